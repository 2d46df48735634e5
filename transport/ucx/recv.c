/*
 * UCX backend: the active-message handler. Decodes the header (amhdr.c:
 * the kind byte says which header it is) and dispatches by it: our
 * one-sided protocol to amrma.c, connection control to conn.c, messages
 * and notifications to the generic layer. Apart from am.c (sends), which
 * conn.c calls, so receiving does not close a circle through conn.c.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

/* The endpoint a MSG/NOTIFY header addresses, if it is live and from its peer. */
static rs_ep_t *hdr_ep(rs_ctx_t *ctx, const rs_ucx_hdr_t *hdr)
{
    rs_ucx_ep_t *uep = rs_ucx_ep_lookup(rs_ucx_ctx(ctx), hdr->dst_id);
    if (uep == NULL || uep->ep == NULL || uep->peer_id != hdr->src_id)
        return NULL;
    return uep->ep;
}

ucs_status_t rs_ucx_am_recv(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param)
{
    rs_ctx_t *ctx = arg;
    rs_ucx_hdr_t hdr;
    rs_ep_t *ep;

    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        rs_warn("rendezvous active message dropped (we send eager only)");
        return UCS_OK;
    }
    rs_ucx_rma_hdr_t rh;
    int rma;
    rs_status_t st = rs_ucx_am_hdr_decode(header, header_length, &hdr, &rh, &rma);
    if (st != RS_OK) {
        rs_warn("malformed active message (%zu-byte header: %s) dropped", header_length,
                rs_strerror(st));
        return UCS_OK;
    }
    if (rma) {
        rs_ucx_amrma_recv(ctx, &rh, data, length);
        return UCS_OK;
    }
    switch (hdr.kind) {
        case RS_UCX_MSG:
            if ((ep = hdr_ep(ctx, &hdr)) != NULL && hdr.arg < RS__MSG_TYPE_LIMIT)
                rs_tp_msg_recv(ep, hdr.arg, data, length);
            break;
        case RS_UCX_NOTIFY:
            if ((ep = hdr_ep(ctx, &hdr)) != NULL)
                rs_tp_notify_recv(ep, hdr.arg);
            break;
        case RS_UCX_CONN:
            rs_ucx_on_conn(ctx, &hdr, data, length, param);
            break;
        case RS_UCX_CONN_ACK:
            rs_ucx_on_conn_ack(ctx, &hdr);
            break;
        case RS_UCX_BYE:
            rs_ucx_on_bye(ctx, &hdr);
            break;
        default:
            rs_warn("active message of unknown kind %u dropped", hdr.kind);
            break;
    }
    return UCS_OK;
}
