/* Logging level control. The library logs to stderr. */
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

#ifdef __cplusplus
}
#endif
#endif
