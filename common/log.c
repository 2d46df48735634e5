#include "common/log.h"
#include "common/env.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* -1: not decided yet; read RSHUFFLE_LOG on first use. */
static int log_level = -1; /* atomic: any thread may set it while others log */

const char *const rs_log_level_names[] = {"error", "warn", "info", "debug", NULL};

rs_status_t rs_log_level_parse(const char *name, rs_log_level_t *level_p)
{
    if (level_p == NULL)
        return RS_ERR_INVALID;
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
    int level = __atomic_load_n(&log_level, __ATOMIC_RELAXED);
    if (level >= 0)
        return (rs_log_level_t)level;

    rs_log_level_t parsed = RS_LOG_WARN;
    const char *env = rs_env_raw("RSHUFFLE_LOG"); /* not rs_env_get: its warning logs */
    if (env != NULL && rs_log_level_parse(env, &parsed) != RS_OK) {
        fprintf(stderr,
                "rshuffle: RSHUFFLE_LOG='%s' is not one of error|warn|info|debug; "
                "using warn\n",
                env);
        parsed = RS_LOG_WARN;
    }
    __atomic_store_n(&log_level, (int)parsed, __ATOMIC_RELAXED);
    return parsed;
}

void rs_log_set_level(rs_log_level_t level)
{
    __atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

static pthread_mutex_t handler_lock = PTHREAD_MUTEX_INITIALIZER;
static rs_log_handler_t handler_fn;
static void *handler_arg;

void rs_log_set_handler(rs_log_handler_t fn, void *arg)
{
    pthread_mutex_lock(&handler_lock);
    handler_fn = fn;
    handler_arg = arg;
    pthread_mutex_unlock(&handler_lock);
}

void rs_log_write(rs_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    const char *base = strrchr(file, '/');
    base = base != NULL ? base + 1 : file;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        msg[0] = '\0';

    pthread_mutex_lock(&handler_lock);
    rs_log_handler_t fn = handler_fn;
    void *arg = handler_arg;
    pthread_mutex_unlock(&handler_lock);
    if (fn != NULL) {
        fn(arg, level, base, line, msg);
        return;
    }

    /* One write() per line so lines of concurrent processes do not interleave. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char out[1200];
    size_t room = sizeof(out) - 1; /* the last byte is for the newline */
    n = snprintf(out, room, "[%lld.%06ld] rshuffle[%d] %s %s:%d: %s", (long long)ts.tv_sec,
                 ts.tv_nsec / 1000, (int)getpid(), rs_log_level_names[level], base, line, msg);
    size_t len = n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1;
    out[len++] = '\n';
    ssize_t unused = write(STDERR_FILENO, out, len);
    (void)unused;
}
