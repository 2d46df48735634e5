/*
 * Every RSHUFFLE_* variable the library reads, for rshuffle_info and the
 * unknown-variable warning. tests/common/test_vars.sh checks that every
 * variable named in the sources is listed here.
 */
#include "common/env.h"
#include "common/log.h"
#include <rshuffle/config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const rs_config_var_t vars[] = {
    /* transport */
    {"RSHUFFLE_LOG", "warn", "log level: error|warn|info|debug"},
    {"RSHUFFLE_TRANSPORT", "auto", "backend: ucx|verbs|auto (verbs when an RDMA port is active)"},
    {"RSHUFFLE_JOB_TOKEN", "rshuffle", "job token every connection must present (<= 64 bytes)"},
    {"RSHUFFLE_PEER_TIMEOUT_MS", "10000", "an op or a silent peer is dead after this long"},
    {"RSHUFFLE_CONNECT_TIMEOUT_MS", "5000", "connect plus handshake bound"},
    {"RSHUFFLE_MSG_MAX", "8192", "largest control message, bytes"},
    {"RSHUFFLE_PROGRESS_THREAD", "0", "start a progress thread per transport context (0|1)"},
    {"RSHUFFLE_UCX_RMA", "auto", "UCX one-sided ops: auto|ucx|am (am: carried as messages)"},
    {"RSHUFFLE_UCX_NOTIFY", "fence", "UCX notified put: fence|flush"},
    {"RSHUFFLE_UCX_MEM", "own",
     "UCX rs_mem_alloc: own (peers attach, map what they reuse) | attach (never map) | shared"},
    {"RSHUFFLE_UCX_MAP_MAX", "64M",
     "UCX: largest region peers may map (default: no limit where shared memory gets huge pages)"},
    {"RSHUFFLE_UCX_HUGE", "0",
     "UCX: private regions of 2 MiB or more advised for huge pages (0|1)"},
    {"RSHUFFLE_VERBS_DEVICE", "", "verbs device name (empty: the first active one)"},
    {"RSHUFFLE_VERBS_SQ_DEPTH", "256", "verbs: send work requests per QP"},
    {"RSHUFFLE_VERBS_SRQ_DEPTH", "512", "verbs: posted receives per context"},
    {"RSHUFFLE_VERBS_CQ_DEPTH", "4096", "verbs: completion queue entries"},
    {"RSHUFFLE_VERBS_INLINE", "128", "verbs: largest inline send, bytes"},
    {"RSHUFFLE_VERBS_SIGNAL_EVERY", "16", "verbs: signal one send in N"},
    {"RSHUFFLE_VERBS_MAX_RD_ATOM", "0", "verbs: reads in flight per QP (0: the device's maximum)"},
    /* shuffle */
    {"RSHUFFLE_REPLICAS", "1",
     "workers holding each batch (1..3), for descriptors that leave replicas 0"},
    /* pusher */
    {"RSHUFFLE_CODEC", "none", "shuffle codec: none|lz4|snappy"},
    {"RSHUFFLE_PUSH_BUF", "256K", "a full push buffer, bytes"},
    {"RSHUFFLE_PUSH_POOL", "32M", "a pusher's registered slab, bytes"},
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
    /* broadcast */
    {"RSHUFFLE_BCAST_BLOCK_SIZE", "4M", "broadcast block, 4 KiB .. 1 GiB"},
    {"RSHUFFLE_BCAST_INLINE_MAX", "64K", "objects up to this ride inline in the first reply"},
    {"RSHUFFLE_BCAST_EMBED_MAX", "1K", "objects up to this (<= 2K) ride in the descriptor itself"},
    {"RSHUFFLE_BCAST_READS_PER_EP", "4", "outstanding block reads per peer"},
    {"RSHUFFLE_BCAST_SOURCE_READS", "2", "torrent reads in flight to the source per object"},
    {"RSHUFFLE_BCAST_HOLDERS_MAX", "32", "holders listed per reply"},
    {"RSHUFFLE_BCAST_TIMEOUT_MS", "30000", "longest rs_bcast_get"},
    {"RSHUFFLE_BCAST_GRACE_MS", "500", "retired memory stays mapped this long for reads in flight"},
    {"RSHUFFLE_BCAST_PATIENCE_MS", "100", "torrent reader's wait for others' blocks per period"},
    {"RSHUFFLE_BCAST_CACHE_BYTES", "128M", "registered memory of retired objects kept for reuse"},
    {"RSHUFFLE_BCAST_MODE", "torrent", "torrent|source"},
    {"RSHUFFLE_BCAST_ADDRESS", "blob", "address a descriptor carries: blob (any host) or hostport"},
    {"RSHUFFLE_BCAST_HOST", "127.0.0.1", "hostport mode: the node's listen and advertised host"},
    {"RSHUFFLE_BCAST_PORT", "0", "broadcast node's port (0: any free port)"},
#ifdef RS_FAULT_INJECTION /* test builds only: a library for use names no hook */
    {"RSHUFFLE_BCAST_FAULT", "", "test builds only: corrupt|slow fault injection"},
#endif
};

size_t rs_config_vars(const rs_config_var_t **vars_p)
{
    if (vars_p != NULL)
        *vars_p = vars;
    return sizeof(vars) / sizeof(vars[0]);
}

static int known(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
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
