/* rs_bcast_config_t: defaults, RSHUFFLE_BCAST_* variables, validation. */
#include <rshuffle/broadcast.h>

#include <string.h>

#include "broadcast/proto.h"
#include "common/env.h"
#include "common/log.h"

void rs_bcast_config_defaults(rs_bcast_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    cfg->block_size = 4u << 20;
    cfg->inline_max = 64u << 10;
    cfg->embed_max = 1u << 10;
    cfg->reads_per_ep = 4;
    cfg->source_reads = 2;
    cfg->holders_max = 32;
    cfg->timeout_ms = 30000;
    cfg->grace_ms = 500;
    cfg->patience_ms = 100;
    cfg->cache_bytes = 128u << 20;
    cfg->mode = RS_BCAST_TORRENT;
    cfg->addr_kind = RS_BCAST_ADDR_BLOB; /* reachable from other hosts with no host to name */
    strcpy(cfg->host, "127.0.0.1");
    cfg->port = 0;
}

/* The numeric fields: one row serves the environment parser and validation. */
#define RS_BCAST_FIELD(env, field, min, max) RS_ENV_FIELD(rs_bcast_config_t, env, field, min, max)
static const rs_env_field_t num_fields[] = {
    RS_BCAST_FIELD("RSHUFFLE_BCAST_BLOCK_SIZE", block_size, RS_BCAST_BLOCK_MIN, RS_BCAST_BLOCK_MAX),
    RS_BCAST_FIELD("RSHUFFLE_BCAST_INLINE_MAX", inline_max, 0, RS_BCAST_INLINE_CAP),
    RS_BCAST_FIELD("RSHUFFLE_BCAST_EMBED_MAX", embed_max, 0, RS_BCAST_EMBED_CAP),
    RS_BCAST_FIELD("RSHUFFLE_BCAST_READS_PER_EP", reads_per_ep, 1, 1024),
    RS_BCAST_FIELD("RSHUFFLE_BCAST_SOURCE_READS", source_reads, 1, 1024),
    RS_BCAST_FIELD("RSHUFFLE_BCAST_HOLDERS_MAX", holders_max, 1, 4096),
    RS_BCAST_FIELD("RSHUFFLE_BCAST_TIMEOUT_MS", timeout_ms, 10, 3600000),
    RS_BCAST_FIELD("RSHUFFLE_BCAST_GRACE_MS", grace_ms, 0, 600000),
    RS_BCAST_FIELD("RSHUFFLE_BCAST_PATIENCE_MS", patience_ms, 0, 600000),
    RS_BCAST_FIELD("RSHUFFLE_BCAST_CACHE_BYTES", cache_bytes, 0, UINT64_MAX),
};
#undef RS_BCAST_FIELD
#define N_NUM_FIELDS (sizeof(num_fields) / sizeof(num_fields[0]))

rs_status_t rs_bcast_config_from_env(rs_bcast_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    static const char *const modes[] = {"torrent", "source", NULL};
    static const char *const kinds[] = {"hostport", "blob", NULL};
    rs_bcast_config_t c = *cfg;
    int mode = (int)c.mode, kind = (int)c.addr_kind;
    uint32_t port = c.port;
    rs_status_t st;

    if ((st = rs_env_fields(num_fields, N_NUM_FIELDS, &c)) != RS_OK ||
        (st = rs_env_choice("RSHUFFLE_BCAST_MODE", modes, &mode)) != RS_OK ||
        (st = rs_env_choice("RSHUFFLE_BCAST_ADDRESS", kinds, &kind)) != RS_OK ||
        (st = rs_env_str("RSHUFFLE_BCAST_HOST", c.host, sizeof(c.host))) != RS_OK ||
        (st = rs_env_u32("RSHUFFLE_BCAST_PORT", 0, 65535, &port)) != RS_OK)
        return st;
    if (rs_bc_host_check(c.host, strlen(c.host)) != RS_OK) {
        rs_error("RSHUFFLE_BCAST_HOST='%s' is invalid: expected a host name or address", c.host);
        return RS_ERR_CONFIG;
    }
    c.mode = (rs_bcast_mode_t)mode;
    c.addr_kind = (rs_bcast_addr_kind_t)kind;
    c.port = (uint16_t)port;
    *cfg = c;
    return RS_OK;
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
    if (rs_env_fields_check(num_fields, N_NUM_FIELDS, cfg, "broadcast config") != RS_OK)
        return RS_ERR_CONFIG;
    if ((unsigned)cfg->mode > RS_BCAST_SOURCE) {
        rs_error("broadcast config field mode = %d is not a rs_bcast_mode_t", (int)cfg->mode);
        return RS_ERR_CONFIG;
    }
    if ((unsigned)cfg->addr_kind > RS_BCAST_ADDR_BLOB) {
        rs_error("broadcast config field addr_kind = %d is not a rs_bcast_addr_kind_t",
                 (int)cfg->addr_kind);
        return RS_ERR_CONFIG;
    }
    if (memchr(cfg->host, '\0', sizeof(cfg->host)) == NULL ||
        rs_bc_host_check(cfg->host, strlen(cfg->host)) != RS_OK) {
        rs_error("broadcast config field host must be a host name or address of 1..%d bytes",
                 RS_BCAST_HOST_MAX);
        return RS_ERR_CONFIG;
    }
    return RS_OK;
}
