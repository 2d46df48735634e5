/*
 * Whether a context's receive queue wants renewing (rs_ctx_renew_due): the
 * decision is the transport's, since only the backend knows whether its
 * connections share a queue that a dead peer of this host can block.
 */
#include "transport/internal.h"

int rs_ctx_renew_due(rs_ctx_t *ctx)
{
    if ((rs_ctx_caps(ctx) & RS_CAP_RENEW) == 0)
        return 0;
    int due = 0;
    rs_tp_lock(ctx);
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &ctx->eps)
    {
        rs_ep_t *ep = RS_CONTAINER_OF(pos, rs_ep_t, link);
        /* An unusable one only: a live peer is not polled (a poll each). */
        if (ep->state != RS_EP_READY && rs_tp_peer_exited(ep)) {
            due = 1;
            break;
        }
    }
    rs_tp_unlock(ctx);
    return due;
}
