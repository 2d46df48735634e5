/*
 * UCX backend: connections. Connection ids, connecting by worker address
 * (host:port goes through the front door first, front.c), the CONN / CONN_ACK / BYE exchange, peer
 * failures (error callback -> rs_tp_ep_failed) and endpoint teardown.
 * Anything that closes a ucp_ep runs outside ucp_worker_progress.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------- control messages */

void rs_ucx_ctl_done_cb(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    ucp_request_free(request);
    rs_ucx_ctl_done(user_data);
}

rs_status_t rs_ucx_send_ctl(rs_ucx_ep_t *uep, rs_ucx_hdr_t *hdr, const void *data, size_t len,
                            unsigned flags)
{
    if (uep->uep == NULL)
        return RS_ERR_UNREACHABLE;
    ucp_request_param_t p = rs_ucx_am_param(rs_ucx_ctl_done_cb, uep, flags);
    ucs_status_ptr_t req =
        ucp_am_send_nbx(uep->uep, RS_UCX_AM_ID, hdr, sizeof(*hdr), data, len, &p);
    if (UCS_PTR_IS_ERR(req)) {
        rs_debug("control message failed: %s", ucs_status_string(UCS_PTR_STATUS(req)));
        return RS_ERR_UNREACHABLE;
    }
    if (req != NULL)
        uep->ctl_inflight++;
    return RS_OK;
}

/* ------------------------------------------------------------- endpoints */

static rs_ucx_ep_t *uep_new(rs_ctx_t *ctx)
{
    rs_ucx_ep_t *uep = calloc(1, sizeof(*uep));
    if (uep == NULL) {
        rs_error("out of memory allocating a UCX endpoint");
        return NULL;
    }
    if (rs_ucx_id_alloc(rs_ucx_ctx(ctx), uep) != 0) {
        rs_error("out of connection ids");
        free(uep);
        return NULL;
    }
    uep->ctx = ctx;
    rs_list_init(&uep->pend_link);
    rs_list_init(&uep->wait_link);
    rs_list_init(&uep->close_link);
    return uep;
}

static void uep_free(rs_ucx_ep_t *uep)
{
    rs_ucx_id_free(rs_ucx_ctx(uep->ctx), uep);
    rs_list_del(&uep->pend_link);
    rs_list_del(&uep->wait_link);
    rs_list_del(&uep->close_link);
    free(uep);
}

static void ucx_ep_err_cb(void *arg, ucp_ep_h ucp_ep, ucs_status_t status)
{
    (void)ucp_ep;
    rs_debug("UCX endpoint error: %s", ucs_status_string(status));
    rs_ucx_ep_mark_failed(arg, status);
}

void rs_ucx_ep_mark_failed(rs_ucx_ep_t *uep, ucs_status_t status)
{
    uep->ucp_failed = 1;
    uep->fail_status = status;
    if (uep->ep != NULL && !uep->fail_pending) {
        uep->fail_pending = 1;
        rs_list_add_tail(&rs_ucx_ctx(uep->ctx)->pending, &uep->pend_link);
    }
}

static void ep_params_common(ucp_ep_params_t *p, rs_ucx_ep_t *uep)
{
    p->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p->err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p->err_handler.cb = ucx_ep_err_cb;
    p->err_handler.arg = uep;
}

static void uep_force_close(rs_ucx_ep_t *uep)
{
    if (uep->uep == NULL)
        return;
    /* Tell the peer, so it need not wait for a transport error or keepalive. */
    if (!uep->ucp_failed && uep->peer_id != 0 && uep->bye_hdr.kind == 0) {
        uep->bye_hdr =
            (rs_ucx_hdr_t){.dst_id = uep->peer_id, .src_id = uep->id, .kind = RS_UCX_BYE};
        rs_ucx_send_ctl(uep, &uep->bye_hdr, NULL, 0, 0);
    }
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t req = ucp_ep_close_nbx(uep->uep, &p);
    uep->uep = NULL;
    /* No answer to our own one-sided requests can come any more. */
    rs_ucx_amrma_ep_failed(rs_ucx_ctx(uep->ctx), uep);
    uep->close_pending = 0;
    rs_list_del(&uep->close_link);
    if (UCS_PTR_IS_PTR(req)) {
        /* Force close completes at once; wait briefly if UCX says otherwise. */
        rs_ucx_ctx_t *uc = rs_ucx_ctx(uep->ctx);
        for (int i = 0; i < 100000 && ucp_request_check_status(req) == UCS_INPROGRESS; i++) {
            uc->in_worker++;
            ucp_worker_progress(uc->worker);
            uc->in_worker--;
        }
        ucp_request_free(req);
    }
}

/*
 * Nobody but in-flight control AMs (whose headers live in uep) holds uep any
 * more: free it now, or when the last of them completes.
 */
static void uep_release(rs_ucx_ep_t *uep)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(uep->ctx);
    uep->ep = NULL;
    uep->released = 1;
    if (uep->ctl_inflight == 0) {
        uep_free(uep);
        return;
    }
    rs_ucx_id_free(uc, uep);
    rs_list_del(&uep->pend_link);
    rs_list_del(&uep->wait_link);
    rs_list_del(&uep->close_link);
    rs_list_add_tail(&uc->zombies, &uep->wait_link);
}

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

/* The UCX address to connect by in a peer's blob (addr.c); a bare UCX address as it is. */
static const ucp_address_t *peer_address(const rs_ucx_ctx_t *uc, const void *blob, size_t len)
{
    const void *addr = blob;
    rs_status_t st = rs_ucx_addr_pick(uc->place_key, blob, len, &addr);
    if (st != RS_OK && st != RS_ERR_BAD_MAGIC)
        rs_debug("a peer's address blob: %s; tried as a UCX address", rs_strerror(st));
    return st == RS_OK ? addr : blob;
}

rs_status_t rs_ucx_connect_uep(rs_ucx_ep_t *uep, const void *addr, size_t len)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(uep->ctx);
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                         .address = peer_address(uc, addr, len)};
    ep_params_common(&p, uep);
    ucs_status_t s = ucp_ep_create(uc->worker, &p, &uep->uep);
    if (s != UCS_OK) {
        /* Whatever UCX says (unreachable, shared memory gone, ...): no peer. */
        rs_error("ucp_ep_create failed: %s", ucs_status_string(s));
        uep->uep = NULL;
        return s == UCS_ERR_NO_MEMORY ? RS_ERR_NOMEM : RS_ERR_UNREACHABLE;
    }
    /* The server connects back to our address (it has no accept event). */
    uep->conn_hdr = (rs_ucx_hdr_t){.dst_id = 0, .src_id = uep->id, .kind = RS_UCX_CONN};
    rs_status_t st = rs_ucx_send_ctl(uep, &uep->conn_hdr, uc->addr, uc->addr_len, 0);
    if (st != RS_OK)
        uep_force_close(uep);
    return st;
}

/* Links a new client uep to ep; the caller starts it. */
static rs_ucx_ep_t *client_new(rs_ctx_t *ctx, rs_ep_t *ep)
{
    rs_ucx_ep_t *uep = uep_new(ctx);
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
    uep_release(uep);
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
        /* UCX parses this address: only peers that reached our worker get here. */
        uep = uep_new(ctx);
        if (uep == NULL)
            return;
        ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                             .address = peer_address(uc, req->addr, req->addr_len)};
        ep_params_common(&p, uep);
        ucs_status_t s = ucp_ep_create(uc->worker, &p, &uep->uep);
        if (s != UCS_OK) {
            rs_warn("cannot connect back to a peer: %s", ucs_status_string(s));
            uep_free(uep);
            return;
        }
        if (accept_ep(ctx, uep) == NULL) {
            uep_force_close(uep);
            uep_release(uep);
            return;
        }
    } else {
        /* Every CONN carries the client's address (host:port goes through
         * the front door, then by address). */
        rs_debug("CONN without an address (dropped)");
        return;
    }
    uep->peer_id = req->src_id;
    uep->conn_hdr =
        (rs_ucx_hdr_t){.dst_id = uep->peer_id, .src_id = uep->id, .kind = RS_UCX_CONN_ACK};
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
        uep_force_close(uep);
        if (uep->ep == NULL)
            uep_release(uep); /* an accept nobody took */
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
    uep_force_close(uep);
}

void rs_ucx_ep_close(rs_ep_t *ep)
{
    rs_ucx_ep_t *uep = ep->be;
    if (uep == NULL)
        return;
    ep->be = NULL;
    uep->ep = NULL;
    rs_ucx_front_drop_ep(uep);
    uep_force_close(uep);
    uep_release(uep);
}

void rs_ucx_ctl_done(rs_ucx_ep_t *uep)
{
    if (--uep->ctl_inflight == 0 && uep->released)
        uep_free(uep);
}

void rs_ucx_conn_cleanup(rs_ctx_t *ctx, int worker_gone)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    if (worker_gone) {
        while (!rs_list_empty(&uc->zombies))
            uep_free(rs_list_first(&uc->zombies, rs_ucx_ep_t, wait_link));
        return;
    }
    while (!rs_list_empty(&uc->conn_reqs)) {
        rs_ucx_conn_req_t *req = rs_list_first(&uc->conn_reqs, rs_ucx_conn_req_t, link);
        rs_list_del(&req->link);
        free(req);
    }
    while (!rs_list_empty(&uc->closes)) {
        rs_ucx_ep_t *uep = rs_list_first(&uc->closes, rs_ucx_ep_t, close_link);
        uep_force_close(uep);
        if (uep->ep == NULL)
            uep_release(uep);
    }
}
