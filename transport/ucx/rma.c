/*
 * UCX backend: one-sided operations. The hot path (put) allocates nothing
 * and makes no system call: an op completes inline when UCX completes the
 * request at once, else from the request callback.
 *
 * Notified put: UCX has no write-with-immediate, so the notification is an
 * active message ordered after the put, either by ucp_worker_fence (default)
 * or by an endpoint flush whose completion sends it
 * (RSHUFFLE_UCX_NOTIFY=flush). See docs/transport.md for the measurements.
 * Parts of a notified put are counted in op->be[2]; the first error is kept
 * in op->be[3]; the notification header lives in op->be[0..1].
 *
 * Requests carry no UCP_OP_ATTR_FIELD_MEMH: UCX 1.13 asserts in the self
 * transport when a force close purges a request that holds a user memh.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"
#include "common/tsan.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(rs_ucx_hdr_t) <= 2 * sizeof(void *), "notify header fits op->be[0..1]");

static inline uintptr_t op_parts(const rs_op_t *op)
{
    return (uintptr_t)op->be[2];
}

static inline void op_parts_set(rs_op_t *op, uintptr_t n)
{
    op->be[2] = (void *)n;
}

static inline ucs_status_t op_error(const rs_op_t *op)
{
    return (ucs_status_t)(intptr_t)op->be[3];
}

/* Keeps the first error of a multi-part op. */
static inline void op_error_set(rs_op_t *op, ucs_status_t s)
{
    if (s != UCS_OK && op_error(op) == UCS_OK)
        op->be[3] = (void *)(intptr_t)s;
}

void rs_ucx_op_part_done(rs_op_t *op, ucs_status_t status)
{
    op_error_set(op, status);
    op_parts_set(op, op_parts(op) - 1);
    if (op_parts(op) == 0)
        rs_tp_op_complete(op, rs_ucx_status(op_error(op)));
}

static void part_done_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    rs_ucx_op_part_done(user_data, status);
}

static inline ucp_request_param_t op_param(rs_op_t *op, ucp_send_nbx_callback_t cb)
{
    return (ucp_request_param_t){
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = cb,
        .user_data = op,
    };
}

/* Like rs_ucx_post_result for one of several requests: a request in flight counts a part. */
static rs_status_t post_part_result(rs_op_t *op, ucs_status_ptr_t req, const char *what)
{
    if (UCS_PTR_IS_ERR(req))
        return rs_ucx_post_error(req, what);
    if (req != NULL)
        op_parts_set(op, op_parts(op) + 1);
    return RS_OK;
}

void rs_ucx_send_notify(rs_op_t *op)
{
    rs_ucx_ep_t *uep = op->ep != NULL ? op->ep->be : NULL;
    if (uep == NULL || uep->uep == NULL) {
        op_error_set(op, UCS_ERR_CANCELED);
        return;
    }
    rs_ucx_hdr_t *hdr = (rs_ucx_hdr_t *)&op->be[0];
    ucp_request_param_t p = op_param(op, part_done_cb);
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    RS_TSAN_RELEASE(); /* the put's bytes are in place (tsan.h) */
    ucs_status_ptr_t req = ucp_am_send_nbx(uep->uep, RS_UCX_AM_ID, hdr, sizeof(*hdr), NULL, 0, &p);
    if (UCS_PTR_IS_ERR(req))
        op_error_set(op, UCS_PTR_STATUS(req));
    else if (req != NULL)
        op_parts_set(op, op_parts(op) + 1);
}

static void flush_then_notify_cb(void *request, ucs_status_t status, void *user_data)
{
    rs_op_t *op = user_data;
    ucp_request_free(request);
    if (status == UCS_OK)
        rs_ucx_send_notify(op);
    rs_ucx_op_part_done(op, status);
}

/* Sets up op as a notified put whose parts are counted; the caller's part is held. */
static void notify_begin(rs_ucx_ep_t *uep, rs_op_t *op, uint32_t imm)
{
    rs_ucx_hdr_t hdr = {
        .dst_id = uep->peer_id, .src_id = uep->id, .arg = imm, .kind = RS_UCX_NOTIFY};
    memcpy(&op->be[0], &hdr, sizeof(hdr));
    op_parts_set(op, 1); /* held by the caller until every part is posted */
    op->be[3] = (void *)(intptr_t)UCS_OK;
}

void rs_ucx_notify_alone(rs_ucx_ep_t *uep, rs_op_t *op, uint32_t imm)
{
    notify_begin(uep, op, imm);
    rs_ucx_send_notify(op);
    rs_ucx_op_part_done(op, UCS_OK);
}

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
        ucp_request_param_t p = op_param(op, rs_ucx_op_done_cb);
        return rs_ucx_post_result(op, ucp_put_nbx(uep->uep, src, len, raddr, k->rk, &p),
                                  "ucp_put_nbx");
    }

    rs_ucx_ctx_t *uc = rs_ucx_ctx(ep->ctx);
    notify_begin(uep, op, imm);

    ucp_request_param_t p = op_param(op, part_done_cb);
    rs_status_t st =
        post_part_result(op, ucp_put_nbx(uep->uep, src, len, raddr, k->rk, &p), "ucp_put_nbx");
    if (st != RS_OK)
        return st;
    if (uc->notify_flush) {
        ucp_request_param_t fp = op_param(op, flush_then_notify_cb);
        ucs_status_ptr_t req = ucp_ep_flush_nbx(uep->uep, &fp);
        if (req == NULL)
            rs_ucx_send_notify(op);
        else if (UCS_PTR_IS_ERR(req))
            op_error_set(op, UCS_PTR_STATUS(req));
        else
            op_parts_set(op, op_parts(op) + 1);
    } else {
        ucs_status_t s = ucp_worker_fence(uc->worker);
        if (s == UCS_OK)
            rs_ucx_send_notify(op);
        else
            op_error_set(op, s);
    }
    rs_ucx_op_part_done(op, UCS_OK);
    return RS_OK;
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
    ucp_request_param_t p = op_param(op, rs_ucx_op_done_cb);
    return rs_ucx_post_result(op, ucp_get_nbx(uep->uep, dst, len, raddr, k->rk, &p), "ucp_get_nbx");
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
    ucp_request_param_t p = op_param(op, fadd_done_cb);
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
    ucp_request_param_t p = op_param(op, rs_ucx_op_done_cb);
    return rs_ucx_post_result(op, ucp_ep_flush_nbx(uep->uep, &p), "ucp_ep_flush_nbx");
}
