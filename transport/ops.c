/*
 * One-sided operations: argument, state and range checks (nothing is posted
 * when one fails), then the backend.
 */
#include "transport/internal.h"

#include "common/assert.h"
#include "common/log.h"

/* [off, off+len) inside [0, total)? Without overflow. */
static inline int range_ok(uint64_t off, uint64_t len, uint64_t total)
{
    return off <= total && len <= total - off;
}

/* The error paths, out of the hot path. */
static rs_status_t __attribute__((noinline, cold))
remote_error(const rs_ep_t *ep, const rs_rkey_t *rkey, uint64_t roff, uint64_t len, unsigned access,
             const char *what)
{
    if (rkey->ep != ep) {
        rs_error("%s: the remote key was unpacked for another endpoint", what);
        return RS_ERR_INVALID;
    }
    if (!range_ok(roff, len, rkey->len)) {
        rs_error("%s: remote range [%llu, +%llu) outside the %llu-byte region", what,
                 (unsigned long long)roff, (unsigned long long)len, (unsigned long long)rkey->len);
        return RS_ERR_OUT_OF_RANGE;
    }
    (void)access;
    rs_error("%s: the remote region does not grant this access", what);
    return RS_ERR_INVALID;
}

static rs_status_t __attribute__((noinline, cold))
local_error(const rs_ctx_t *ctx, const rs_mr_t *mr, const char *what)
{
    if (mr->ctx != ctx) {
        rs_error("%s: the local region belongs to another context", what);
        return RS_ERR_INVALID;
    }
    rs_error("%s: local buffer outside its registered region", what);
    return RS_ERR_OUT_OF_RANGE;
}

static inline rs_status_t check_remote(const rs_ep_t *ep, const rs_rkey_t *rkey, uint64_t roff,
                                       uint64_t len, unsigned access, const char *what)
{
    if (__builtin_expect(rkey->ep == ep && range_ok(roff, len, rkey->len) &&
                             (rkey->access & access) == access,
                         1))
        return RS_OK;
    return remote_error(ep, rkey, roff, len, access, what);
}

static inline rs_status_t check_local(const rs_ctx_t *ctx, const void *buf, size_t len,
                                      const rs_mr_t *mr, const char *what)
{
    uintptr_t b = (uintptr_t)buf, base = (uintptr_t)mr->addr;
    if (__builtin_expect(mr->ctx == ctx && b >= base && range_ok(b - base, len, mr->len), 1))
        return RS_OK;
    return local_error(ctx, mr, what);
}

static rs_status_t put_common(rs_ep_t *ep, const void *src, size_t len, rs_mr_t *src_mr,
                              rs_rkey_t *rkey, uint64_t roff, int notify, uint32_t imm,
                              rs_op_cb_t cb, void *arg)
{
    const char *what = notify ? "rs_put_notify" : "rs_put";
    if (ep == NULL || src_mr == NULL || rkey == NULL || (src == NULL && len > 0)) {
        rs_error("%s: invalid argument", what);
        return RS_ERR_INVALID;
    }
    rs_ctx_t *ctx = ep->ctx;
    rs_tp_lock(ctx);
    rs_status_t st = rs_tp_ep_check_ready(ep);
    if (st == RS_OK)
        st = check_remote(ep, rkey, roff, len, RS_MEM_REMOTE_WRITE, what);
    if (st == RS_OK)
        st = check_local(ctx, src, len, src_mr, what);
    if (st == RS_OK) {
        rs_op_t *op = rs_tp_op_alloc(ctx, ep, notify ? RS_OP_PUT_NOTIFY : RS_OP_PUT, cb, arg);
        if (op == NULL) {
            st = RS_ERR_NOMEM;
        } else {
            st = ctx->be_ops->put(ep, op, src, len, src_mr, rkey, rkey->base + roff, notify, imm);
            if (st != RS_OK)
                rs_tp_op_unpost(op);
        }
    }
    rs_tp_unlock(ctx);
    return st;
}

rs_status_t rs_put(rs_ep_t *ep, const void *src, size_t len, rs_mr_t *src_mr, rs_rkey_t *rkey,
                   uint64_t roff, rs_op_cb_t cb, void *arg)
{
    return put_common(ep, src, len, src_mr, rkey, roff, 0, 0, cb, arg);
}

rs_status_t rs_put_notify(rs_ep_t *ep, const void *src, size_t len, rs_mr_t *src_mr,
                          rs_rkey_t *rkey, uint64_t roff, uint32_t imm, rs_op_cb_t cb, void *arg)
{
    return put_common(ep, src, len, src_mr, rkey, roff, 1, imm, cb, arg);
}

rs_status_t rs_get(rs_ep_t *ep, void *dst, size_t len, rs_mr_t *dst_mr, rs_rkey_t *rkey,
                   uint64_t roff, rs_op_cb_t cb, void *arg)
{
    if (ep == NULL || dst_mr == NULL || rkey == NULL || (dst == NULL && len > 0)) {
        rs_error("rs_get: invalid argument");
        return RS_ERR_INVALID;
    }
    rs_ctx_t *ctx = ep->ctx;
    rs_tp_lock(ctx);
    rs_status_t st = rs_tp_ep_check_ready(ep);
    if (st == RS_OK)
        st = check_remote(ep, rkey, roff, len, RS_MEM_REMOTE_READ, "rs_get");
    if (st == RS_OK)
        st = check_local(ctx, dst, len, dst_mr, "rs_get");
    if (st == RS_OK) {
        rs_op_t *op = rs_tp_op_alloc(ctx, ep, RS_OP_GET, cb, arg);
        if (op == NULL) {
            st = RS_ERR_NOMEM;
        } else {
            st = ctx->be_ops->get(ep, op, dst, len, dst_mr, rkey, rkey->base + roff);
            if (st != RS_OK)
                rs_tp_op_unpost(op);
        }
    }
    rs_tp_unlock(ctx);
    return st;
}

/*
 * A vectored read the backend cannot take whole: one child get per segment,
 * the parent op completing when the last child does (its backend scratch:
 * be[0] the children left, be[1] the first failure). Children complete
 * only from progress, never inside this call. A child that cannot be
 * posted after others were fails the parent once those complete.
 */
static void getv_child_done(void *arg, rs_status_t status)
{
    rs_op_t *parent = arg;
    uintptr_t left = (uintptr_t)parent->be[0];
    RS_ASSERT(left > 0);
    if (status != RS_OK && (rs_status_t)(intptr_t)parent->be[1] == RS_OK)
        parent->be[1] = (void *)(intptr_t)status;
    parent->be[0] = (void *)(left - 1);
    if (left == 1)
        rs_tp_op_complete(parent, (rs_status_t)(intptr_t)parent->be[1]);
}

static rs_status_t getv_split(rs_ep_t *ep, rs_op_t *parent, const rs_get_seg_t *seg, unsigned n,
                              rs_mr_t *dst_mr, rs_rkey_t *rkey)
{
    rs_ctx_t *ctx = ep->ctx;
    rs_status_t st = RS_OK;
    uintptr_t posted = 0;
    parent->be[1] = (void *)(intptr_t)RS_OK;
    for (; posted < n; posted++) {
        rs_op_t *op = rs_tp_op_alloc(ctx, ep, RS_OP_GET, getv_child_done, parent);
        if (op == NULL) {
            st = RS_ERR_NOMEM;
            break;
        }
        st = ctx->be_ops->get(ep, op, seg[posted].dst, seg[posted].len, dst_mr, rkey,
                              rkey->base + seg[posted].roff);
        if (st != RS_OK) {
            rs_tp_op_unpost(op);
            break;
        }
    }
    if (posted == 0)
        return st; /* nothing posted: the caller unposts the parent */
    parent->be[0] = (void *)posted;
    if (st != RS_OK) {
        rs_error("rs_getv: segment %u of %u not posted: %s", (unsigned)posted, n, rs_strerror(st));
        parent->be[1] = (void *)(intptr_t)st;
    }
    return RS_OK;
}

rs_status_t rs_getv(rs_ep_t *ep, const rs_get_seg_t *seg, unsigned n, rs_mr_t *dst_mr,
                    rs_rkey_t *rkey, rs_op_cb_t cb, void *arg)
{
    if (ep == NULL || dst_mr == NULL || rkey == NULL || seg == NULL || n == 0 || n > RS_GETV_MAX) {
        rs_error("rs_getv: invalid argument (%u segments, at most %u)", n, RS_GETV_MAX);
        return RS_ERR_INVALID;
    }
    rs_ctx_t *ctx = ep->ctx;
    rs_tp_lock(ctx);
    rs_status_t st = rs_tp_ep_check_ready(ep);
    for (unsigned i = 0; i < n && st == RS_OK; i++) {
        if (seg[i].dst == NULL && seg[i].len > 0) {
            rs_error("rs_getv: segment %u has a NULL destination", i);
            st = RS_ERR_INVALID;
            break;
        }
        st = check_remote(ep, rkey, seg[i].roff, seg[i].len, RS_MEM_REMOTE_READ, "rs_getv");
        if (st == RS_OK)
            st = check_local(ctx, seg[i].dst, seg[i].len, dst_mr, "rs_getv");
    }
    if (st == RS_OK) {
        rs_op_t *op = rs_tp_op_alloc(ctx, ep, RS_OP_GET, cb, arg);
        if (op == NULL) {
            st = RS_ERR_NOMEM;
        } else {
            st = ctx->be_ops->getv != NULL ? ctx->be_ops->getv(ep, op, seg, n, rkey)
                                           : RS_ERR_UNSUPPORTED;
            if (st == RS_ERR_UNSUPPORTED)
                st = getv_split(ep, op, seg, n, dst_mr, rkey);
            if (st != RS_OK)
                rs_tp_op_unpost(op);
        }
    }
    rs_tp_unlock(ctx);
    return st;
}

rs_status_t rs_fetch_add(rs_ep_t *ep, rs_rkey_t *rkey, uint64_t roff, uint64_t add, uint64_t *old_p,
                         rs_op_cb_t cb, void *arg)
{
    if (ep == NULL || rkey == NULL) {
        rs_error("rs_fetch_add: invalid argument");
        return RS_ERR_INVALID;
    }
    if (roff % 8 != 0) {
        rs_error("rs_fetch_add: remote offset %llu is not 8-byte aligned",
                 (unsigned long long)roff);
        return RS_ERR_INVALID;
    }
    rs_ctx_t *ctx = ep->ctx;
    rs_tp_lock(ctx);
    rs_status_t st = rs_tp_ep_check_ready(ep);
    if (st == RS_OK)
        st = check_remote(ep, rkey, roff, 8, RS_MEM_REMOTE_ATOMIC, "rs_fetch_add");
    if (st == RS_OK) {
        rs_op_t *op = rs_tp_op_alloc(ctx, ep, RS_OP_FETCH_ADD, cb, arg);
        if (op == NULL) {
            st = RS_ERR_NOMEM;
        } else {
            op->old_p = old_p;
            st = ctx->be_ops->fetch_add(ep, op, rkey, rkey->base + roff, add);
            if (st != RS_OK)
                rs_tp_op_unpost(op);
        }
    }
    rs_tp_unlock(ctx);
    return st;
}

rs_status_t rs_ep_flush(rs_ep_t *ep, rs_op_cb_t cb, void *arg)
{
    if (ep == NULL)
        return RS_ERR_INVALID;
    rs_ctx_t *ctx = ep->ctx;
    rs_tp_lock(ctx);
    rs_status_t st = rs_tp_ep_check_ready(ep);
    if (st == RS_OK) {
        rs_op_t *op = rs_tp_op_alloc(ctx, ep, RS_OP_FLUSH, cb, arg);
        if (op == NULL) {
            st = RS_ERR_NOMEM;
        } else {
            st = ctx->be_ops->flush(ep, op);
            if (st != RS_OK)
                rs_tp_op_unpost(op);
        }
    }
    rs_tp_unlock(ctx);
    return st;
}
