/*
 * Process-wide configuration of the transport: a struct with defaults that
 * RSHUFFLE_* environment variables override. Modules with their own knobs
 * (pusher, worker, broadcast) have their own config structs in their headers
 * and read their variables the same way.
 */
#ifndef RSHUFFLE_CONFIG_H
#define RSHUFFLE_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/log.h>
#include <rshuffle/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rs_transport_kind {
    RS_TRANSPORT_AUTO = 0, /* verbs when a device is present, else UCX */
    RS_TRANSPORT_UCX = 1,
    RS_TRANSPORT_VERBS = 2,
} rs_transport_kind_t;

#define RS_JOB_TOKEN_MAX   64 /* bytes of a job token, without the NUL */
#define RS_DEVICE_NAME_MAX 64

typedef struct rs_config {
    rs_log_level_t log_level;             /* RSHUFFLE_LOG: error|warn|info|debug (warn); set
                                             process-wide by rs_ctx_create */
    rs_transport_kind_t transport;        /* RSHUFFLE_TRANSPORT: ucx|verbs|auto (auto) */
    char job_token[RS_JOB_TOKEN_MAX + 1]; /* RSHUFFLE_JOB_TOKEN ("rshuffle") */
    uint32_t peer_timeout_ms;    /* RSHUFFLE_PEER_TIMEOUT_MS: op or silent peer -> dead (10000) */
    uint32_t connect_timeout_ms; /* RSHUFFLE_CONNECT_TIMEOUT_MS: connect + handshake (5000) */
    uint32_t msg_max;            /* RSHUFFLE_MSG_MAX: largest control message, bytes (8192) */
    int progress_thread;         /* RSHUFFLE_PROGRESS_THREAD: 0|1, start one per context (0) */

    /* verbs backend */
    char verbs_device[RS_DEVICE_NAME_MAX + 1]; /* RSHUFFLE_VERBS_DEVICE ("" = first/any) */
    uint32_t verbs_sq_depth;                   /* RSHUFFLE_VERBS_SQ_DEPTH: send WRs per QP (256) */
    uint32_t verbs_srq_depth;    /* RSHUFFLE_VERBS_SRQ_DEPTH: posted receives per context (512) */
    uint32_t verbs_cq_depth;     /* RSHUFFLE_VERBS_CQ_DEPTH: CQ entries (4096) */
    uint32_t verbs_inline;       /* RSHUFFLE_VERBS_INLINE: max inline send bytes (128) */
    uint32_t verbs_signal_every; /* RSHUFFLE_VERBS_SIGNAL_EVERY: signal one send in N (16) */
    uint32_t verbs_max_rd_atom;  /* RSHUFFLE_VERBS_MAX_RD_ATOM: reads in flight per QP
                                    (0: the device's maximum) */
} rs_config_t;

/*
 * Fills *cfg with the built-in defaults only (log_level: the process's
 * current level, rs_log_level). Reads no other variable. Cannot fail.
 */
RS_API void rs_config_defaults(rs_config_t *cfg);

/*
 * Applies every RSHUFFLE_* variable of the environment to *cfg (variables
 * not set leave their field alone). A bad value (out of range, not one of
 * the choices, a string too long, an empty RSHUFFLE_JOB_TOKEN) returns
 * RS_ERR_CONFIG and logs the variable's name and what it accepts; *cfg is
 * then unchanged. cfg must not be NULL. It does not change the process's
 * log level (rs_ctx_create does, from cfg->log_level). The first read of
 * the environment warns once about unknown RSHUFFLE_* names.
 */
RS_API rs_status_t rs_config_from_env(rs_config_t *cfg);

/*
 * rs_config_defaults followed by rs_config_from_env: RS_ERR_CONFIG as that;
 * *cfg is written only on RS_OK.
 */
RS_API rs_status_t rs_config_init(rs_config_t *cfg);

/*
 * Checks the fields' ranges (for configs built in code): the same ranges as
 * the variables, known enum values, job_token non-empty and NUL-terminated,
 * verbs_device NUL-terminated. RS_ERR_CONFIG (and a log line naming the
 * field) for the first bad one; RS_ERR_INVALID for a NULL cfg.
 */
RS_API rs_status_t rs_config_validate(const rs_config_t *cfg);

/*
 * Parses a byte count as the RSHUFFLE_* size variables take it, for command
 * lines too: decimal digits with an optional K, M or G (either case; powers
 * of 2), optionally followed by iB or B ("64K", "64KiB", "64KB", "4096B").
 * No sign, space or fraction. RS_ERR_INVALID for anything else, a NULL s, or
 * a value over UINT64_MAX; *out is set only on RS_OK.
 */
RS_API rs_status_t rs_parse_size(const char *s, uint64_t *out);

/*
 * Parses a plain unsigned decimal number in [0, max] for command lines
 * (ports, counts): digits only, no sign, space or suffix. RS_ERR_INVALID
 * for anything else, on overflow or above max; *out is then unchanged.
 */
RS_API rs_status_t rs_parse_uint(const char *s, uint64_t max, uint64_t *out);

/* One RSHUFFLE_* variable the library reads. */
typedef struct rs_config_var {
    const char *name;          /* "RSHUFFLE_..." */
    const char *default_value; /* as the variable would be written ("" when empty) */
    const char *description;   /* one line; a number's range at its end ("(1M .. 1024G)") */
} rs_config_var_t;

/*
 * Every RSHUFFLE_* variable the library reads (RSHUFFLE_TEST_* are left to
 * test programs). Sets *vars_p (if not NULL) to a static array and returns
 * its length (the array lives as long as the library). Cannot fail;
 * thread-safe. A variable of the environment that starts with
 * RSHUFFLE_ and is not listed is warned about once per process, at the
 * first configuration read.
 */
RS_API size_t rs_config_vars(const rs_config_var_t **vars_p);

#ifdef __cplusplus
}
#endif
#endif
