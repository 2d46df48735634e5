/*
 * Every RSHUFFLE_* variable the library reads, for rshuffle_info and the
 * unknown-variable warning: the modules' configuration tables (cfgtab.h),
 * then the test builds' fault hooks. tests/common/check-vars checks that
 * every variable named in the sources is listed here, and
 * tests/common/test_cfgtab.c that man/rshuffle.7 gives each its default and
 * range.
 */
#include "common/cfgtab.h"
#include "common/env.h"
#include "common/log.h"
#include <rshuffle/config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const rs_cfg_table_t *const tables[] = {
    &rs_config_table,
#ifdef RS_HAVE_UCX
    &rs_ucx_config_table,
#endif
    &rs_shuffle_env_table,   &rs_client_config_table, &rs_pusher_config_table,
    &rs_worker_config_table, &rs_reader_config_table, &rs_bc_config_table,
};
#define N_TABLES (sizeof(tables) / sizeof(tables[0]))

/* Test hooks, read by inline rs_env_* calls in test builds only. */
static const rs_config_var_t hooks[] = {
#ifdef RS_FAULT_INJECTION /* a library for use names no hook */
    {"RSHUFFLE_BCAST_FAULT", "", "test builds only: corrupt|slow fault injection"},
#endif
    {NULL, NULL, NULL},
};

#define N_VARS_MAX 128
static rs_config_var_t vars[N_VARS_MAX];
static char descs[N_VARS_MAX][256]; /* a row's description and its range */
static size_t n_vars;

static void vars_build(void)
{
    size_t n = 0;
    for (size_t t = 0; t < N_TABLES; t++)
        for (size_t i = 0; i < tables[t]->n && n < N_VARS_MAX; i++, n++) {
            const rs_cfg_row_t *r = &tables[t]->rows[i];
            char range[96];
            rs_cfg_range(r, range, sizeof(range));
            if (range[0] != '\0')
                snprintf(descs[n], sizeof(descs[n]), "%s (%s)", r->desc, range);
            else
                snprintf(descs[n], sizeof(descs[n]), "%s", r->desc);
            vars[n] = (rs_config_var_t){r->env, r->dflt, descs[n]};
        }
    for (size_t i = 0; hooks[i].name != NULL && n < N_VARS_MAX; i++)
        vars[n++] = hooks[i];
    n_vars = n;
}

static size_t vars_get(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, vars_build);
    return n_vars;
}

size_t rs_config_vars(const rs_config_var_t **vars_p)
{
    size_t n = vars_get();
    if (vars_p != NULL)
        *vars_p = vars;
    return n;
}

static int known(const char *name, size_t len)
{
    size_t n = vars_get();
    for (size_t i = 0; i < n; i++)
        if (strlen(vars[i].name) == len && memcmp(vars[i].name, name, len) == 0)
            return 1;
    return 0;
}

static void warn_if_unknown(const char *entry, void *arg)
{
    static const char tests[] = "RSHUFFLE_TEST_"; /* reserved for test programs */
    (void)arg;
    if (strncmp(entry, tests, sizeof(tests) - 1) == 0)
        return;
    const char *eq = strchr(entry, '=');
    size_t len = eq != NULL ? (size_t)(eq - entry) : strlen(entry);
    if (!known(entry, len))
        rs_warn("%.*s is not a variable rshuffle reads (misspelt? rshuffle_info -c lists them)",
                (int)len, entry);
}

static void warn_unknown(void)
{
    static const char prefix[] = "RSHUFFLE_";
    rs_env_raw_each(prefix, sizeof(prefix) - 1, warn_if_unknown, NULL);
}

void rs_env_warn_unknown_once(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, warn_unknown);
}
