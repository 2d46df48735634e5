/*
 * UCX backend: connections. Connecting by worker address (host:port goes
 * through the front door first, front.c), the CONN / CONN_ACK / BYE
 * exchange, peer failures (-> rs_tp_ep_failed) and endpoint teardown; a
 * UCX endpoint's own life (ids, creation by address, force close) is
 * uep.c's. Anything that closes a ucp_ep runs outside ucp_worker_progress.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- endpoints */

/* Links a new rs_ep_t (server side) to uep; NULL when the context refuses. */
static rs_ep_t *accept_ep(rs_ctx_t *ctx, rs_ucx_ep_t *uep)
{
    rs_ep_t *ep = rs_tp_ep_new_accepted(ctx);
    if (ep == NULL)
        return NULL;
    ep->be = uep;
    uep->ep = ep;
    return ep;
}

/* ---------------------------------------------------------------- connect */

/* Links a new client uep to ep; the caller starts it. */
static rs_ucx_ep_t *client_new(rs_ctx_t *ctx, rs_ep_t *ep)
{
    rs_ucx_ep_t *uep = rs_ucx_uep_new(ctx);
    if (uep == NULL)
        return NULL;
    ep->be = uep;
    uep->ep = ep;
    return uep;
}

static void client_unlink(rs_ep_t *ep, rs_ucx_ep_t *uep)
{
    ep->be = NULL;
    uep->ep = NULL;
    rs_ucx_front_drop_ep(uep);
    rs_ucx_uep_release(uep);
}

rs_status_t rs_ucx_connect(rs_ctx_t *ctx, rs_ep_t *ep, const char *host, uint16_t port)
{
    rs_ucx_ep_t *uep = client_new(ctx, ep);
    if (uep == NULL)
        return RS_ERR_NOMEM;
    /* The front door first (front.c); it calls rs_ucx_connect_uep. */
    rs_status_t st = rs_ucx_front_connect(uep, host, port);
    if (st != RS_OK)
        client_unlink(ep, uep);
    return st;
}

rs_status_t rs_ucx_connect_address(rs_ctx_t *ctx, rs_ep_t *ep, const void *blob, size_t len)
{
    rs_ucx_ep_t *uep = client_new(ctx, ep);
    if (uep == NULL)
        return RS_ERR_NOMEM;
    ep->stage = "UCX wire-up";
    rs_status_t st = rs_ucx_connect_uep(uep, blob, len);
    if (st != RS_OK)
        client_unlink(ep, uep);
    return st;
}

void rs_ucx_on_conn(rs_ctx_t *ctx, const rs_ucx_hdr_t *hdr, const void *data, size_t len,
                    const ucp_am_recv_param_t *param)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    if (len > RS_ADDR_BLOB_MAX)
        return;
    rs_ucx_conn_req_t *req = malloc(sizeof(*req) + len);
    if (req == NULL)
        return;
    req->src_id = hdr->src_id;
    req->accept_id = uc->am_accept_id;
    (void)param;
    req->addr_len = len;
    if (len > 0)
        memcpy(req->addr, data, len);
    rs_list_add_tail(&uc->conn_reqs, &req->link);
}

static void conn_req_handle(rs_ctx_t *ctx, rs_ucx_conn_req_t *req)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    rs_ucx_ep_t *uep = NULL;

    if (req->addr_len > 0) {
        /* Descriptors nearly out: a connection back could cost UCX its listener. */
        if (rs_ucx_front_conn_arrived(ctx)) {
            rs_ucx_front_conn_refused(ctx);
            return;
        }
        /* UCX parses this address: only peers that reached our worker get here. On an
         * accept's own worker (the front door made it) the endpoint waits there. */
        uep = req->accept_id != 0 ? rs_ucx_accept_claim(uc, req->accept_id) : rs_ucx_uep_new(ctx);
        if (uep == NULL)
            return;
        ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                             .address = rs_ucx_peer_address(uc, req->addr, req->addr_len, NULL)};
        rs_ucx_ep_params(&p, uep);
        ucs_status_t s = ucp_ep_create(rs_ucx_uep_worker(uep), &p, &uep->uep);
        if (s != UCS_OK) {
            rs_warn("cannot connect back to a peer: %s", ucs_status_string(s));
            rs_ucx_uep_free(uep);
            return;
        }
        if (accept_ep(ctx, uep) == NULL) {
            rs_ucx_uep_force_close(uep);
            rs_ucx_uep_release(uep);
            return;
        }
    } else {
        /* Every CONN carries the client's address (host:port goes through
         * the front door, then by address). */
        rs_debug("CONN without an address (dropped)");
        return;
    }
    uep->peer_id = req->src_id;
    rs_ucx_hdr_pack(
        &(rs_ucx_hdr_t){.dst_id = uep->peer_id, .src_id = uep->id, .kind = RS_UCX_CONN_ACK},
        &uep->conn_hdr);
    if (rs_ucx_send_ctl(uep, &uep->conn_hdr, NULL, 0, 0) != RS_OK)
        rs_tp_ep_failed(uep->ep, RS_ERR_UNREACHABLE);
}

void rs_ucx_on_conn_ack(rs_ctx_t *ctx, const rs_ucx_hdr_t *hdr)
{
    rs_ucx_ep_t *uep = rs_ucx_ep_lookup(rs_ucx_ctx(ctx), hdr->dst_id);
    if (uep == NULL || uep->ep == NULL || uep->ep->state != RS_EP_CONNECTING)
        return;
    uep->peer_id = hdr->src_id;
    rs_tp_ep_connected(uep->ep);
}

void rs_ucx_on_bye(rs_ctx_t *ctx, const rs_ucx_hdr_t *hdr)
{
    rs_ucx_ep_t *uep = rs_ucx_ep_lookup(rs_ucx_ctx(ctx), hdr->dst_id);
    if (uep == NULL || uep->peer_id != hdr->src_id || uep->ep == NULL || uep->fail_pending)
        return;
    rs_debug("endpoint %p: the peer closed it", (void *)uep->ep);
    uep->fail_status = UCS_ERR_CONNECTION_RESET;
    uep->fail_pending = 1;
    uep->bye = 1;
    rs_list_add_tail(&rs_ucx_ctx(ctx)->pending, &uep->pend_link);
}

/* ------------------------------------------------------ failure and close */

unsigned rs_ucx_conn_progress(rs_ctx_t *ctx)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    unsigned n = 0;
    if (rs_list_empty(&uc->conn_reqs) && rs_list_empty(&uc->closes) && rs_list_empty(&uc->pending))
        return 0;
    while (!rs_list_empty(&uc->conn_reqs)) {
        rs_ucx_conn_req_t *req = rs_list_first(&uc->conn_reqs, rs_ucx_conn_req_t, link);
        rs_list_del(&req->link);
        conn_req_handle(ctx, req);
        free(req);
        n++;
    }
    while (!rs_list_empty(&uc->closes)) {
        rs_ucx_ep_t *uep = rs_list_first(&uc->closes, rs_ucx_ep_t, close_link);
        rs_ucx_uep_force_close(uep);
        if (uep->ep == NULL)
            rs_ucx_uep_release(uep); /* an accept nobody took */
        n++;
    }
    while (!rs_list_empty(&uc->pending)) {
        rs_ucx_ep_t *uep = rs_list_first(&uc->pending, rs_ucx_ep_t, pend_link);
        rs_list_del(&uep->pend_link);
        uep->fail_pending = 0;
        if (uep->ep != NULL && uep->bye) {
            rs_tp_ep_peer_closed(uep->ep);
        } else if (uep->ep != NULL) {
            rs_status_t st = rs_ucx_status(uep->fail_status);
            rs_tp_ep_failed(uep->ep, st == RS_ERR_TIMEOUT ? RS_ERR_TIMEOUT : RS_ERR_UNREACHABLE);
        }
        n++;
    }
    return n;
}

/*
 * A close by the user of a healthy endpoint: let what is in flight finish
 * (the generic layer waits a bounded time) instead of cutting it. A force
 * close with a stream half sent makes UCX 1.13 on the target abort in
 * ucp_put_handler when its acknowledgement cannot be sent.
 */
static void uep_start_drain(rs_ucx_ep_t *uep)
{
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = rs_ucx_ctl_done_cb,
        .user_data = uep,
    };
    ucs_status_ptr_t req = ucp_ep_flush_nbx(uep->uep, &p);
    if (UCS_PTR_IS_PTR(req))
        uep->ctl_inflight++;
}

void rs_ucx_ep_fail(rs_ep_t *ep)
{
    rs_ucx_ep_t *uep = ep->be;
    if (uep != NULL)
        rs_ucx_front_drop_ep(uep);
    if (uep == NULL || uep->uep == NULL)
        return;
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ep->ctx);
    if (ep->state == RS_EP_CLOSING && !uep->ucp_failed) {
        if (ep->n_ops > 0)
            uep_start_drain(uep);
        return; /* rs_ucx_ep_close closes it */
    }
    if (uc->in_worker > 0) {
        if (!uep->close_pending) {
            uep->close_pending = 1;
            rs_list_add_tail(&uc->closes, &uep->close_link);
        }
        return;
    }
    rs_ucx_uep_force_close(uep);
}

void rs_ucx_ep_close(rs_ep_t *ep)
{
    rs_ucx_ep_t *uep = ep->be;
    if (uep == NULL)
        return;
    ep->be = NULL;
    uep->ep = NULL;
    rs_ucx_front_drop_ep(uep);
    rs_ucx_uep_force_close(uep);
    rs_ucx_uep_release(uep);
}

void rs_ucx_conn_cleanup(rs_ctx_t *ctx, int worker_gone)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    if (worker_gone) {
        while (!rs_list_empty(&uc->zombies))
            rs_ucx_uep_free(rs_list_first(&uc->zombies, rs_ucx_ep_t, wait_link));
        return;
    }
    while (!rs_list_empty(&uc->conn_reqs)) {
        rs_ucx_conn_req_t *req = rs_list_first(&uc->conn_reqs, rs_ucx_conn_req_t, link);
        rs_list_del(&req->link);
        free(req);
    }
    while (!rs_list_empty(&uc->closes)) {
        rs_ucx_ep_t *uep = rs_list_first(&uc->closes, rs_ucx_ep_t, close_link);
        rs_ucx_uep_force_close(uep);
        if (uep->ep == NULL)
            rs_ucx_uep_release(uep);
    }
    rs_ucx_accept_expire(ctx, UINT64_MAX);
}
