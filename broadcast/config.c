/* rs_bcast_config_t: defaults, RSHUFFLE_BCAST_* variables, validation. */
#include <rshuffle/broadcast.h>

#include <string.h>

#include "broadcast/proto.h"
#include "common/env.h"
#include "common/log.h"

void rs_bcast_config_defaults(rs_bcast_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->block_size = 4u << 20;
    cfg->inline_max = 64u << 10;
    cfg->reads_per_ep = 4;
    cfg->source_reads = 2;
    cfg->holders_max = 32;
    cfg->timeout_ms = 30000;
    cfg->grace_ms = 500;
    cfg->patience_ms = 100;
    cfg->cache_bytes = 128u << 20;
    cfg->mode = RS_BCAST_TORRENT;
    cfg->addr_kind = RS_BCAST_ADDR_HOSTPORT;
    strcpy(cfg->host, "127.0.0.1");
    cfg->port = 0;
}

rs_status_t rs_bcast_config_from_env(rs_bcast_config_t *cfg)
{
    static const char *const modes[] = {"torrent", "source", NULL};
    static const char *const kinds[] = {"hostport", "blob", NULL};
    rs_bcast_config_t c = *cfg;
    int mode = (int)c.mode, kind = (int)c.addr_kind;
    uint32_t port = c.port;
    rs_status_t st;

    if ((st = rs_env_u64("RSHUFFLE_BCAST_BLOCK_SIZE", RS_BCAST_BLOCK_MIN, RS_BCAST_BLOCK_MAX,
                         &c.block_size)) != RS_OK ||
        (st = rs_env_u32("RSHUFFLE_BCAST_INLINE_MAX", 0, RS_BCAST_INLINE_CAP, &c.inline_max)) !=
            RS_OK ||
        (st = rs_env_u32("RSHUFFLE_BCAST_READS_PER_EP", 1, 1024, &c.reads_per_ep)) != RS_OK ||
        (st = rs_env_u32("RSHUFFLE_BCAST_SOURCE_READS", 1, 1024, &c.source_reads)) != RS_OK ||
        (st = rs_env_u32("RSHUFFLE_BCAST_HOLDERS_MAX", 1, 4096, &c.holders_max)) != RS_OK ||
        (st = rs_env_u32("RSHUFFLE_BCAST_TIMEOUT_MS", 10, 3600000, &c.timeout_ms)) != RS_OK ||
        (st = rs_env_u32("RSHUFFLE_BCAST_GRACE_MS", 0, 600000, &c.grace_ms)) != RS_OK ||
        (st = rs_env_u32("RSHUFFLE_BCAST_PATIENCE_MS", 0, 600000, &c.patience_ms)) != RS_OK ||
        (st = rs_env_u64("RSHUFFLE_BCAST_CACHE_BYTES", 0, UINT64_MAX, &c.cache_bytes)) != RS_OK ||
        (st = rs_env_choice("RSHUFFLE_BCAST_MODE", modes, &mode)) != RS_OK ||
        (st = rs_env_choice("RSHUFFLE_BCAST_ADDRESS", kinds, &kind)) != RS_OK ||
        (st = rs_env_str("RSHUFFLE_BCAST_HOST", c.host, sizeof(c.host))) != RS_OK ||
        (st = rs_env_u32("RSHUFFLE_BCAST_PORT", 0, 65535, &port)) != RS_OK)
        return st;
    if (rs_bhost_check(c.host, strlen(c.host)) != RS_OK) {
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
    rs_bcast_config_t c;
    rs_bcast_config_defaults(&c);
    rs_status_t st = rs_bcast_config_from_env(&c);
    if (st == RS_OK)
        *cfg = c;
    return st;
}

#define CHECK_RANGE(field, lo, hi)                                                            \
    do {                                                                                      \
        if ((uint64_t)cfg->field < (uint64_t)(lo) || (uint64_t)cfg->field > (uint64_t)(hi)) { \
            rs_error("broadcast config field " #field " = %llu is out of range [%llu, %llu]", \
                     (unsigned long long)cfg->field, (unsigned long long)(lo),                \
                     (unsigned long long)(hi));                                               \
            return RS_ERR_CONFIG;                                                             \
        }                                                                                     \
    } while (0)

rs_status_t rs_bcast_config_validate(const rs_bcast_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    CHECK_RANGE(block_size, RS_BCAST_BLOCK_MIN, RS_BCAST_BLOCK_MAX);
    CHECK_RANGE(inline_max, 0, RS_BCAST_INLINE_CAP);
    CHECK_RANGE(reads_per_ep, 1, 1024);
    CHECK_RANGE(source_reads, 1, 1024);
    CHECK_RANGE(holders_max, 1, 4096);
    CHECK_RANGE(timeout_ms, 10, 3600000);
    CHECK_RANGE(grace_ms, 0, 600000);
    CHECK_RANGE(patience_ms, 0, 600000);
    CHECK_RANGE(mode, RS_BCAST_TORRENT, RS_BCAST_SOURCE);
    CHECK_RANGE(addr_kind, RS_BCAST_ADDR_HOSTPORT, RS_BCAST_ADDR_BLOB);
    if (memchr(cfg->host, '\0', sizeof(cfg->host)) == NULL ||
        rs_bhost_check(cfg->host, strlen(cfg->host)) != RS_OK) {
        rs_error("broadcast config field host must be a host name or address of 1..%d bytes",
                 RS_BCAST_HOST_MAX);
        return RS_ERR_CONFIG;
    }
    return RS_OK;
}
