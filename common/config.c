#include <rshuffle/config.h>

#include "common/env.h"
#include "common/log.h"

#include <stddef.h>
#include <string.h>

void rs_config_defaults(rs_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    cfg->log_level = rs_log_level();
    cfg->transport = RS_TRANSPORT_AUTO;
    strcpy(cfg->job_token, "rshuffle");
    cfg->peer_timeout_ms = 10000;
    cfg->connect_timeout_ms = 5000;
    cfg->msg_max = 8192;
    cfg->progress_thread = 0;
    cfg->verbs_sq_depth = 256;
    cfg->verbs_srq_depth = 512;
    cfg->verbs_cq_depth = 4096;
    cfg->verbs_inline = 128;
    cfg->verbs_signal_every = 16;
    cfg->verbs_max_rd_atom = 0;
}

/* The numeric fields: one row serves the environment parser and validation. */
#define RS_U32_FIELD(env, field, min, max) RS_ENV_FIELD(rs_config_t, env, field, min, max)
static const rs_env_field_t u32_fields[] = {
    RS_U32_FIELD("RSHUFFLE_PEER_TIMEOUT_MS", peer_timeout_ms, 10, 3600000),
    RS_U32_FIELD("RSHUFFLE_CONNECT_TIMEOUT_MS", connect_timeout_ms, 10, 3600000),
    RS_U32_FIELD("RSHUFFLE_MSG_MAX", msg_max, 64, 1u << 20),
    RS_U32_FIELD("RSHUFFLE_VERBS_SQ_DEPTH", verbs_sq_depth, 16, 32768),
    RS_U32_FIELD("RSHUFFLE_VERBS_SRQ_DEPTH", verbs_srq_depth, 16, 65536),
    RS_U32_FIELD("RSHUFFLE_VERBS_CQ_DEPTH", verbs_cq_depth, 64, 1u << 20),
    RS_U32_FIELD("RSHUFFLE_VERBS_INLINE", verbs_inline, 0, 1024),
    RS_U32_FIELD("RSHUFFLE_VERBS_SIGNAL_EVERY", verbs_signal_every, 1, 1024),
    RS_U32_FIELD("RSHUFFLE_VERBS_MAX_RD_ATOM", verbs_max_rd_atom, 0, 256),
};
#undef RS_U32_FIELD
#define N_U32_FIELDS (sizeof(u32_fields) / sizeof(u32_fields[0]))

rs_status_t rs_config_from_env(rs_config_t *cfg)
{
    static const char *const transports[] = {"auto", "ucx", "verbs", NULL};
    if (cfg == NULL)
        return RS_ERR_INVALID;
    rs_config_t c = *cfg;
    int level = (int)c.log_level, transport = (int)c.transport;
    rs_status_t st;

    if ((st = rs_env_choice("RSHUFFLE_LOG", rs_log_level_names, &level)) != RS_OK ||
        (st = rs_env_choice("RSHUFFLE_TRANSPORT", transports, &transport)) != RS_OK ||
        (st = rs_env_str("RSHUFFLE_JOB_TOKEN", c.job_token, sizeof(c.job_token))) != RS_OK ||
        (st = rs_env_bool("RSHUFFLE_PROGRESS_THREAD", &c.progress_thread)) != RS_OK ||
        (st = rs_env_str("RSHUFFLE_VERBS_DEVICE", c.verbs_device, sizeof(c.verbs_device))) !=
            RS_OK ||
        (st = rs_env_fields(u32_fields, N_U32_FIELDS, &c)) != RS_OK)
        return st;
    if (c.job_token[0] == '\0') {
        rs_error("RSHUFFLE_JOB_TOKEN is invalid: it must not be empty");
        return RS_ERR_CONFIG;
    }
    c.log_level = (rs_log_level_t)level;
    c.transport = (rs_transport_kind_t)transport;
    *cfg = c;
    return RS_OK;
}

rs_status_t rs_config_init(rs_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    rs_config_t c;
    rs_config_defaults(&c);
    rs_status_t st = rs_config_from_env(&c);
    if (st == RS_OK)
        *cfg = c;
    return st;
}

rs_status_t rs_config_validate(const rs_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    if ((unsigned)cfg->log_level > RS_LOG_DEBUG) {
        rs_error("config field log_level = %d is not a rs_log_level_t", (int)cfg->log_level);
        return RS_ERR_CONFIG;
    }
    if ((unsigned)cfg->transport > RS_TRANSPORT_VERBS) {
        rs_error("config field transport = %d is not a rs_transport_kind_t", (int)cfg->transport);
        return RS_ERR_CONFIG;
    }
    if (rs_env_fields_check(u32_fields, N_U32_FIELDS, cfg, "config") != RS_OK)
        return RS_ERR_CONFIG;
    if (memchr(cfg->job_token, '\0', sizeof(cfg->job_token)) == NULL || cfg->job_token[0] == '\0') {
        rs_error("config field job_token must be a non-empty string of at most %d bytes",
                 RS_JOB_TOKEN_MAX);
        return RS_ERR_CONFIG;
    }
    if (memchr(cfg->verbs_device, '\0', sizeof(cfg->verbs_device)) == NULL) {
        rs_error("config field verbs_device must be a string of at most %d bytes",
                 RS_DEVICE_NAME_MAX);
        return RS_ERR_CONFIG;
    }
    return RS_OK;
}
