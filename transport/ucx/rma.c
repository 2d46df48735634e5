/*
 * UCX backend: one-sided operations. The hot path (put) allocates nothing
 * and makes no system call: an op completes inline when UCX completes the
 * request at once, else from the request callback. Notified puts over UCX
 * are notify.c's.
 *
 * Requests carry no UCP_OP_ATTR_FIELD_MEMH: UCX 1.13 asserts in the self
 * transport when a force close purges a request that holds a user memh.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

#include <stdlib.h>
#include <string.h>

rs_status_t rs_ucx_put(rs_ep_t *ep, rs_op_t *op, const void *src, size_t len, rs_mr_t *mr,
                       rs_rkey_t *rkey, uint64_t raddr, int notify, uint32_t imm)
{
    rs_ucx_ep_t *uep = ep->be;
    rs_ucx_rkey_t *k = rkey->be;
    (void)mr; /* no UCP_OP_ATTR_FIELD_MEMH: see the file comment */
    if (uep->uep == NULL)
        return RS_ERR_UNREACHABLE;
    if (k->attach_pid != 0)
        return rs_ucx_attach_put(uep, op, k, src, len, raddr, notify, imm);
    if (k->am)
        return rs_ucx_amrma_put(uep, op, src, len, raddr, notify, imm);

    if (!notify) {
        ucp_request_param_t p = rs_ucx_op_param(op, rs_ucx_op_done_cb);
        return rs_ucx_post_result(op, ucp_put_nbx(uep->uep, src, len, raddr, k->rk, &p),
                                  "ucp_put_nbx");
    }

    return rs_ucx_notify_put(uep, rs_ucx_ctx(ep->ctx), op, src, len, raddr, k->rk, imm);
}

rs_status_t rs_ucx_get(rs_ep_t *ep, rs_op_t *op, void *dst, size_t len, rs_mr_t *mr,
                       rs_rkey_t *rkey, uint64_t raddr)
{
    rs_ucx_ep_t *uep = ep->be;
    rs_ucx_rkey_t *k = rkey->be;
    (void)mr;
    if (uep->uep == NULL)
        return RS_ERR_UNREACHABLE;
    if (k->attach_pid != 0)
        return rs_ucx_attach_get(uep, op, k, dst, len, raddr);
    if (k->am)
        return rs_ucx_amrma_get(uep, op, dst, len, raddr);
    ucp_request_param_t p = rs_ucx_op_param(op, rs_ucx_op_done_cb);
    return rs_ucx_post_result(op, ucp_get_nbx(uep->uep, dst, len, raddr, k->rk, &p), "ucp_get_nbx");
}

rs_status_t rs_ucx_getv(rs_ep_t *ep, rs_op_t *op, const rs_get_seg_t *seg, unsigned n,
                        rs_rkey_t *rkey)
{
    rs_ucx_ep_t *uep = ep->be;
    rs_ucx_rkey_t *k = rkey->be;
    if (uep->uep == NULL)
        return RS_ERR_UNREACHABLE;
    if (k->attach_pid == 0)
        return RS_ERR_UNSUPPORTED; /* UCX's gets, or gets as messages: one per segment */
    return rs_ucx_attach_getv(uep, op, k, seg, n, rkey->base);
}

/*
 * Fetch-add requests live in zeroed memory of our own: UCX 1.13 never sets
 * the datatype of an emulated fetching atomic, and when an endpoint fails it
 * "deregisters" the request's buffer according to that field. In memory
 * from its pool that is stale garbage (seen as a double free); zeroed, it
 * means a contiguous buffer with nothing registered.
 */
static void *amo_req_get(rs_ucx_ctx_t *uc)
{
    void *buf;
    if (!rs_list_empty(&uc->amo_reqs)) {
        rs_list_t *l = uc->amo_reqs.next;
        rs_list_del(l);
        buf = l;
    } else {
        size_t size = uc->req_size < sizeof(rs_list_t) ? sizeof(rs_list_t) : uc->req_size;
        buf = malloc(size);
        if (buf == NULL)
            return NULL;
    }
    memset(buf, 0, uc->req_size);
    return buf;
}

static void amo_req_put(rs_ucx_ctx_t *uc, void *buf)
{
    rs_list_add_head(&uc->amo_reqs, (rs_list_t *)buf);
}

void rs_ucx_amo_reqs_free(rs_ucx_ctx_t *uc)
{
    while (!rs_list_empty(&uc->amo_reqs)) {
        rs_list_t *l = uc->amo_reqs.next;
        rs_list_del(l);
        free(l);
    }
}

static void fadd_done_cb(void *request, ucs_status_t status, void *user_data)
{
    rs_op_t *op = user_data;
    (void)request; /* ours: never ucp_request_free'd */
    amo_req_put(op->be[2], op->be[1]);
    rs_tp_op_complete(op, rs_ucx_status(status));
}

rs_status_t rs_ucx_fetch_add(rs_ep_t *ep, rs_op_t *op, rs_rkey_t *rkey, uint64_t raddr,
                             uint64_t add)
{
    rs_ucx_ep_t *uep = ep->be;
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ep->ctx);
    const rs_ucx_rkey_t *k = rkey->be;
    if (uep->uep == NULL)
        return RS_ERR_UNREACHABLE;
    if (k->am)
        return rs_ucx_amrma_fetch_add(uep, op, raddr, add);
    void *req = amo_req_get(uc);
    if (req == NULL) {
        rs_error("out of memory for a fetch-add request");
        return RS_ERR_NOMEM;
    }
    /* The operand lives in the op until UCX is done with it. */
    memcpy(&op->be[0], &add, sizeof(add));
    op->be[1] = req;
    op->be[2] = uc;
    ucp_request_param_t p = rs_ucx_op_param(op, fadd_done_cb);
    p.op_attr_mask |=
        UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER | UCP_OP_ATTR_FIELD_REQUEST;
    p.datatype = ucp_dt_make_contig(sizeof(uint64_t));
    p.reply_buffer = &op->result;
    p.request = (char *)req + uc->req_size;
    ucs_status_ptr_t r =
        ucp_atomic_op_nbx(uep->uep, UCP_ATOMIC_OP_ADD, &op->be[0], 1, raddr, k->rk, &p);
    if (!UCS_PTR_IS_PTR(r))
        amo_req_put(uc, req); /* done or failed at once: UCX let go of it */
    if (r == NULL) {
        rs_tp_op_complete(op, RS_OK);
        return RS_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        rs_error("ucp_atomic_op_nbx failed: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        return RS_ERR_UNREACHABLE;
    }
    return RS_OK;
}

rs_status_t rs_ucx_flush(rs_ep_t *ep, rs_op_t *op)
{
    rs_ucx_ep_t *uep = ep->be;
    if (uep->uep == NULL)
        return RS_ERR_UNREACHABLE;
    /* Our own one-sided messages are flushed by a round trip. */
    if (uep->used_amrma)
        return rs_ucx_amrma_flush(uep, op);
    ucp_request_param_t p = rs_ucx_op_param(op, rs_ucx_op_done_cb);
    return rs_ucx_post_result(op, ucp_ep_flush_nbx(uep->uep, &p), "ucp_ep_flush_nbx");
}
