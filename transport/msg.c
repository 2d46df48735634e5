/* Control messages received: per-type dispatch, and the early queue of a new client endpoint. */
#include "transport/internal.h"

#include "common/assert.h"
#include "common/log.h"
#include "common/tsan.h"

#include <stdlib.h>
#include <string.h>

/* Hands a message (or a notification) to its handler; 0 when there is none. */
static int deliver(rs_ep_t *ep, int notify, unsigned type, uint32_t imm, const void *data,
                   size_t len)
{
    rs_ctx_t *ctx = ep->ctx;
    rs_msg_handler_t h = notify ? (rs_msg_handler_t){0} : ctx->msg_handlers[type];
    if ((notify && ctx->notify_cb == NULL) || (!notify && h.cb == NULL))
        return 0;
    RS_TSAN_ACQUIRE();
    ctx->in_cb++;
    if (notify)
        ctx->notify_cb(ctx->notify_arg, ep, imm);
    else
        h.cb(h.arg, ep, data, len);
    RS_ASSERT(ctx->in_cb > 0);
    ctx->in_cb--;
    return 1;
}

void rs_tp_msg_recv(rs_ep_t *ep, unsigned type, const void *data, size_t len)
{
    rs_ctx_t *ctx = ep->ctx;
    if (type >= RS_MSG_TYPES) {
        rs_tp_hs_recv(ep, type, data, len);
        return;
    }
    if (ep->state != RS_EP_READY) {
        rs_debug("endpoint %p: message before the handshake passed (dropped)", (void *)ep);
        return;
    }
    if (len > ctx->cfg.msg_max) {
        rs_warn("endpoint %p: %zu-byte message exceeds msg_max %u (dropped)", (void *)ep, len,
                ctx->cfg.msg_max);
        return;
    }
    if (rs_tp_early_queue(ep, 0, type, 0, data, len))
        return;
    if (!deliver(ep, 0, type, 0, data, len))
        rs_debug("endpoint %p: no handler for message type %u (dropped)", (void *)ep, type);
}

void rs_tp_notify_recv(rs_ep_t *ep, uint32_t imm)
{
    if (ep->state != RS_EP_READY) {
        rs_debug("endpoint %p: notification before the handshake passed (dropped)", (void *)ep);
        return;
    }
    if (rs_tp_early_queue(ep, 1, 0, imm, NULL, 0))
        return;
    if (!deliver(ep, 1, 0, imm, NULL, 0))
        rs_debug("endpoint %p: no notify handler (notification %u dropped)", (void *)ep, imm);
}

/*
 * The client's endpoint is READY when the WELCOME arrives, but rs_connect
 * has not returned it yet: the user cannot know the ep a handler would
 * name. Such messages (and any behind them, to keep order) wait here.
 * Returns 1 when the message was queued.
 */
int rs_tp_early_queue(rs_ep_t *ep, int notify, unsigned type, uint32_t imm, const void *data,
                      size_t len)
{
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    if (p->told && rs_list_empty(&p->early))
        return 0;
    rs_early_t *e = malloc(sizeof(*e) + len);
    if (e == NULL) {
        rs_error("out of memory keeping an early message (dropped)");
        return 1;
    }
    e->notify = notify;
    e->type = type;
    e->imm = imm;
    e->len = len;
    if (len > 0)
        memcpy(e->data, data, len);
    rs_list_add_tail(&p->early, &e->link);
    return 1;
}

static void early_deliver_ep(rs_ep_t *ep)
{
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    while (!rs_list_empty(&p->early) && ep->state == RS_EP_READY) {
        rs_early_t *e = rs_list_first(&p->early, rs_early_t, link);
        rs_list_del(&e->link);
        deliver(ep, e->notify, e->type, e->imm, e->data, e->len);
        free(e);
    }
}

unsigned rs_tp_early_deliver(rs_ctx_t *ctx)
{
    unsigned n = 0;
    while (!rs_list_empty(&ctx->early_eps)) {
        rs_ep_priv_t *p = rs_list_first(&ctx->early_eps, rs_ep_priv_t, early_link);
        rs_list_del(&p->early_link);
        early_deliver_ep(&p->ep);
        n++;
    }
    return n;
}
