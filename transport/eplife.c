/*
 * An endpoint's lifetime: allocation, death (rs_tp_ep_kill: the backend
 * told, deadlines shortened, the user's endpoint event), teardown. The
 * state machine above it is ep.c.
 */
#include "transport/internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>

/* After an endpoint died, the backend gets this long to return its ops. */
#define RS_EP_FAIL_GRACE_NS RS_MS_TO_NS(100)
/*
 * Closing waits at most this long (or peer_timeout_ms if shorter) for what
 * is in flight to finish or be canceled by the backend; then it is cut.
 */
#define RS_EP_CLOSE_WAIT_NS RS_MS_TO_NS(500)

uint64_t rs_tp_close_deadline(const rs_ctx_t *ctx)
{
    uint64_t wait = RS_EP_CLOSE_WAIT_NS < ctx->timeout_ns ? RS_EP_CLOSE_WAIT_NS : ctx->timeout_ns;
    return rs_now_ns() + wait;
}

/* Messages that waited for rs_connect to return (msg.c) go with the endpoint. */
static void early_free(rs_ep_t *ep)
{
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    rs_list_del(&p->early_link);
    while (!rs_list_empty(&p->early)) {
        rs_early_t *e = rs_list_first(&p->early, rs_early_t, link);
        rs_list_del(&e->link);
        free(e);
    }
}

rs_ep_t *rs_tp_ep_alloc(rs_ctx_t *ctx)
{
    rs_ep_priv_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        rs_error("out of memory allocating an endpoint");
        return NULL;
    }
    rs_ep_t *ep = &p->ep;
    rs_list_init(&p->early);
    rs_list_init(&p->early_link);
    p->peer_pidfd = -1;
    ep->ctx = ctx;
    rs_list_init(&ep->ops);
    rs_list_init(&ep->rkeys);
    ep->state = RS_EP_CONNECTING;
    ep->status = RS_OK;
    ep->hs_result = RS_ERR_BUSY;
    rs_list_add_tail(&ctx->eps, &ep->link);
    return ep;
}

void rs_tp_ep_free(rs_ep_t *ep)
{
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    if (p->reap)
        ep->ctx->n_reap--;
    early_free(ep);
    rs_tp_peer_unwatch(ep);
    rs_list_del(&ep->link);
    free(p);
}

void rs_tp_ep_mark_reap(rs_ep_t *ep)
{
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    if (!p->reap) {
        p->reap = 1;
        ep->ctx->n_reap++;
    }
}

void rs_tp_ep_tell_user(rs_ep_t *ep, rs_status_t status)
{
    rs_ctx_t *ctx = ep->ctx;
    if (ctx->ep_cb == NULL)
        return;
    ctx->in_cb++;
    ctx->ep_cb(ctx->ep_arg, ep, status);
    ctx->in_cb--;
}

void rs_tp_ep_be_fail(rs_ep_t *ep)
{
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    if (!p->be_failed) {
        p->be_failed = 1;
        ep->ctx->be_ops->ep_fail(ep);
    }
}

void rs_tp_ep_kill(rs_ep_t *ep, rs_status_t status)
{
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    if (ep->state == RS_EP_DEAD && ep->accepted && !p->told) {
        rs_tp_ep_mark_reap(ep); /* e.g. a rejected peer went away: drop it now */
        return;
    }
    if (ep->state == RS_EP_DEAD || ep->state == RS_EP_CLOSING)
        return;
    rs_ep_state_t prev = ep->state;
    ep->state = RS_EP_DEAD;
    ep->status = status;
    if (p->hs_client && ep->hs_result == RS_ERR_BUSY)
        /* A refused token stays RS_ERR_AUTH even before the fabric connection
         * (a front door refuses it while CONNECTING). */
        ep->hs_result = prev == RS_EP_CONNECTING && status != RS_ERR_AUTH ? RS_ERR_REFUSED : status;
    /* The endpoint handler hears of it; a peer closing is no warning. */
    if (p->peer_closed)
        rs_debug("endpoint %p: closed by the peer", (void *)ep);
    else if (prev == RS_EP_READY)
        rs_info("endpoint %p died: %s", (void *)ep, rs_strerror(status));
    else
        rs_debug("endpoint %p failed while connecting: %s", (void *)ep, rs_strerror(status));
    rs_tp_ep_be_fail(ep);

    /* Whatever the backend still holds completes for the user soon. */
    uint64_t limit = rs_now_coarse_ns() + RS_EP_FAIL_GRACE_NS;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &ep->ops)
    {
        rs_op_t *op = RS_CONTAINER_OF(pos, rs_op_t, link);
        if (op->deadline_ns > limit)
            op->deadline_ns = limit;
    }
    if (p->told)
        rs_tp_ep_tell_user(ep, status);
    else if (ep->accepted)
        rs_tp_ep_mark_reap(ep);
}

void rs_tp_ep_destroy(rs_ep_t *ep, rs_status_t cancel_status, uint64_t end)
{
    rs_ctx_t *ctx = ep->ctx;
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    int was_dead = ep->state == RS_EP_DEAD;

    p->told = 0; /* no more endpoint events for it */
    if (!was_dead)
        ep->state = RS_EP_CLOSING;
    rs_tp_ep_be_fail(ep);

    /* Let the backend cancel what it holds, within a bound. */
    while (ep->n_ops > 0 && ctx->in_progress == 0 && rs_now_ns() < end) {
        ctx->in_progress++;
        ctx->be_ops->progress(ctx);
        ctx->in_progress--;
    }
    rs_status_t forced = was_dead ? ep->status : cancel_status;
    while (!rs_list_empty(&ep->ops))
        rs_tp_op_force(rs_list_first(&ep->ops, rs_op_t, link), forced);
    /* Callbacks run while ep and its rkeys still exist (posting is refused). */
    rs_tp_ops_drain(ctx);

    while (!rs_list_empty(&ep->rkeys)) {
        rs_rkey_t *rkey = rs_list_first(&ep->rkeys, rs_rkey_t, link);
        ctx->be_ops->rkey_release(rkey);
        rs_list_del(&rkey->link);
        free(rkey);
    }
    ctx->be_ops->ep_close(ep);
    rs_tp_ep_free(ep);
}
