/* Context life cycle, configuration and handler registration. */
#include "transport/internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

static rs_status_t ctx_init_lock(rs_ctx_t *ctx)
{
    pthread_mutexattr_t attr;
    if (pthread_mutexattr_init(&attr) != 0)
        return RS_ERR_NOMEM;
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    int rc = pthread_mutex_init(&ctx->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    return rc == 0 ? RS_OK : RS_ERR_NOMEM;
}

static rs_status_t ctx_open_backend(rs_ctx_t *ctx)
{
    rs_status_t st = rs_tp_select_backend(&ctx->cfg, &ctx->be_ops);
    if (st != RS_OK)
        return st;
    st = ctx->be_ops->ctx_open(ctx);
    if (st == RS_OK || ctx->cfg.transport != RS_TRANSPORT_AUTO || rs_tp_ucx_backend() == NULL ||
        ctx->be_ops == rs_tp_ucx_backend())
        return st;
    /* auto: a device is present but verbs could not use it; UCX still can. */
    rs_warn("transport auto: verbs backend unavailable (%s), using ucx", rs_strerror(st));
    ctx->be_ops = rs_tp_ucx_backend();
    return ctx->be_ops->ctx_open(ctx);
}

rs_status_t rs_ctx_create(const rs_config_t *cfg, rs_ctx_t **ctx_p)
{
    rs_config_t c;
    rs_status_t st;

    if (ctx_p == NULL)
        return RS_ERR_INVALID;
    if (cfg == NULL) {
        st = rs_config_init(&c);
        if (st != RS_OK)
            return st;
    } else {
        st = rs_config_validate(cfg);
        if (st != RS_OK)
            return st;
        c = *cfg;
    }
    rs_log_set_level(c.log_level); /* logging is process-wide: the newest context's level */

    rs_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        rs_error("out of memory allocating a transport context");
        return RS_ERR_NOMEM;
    }
    ctx->cfg = c;
    ctx->thread_wake_fd = -1;
    rs_list_init(&ctx->eps);
    rs_list_init(&ctx->mrs);
    rs_list_init(&ctx->listeners);
    rs_list_init(&ctx->done);
    rs_list_init(&ctx->op_free);
    rs_list_init(&ctx->op_chunks);
    rs_list_init(&ctx->early_eps);
    ctx->timeout_ns = RS_MS_TO_NS(c.peer_timeout_ms);
    /* Deadlines are checked this often: a tenth of the timeout, 1..100 ms. */
    ctx->scan_period_ns = ctx->timeout_ns / 10;
    if (ctx->scan_period_ns < RS_MS_TO_NS(1))
        ctx->scan_period_ns = RS_MS_TO_NS(1);
    if (ctx->scan_period_ns > RS_MS_TO_NS(100))
        ctx->scan_period_ns = RS_MS_TO_NS(100);
    ctx->next_scan_ns = rs_now_coarse_ns() + ctx->scan_period_ns;

    st = ctx_init_lock(ctx);
    if (st != RS_OK)
        goto err_free_ctx;
    st = ctx_open_backend(ctx);
    if (st != RS_OK)
        goto err_destroy_lock;
    if (c.progress_thread) {
        st = rs_progress_thread_start(ctx);
        if (st != RS_OK)
            goto err_close_backend;
    }
    rs_debug("transport context %p on backend %s", (void *)ctx, ctx->be_ops->name);
    *ctx_p = ctx;
    return RS_OK;

err_close_backend:
    ctx->be_ops->ctx_close(ctx);
err_destroy_lock:
    pthread_mutex_destroy(&ctx->lock);
err_free_ctx:
    free(ctx);
    return st;
}

void rs_ctx_destroy(rs_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    rs_progress_thread_stop(ctx);
    rs_tp_lock(ctx);
    if (ctx->in_cb > 0 || ctx->in_progress > 0)
        rs_error("rs_ctx_destroy called from a transport callback: undefined behaviour");
    ctx->destroying = 1;

    while (!rs_list_empty(&ctx->listeners))
        rs_listener_destroy(rs_list_first(&ctx->listeners, rs_listener_t, link));

    /* Refuse new work on every endpoint first, so callbacks cannot re-post. */
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &ctx->eps)
    {
        rs_ep_t *ep = RS_CONTAINER_OF(pos, rs_ep_t, link);
        if (ep->state != RS_EP_DEAD)
            ep->state = RS_EP_CLOSING;
    }
    /* Let every endpoint wind down at once, then wait for each. */
    rs_list_for_each_safe(pos, tmp, &ctx->eps)
    {
        rs_tp_ep_be_fail(RS_CONTAINER_OF(pos, rs_ep_t, link));
    }
    uint64_t end = rs_tp_close_deadline(ctx); /* one bound for all of them */
    while (!rs_list_empty(&ctx->eps))
        rs_tp_ep_destroy(rs_list_first(&ctx->eps, rs_ep_t, link), RS_ERR_CANCELED, end);
    rs_tp_ops_drain(ctx);

    while (!rs_list_empty(&ctx->mrs))
        rs_mem_free(rs_list_first(&ctx->mrs, rs_mr_t, link));

    ctx->be_ops->ctx_close(ctx);
    /* The backend is gone: ops it never completed can no longer complete. */
    rs_tp_ops_drain(ctx);
    rs_tp_ops_pool_free(ctx);
    rs_tp_unlock(ctx);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

rs_status_t rs_ctx_renew(rs_ctx_t *ctx)
{
    if (ctx == NULL)
        return RS_ERR_INVALID;
    rs_tp_lock(ctx);
    rs_status_t st = RS_OK;
    if (ctx->in_cb > 0 || ctx->in_progress > 0 || ctx->destroying) {
        rs_error("rs_ctx_renew called from a transport callback or during destroy");
        st = RS_ERR_STATE;
    } else if (!rs_list_empty(&ctx->eps)) {
        rs_error("rs_ctx_renew: endpoints are still open");
        st = RS_ERR_STATE;
    } else if (ctx->be_ops->caps(ctx) & RS_CAP_RENEW) {
        st = ctx->be_ops->renew(ctx);
    }
    rs_tp_unlock(ctx);
    return st;
}

const char *rs_ctx_backend(const rs_ctx_t *ctx)
{
    if (ctx == NULL)
        return NULL;
    return ctx->be_ops->name;
}

unsigned rs_ctx_caps(const rs_ctx_t *ctx)
{
    if (ctx == NULL)
        return 0;
    return ctx->be_ops->caps(ctx);
}

const rs_config_t *rs_ctx_config(const rs_ctx_t *ctx)
{
    if (ctx == NULL)
        return NULL;
    return &ctx->cfg;
}

rs_status_t rs_set_msg_handler(rs_ctx_t *ctx, unsigned type, rs_msg_cb_t cb, void *arg)
{
    if (ctx == NULL)
        return RS_ERR_INVALID;
    if (type >= RS_MSG_TYPES) {
        rs_error("message type %u is not a user type (0..%d)", type, RS_MSG_TYPES - 1);
        return RS_ERR_INVALID;
    }
    rs_tp_lock(ctx);
    ctx->msg_handlers[type].cb = cb;
    ctx->msg_handlers[type].arg = cb != NULL ? arg : NULL;
    rs_tp_unlock(ctx);
    return RS_OK;
}

void rs_set_notify_handler(rs_ctx_t *ctx, rs_notify_cb_t cb, void *arg)
{
    if (ctx == NULL)
        return;
    rs_tp_lock(ctx);
    ctx->notify_cb = cb;
    ctx->notify_arg = arg;
    rs_tp_unlock(ctx);
}

void rs_set_ep_handler(rs_ctx_t *ctx, rs_ep_cb_t cb, void *arg)
{
    if (ctx == NULL)
        return;
    rs_tp_lock(ctx);
    ctx->ep_cb = cb;
    ctx->ep_arg = arg;
    rs_tp_unlock(ctx);
}

const rs_config_t *rs_tp_ctx_cfg(const rs_ctx_t *ctx)
{
    return &ctx->cfg;
}

void *rs_tp_ctx_be(const rs_ctx_t *ctx)
{
    return ctx->be;
}

void rs_tp_ctx_set_be(rs_ctx_t *ctx, void *be)
{
    ctx->be = be;
}
