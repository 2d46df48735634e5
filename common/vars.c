/*
 * Every RSHUFFLE_* variable the library reads, for rshuffle_info and the
 * unknown-variable warning: the modules' configuration tables (cfgtab.h),
 * then the rows of the modules that have no table yet. tests/common/check-vars
 * checks that every variable named in the sources is listed here, and that
 * man/rshuffle.7 gives each its default.
 */
#include "common/cfgtab.h"
#include "common/env.h"
#include "common/log.h"
#include <rshuffle/config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const rs_cfg_table_t *const tables[] = {
    &rs_config_table,
#ifdef RS_HAVE_UCX
    &rs_ucx_config_table,
#endif
    &rs_bc_config_table,
};
#define N_TABLES (sizeof(tables) / sizeof(tables[0]))

/* Modules whose variables are read by inline rs_env_* calls, not yet by a table. */
static const rs_config_var_t untabled[] = {
    /* shuffle */
    {"RSHUFFLE_REPLICAS", "1",
     "workers holding each batch (1..3), for descriptors that leave replicas 0"},
    /* client */
    {"RSHUFFLE_CLIENT_LANES", "64",
     "idle lanes (context, pool, connections) a client keeps for later tasks; 0: none"},
    /* pusher */
    {"RSHUFFLE_CODEC", "none", "shuffle codec: none|lz4|snappy"},
    {"RSHUFFLE_PUSH_BUF", "256K", "a full push buffer, bytes"},
    {"RSHUFFLE_PUSH_POOL", "32M", "a push lane's registered slab, bytes"},
    {"RSHUFFLE_PUSH_INFLIGHT", "4M", "bytes in flight per worker"},
    {"RSHUFFLE_PUSH_WAIT_MS", "30000", "bound of every wait of append, swap and close"},
    {"RSHUFFLE_PUSH_BACKPRESSURE_MS", "30000", "worker backpressure longer than this fails"},
    /* worker */
    {"RSHUFFLE_WORKER_MEM", "256M", "a worker's registered arena, bytes"},
    {"RSHUFFLE_WORKER_HIGH_WATER", "75", "spill above this percentage of the arena"},
    {"RSHUFFLE_WORKER_SPILL_DIR", "/tmp", "directory of spill files"},
    {"RSHUFFLE_WORKER_EXTENT_MIN", "64K", "first extent of a partition, bytes"},
    {"RSHUFFLE_WORKER_EXTENT_MAX", "8M", "extents double up to this, bytes"},
    {"RSHUFFLE_WORKER_GRANT_BULK", "1M", "extra space per bulk grant, bytes"},
    {"RSHUFFLE_WORKER_VERIFY", "0",
     "also check batch checksums on arrival (0|1; readers always verify)"},
    {"RSHUFFLE_WORKER_SINK", "0", "perf only: free batches once committed (0|1)"},
    /* reader */
    {"RSHUFFLE_READ_MAX", "16M", "bytes per one-sided read, the reader's registered buffer"},
    {"RSHUFFLE_READ_WAIT_MS", "30000", "bound of any single reader wait"},
    {"RSHUFFLE_READ_LOCAL", "1", "read partitions of a worker in this process in place (0|1)"},
#ifdef RS_FAULT_INJECTION /* test builds only: a library for use names no hook */
    {"RSHUFFLE_BCAST_FAULT", "", "test builds only: corrupt|slow fault injection"},
#endif
};
#define N_UNTABLED (sizeof(untabled) / sizeof(untabled[0]))

#define N_VARS_MAX 128
static rs_config_var_t vars[N_VARS_MAX];
static size_t n_vars;

static void vars_build(void)
{
    size_t n = 0;
    for (size_t t = 0; t < N_TABLES; t++)
        for (size_t i = 0; i < tables[t]->n && n < N_VARS_MAX; i++, n++) {
            const rs_cfg_row_t *r = &tables[t]->rows[i];
            vars[n] = (rs_config_var_t){r->env, r->dflt, r->desc};
        }
    for (size_t i = 0; i < N_UNTABLED && n < N_VARS_MAX; i++)
        vars[n++] = untabled[i];
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

extern char **environ;

static void warn_unknown(void)
{
    static const char prefix[] = "RSHUFFLE_";
    static const char tests[] = "RSHUFFLE_TEST_"; /* reserved for test programs */
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, prefix, sizeof(prefix) - 1) != 0 ||
            strncmp(*e, tests, sizeof(tests) - 1) == 0)
            continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq != NULL ? (size_t)(eq - *e) : strlen(*e);
        if (!known(*e, len))
            rs_warn("%.*s is not a variable rshuffle reads (misspelt? rshuffle_info -c lists them)",
                    (int)len, *e);
    }
}

void rs_env_warn_unknown_once(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, warn_unknown);
}
