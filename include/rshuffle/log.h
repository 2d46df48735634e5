/*
 * Logging: a process-wide level and where the lines go. By default each line
 * goes to stderr as one write(2):
 *   [SECONDS.MICROS] rshuffle[PID] LEVEL FILE:LINE: MESSAGE
 * (wall-clock time); a host application can take the lines instead with
 * rs_log_set_handler.
 */
#ifndef RSHUFFLE_LOG_H
#define RSHUFFLE_LOG_H

#include <rshuffle/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rs_log_level {
    RS_LOG_ERROR = 0,
    RS_LOG_WARN = 1,
    RS_LOG_INFO = 2,
    RS_LOG_DEBUG = 3,
} rs_log_level_t;

/* The current level: set by rs_log_set_level, else RSHUFFLE_LOG, else warn. */
RS_API rs_log_level_t rs_log_level(void);

/* Sets the level for the whole process (overrides RSHUFFLE_LOG). */
RS_API void rs_log_set_level(rs_log_level_t level);

/* Parses "error", "warn", "info" or "debug"; RS_ERR_INVALID otherwise. */
RS_API rs_status_t rs_log_level_parse(const char *name, rs_log_level_t *level_p);

/*
 * Receives one log line: its level, the library source position and the
 * message (no newline; valid only during the call). Runs on the thread that
 * logs, possibly a library thread holding library locks: it must not call
 * into rshuffle and should not block.
 */
typedef void (*rs_log_handler_t)(void *arg, rs_log_level_t level, const char *file, int line,
                                 const char *msg);

/*
 * Routes every log line of the process to fn(arg, ...) instead of stderr;
 * fn NULL restores the default stderr format. Lines below the level (see
 * rs_log_set_level) are not formatted at all. Cannot fail. The library keeps
 * arg until the next call.
 */
RS_API void rs_log_set_handler(rs_log_handler_t fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif
