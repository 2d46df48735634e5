#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -1: not decided yet; read RSHUFFLE_LOG on first use. */
static volatile int log_level = -1;

const char *const rs_log_level_names[] = {"error", "warn", "info", "debug", NULL};

rs_status_t rs_log_level_parse(const char *name, rs_log_level_t *level_p)
{
    for (int i = 0; rs_log_level_names[i] != NULL; i++) {
        if (name != NULL && strcmp(name, rs_log_level_names[i]) == 0) {
            *level_p = (rs_log_level_t)i;
            return RS_OK;
        }
    }
    return RS_ERR_INVALID;
}

rs_log_level_t rs_log_level(void)
{
    int level = log_level;
    if (level >= 0)
        return (rs_log_level_t)level;

    rs_log_level_t parsed = RS_LOG_WARN;
    const char *env = getenv("RSHUFFLE_LOG");
    if (env != NULL && rs_log_level_parse(env, &parsed) != RS_OK) {
        fprintf(stderr,
                "rshuffle: RSHUFFLE_LOG='%s' is not one of error|warn|info|debug; "
                "using warn\n",
                env);
        parsed = RS_LOG_WARN;
    }
    log_level = (int)parsed;
    return parsed;
}

void rs_log_set_level(rs_log_level_t level)
{
    log_level = (int)level;
}

void rs_log_write(rs_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    const char *base = strrchr(file, '/');
    /* One write() per line so lines of concurrent processes do not interleave. */
    char out[1200];
    size_t room = sizeof(out) - 1; /* the last byte is for the newline */
    int n = snprintf(out, room, "rshuffle[%d] %s %s:%d: ", (int)getpid(), rs_log_level_names[level],
                     base ? base + 1 : file, line);
    size_t len = n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(out + len, room - len, fmt, ap);
    va_end(ap);
    len += n < 0 ? 0 : (size_t)n < room - len ? (size_t)n : room - len - 1;
    out[len++] = '\n';
    ssize_t unused = write(STDERR_FILENO, out, len);
    (void)unused;
}
