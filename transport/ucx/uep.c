/*
 * UCX backend: a UCX endpoint's own life, below the connection logic
 * (conn.c) and the front door (front.c), which both connect one by
 * address: allocation and release, the ucp endpoint's creation by address,
 * its error callback, control messages (CONN, CONN_ACK, BYE) and the force
 * close. Anything that closes a ucp_ep runs outside ucp_worker_progress.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

#include <stdlib.h>

/* ----------------------------------------------------- control messages */

void rs_ucx_ctl_done_cb(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    ucp_request_free(request);
    rs_ucx_ctl_done(user_data);
}

rs_status_t rs_ucx_send_ctl(rs_ucx_ep_t *uep, rs_ucx_hdr_wire_t *hdr, const void *data, size_t len,
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

rs_ucx_ep_t *rs_ucx_uep_new(rs_ctx_t *ctx)
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
    rs_list_init(&uep->own_link);
    rs_list_init(&uep->accept_link);
    return uep;
}

void rs_ucx_uep_accept_unwait(rs_ucx_ep_t *uep)
{
    if (rs_list_empty(&uep->accept_link))
        return;
    rs_list_del(&uep->accept_link);
    rs_ucx_ctx(uep->ctx)->accept_waits_n--;
}

void rs_ucx_uep_free(rs_ucx_ep_t *uep)
{
    rs_ucx_id_free(rs_ucx_ctx(uep->ctx), uep);
    rs_list_del(&uep->pend_link);
    rs_list_del(&uep->wait_link);
    rs_list_del(&uep->close_link);
    rs_ucx_uep_accept_unwait(uep);
    rs_ucx_own_close(uep);
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

void rs_ucx_ep_params(ucp_ep_params_t *p, rs_ucx_ep_t *uep)
{
    p->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p->err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p->err_handler.cb = ucx_ep_err_cb;
    p->err_handler.arg = uep;
}

void rs_ucx_uep_force_close(rs_ucx_ep_t *uep)
{
    if (uep->uep == NULL)
        return;
    /* Tell the peer, so it need not wait for a transport error or keepalive. */
    if (!uep->ucp_failed && uep->peer_id != 0 && uep->bye_hdr.b[0] == 0) {
        rs_ucx_hdr_pack(
            &(rs_ucx_hdr_t){.dst_id = uep->peer_id, .src_id = uep->id, .kind = RS_UCX_BYE},
            &uep->bye_hdr);
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
            ucp_worker_progress(rs_ucx_uep_worker(uep));
            uc->in_worker--;
        }
        ucp_request_free(req);
    }
}

/*
 * Nobody but in-flight control AMs (whose headers live in uep) holds uep any
 * more: free it now, or when the last of them completes.
 */
void rs_ucx_uep_release(rs_ucx_ep_t *uep)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(uep->ctx);
    uep->ep = NULL;
    uep->released = 1;
    if (uep->ctl_inflight == 0) {
        rs_ucx_uep_free(uep);
        return;
    }
    rs_ucx_id_free(uc, uep);
    rs_list_del(&uep->pend_link);
    rs_list_del(&uep->wait_link);
    rs_list_del(&uep->close_link);
    rs_list_add_tail(&uc->zombies, &uep->wait_link);
}

/* The UCX address to connect by in a peer's blob (addr.c); a bare UCX address as it is. */
const ucp_address_t *rs_ucx_peer_address(const rs_ucx_ctx_t *uc, const void *blob, size_t len,
                                         int *local_p)
{
    const void *addr = blob;
    int full = 1; /* a bare address: every transport of the peer's */
    rs_status_t st = rs_ucx_addr_pick(uc->place_key, blob, len, &addr, &full);
    if (local_p != NULL)
        *local_p = st != RS_OK || full;
    if (st != RS_OK && st != RS_ERR_BAD_MAGIC)
        rs_debug("a peer's address blob: %s; tried as a UCX address", rs_strerror(st));
    return st == RS_OK ? addr : blob;
}

/* ---------------------------------------------------------------- connect */

rs_status_t rs_ucx_connect_uep(rs_ucx_ep_t *uep, const void *addr, size_t len)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(uep->ctx);
    int local;
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                         .address = rs_ucx_peer_address(uc, addr, len, &local)};
    rs_ucx_ep_params(&p, uep);
    rs_status_t st = rs_ucx_own_open(uep, local);
    if (st != RS_OK)
        return st;
    ucs_status_t s = ucp_ep_create(rs_ucx_uep_worker(uep), &p, &uep->uep);
    if (s != UCS_OK) {
        /* Whatever UCX says (unreachable, shared memory gone, ...): no peer. */
        rs_error("ucp_ep_create failed: %s", ucs_status_string(s));
        uep->uep = NULL;
        return s == UCS_ERR_NO_MEMORY ? RS_ERR_NOMEM : RS_ERR_UNREACHABLE;
    }
    /* The server connects back to our address (it has no accept event): the connection's own
     * queue's where it has one. */
    rs_ucx_hdr_pack(&(rs_ucx_hdr_t){.dst_id = 0, .src_id = uep->id, .kind = RS_UCX_CONN},
                    &uep->conn_hdr);
    const unsigned char *me = uep->own != NULL ? uep->own->blob : uc->addr;
    size_t me_len = uep->own != NULL ? uep->own->blob_len : uc->addr_len;
    st = rs_ucx_send_ctl(uep, &uep->conn_hdr, me, me_len, 0);
    if (st != RS_OK)
        rs_ucx_uep_force_close(uep);
    return st;
}

void rs_ucx_ctl_done(rs_ucx_ep_t *uep)
{
    if (--uep->ctl_inflight == 0 && uep->released)
        rs_ucx_uep_free(uep);
}
