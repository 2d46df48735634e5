/* Internal logging macros. The first function that detects an error logs it, once. */
#ifndef RS_COMMON_LOG_H
#define RS_COMMON_LOG_H

#include <rshuffle/log.h>

/* "error", "warn", "info", "debug" by rs_log_level_t, then NULL. */
extern const char *const rs_log_level_names[];

void rs_log_write(rs_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define rs_log_at(level, ...)                                       \
    do {                                                            \
        if ((level) <= rs_log_level())                              \
            rs_log_write((level), __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#define rs_error(...) rs_log_at(RS_LOG_ERROR, __VA_ARGS__)
#define rs_warn(...)  rs_log_at(RS_LOG_WARN, __VA_ARGS__)
#define rs_info(...)  rs_log_at(RS_LOG_INFO, __VA_ARGS__)
#define rs_debug(...) rs_log_at(RS_LOG_DEBUG, __VA_ARGS__)

#endif
