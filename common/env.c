/* Reading RSHUFFLE_* variables and size strings (common/env.h). */
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
    return rs_env_raw(name);
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
