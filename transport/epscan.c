/*
 * Run by each progress round: deadlines of outstanding ops and of silent
 * accepted peers (rs_tp_eps_scan), and endpoints the user never saw, reaped
 * (rs_tp_eps_reap).
 */
#include "transport/internal.h"

#include "common/log.h"

unsigned rs_tp_eps_scan(rs_ctx_t *ctx, uint64_t now)
{
    unsigned n = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &ctx->eps)
    {
        rs_ep_t *ep = RS_CONTAINER_OF(pos, rs_ep_t, link);
        rs_ep_priv_t *p = RS_EP_PRIV(ep);
        if (p->reap_ns != 0 && now >= p->reap_ns && !p->told) {
            p->reap_ns = 0;
            rs_tp_ep_mark_reap(ep);
            n++;
        }
        if (ep->state == RS_EP_READY && rs_tp_peer_exited(ep)) {
            rs_info("endpoint %p: the peer process exited", (void *)ep);
            rs_tp_ep_kill(ep, RS_ERR_UNREACHABLE);
            n++;
        }
        if (ep->n_ops == 0 || rs_list_first(&ep->ops, rs_op_t, link)->deadline_ns > now)
            continue;
        if (ep->state != RS_EP_DEAD && ep->state != RS_EP_CLOSING) {
            rs_warn("endpoint %p: an operation is outstanding for more than %u ms", (void *)ep,
                    ctx->cfg.peer_timeout_ms);
            rs_tp_ep_kill(ep, RS_ERR_TIMEOUT);
        }
        /* Dead: the backend had its grace period; complete what is left. */
        while (ep->n_ops > 0) {
            rs_op_t *op = rs_list_first(&ep->ops, rs_op_t, link);
            if (op->deadline_ns > now)
                break;
            rs_tp_op_force(op, ep->status != RS_OK ? ep->status : RS_ERR_TIMEOUT);
            n++;
        }
    }
    return n;
}

unsigned rs_tp_eps_reap(rs_ctx_t *ctx)
{
    unsigned n = 0;
    while (ctx->n_reap > 0) {
        rs_ep_t *victim = NULL;
        rs_list_t *pos, *tmp;
        rs_list_for_each_safe(pos, tmp, &ctx->eps)
        {
            rs_ep_t *ep = RS_CONTAINER_OF(pos, rs_ep_t, link);
            if (RS_EP_PRIV(ep)->reap) {
                victim = ep;
                break;
            }
        }
        if (victim == NULL) {
            ctx->n_reap = 0;
            break;
        }
        rs_tp_ep_destroy(victim, RS_ERR_CANCELED, rs_tp_close_deadline(ctx));
        n++;
    }
    return n;
}
