#include "common/env.h"
#include <rshuffle/config.h>
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *rs_env_get(const char *name)
{
    rs_env_warn_unknown_once();
    return getenv(name);
}

rs_status_t rs_parse_size(const char *s, uint64_t *out)
{
    if (s == NULL || out == NULL || *s < '0' || *s > '9') /* strtoull would take " -1" */
        return RS_ERR_INVALID;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return RS_ERR_INVALID;

    unsigned shift = 0;
    switch (*end) {
        case '\0':
            break;
        case 'k':
        case 'K':
            shift = 10;
            end++;
            break;
        case 'm':
        case 'M':
            shift = 20;
            end++;
            break;
        case 'g':
        case 'G':
            shift = 30;
            end++;
            break;
        default:
            return RS_ERR_INVALID;
    }
    if (*end == 'i' || *end == 'B') /* accept KiB, KB */
        end += (end[0] == 'i' && end[1] == 'B') ? 2 : 1;
    if (*end != '\0')
        return RS_ERR_INVALID;
    if (shift != 0 && v > (UINT64_MAX >> shift))
        return RS_ERR_INVALID;
    *out = (uint64_t)v << shift;
    return RS_OK;
}

rs_status_t rs_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    if (s == NULL || out == NULL || *s == '\0')
        return RS_ERR_INVALID;
    uint64_t v = 0;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return RS_ERR_INVALID;
        unsigned d = (unsigned)(*s - '0');
        if (d > max || v > (max - d) / 10) /* v * 10 + d > max, without overflowing */
            return RS_ERR_INVALID;
        v = v * 10 + d;
    }
    *out = v;
    return RS_OK;
}

rs_status_t rs_env_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out)
{
    const char *s = rs_env_get(name);
    if (s == NULL)
        return RS_OK;
    uint64_t v;
    if (rs_parse_size(s, &v) != RS_OK || v < min || v > max) {
        rs_error("%s='%s' is invalid: expected an integer in [%" PRIu64 ", %" PRIu64
                 "] (suffixes K, M, G allowed)",
                 name, s, min, max);
        return RS_ERR_CONFIG;
    }
    *out = v;
    return RS_OK;
}

rs_status_t rs_env_u32(const char *name, uint32_t min, uint32_t max, uint32_t *out)
{
    uint64_t v = *out;
    rs_status_t st = rs_env_u64(name, min, max, &v);
    if (st == RS_OK)
        *out = (uint32_t)v;
    return st;
}

rs_status_t rs_env_fields(const rs_env_field_t *fields, size_t n, void *cfg)
{
    for (size_t i = 0; i < n; i++) {
        const rs_env_field_t *f = &fields[i];
        void *p = (char *)cfg + f->offset;
        rs_status_t st = f->size == sizeof(uint64_t)
                             ? rs_env_u64(f->env, f->min, f->max, p)
                             : rs_env_u32(f->env, (uint32_t)f->min, (uint32_t)f->max, p);
        if (st != RS_OK)
            return st;
    }
    return RS_OK;
}

rs_status_t rs_env_fields_check(const rs_env_field_t *fields, size_t n, const void *cfg,
                                const char *what)
{
    for (size_t i = 0; i < n; i++) {
        const rs_env_field_t *f = &fields[i];
        const void *p = (const char *)cfg + f->offset;
        uint64_t v = f->size == sizeof(uint64_t) ? *(const uint64_t *)p : *(const uint32_t *)p;
        if (v < f->min || v > f->max) {
            rs_error("%s field %s = %" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64
                     "] (env %s)",
                     what, f->field, v, f->min, f->max, f->env);
            return RS_ERR_CONFIG;
        }
    }
    return RS_OK;
}

rs_status_t rs_env_bool(const char *name, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    const char *s = rs_env_get(name);
    if (s == NULL)
        return RS_OK;
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return RS_OK;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return RS_OK;
        }
    }
    rs_error("%s='%s' is invalid: expected 0|1|true|false|yes|no|on|off", name, s);
    return RS_ERR_CONFIG;
}

rs_status_t rs_env_choice(const char *name, const char *const *choices, int *out)
{
    const char *s = rs_env_get(name);
    if (s == NULL)
        return RS_OK;
    char accepted[256] = "";
    for (int i = 0; choices[i] != NULL; i++) {
        if (strcmp(s, choices[i]) == 0) {
            *out = i;
            return RS_OK;
        }
        if (i > 0)
            strncat(accepted, "|", sizeof(accepted) - strlen(accepted) - 1);
        strncat(accepted, choices[i], sizeof(accepted) - strlen(accepted) - 1);
    }
    rs_error("%s='%s' is invalid: expected one of %s", name, s, accepted);
    return RS_ERR_CONFIG;
}

rs_status_t rs_env_str(const char *name, char *out, size_t cap)
{
    const char *s = rs_env_get(name);
    if (s == NULL)
        return RS_OK;
    size_t len = strlen(s);
    if (len + 1 > cap) {
        rs_error("%s is invalid: %zu bytes long, at most %zu allowed", name, len, cap - 1);
        return RS_ERR_CONFIG;
    }
    memcpy(out, s, len + 1);
    return RS_OK;
}
