/*
 * The table of rs_config_t, the transport's configuration (cfgtab.h): data
 * only, so common/vars.c can list it without reaching the code that reads
 * the environment.
 */
#include <rshuffle/config.h>

#include "common/cfgtab.h"
#include "common/log.h"

static rs_status_t token_check(const char *s)
{
    return s[0] != '\0' ? RS_OK : RS_ERR_INVALID;
}

static const char *const transports[] = {"auto", "ucx", "verbs", NULL};

#define U32(env, field, dflt, min, max, desc) \
    RS_CFG_UINT_ROW(rs_config_t, env, field, dflt, min, max, desc)
static const rs_cfg_row_t rows[] = {
    RS_CFG_CHOICE_ROW(rs_config_t, "RSHUFFLE_LOG", log_level, "warn", rs_log_level_names,
                      "log level: error|warn|info|debug"),
    RS_CFG_CHOICE_ROW(rs_config_t, "RSHUFFLE_TRANSPORT", transport, "auto", transports,
                      "backend: ucx|verbs|auto (verbs when an RDMA port is active)"),
    RS_CFG_STR_ROW(rs_config_t, "RSHUFFLE_JOB_TOKEN", job_token, "rshuffle", token_check,
                   "a non-empty string", "job token every connection must present (<= 64 bytes)"),
    U32("RSHUFFLE_PEER_TIMEOUT_MS", peer_timeout_ms, "10000", 10, 3600000,
        "an op or a silent peer is dead after this long"),
    U32("RSHUFFLE_CONNECT_TIMEOUT_MS", connect_timeout_ms, "5000", 10, 3600000,
        "connect plus handshake bound"),
    U32("RSHUFFLE_MSG_MAX", msg_max, "8192", 64, 1u << 20, "largest control message, bytes"),
    RS_CFG_BOOL_ROW(rs_config_t, "RSHUFFLE_PROGRESS_THREAD", progress_thread, "0",
                    "start a progress thread per transport context (0|1)"),
    /* The verbs backend's knobs are fields of the public rs_config_t. */
    RS_CFG_STR_ROW(rs_config_t, "RSHUFFLE_VERBS_DEVICE", verbs_device, "", NULL, NULL,
                   "verbs device name (empty: the first active one)"),
    U32("RSHUFFLE_VERBS_SQ_DEPTH", verbs_sq_depth, "256", 16, 32768,
        "verbs: send work requests per QP"),
    U32("RSHUFFLE_VERBS_SRQ_DEPTH", verbs_srq_depth, "512", 16, 65536,
        "verbs: posted receives per context"),
    U32("RSHUFFLE_VERBS_CQ_DEPTH", verbs_cq_depth, "4096", 64, 1u << 20,
        "verbs: completion queue entries"),
    U32("RSHUFFLE_VERBS_INLINE", verbs_inline, "128", 0, 1024, "verbs: largest inline send, bytes"),
    U32("RSHUFFLE_VERBS_SIGNAL_EVERY", verbs_signal_every, "16", 1, 1024,
        "verbs: signal one send in N"),
    U32("RSHUFFLE_VERBS_MAX_RD_ATOM", verbs_max_rd_atom, "0", 0, 256,
        "verbs: reads in flight per QP (0: the device's maximum)"),
};
#undef U32

const rs_cfg_table_t rs_config_table = {"config", rows, sizeof(rows) / sizeof(rows[0])};
