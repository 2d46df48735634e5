/*
 * UCX backend: notified puts. UCX has no write-with-immediate, so the
 * notification is an active message ordered after the put, either by
 * ucp_worker_fence (default) or by an endpoint flush whose completion sends
 * it (RSHUFFLE_UCX_NOTIFY=flush). See docs/transport.md for the
 * measurements. Parts of a notified put are counted in op->be[2]; the first
 * error is kept in op->be[3]; the notification header lives in op->be[0..1].
 * Below rma.c and attach.c, which both end a put here.
 *
 * Requests carry no UCP_OP_ATTR_FIELD_MEMH (rma.c says why).
 */
#include "transport/ucx/ucx.h"

#include "common/tsan.h"

_Static_assert(sizeof(rs_ucx_hdr_wire_t) <= 2 * sizeof(void *), "notify header fits op->be[0..1]");

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
    rs_ucx_hdr_wire_t *hdr = (rs_ucx_hdr_wire_t *)&op->be[0];
    ucp_request_param_t p = rs_ucx_op_param(op, part_done_cb);
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
    rs_ucx_hdr_pack(&hdr, (rs_ucx_hdr_wire_t *)&op->be[0]);
    op_parts_set(op, 1); /* held by the caller until every part is posted */
    op->be[3] = (void *)(intptr_t)UCS_OK;
}

void rs_ucx_notify_alone(rs_ucx_ep_t *uep, rs_op_t *op, uint32_t imm)
{
    notify_begin(uep, op, imm);
    rs_ucx_send_notify(op);
    rs_ucx_op_part_done(op, UCS_OK);
}

rs_status_t rs_ucx_notify_put(rs_ucx_ep_t *uep, rs_ucx_ctx_t *uc, rs_op_t *op, const void *src,
                              size_t len, uint64_t raddr, ucp_rkey_h rk, uint32_t imm)
{
    notify_begin(uep, op, imm);

    ucp_request_param_t p = rs_ucx_op_param(op, part_done_cb);
    rs_status_t st =
        post_part_result(op, ucp_put_nbx(uep->uep, src, len, raddr, rk, &p), "ucp_put_nbx");
    if (st != RS_OK)
        return st;
    if (uc->notify_flush) {
        ucp_request_param_t fp = rs_ucx_op_param(op, flush_then_notify_cb);
        ucs_status_ptr_t req = ucp_ep_flush_nbx(uep->uep, &fp);
        if (req == NULL)
            rs_ucx_send_notify(op);
        else if (UCS_PTR_IS_ERR(req))
            op_error_set(op, UCS_PTR_STATUS(req));
        else
            op_parts_set(op, op_parts(op) + 1);
    } else {
        ucs_status_t s = ucp_worker_fence(rs_ucx_uep_worker(uep));
        if (s == UCS_OK)
            rs_ucx_send_notify(op);
        else
            op_error_set(op, s);
    }
    rs_ucx_op_part_done(op, UCS_OK);
    return RS_OK;
}
