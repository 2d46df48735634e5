/* rs_bcast_config_t: its table (RSHUFFLE_BCAST_*), defaults, environment, validation. */
#include <rshuffle/broadcast.h>

#include <string.h>

#include "broadcast/proto.h"
#include "common/cfgtab.h"
#include "common/log.h"

static rs_status_t host_check(const char *s)
{
    return rs_bc_host_check(s, strlen(s));
}

static const char *const modes[] = {"torrent", "source", NULL};
static const char *const kinds[] = {"hostport", "blob", NULL};

#define NUM(env, field, dflt, min, max, desc) \
    RS_CFG_UINT_ROW(rs_bcast_config_t, env, field, dflt, min, max, desc)
static const rs_cfg_row_t rows[] = {
    NUM("RSHUFFLE_BCAST_BLOCK_SIZE", block_size, "4M", RS_BCAST_BLOCK_MIN, RS_BCAST_BLOCK_MAX,
        "broadcast block, bytes"),
    NUM("RSHUFFLE_BCAST_INLINE_MAX", inline_max, "64K", 0, RS_BCAST_INLINE_CAP,
        "objects up to this ride inline in the first reply"),
    NUM("RSHUFFLE_BCAST_EMBED_MAX", embed_max, "1K", 0, RS_BCAST_EMBED_CAP,
        "objects up to this ride in the descriptor itself"),
    NUM("RSHUFFLE_BCAST_READS_PER_EP", reads_per_ep, "4", 1, 1024,
        "outstanding block reads per peer"),
    NUM("RSHUFFLE_BCAST_SOURCE_READS", source_reads, "2", 1, 1024,
        "torrent reads in flight to the source per object"),
    NUM("RSHUFFLE_BCAST_HOLDERS_MAX", holders_max, "32", 1, 4096, "holders listed per reply"),
    NUM("RSHUFFLE_BCAST_TIMEOUT_MS", timeout_ms, "30000", 10, 3600000, "longest rs_bcast_get"),
    NUM("RSHUFFLE_BCAST_GRACE_MS", grace_ms, "500", 0, 600000,
        "retired memory stays mapped this long for reads in flight"),
    NUM("RSHUFFLE_BCAST_PATIENCE_MS", patience_ms, "100", 0, 600000,
        "torrent reader's wait for others' blocks per period"),
    NUM("RSHUFFLE_BCAST_CACHE_BYTES", cache_bytes, "128M", 0, UINT64_MAX,
        "registered memory of retired objects kept for reuse"),
    RS_CFG_CHOICE_ROW(rs_bcast_config_t, "RSHUFFLE_BCAST_MODE", mode, "torrent", modes,
                      "torrent|source"),
    /* blob: reachable from other hosts with no host to name */
    RS_CFG_CHOICE_ROW(rs_bcast_config_t, "RSHUFFLE_BCAST_ADDRESS", addr_kind, "blob", kinds,
                      "address a descriptor carries: blob (any host) or hostport"),
    RS_CFG_STR_ROW(rs_bcast_config_t, "RSHUFFLE_BCAST_HOST", host, "127.0.0.1", host_check,
                   "a host name or address",
                   "hostport mode: the node's listen and advertised host"),
    NUM("RSHUFFLE_BCAST_PORT", port, "0", 0, 65535, "broadcast node's port (0: any free port)"),
};
#undef NUM

const rs_cfg_table_t rs_bc_config_table = {"broadcast config", rows,
                                           sizeof(rows) / sizeof(rows[0])};

void rs_bcast_config_defaults(rs_bcast_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    rs_cfg_defaults(&rs_bc_config_table, cfg);
}

rs_status_t rs_bcast_config_from_env(rs_bcast_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    return rs_cfg_apply(&rs_bc_config_table, cfg);
}

rs_status_t rs_bcast_config_init(rs_bcast_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    rs_bcast_config_t c;
    rs_bcast_config_defaults(&c);
    rs_status_t st = rs_bcast_config_from_env(&c);
    if (st == RS_OK)
        *cfg = c;
    return st;
}

rs_status_t rs_bcast_config_validate(const rs_bcast_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    return rs_cfg_check(&rs_bc_config_table, cfg);
}
