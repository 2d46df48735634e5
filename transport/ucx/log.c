/*
 * UCX backend: UCX's own log lines (its warnings and errors, printed to
 * stdout by UCX's default handler) go through rshuffle's log instead, so
 * rs_log_set_handler and RSHUFFLE_LOG govern them like every other line.
 * UCX's handler stack is process-wide: ours is pushed once, before the
 * first context reads UCX's configuration.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <ucs/debug/log_def.h>

static rs_log_level_t level_of(ucs_log_level_t level)
{
    return level <= UCS_LOG_LEVEL_ERROR  ? RS_LOG_ERROR
           : level == UCS_LOG_LEVEL_WARN ? RS_LOG_WARN
           : level <= UCS_LOG_LEVEL_INFO ? RS_LOG_INFO
                                         : RS_LOG_DEBUG;
}

/* fmt and ap are UCX's own printf format and its arguments. */
__attribute__((format(printf, 6, 0))) static ucs_log_func_rc_t
route(const char *file, unsigned line, const char *function, ucs_log_level_t level,
      const ucs_log_component_config_t *comp, const char *fmt, va_list ap)
{
    (void)function;
    (void)comp;
    if (level == UCS_LOG_LEVEL_PRINT)
        return UCS_LOG_FUNC_RC_CONTINUE; /* output a user asked UCX for (ucx_info and the like) */
    rs_log_level_t rl = level_of(level);
    if (rl <= rs_log_level()) {
        char msg[512];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        rs_log_write(rl, file, (int)line, "ucx: %s", msg);
    }
    /* A fatal line goes on to UCX's handler too: it ends the process after it. */
    return level == UCS_LOG_LEVEL_FATAL ? UCS_LOG_FUNC_RC_CONTINUE : UCS_LOG_FUNC_RC_STOP;
}

static void push(void)
{
    ucs_log_push_handler(route);
}

void rs_ucx_log_route(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, push);
}
