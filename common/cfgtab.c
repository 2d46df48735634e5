/* Configuration tables (cfgtab.h): defaults, the environment, validation. */
#include "common/cfgtab.h"

#include "common/assert.h"
#include "common/env.h"
#include "common/log.h"
#include <rshuffle/config.h>

#include <inttypes.h>
#include <string.h>
#include <strings.h>

/* A parsed value: a number (UINT, BOOL, CHOICE) or a string that fits. */
typedef struct {
    uint64_t num;
    const char *str;
} value_t;

static void accepted_choices(const rs_cfg_row_t *r, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int i = 0; r->choices[i] != NULL; i++) {
        if (i > 0)
            strncat(buf, "|", cap - strlen(buf) - 1);
        strncat(buf, r->choices[i], cap - strlen(buf) - 1);
    }
}

/* Parses s for row r; logs (naming name: a variable or a default) and fails on a bad value. */
static rs_status_t parse(const rs_cfg_row_t *r, const char *name, const char *s, value_t *v)
{
    static const char *const yes[] = {"1", "true", "yes", "on", NULL};
    static const char *const no[] = {"0", "false", "no", "off", NULL};
    char accepted[256];
    switch (r->kind) {
        case RS_CFG_UINT:
            if (rs_parse_size(s, &v->num) == RS_OK && v->num >= r->min && v->num <= r->max)
                return RS_OK;
            rs_error("%s='%s' is invalid: expected an integer in [%" PRIu64 ", %" PRIu64
                     "] (suffixes K, M, G allowed)",
                     name, s, r->min, r->max);
            return RS_ERR_CONFIG;
        case RS_CFG_BOOL:
            for (int i = 0; yes[i] != NULL; i++) {
                if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
                    v->num = strcasecmp(s, yes[i]) == 0;
                    return RS_OK;
                }
            }
            rs_error("%s='%s' is invalid: expected 0|1|true|false|yes|no|on|off", name, s);
            return RS_ERR_CONFIG;
        case RS_CFG_CHOICE:
            for (int i = 0; r->choices[i] != NULL; i++) {
                if (strcmp(s, r->choices[i]) == 0) {
                    v->num = (uint64_t)i;
                    return RS_OK;
                }
            }
            accepted_choices(r, accepted, sizeof(accepted));
            rs_error("%s='%s' is invalid: expected one of %s", name, s, accepted);
            return RS_ERR_CONFIG;
        case RS_CFG_STR:
            if (strlen(s) + 1 > r->size) {
                rs_error("%s is invalid: %zu bytes long, at most %zu allowed", name, strlen(s),
                         r->size - 1);
                return RS_ERR_CONFIG;
            }
            if (r->check != NULL && r->check(s) != RS_OK) {
                rs_error("%s='%s' is invalid: expected %s", name, s, r->accepts);
                return RS_ERR_CONFIG;
            }
            v->str = s;
            return RS_OK;
    }
    return RS_ERR_CONFIG;
}

static void store(const rs_cfg_row_t *r, void *cfg, const value_t *v)
{
    char *p = (char *)cfg + r->offset;
    if (r->kind == RS_CFG_STR) {
        memcpy(p, v->str, strlen(v->str) + 1);
        return;
    }
    RS_ASSERT(r->kind == RS_CFG_UINT || r->size == sizeof(int));
    switch (r->size) {
        case 2:
            *(uint16_t *)(void *)p = (uint16_t)v->num;
            break;
        case 4:
            *(uint32_t *)(void *)p = (uint32_t)v->num;
            break;
        default:
            *(uint64_t *)(void *)p = v->num;
            break;
    }
}

static uint64_t load(const rs_cfg_row_t *r, const void *cfg)
{
    const char *p = (const char *)cfg + r->offset;
    switch (r->size) {
        case 2:
            return *(const uint16_t *)(const void *)p;
        case 4:
            return *(const uint32_t *)(const void *)p;
        default:
            return *(const uint64_t *)(const void *)p;
    }
}

rs_status_t rs_cfg_defaults(const rs_cfg_table_t *t, void *cfg)
{
    for (size_t i = 0; i < t->n; i++) {
        value_t v;
        if (parse(&t->rows[i], t->rows[i].env, t->rows[i].dflt, &v) != RS_OK) {
            rs_error("%s: the default of %s is refused by its own row", t->what, t->rows[i].env);
            return RS_ERR_CONFIG;
        }
        store(&t->rows[i], cfg, &v);
    }
    return RS_OK;
}

rs_status_t rs_cfg_apply(const rs_cfg_table_t *t, void *cfg)
{
    const char *names[RS_CFG_ROWS_MAX], *vals[RS_CFG_ROWS_MAX];
    RS_ASSERT(t->n <= RS_CFG_ROWS_MAX);
    rs_env_warn_unknown_once();
    for (size_t i = 0; i < t->n; i++)
        names[i] = t->rows[i].env;
    rs_env_raw_many(names, t->n, vals);
    /* Every set variable is parsed before any is stored: a refusal leaves cfg as it was. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < t->n; i++) {
            value_t v;
            if (vals[i] == NULL)
                continue;
            if (parse(&t->rows[i], t->rows[i].env, vals[i], &v) != RS_OK)
                return RS_ERR_CONFIG;
            if (pass == 1)
                store(&t->rows[i], cfg, &v);
        }
    }
    return RS_OK;
}

rs_status_t rs_cfg_check(const rs_cfg_table_t *t, const void *cfg)
{
    char accepted[256];
    for (size_t i = 0; i < t->n; i++) {
        const rs_cfg_row_t *r = &t->rows[i];
        const char *p = (const char *)cfg + r->offset;
        uint64_t v;
        int n = 0;
        switch (r->kind) {
            case RS_CFG_UINT:
                v = load(r, cfg);
                if (v < r->min || v > r->max) {
                    rs_error("%s field %s = %" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64
                             "] (env %s)",
                             t->what, r->field, v, r->min, r->max, r->env);
                    return RS_ERR_CONFIG;
                }
                break;
            case RS_CFG_BOOL: /* any int: zero or not */
                break;
            case RS_CFG_CHOICE:
                while (r->choices[n] != NULL)
                    n++;
                if (*(const unsigned *)(const void *)p >= (unsigned)n) {
                    accepted_choices(r, accepted, sizeof(accepted));
                    rs_error("%s field %s = %d is not one of %s (env %s)", t->what, r->field,
                             *(const int *)(const void *)p, accepted, r->env);
                    return RS_ERR_CONFIG;
                }
                break;
            case RS_CFG_STR:
                if (memchr(p, '\0', r->size) == NULL ||
                    (r->check != NULL && r->check(p) != RS_OK)) {
                    rs_error("%s field %s must be %s of at most %zu bytes (env %s)", t->what,
                             r->field, r->accepts != NULL ? r->accepts : "a string", r->size - 1,
                             r->env);
                    return RS_ERR_CONFIG;
                }
                break;
        }
    }
    return RS_OK;
}
