/* rs_reader_config_t: its table (RSHUFFLE_READ_*), defaults, environment, check. */
#include "reader/config.h"

#include "common/cfgtab.h"
#include "shuffle/proto.h"

#include <rshuffle/transport.h>

#include <string.h>

/*
 * A read buffer holds one batch whole (a grant, 16 MiB) at least: a smaller
 * RSHUFFLE_READ_MAX could never take effect, so it is refused.
 */
static const rs_cfg_row_t rows[] = {
    RS_CFG_UINT_ROW(rs_reader_config_t, "RSHUFFLE_READ_MAX", read_max, "16M", RS_GRANT_MAX,
                    1ull << 32, "the reader's registered buffer: its largest batch"),
    RS_CFG_UINT_ROW(rs_reader_config_t, "RSHUFFLE_READ_WAIT_MS", wait_ms, "30000", 10, 3600000,
                    "bound of any single reader wait"),
    RS_CFG_BOOL_ROW(rs_reader_config_t, "RSHUFFLE_READ_LOCAL", local_reads, "1",
                    "read partitions of a worker in this process in place (0|1)"),
    RS_CFG_UINT_ROW(rs_reader_config_t, "RSHUFFLE_READ_RANGES", read_ranges, "64", 1, RS_GETV_MAX,
                    "a remote partition's batches taken by one vectored read, at most"),
};

const rs_cfg_table_t rs_reader_config_table = {"reader config", rows,
                                               sizeof(rows) / sizeof(rows[0])};

void rs_reader_config_defaults(rs_reader_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    rs_cfg_defaults(&rs_reader_config_table, cfg);
}

rs_status_t rs_reader_config_from_env(rs_reader_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    return rs_cfg_apply(&rs_reader_config_table, cfg);
}

rs_status_t rs_rd_config_check(rs_reader_config_t *cfg)
{
    if (cfg->read_max < RS_GRANT_MAX)
        cfg->read_max = RS_GRANT_MAX; /* one frame always fits */
    if (cfg->wait_ms == 0)
        cfg->wait_ms = 30000;
    if (cfg->read_ranges == 0)
        cfg->read_ranges = 64;
    return rs_cfg_check(&rs_reader_config_table, cfg);
}
