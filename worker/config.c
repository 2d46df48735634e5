/* rs_worker_config_t: its table (RSHUFFLE_WORKER_*), defaults, environment, check. */
#include "worker/config.h"

#include "common/cfgtab.h"
#include "common/log.h"

#include <inttypes.h>
#include <string.h>

#define NUM(env, field, dflt, min, max, desc) \
    RS_CFG_UINT_ROW(rs_worker_config_t, env, field, dflt, min, max, desc)
static const rs_cfg_row_t rows[] = {
    NUM("RSHUFFLE_WORKER_MEM", mem_limit, "256M", 1u << 20, 1ull << 40,
        "a worker's registered arena, bytes"),
    NUM("RSHUFFLE_WORKER_HIGH_WATER", high_water_pct, "95", 1, 100,
        "spill above this percentage of the arena"),
    RS_CFG_STR_ROW(rs_worker_config_t, "RSHUFFLE_WORKER_SPILL_DIR", spill_dir, "/tmp", NULL, NULL,
                   "directory of spill files"),
    NUM("RSHUFFLE_WORKER_EXTENT_MIN", extent_min, "64K", 4096, 1u << 30,
        "first extent of a partition, bytes; at most EXTENT_MAX"),
    NUM("RSHUFFLE_WORKER_EXTENT_MAX", extent_max, "8M", 4096, 1u << 30,
        "extents double up to this, bytes"),
    NUM("RSHUFFLE_WORKER_GRANT_BULK", grant_bulk, "1M", 0, 1u << 24,
        "extra space per bulk grant, bytes"),
    /* readers verify every frame end to end: see docs/shuffle.md */
    RS_CFG_BOOL_ROW(rs_worker_config_t, "RSHUFFLE_WORKER_VERIFY", verify, "0",
                    "also check batch checksums on arrival (0|1; readers always verify)"),
    RS_CFG_BOOL_ROW(rs_worker_config_t, "RSHUFFLE_WORKER_SINK", sink, "0",
                    "perf only: free batches once committed (0|1)"),
};
#undef NUM

const rs_cfg_table_t rs_worker_config_table = {"worker config", rows,
                                               sizeof(rows) / sizeof(rows[0])};

void rs_worker_config_defaults(rs_worker_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    rs_cfg_defaults(&rs_worker_config_table, cfg);
    cfg->commit_wait_ms = 5000; /* the fields no variable sets */
    cfg->retry_ms = 20;
}

rs_status_t rs_worker_config_from_env(rs_worker_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    return rs_cfg_apply(&rs_worker_config_table, cfg);
}

rs_status_t rs_wk_config_check(const rs_worker_config_t *cfg)
{
    rs_status_t st = rs_cfg_check(&rs_worker_config_table, cfg);
    if (st != RS_OK)
        return st;
    if (cfg->extent_min > cfg->extent_max) {
        rs_error("worker config: extent_min (RSHUFFLE_WORKER_EXTENT_MIN) = %" PRIu64
                 " is above extent_max (RSHUFFLE_WORKER_EXTENT_MAX) = %" PRIu64,
                 cfg->extent_min, cfg->extent_max);
        return RS_ERR_CONFIG;
    }
    return RS_OK;
}
