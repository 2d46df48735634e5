/* The UCX backend's table: RSHUFFLE_UCX_* into its private rs_ucx_config_t. */
#include "transport/ucx/config.h"

#include "common/cfgtab.h"

#include <string.h>

static const char *const rmas[] = {"auto", "ucx", "am", NULL};
static const char *const mems[] = {"own", "shared", "attach", NULL};
static const char *const notifies[] = {"fence", "flush", NULL};
static const char *const queues[] = {"shared", "local", "own", NULL};

static const rs_cfg_row_t rows[] = {
    RS_CFG_CHOICE_ROW(rs_ucx_config_t, "RSHUFFLE_UCX_RMA", rma, "auto", rmas,
                      "UCX one-sided ops: auto|ucx|am (am: carried as messages)"),
    RS_CFG_CHOICE_ROW(rs_ucx_config_t, "RSHUFFLE_UCX_NOTIFY", notify, "fence", notifies,
                      "UCX notified put: fence|flush"),
    RS_CFG_CHOICE_ROW(
        rs_ucx_config_t, "RSHUFFLE_UCX_MEM", mem, "own", mems,
        "UCX rs_mem_alloc: own (peers attach, map what they reuse) | attach (never map) | shared"),
    RS_CFG_UINT_ROW(rs_ucx_config_t, "RSHUFFLE_UCX_MAP_MAX", map_max, "0", 0, UINT64_MAX,
                    "UCX: largest region peers may map (0: no limit where shared memory gets huge "
                    "pages, else 64M)"),
    RS_CFG_BOOL_ROW(rs_ucx_config_t, "RSHUFFLE_UCX_HUGE", huge, "1",
                    "UCX: private regions of 2 MiB or more advised for huge pages (0|1)"),
    RS_CFG_CHOICE_ROW(rs_ucx_config_t, "RSHUFFLE_UCX_QUEUE", queue, "local", queues,
                      "UCX receive queue of a connection (made, or accepted through rs_listen): "
                      "shared (one per context, renewed "
                      "after a peer of this host dies) | local (a UCX worker of its own for a peer "
                      "of this host, the shared one for others) | own (a UCX worker per "
                      "connection)"),
};

const rs_cfg_table_t rs_ucx_config_table = {"UCX config", rows, sizeof(rows) / sizeof(rows[0])};

rs_status_t rs_ucx_config_read(rs_ucx_config_t *cfg)
{
    rs_ucx_config_t c;
    memset(&c, 0, sizeof(c));
    rs_status_t st = rs_cfg_defaults(&rs_ucx_config_table, &c);
    if (st == RS_OK)
        st = rs_cfg_apply(&rs_ucx_config_table, &c);
    if (st == RS_OK)
        *cfg = c;
    return st;
}
