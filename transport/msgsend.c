/* Control messages sent, with msg_max enforced. */
#include "transport/internal.h"

#include "common/log.h"
#include "common/tsan.h"

rs_status_t rs_tp_msg_post(rs_ep_t *ep, unsigned type, const void *data, size_t len, rs_op_cb_t cb,
                           void *arg)
{
    rs_ctx_t *ctx = ep->ctx;
    rs_op_t *op = rs_tp_op_alloc(ctx, ep, RS_OP_MSG, cb, arg);
    if (op == NULL)
        return RS_ERR_NOMEM;
    RS_TSAN_RELEASE();
    rs_status_t st = ctx->be_ops->msg_send(ep, op, type, data, len);
    if (st != RS_OK)
        rs_tp_op_unpost(op);
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
    rs_tp_lock(ctx);
    rs_status_t st = rs_tp_ep_check_ready(ep);
    if (st == RS_OK)
        st = rs_tp_msg_post(ep, type, data, len, cb, arg);
    rs_tp_unlock(ctx);
    return st;
}
