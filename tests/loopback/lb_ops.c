/* The loopback backend: posted operations, progress and the ops table (lb_int.h). */
#include "tests/loopback/lb_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -------------------------------------------------------------------- ops */

static rs_status_t post_out(rs_ep_t *ep, lb_item_t *it, rs_op_t *op)
{
    lb_ep_t *e = ep->be;
    it->op = op;
    lb_lock();
    if (e->failed) {
        lb_unlock();
        free(it);
        return RS_ERR_UNREACHABLE;
    }
    if (it->kind == LB_MSG)
        lb.counts.sent[it->type & 255]++;
    rs_list_add_tail(&e->out, &it->link);
    lb_wake(e->owner);
    lb_unlock();
    return RS_OK;
}

static rs_status_t lb_put(rs_ep_t *ep, rs_op_t *op, const void *src, size_t len, rs_mr_t *mr,
                          rs_rkey_t *rkey, uint64_t raddr, int notify, uint32_t imm)
{
    (void)mr;
    lb_item_t *it = lb_item_new(LB_PUT, 0);
    if (it == NULL)
        return RS_ERR_NOMEM;
    it->local = (void *)(uintptr_t)src;
    it->len = len;
    it->raddr = raddr;
    it->region = (uint64_t)(uintptr_t)rkey->be;
    it->rkey = rkey;
    it->notify = notify;
    it->imm = imm;
    return post_out(ep, it, op);
}

static rs_status_t lb_get(rs_ep_t *ep, rs_op_t *op, void *dst, size_t len, rs_mr_t *mr,
                          rs_rkey_t *rkey, uint64_t raddr)
{
    (void)mr;
    lb_item_t *it = lb_item_new(LB_GET, 0);
    if (it == NULL)
        return RS_ERR_NOMEM;
    it->local = dst;
    it->len = len;
    it->raddr = raddr;
    it->region = (uint64_t)(uintptr_t)rkey->be;
    it->rkey = rkey;
    return post_out(ep, it, op);
}

/* All segments in one item: carried out together, counted as one get. */
static rs_status_t lb_getv(rs_ep_t *ep, rs_op_t *op, const rs_get_seg_t *seg, unsigned n,
                           rs_rkey_t *rkey)
{
    lb_item_t *it = lb_item_new(LB_GETV, n * sizeof(*seg));
    if (it == NULL)
        return RS_ERR_NOMEM;
    rs_get_seg_t *s = (rs_get_seg_t *)(void *)it->data;
    for (unsigned i = 0; i < n; i++) {
        s[i] = seg[i];
        s[i].roff += rkey->base;
    }
    it->len = n;
    it->region = (uint64_t)(uintptr_t)rkey->be;
    it->rkey = rkey;
    return post_out(ep, it, op);
}

static rs_status_t lb_fetch_add(rs_ep_t *ep, rs_op_t *op, rs_rkey_t *rkey, uint64_t raddr,
                                uint64_t add)
{
    lb_item_t *it = lb_item_new(LB_FADD, 0);
    if (it == NULL)
        return RS_ERR_NOMEM;
    it->len = sizeof(uint64_t);
    it->raddr = raddr;
    it->add = add;
    it->region = (uint64_t)(uintptr_t)rkey->be;
    it->rkey = rkey;
    return post_out(ep, it, op);
}

static rs_status_t lb_flush(rs_ep_t *ep, rs_op_t *op)
{
    lb_item_t *it = lb_item_new(LB_FLUSH, 0);
    if (it == NULL)
        return RS_ERR_NOMEM;
    return post_out(ep, it, op);
}

static rs_status_t lb_msg_send(rs_ep_t *ep, rs_op_t *op, unsigned type, const void *data,
                               size_t len)
{
    lb_item_t *it = lb_item_new(LB_MSG, len);
    if (it == NULL)
        return RS_ERR_NOMEM;
    it->type = type;
    it->len = len;
    if (len > 0)
        memcpy(it->data, data, len);
    return post_out(ep, it, op);
}

/* ---------------------------------------------------------------- progress */

/* The target bytes of a one-sided op, or NULL (lb_lock held). */
static unsigned char *target(const lb_item_t *it, rs_status_t *st)
{
    lb_region_t *r = lb_region_by_id(it->region);
    if (r == NULL || r->owner == NULL || r->owner->dead) {
        *st = RS_ERR_UNREACHABLE;
        return NULL;
    }
    uintptr_t base = (uintptr_t)r->addr;
    if (it->raddr < base || it->len > r->len || it->raddr - base > r->len - it->len) {
        *st = RS_ERR_OUT_OF_RANGE;
        return NULL;
    }
    return (unsigned char *)(uintptr_t)it->raddr;
}

/*
 * Carries out it, the first op posted on e (lb_lock held; it is unlinked).
 * Returns it when the caller completes its op and frees it, NULL when it
 * moved to the peer's inbound queue (a message: its op completes here).
 */
static lb_item_t *carry_out(lb_ep_t *e, lb_item_t *it, rs_status_t *st)
{
    lb_ep_t *peer = e->peer;
    *st = RS_OK;
    if (e->owner->dead || peer == NULL || peer->owner->dead) {
        *st = RS_ERR_UNREACHABLE;
        return it;
    }
    unsigned char *p;
    switch (it->kind) {
        case LB_MSG:
            if (lb.drop[it->type & 255] > 0) {
                lb.drop[it->type & 255]--;
                lb.counts.dropped[it->type & 255]++;
                return it;
            }
            if (lb.mangle[it->type & 255] > 0) {
                lb.mangle[it->type & 255]--;
                lb.counts.mangled[it->type & 255]++;
                size_t n =
                    lb.mangle_fn[it->type & 255](lb.mangle_arg[it->type & 255], it->data, it->len);
                it->len = n < it->len ? n : it->len;
            }
            it->kind = LB_IN_MSG;
            it->to = peer;
            rs_list_add_tail(&peer->owner->inbound, &it->link);
            lb_wake(peer->owner);
            return NULL;
        case LB_PUT:
            if ((p = target(it, st)) == NULL)
                return it;
            memcpy(p, it->local, it->len);
            lb.counts.puts++;
            lb.counts.put_bytes += it->len;
            if (it->notify) {
                lb.counts.notifies++;
                lb_item_t *n = lb_item_new(LB_IN_NOTIFY, 0);
                if (n == NULL) {
                    *st = RS_ERR_NOMEM;
                    return it;
                }
                n->to = peer;
                n->imm = it->imm;
                rs_list_add_tail(&peer->owner->inbound, &n->link);
                lb_wake(peer->owner);
            }
            return it;
        case LB_GET:
            if ((p = target(it, st)) == NULL)
                return it;
            memcpy(it->local, p, it->len);
            lb.counts.gets++;
            return it;
        case LB_GETV: {
            const rs_get_seg_t *seg = (const rs_get_seg_t *)(const void *)it->data;
            size_t n = it->len;
            for (size_t i = 0; i < n; i++) { /* every range checked before any is read */
                it->raddr = seg[i].roff;
                it->len = seg[i].len;
                if (target(it, st) == NULL)
                    return it;
            }
            for (size_t i = 0; i < n; i++)
                memcpy(seg[i].dst, (const void *)(uintptr_t)seg[i].roff, seg[i].len);
            lb.counts.gets++;
            return it;
        }
        case LB_FADD:
            if ((p = target(it, st)) == NULL)
                return it;
            if (((uintptr_t)p & 7) != 0) {
                *st = RS_ERR_INVALID;
                return it;
            }
            it->op->result = __atomic_fetch_add((uint64_t *)(void *)p, it->add, __ATOMIC_SEQ_CST);
            lb.counts.fetch_adds++;
            return it;
        default:
            return it; /* flush: everything before it on e is done */
    }
}

/* One posted op of c's endpoints carried out; 0 when none is left. */
static unsigned progress_out(lb_ctx_t *c)
{
    lb_lock();
    lb_item_t *it = NULL;
    lb_ep_t *e = NULL;
    rs_list_t *pos;
    LB_FOR_EACH(pos, &c->eps)
    {
        e = RS_CONTAINER_OF(pos, lb_ep_t, link);
        if (!rs_list_empty(&e->out)) {
            it = rs_list_first(&e->out, lb_item_t, link);
            if (lb.hold_gets && (it->kind == LB_GET || it->kind == LB_GETV)) {
                it = NULL; /* held, and what the endpoint posted after it */
                continue;
            }
            break;
        }
    }
    if (it == NULL) {
        lb_unlock();
        return 0;
    }
    rs_list_del(&it->link);
    /* Round robin: the endpoint goes to the end of the list. */
    rs_list_del(&e->link);
    rs_list_add_tail(&c->eps, &e->link);
    rs_op_t *op = it->op;
    rs_status_t st;
    lb_item_t *done = carry_out(e, it, &st);
    lb_unlock();
    rs_tp_op_complete(op, st);
    free(done);
    return 1;
}

/* One inbound event of c delivered; 0 when none is deliverable. */
static unsigned progress_in(lb_ctx_t *c)
{
    lb_lock();
    lb_item_t *it = lb_next_in(c);
    if (it != NULL)
        rs_list_del(&it->link);
    if (it != NULL && it->kind == LB_IN_MSG)
        lb.counts.delivered[it->type & 255]++;
    lb_unlock();
    if (it == NULL)
        return 0;
    rs_ep_t *ep = it->to != NULL ? it->to->ep : NULL;
    switch (it->kind) {
        case LB_IN_ACCEPT:
            lb_accept_one(c, it);
            break;
        case LB_IN_CONNECTED:
            rs_tp_ep_connected(ep);
            break;
        case LB_IN_FAILED:
            rs_tp_ep_failed(ep, it->status);
            break;
        case LB_IN_CLOSED:
            rs_tp_ep_peer_closed(ep);
            break;
        case LB_IN_MSG:
            if (!it->to->failed)
                rs_tp_msg_recv(ep, it->type, it->data, it->len);
            break;
        case LB_IN_NOTIFY:
            if (!it->to->failed)
                rs_tp_notify_recv(ep, it->imm);
            break;
        default:
            break;
    }
    free(it);
    return 1;
}

static unsigned lb_progress(rs_ctx_t *ctx)
{
    lb_ctx_t *c = rs_tp_ctx_be(ctx);
    uint64_t v;
    ssize_t unused = read(c->efd, &v, sizeof(v));
    (void)unused;
    unsigned n = 0, k;
    do {
        k = progress_out(c);
        k += progress_in(c);
        n += k;
    } while (k > 0 && n < LB_PROGRESS_MAX);
    if (k > 0)
        lb_wake(c); /* more to do: the next progress call does it */
    return n;
}

/* One process, no shared receive queue, no listeners of its own: nothing to renew or watch. */
static unsigned lb_caps(const rs_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

const rs_backend_ops_t rs_lb_ops = {
    .name = RS_LB_NAME,
    .ctx_open = lb_ctx_open,
    .ctx_close = lb_ctx_close,
    .progress = lb_progress,
    .fd = lb_fd,
    .arm = lb_arm,
    .caps = lb_caps,
    .mem_reg = lb_mem_reg,
    .mem_dereg = lb_mem_dereg,
    .rkey_pack = lb_rkey_pack,
    .rkey_unpack = lb_rkey_unpack,
    .rkey_release = lb_rkey_release,
    .listen = lb_listen,
    .listener_close = lb_listener_close,
    .connect = lb_connect,
    .address = lb_address,
    .connect_address = lb_connect_address,
    .ep_fail = lb_ep_fail,
    .ep_close = lb_ep_close,
    .put = lb_put,
    .get = lb_get,
    .getv = lb_getv,
    .fetch_add = lb_fetch_add,
    .flush = lb_flush,
    .msg_send = lb_msg_send,
};
