/* rs_pusher_config_t: its table (RSHUFFLE_CODEC, RSHUFFLE_PUSH_*), defaults, environment, check. */
#include "pusher/config.h"

#include "common/cfgtab.h"
#include "common/log.h"
#include "shuffle/proto.h"

#include <string.h>

/* A full buffer's batch (frame header + records) fits one grant of a worker. */
#define PUSH_BUF_MIN  1024u
#define PUSH_BUF_MAX  (RS_GRANT_MAX - RS_FRAME_HEADER_SIZE)
#define PUSH_POOL_MIN (4u * (PUSH_BUF_MIN + RS_PBUF_HEAD_ROOM)) /* 4 of the smallest buffers */

static const char *const codecs[] = {"none", "lz4", "snappy", NULL};

#define NUM(env, field, dflt, min, max, desc) \
    RS_CFG_UINT_ROW(rs_pusher_config_t, env, field, dflt, min, max, desc)
static const rs_cfg_row_t rows[] = {
    RS_CFG_CHOICE_ROW(rs_pusher_config_t, "RSHUFFLE_CODEC", codec, "none", codecs,
                      "shuffle codec: none|lz4|snappy"),
    NUM("RSHUFFLE_PUSH_BUF", buf_len, "256K", PUSH_BUF_MIN, PUSH_BUF_MAX,
        "a full push buffer, bytes"),
    NUM("RSHUFFLE_PUSH_POOL", pool_bytes, "32M", PUSH_POOL_MIN, 1ull << 36,
        "a push lane's registered slab, bytes; holds 4 buffers of PUSH_BUF + 64"),
    NUM("RSHUFFLE_PUSH_INFLIGHT", max_inflight, "4M", 4096, 1ull << 36,
        "bytes in flight per worker"),
    NUM("RSHUFFLE_PUSH_WAIT_MS", wait_ms, "30000", 10, 3600000,
        "bound of every wait of append, swap and close"),
    NUM("RSHUFFLE_PUSH_BACKPRESSURE_MS", backpressure_ms, "30000", 10, 3600000,
        "worker backpressure longer than this fails"),
    NUM("RSHUFFLE_PUSH_MERGE_BELOW", merge_below, "32K", 0, 4u << 20,
        "batches of fewer frame bytes bound for one worker travel in one write; 0: off"),
    NUM("RSHUFFLE_PUSH_POOL_MAX", pool_max, "128M", 0, 1ull << 36,
        "a pool doubles up to this until each partition's buffer holds 16 KiB; PUSH_POOL: never"),
    NUM("RSHUFFLE_PUSH_HOT", hot_bytes, "3M", 0, 1ull << 36,
        "all partitions' buffers together, bytes (not below 16 KiB each); 0: off"),
};
#undef NUM

const rs_cfg_table_t rs_pusher_config_table = {"pusher config", rows,
                                               sizeof(rows) / sizeof(rows[0])};

void rs_pusher_config_defaults(rs_pusher_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    rs_cfg_defaults(&rs_pusher_config_table, cfg);
    cfg->min_buf = 4 << 10; /* the fields no variable sets */
    cfg->queue_depth = 16;
}

rs_status_t rs_pusher_config_from_env(rs_pusher_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    return rs_cfg_apply(&rs_pusher_config_table, cfg);
}

rs_status_t rs_push_config_check(const rs_pusher_config_t *cfg)
{
    rs_status_t st = rs_cfg_check(&rs_pusher_config_table, cfg);
    if (st != RS_OK)
        return st;
    if (cfg->min_buf == 0) {
        rs_error("pusher config field min_buf is 0: a partition's first buffer needs a byte");
        return RS_ERR_CONFIG;
    }
    if (cfg->pool_bytes < 4 * (cfg->buf_len + RS_PBUF_HEAD_ROOM)) {
        rs_error("pusher config: pool_bytes (RSHUFFLE_PUSH_POOL) = %zu holds fewer than 4 "
                 "buffers of buf_len (RSHUFFLE_PUSH_BUF) = %zu plus %d bytes of head room",
                 cfg->pool_bytes, cfg->buf_len, RS_PBUF_HEAD_ROOM);
        return RS_ERR_CONFIG;
    }
    return RS_OK;
}

size_t rs_push_pool_for(const rs_pusher_config_t *cfg, uint32_t n_partitions)
{
    /*
     * Each partition holds a buffer of half the pool's share: with 20,000
     * partitions a 32 MiB pool gave 640-byte batches, and every role paid
     * per batch (an 80 or 128 MiB pool: 2.4-3.2x fewer batches, the
     * shuffle 15 % faster). Doubled, not sized exactly: lanes are kept per
     * pool size, so shuffles of nearby partition counts share them.
     */
    if (cfg->pool_bytes >= cfg->pool_max)
        return cfg->pool_bytes; /* growth off: pool_max at or below pool_bytes */
    uint64_t want = (uint64_t)n_partitions * 2 * RS_PUSH_PART_GROW;
    uint64_t pool = cfg->pool_bytes;
    while (pool < want && pool < cfg->pool_max)
        pool *= 2;
    if (pool > cfg->pool_max)
        pool = cfg->pool_max; /* the last doubling went past it */
    return (size_t)pool;
}
