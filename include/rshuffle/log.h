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

/*
 * The current level: set by rs_log_set_level, else RSHUFFLE_LOG, else warn.
 * RSHUFFLE_LOG is read once, at the first call; a value that is not a level
 * is reported on stderr and means warn. Cannot fail; thread-safe.
 */
RS_API rs_log_level_t rs_log_level(void);

/*
 * Sets the level for the whole process (overrides RSHUFFLE_LOG). level must
 * be one of rs_log_level_t (not checked). Note that every transport context
 * created later sets the level again to its config's log_level (see
 * rs_config_t.log_level): with a NULL config that is the current level,
 * unless RSHUFFLE_LOG is set, which then wins. Thread-safe.
 */
RS_API void rs_log_set_level(rs_log_level_t level);

/*
 * Parses "error", "warn", "info" or "debug" (exact, lower case) into
 * *level_p. RS_ERR_INVALID for anything else or a NULL name; *level_p is set
 * only on RS_OK.
 */
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
 * fn NULL restores the default stderr format. UCX's own warnings and errors
 * come this way too, as lines starting "ucx: " (from the first UCX context
 * on; UCX_LOG_LEVEL still decides which UCX makes). Lines below the level (see
 * rs_log_set_level) are not formatted at all; a message is cut at 1023
 * bytes. Cannot fail; thread-safe. The library keeps fn and arg by
 * reference until the next call, and a line logged by another thread while
 * this call runs may still reach the previous fn and arg just after it
 * returns: replace or remove a handler while no library thread logs (no
 * context, pusher, reader, worker or node alive) before freeing its arg.
 */
RS_API void rs_log_set_handler(rs_log_handler_t fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif
