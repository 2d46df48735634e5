/* Control messages: sending with msg_max enforced, and per-type dispatch. */
#include "transport/internal.h"

#include "common/log.h"

rs_status_t rs__msg_post(rs_ep_t *ep, unsigned type, const void *data, size_t len, rs_op_cb_t cb,
                         void *arg)
{
    rs_ctx_t *ctx = ep->ctx;
    rs_op_t *op = rs__op_alloc(ctx, ep, RS_OP_MSG, cb, arg);
    if (op == NULL)
        return RS_ERR_NOMEM;
    rs_status_t st = ctx->be_ops->msg_send(ep, op, type, data, len);
    if (st != RS_OK)
        rs__op_unpost(op);
    return st;
}

rs_status_t rs_msg_send(rs_ep_t *ep, unsigned type, const void *data, size_t len, rs_op_cb_t cb,
                        void *arg)
{
    if (ep == NULL || type >= RS_MSG_TYPES || (data == NULL && len > 0)) {
        rs_error("rs_msg_send: invalid argument (type %u)", type);
        return RS_ERR_INVALID;
    }
    rs_ctx_t *ctx = ep->ctx;
    if (len > ctx->cfg.msg_max) {
        rs_error("rs_msg_send: %zu bytes exceed msg_max %u", len, ctx->cfg.msg_max);
        return RS_ERR_MSG_SIZE;
    }
    rs__lock(ctx);
    rs_status_t st = rs__ep_check_ready(ep);
    if (st == RS_OK)
        st = rs__msg_post(ep, type, data, len, cb, arg);
    rs__unlock(ctx);
    return st;
}

void rs__msg_recv(rs_ep_t *ep, unsigned type, const void *data, size_t len)
{
    rs_ctx_t *ctx = ep->ctx;
    if (type >= RS_MSG_TYPES) {
        rs__hs_recv(ep, type, data, len);
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
    rs_msg_handler_t h = ctx->msg_handlers[type];
    if (h.cb == NULL) {
        rs_debug("endpoint %p: no handler for message type %u (dropped)", (void *)ep, type);
        return;
    }
    ctx->in_cb++;
    h.cb(h.arg, ep, data, len);
    ctx->in_cb--;
}

void rs__notify_recv(rs_ep_t *ep, uint32_t imm)
{
    rs_ctx_t *ctx = ep->ctx;
    if (ep->state != RS_EP_READY) {
        rs_debug("endpoint %p: notification before the handshake passed (dropped)", (void *)ep);
        return;
    }
    if (ctx->notify_cb == NULL) {
        rs_debug("endpoint %p: no notify handler (notification %u dropped)", (void *)ep, imm);
        return;
    }
    ctx->in_cb++;
    ctx->notify_cb(ctx->notify_arg, ep, imm);
    ctx->in_cb--;
}
