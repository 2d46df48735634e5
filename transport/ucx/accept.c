/*
 * UCX backend: an accepted connection's own receive queue (RSHUFFLE_UCX_QUEUE=local for a
 * client of this host, the default; own for every client). When the front door (front.c)
 * takes a hello from such a client it opens a worker for that connection here and answers
 * with its address; the client's CONN arrives on it, and conn.c makes the accepted endpoint
 * there. The worker's AM handler says which accept an AM arrived on. An accept whose CONN does
 * not come within connect_timeout_ms goes, worker and all.
 */
#include "transport/ucx/ucx.h"

#include "common/clock.h"
#include "common/log.h"

#define RS_UCX_ACCEPT_WAITS_MAX 64 /* accepts' own workers waiting for their CONN, at most */

/* Every AM on an accept's own worker: says which accept it arrived on (rs_ucx_on_conn). */
static ucs_status_t accept_am_recv(void *arg, const void *header, size_t header_length, void *data,
                                   size_t length, const ucp_am_recv_param_t *param)
{
    rs_ucx_ep_t *uep = arg;
    rs_ucx_ctx_t *uc = rs_ucx_ctx(uep->ctx);
    uint32_t outer = uc->am_accept_id;
    uc->am_accept_id = uep->id;
    ucs_status_t s = uc->am_cb(uep->ctx, header, header_length, data, length, param);
    uc->am_accept_id = outer;
    return s;
}

rs_status_t rs_ucx_accept_own_open(rs_ctx_t *ctx, uint64_t place_key, const unsigned char **blob_p,
                                   size_t *len_p)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    /* The client's own test (rs_ucx_peer_address) on our address, from its side. */
    const void *addr;
    int full = 1;
    int local = rs_ucx_addr_pick(place_key, uc->addr, uc->addr_len, &addr, &full) != RS_OK || full;
    int own = uc->queue == RS_UCX_QUEUE_OWN || (uc->queue == RS_UCX_QUEUE_LOCAL && local);
    if (!own || uc->accept_waits_n >= RS_UCX_ACCEPT_WAITS_MAX)
        return RS_ERR_EXISTS;
    rs_ucx_ep_t *uep = rs_ucx_uep_new(ctx);
    if (uep == NULL)
        return RS_ERR_NOMEM;
    rs_status_t st = rs_ucx_own_open(uep, local);
    if (st == RS_OK && uep->own == NULL)
        st = RS_ERR_EXISTS;
    if (st == RS_OK)
        st = rs_ucx_worker_set_am(uep->own, accept_am_recv, uep);
    if (st != RS_OK) {
        rs_ucx_uep_free(uep);
        return st;
    }
    uep->accept_by_ns = rs_now_coarse_ns() + RS_MS_TO_NS(rs_tp_ctx_cfg(ctx)->connect_timeout_ms);
    rs_list_add_tail(&uc->accept_waits, &uep->accept_link);
    uc->accept_waits_n++;
    *blob_p = uep->own->blob;
    *len_p = uep->own->blob_len;
    return RS_OK;
}

void rs_ucx_accept_expire(rs_ctx_t *ctx, uint64_t now_ns)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    while (!rs_list_empty(&uc->accept_waits)) {
        rs_ucx_ep_t *uep = rs_list_first(&uc->accept_waits, rs_ucx_ep_t, accept_link);
        if (now_ns < uep->accept_by_ns)
            return; /* in deadline order */
        rs_debug("an accept's own worker: no CONN within connect_timeout_ms (closed)");
        rs_ucx_uep_free(uep);
    }
}

rs_ucx_ep_t *rs_ucx_accept_claim(rs_ucx_ctx_t *uc, uint32_t accept_id)
{
    rs_ucx_ep_t *uep = rs_ucx_ep_lookup(uc, accept_id);
    if (uep == NULL || rs_list_empty(&uep->accept_link))
        return NULL; /* expired, or a second CONN on a worker already taken */
    rs_ucx_uep_accept_unwait(uep);
    return uep;
}
