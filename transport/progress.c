/*
 * Progress: one round = backend progress, deadline scan (every
 * scan_period_ns), deferred endpoint closes, then the user callbacks of
 * completed ops. rs_wait, the arm/fd pair and the progress thread build on
 * it.
 */
#include "transport/internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

unsigned rs_tp_progress_locked(rs_ctx_t *ctx)
{
    if (ctx->in_progress > 0 || ctx->in_cb > 0)
        return 0; /* called from a callback: progress is not re-entrant */
    ctx->in_progress++;
    unsigned n = ctx->be_ops->progress(ctx);
    ctx->in_progress--;

    uint64_t now = rs_now_coarse_ns();
    if (now >= ctx->next_scan_ns) {
        ctx->next_scan_ns = now + ctx->scan_period_ns;
        n += rs_tp_eps_scan(ctx, now);
    }
    if (ctx->n_reap > 0)
        n += rs_tp_eps_reap(ctx);
    if (!rs_list_empty(&ctx->early_eps))
        n += rs_tp_early_deliver(ctx);
    n += rs_tp_ops_drain(ctx);
    return n;
}

unsigned rs_progress(rs_ctx_t *ctx)
{
    if (ctx == NULL)
        return 0;
    rs_tp_lock(ctx);
    unsigned n = rs_tp_progress_locked(ctx);
    rs_tp_unlock(ctx);
    return n;
}

static rs_status_t arm_locked(rs_ctx_t *ctx)
{
    if (!rs_list_empty(&ctx->done) || ctx->n_reap > 0 || !rs_list_empty(&ctx->early_eps))
        return RS_ERR_BUSY;
    return ctx->be_ops->arm(ctx);
}

int rs_ctx_fd(rs_ctx_t *ctx)
{
    if (ctx == NULL)
        return -1;
    rs_tp_lock(ctx);
    int fd = ctx->be_ops->fd(ctx);
    rs_tp_unlock(ctx);
    return fd;
}

rs_status_t rs_ctx_arm(rs_ctx_t *ctx)
{
    if (ctx == NULL)
        return RS_ERR_INVALID;
    rs_tp_lock(ctx);
    rs_status_t st = arm_locked(ctx);
    rs_tp_unlock(ctx);
    return st;
}

/* Sleeps on the backend fd (and extra_fd if >= 0) for at most ms. */
static void sleep_on_fds(rs_ctx_t *ctx, int extra_fd, int ms)
{
    struct pollfd pfd[2] = {{.fd = ctx->be_ops->fd(ctx), .events = POLLIN},
                            {.fd = extra_fd, .events = POLLIN}};
    int n = poll(pfd, extra_fd >= 0 ? 2 : 1, ms);
    if (n < 0 && errno != EINTR)
        rs_warn("poll on the transport fd failed: errno %d", errno);
}

rs_status_t rs_wait(rs_ctx_t *ctx, int timeout_ms)
{
    if (ctx == NULL)
        return RS_ERR_INVALID;
    uint64_t start = rs_now_ns();
    uint64_t end = timeout_ms < 0 ? UINT64_MAX : start + RS_MS_TO_NS(timeout_ms);
    int scan_ms = (int)(ctx->scan_period_ns / 1000000);

    for (;;) {
        rs_tp_lock(ctx);
        if (ctx->in_cb > 0 || ctx->in_progress > 0) {
            rs_tp_unlock(ctx);
            rs_error("rs_wait called from a transport callback");
            return RS_ERR_STATE;
        }
        unsigned n = rs_tp_progress_locked(ctx);
        rs_status_t st = n > 0 ? RS_OK : arm_locked(ctx);
        rs_tp_unlock(ctx);
        if (n > 0)
            return RS_OK;

        uint64_t now = rs_now_ns();
        if (now >= end)
            return RS_ERR_TIMEOUT;
        if (st == RS_ERR_BUSY)
            continue;
        /* Wake at least every scan period so deadlines are enforced. */
        uint64_t left_ms = end == UINT64_MAX ? (uint64_t)scan_ms : (end - now + 999999) / 1000000;
        int ms = left_ms < (uint64_t)scan_ms ? (int)left_ms : scan_ms;
        sleep_on_fds(ctx, -1, st == RS_OK ? ms : 1);
    }
}

/* Spin this many empty rounds before sleeping on the fd. */
#define RS_THREAD_SPIN 64

static void *progress_thread_main(void *arg)
{
    rs_ctx_t *ctx = arg;
    int scan_ms = (int)(ctx->scan_period_ns / 1000000);
    unsigned idle = 0;

    while (!__atomic_load_n(&ctx->thread_stop, __ATOMIC_ACQUIRE)) {
        rs_tp_lock(ctx);
        ctx->thread_sleeping = 0; /* awake (a wake-up in between costs one spare write) */
        unsigned n = rs_tp_progress_locked(ctx);
        rs_status_t st = RS_ERR_BUSY;
        if (n == 0 && ++idle >= RS_THREAD_SPIN)
            st = arm_locked(ctx);
        /* Asleep: a completion queued by a posting call must wake us. */
        ctx->thread_sleeping = st == RS_OK;
        rs_tp_unlock(ctx);
        if (n > 0) {
            idle = 0;
            continue;
        }
        if (st == RS_OK) {
            sleep_on_fds(ctx, ctx->thread_wake_fd, scan_ms);
            uint64_t v;
            ssize_t unused = read(ctx->thread_wake_fd, &v, sizeof(v));
            (void)unused;
            idle = 0;
        } else if (st != RS_ERR_BUSY) {
            usleep(1000);
        }
    }
    return NULL;
}

rs_status_t rs_progress_thread_start(rs_ctx_t *ctx)
{
    if (ctx == NULL)
        return RS_ERR_INVALID;
    rs_tp_lock(ctx);
    if (ctx->thread_running) {
        rs_tp_unlock(ctx);
        return RS_OK;
    }
    ctx->thread_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ctx->thread_wake_fd < 0) {
        rs_tp_unlock(ctx);
        rs_error("eventfd for the progress thread failed: errno %d", errno);
        return RS_ERR_IO;
    }
    __atomic_store_n(&ctx->thread_stop, 0, __ATOMIC_RELEASE);
    if (pthread_create(&ctx->thread, NULL, progress_thread_main, ctx) != 0) {
        close(ctx->thread_wake_fd);
        ctx->thread_wake_fd = -1;
        rs_tp_unlock(ctx);
        rs_error("cannot start the progress thread");
        return RS_ERR_NOMEM;
    }
    ctx->thread_running = 1;
    rs_tp_unlock(ctx);
    return RS_OK;
}

void rs_progress_thread_stop(rs_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    rs_tp_lock(ctx);
    if (!ctx->thread_running) {
        rs_tp_unlock(ctx);
        return;
    }
    if (pthread_equal(pthread_self(), ctx->thread)) {
        rs_tp_unlock(ctx);
        rs_error("rs_progress_thread_stop called from the progress thread (ignored)");
        return;
    }
    __atomic_store_n(&ctx->thread_stop, 1, __ATOMIC_RELEASE);
    ctx->thread_running = 0;
    rs_tp_thread_wake(ctx);
    pthread_t thread = ctx->thread;
    rs_tp_unlock(ctx);
    pthread_join(thread, NULL);
    rs_tp_lock(ctx);
    close(ctx->thread_wake_fd);
    ctx->thread_wake_fd = -1;
    rs_tp_unlock(ctx);
}
