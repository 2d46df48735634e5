/*
 * Verbs work requests. Every send-queue WR an endpoint posts sits in its
 * ring from post to completion, so each op completes exactly once even when
 * it was posted unsignaled: a signaled completion retires every older entry
 * (an RC send queue completes in order), and a QP in error flushes them.
 *
 * Budgets, checked before posting (else the op waits in the endpoint's
 * backlog, in posting order):
 *   - send queue: sq_cap regular WRs in flight, plus one internal
 *     signal-only write ("tail");
 *   - CQ: every regular WR in flight holds one CQ entry (a QP in error
 *     flushes unsignaled WRs too); each QP holds one more for its tail;
 *   - reads and atomics in flight: rd_cap per QP (the responder's limit).
 * Signaling: one WR in signal_every, every read/atomic/flush, and the WR
 * that fills the send queue. A WR left unsignaled at the end of a burst gets
 * a tail from the next progress call (which a post wakes when the context
 * is armed), so nothing waits for a completion that was never requested.
 */
#include "transport/verbs/verbs.h"

#include "common/assert.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

rs_status_t rs_verbs_ep_init_sq(rs_vep_t *v, uint32_t sq_cap, uint32_t inline_max)
{
    v->ring_size = sq_cap + 1;
    v->ring = calloc(v->ring_size, sizeof(*v->ring));
    if (v->ring == NULL) {
        rs_error("verbs: out of memory for a send queue of %u", sq_cap);
        return RS_ERR_NOMEM;
    }
    v->sq_cap = sq_cap;
    v->inline_max = inline_max;
    v->head = v->tail = 0;
    return RS_OK;
}

static int is_rd(enum ibv_wr_opcode op)
{
    return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
           op == IBV_WR_ATOMIC_CMP_AND_SWP;
}

static int is_atomic(enum ibv_wr_opcode op)
{
    return op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP;
}

static void slot_release(rs_vctx_t *vc, rs_vslot_t *slot, int atomic)
{
    if (slot != NULL)
        rs_verbs_slot_put(atomic ? &vc->atomic_pool : &vc->msg_pool, slot);
}

static void list_leave(rs_list_t *link, uint8_t *flag)
{
    if (*flag) {
        rs_list_del(link);
        *flag = 0;
    }
}

/* Room for a regular WR now? */
static int can_post(const rs_vep_t *v, const rs_vwork_t *w)
{
    return v->can_post && !v->failed && v->tail - v->head < v->sq_cap && v->vc->cq_free > 0 &&
           (!is_rd(w->opcode) || v->rd_out < v->rd_cap);
}

/* Posts one WR (tail: the internal signal-only write); 0 or an errno. */
static int post_wr(rs_vep_t *v, rs_vwork_t *w, int tail)
{
    rs_vctx_t *vc = v->vc;
    uint64_t seq = v->tail;
    uint64_t inflight = v->tail - v->head;
    int rd = is_rd(w->opcode), atomic = is_atomic(w->opcode);
    int signaled = tail || w->force_signal || rd || v->unsignaled + 1 >= vc->signal_every ||
                   inflight + 1 >= v->sq_cap;
    int inl = w->len > 0 && w->len <= v->inline_max && !rd;

    struct ibv_sge sge = {.addr = w->laddr, .length = w->len, .lkey = w->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = (uint64_t)v->uid << 32 | (uint32_t)seq;
    wr.opcode = w->opcode;
    wr.sg_list = &sge;
    wr.num_sge = w->len > 0 ? 1 : 0;
    wr.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) | (inl ? IBV_SEND_INLINE : 0);
    switch (w->opcode) {
        case IBV_WR_RDMA_WRITE_WITH_IMM:
            wr.imm_data = htonl(w->imm);
            /* fallthrough */
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_READ:
            wr.wr.rdma.remote_addr = w->raddr;
            wr.wr.rdma.rkey = w->rkey;
            break;
        case IBV_WR_SEND_WITH_IMM:
            wr.imm_data = htonl(w->imm);
            break;
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            wr.wr.atomic.remote_addr = w->raddr;
            wr.wr.atomic.compare_add = w->add;
            wr.wr.atomic.rkey = w->rkey;
            break;
        default:
            return EINVAL;
    }
    int rc = ibv_post_send(v->qp, &wr, &bad);
    if (rc != 0)
        return rc;

    RS_ASSERT(v->tail - v->head < v->ring_size); /* the ring slot is free */
    rs_vwr_t *e = &v->ring[seq % v->ring_size];
    e->op = w->op;
    e->rd = (uint8_t)rd;
    e->atomic = (uint8_t)atomic;
    e->tail = (uint8_t)tail;
    e->slot = inl ? NULL : w->slot;
    if (inl)
        slot_release(vc, w->slot, atomic); /* the data was copied into the WQE */
    v->tail++;
    if (tail)
        v->tail_out = 1;
    else
        vc->cq_free--;
    if (rd)
        v->rd_out++;
    if (signaled) {
        v->unsignaled = 0;
    } else {
        v->unsignaled++;
        if (!v->on_tails) {
            rs_list_add_tail(&vc->tails, &v->tail_link);
            v->on_tails = 1;
        }
        rs_verbs_wake(vc);
    }
    return 0;
}

static rs_status_t enqueue(rs_vep_t *v, const rs_vwork_t *w)
{
    rs_vctx_t *vc = v->vc;
    rs_vwork_t *q;
    if (!rs_list_empty(&vc->work_free)) {
        q = rs_list_first(&vc->work_free, rs_vwork_t, link);
        rs_list_del(&q->link);
    } else if ((q = malloc(sizeof(*q))) == NULL) {
        rs_error("verbs: out of memory queueing an operation");
        return RS_ERR_NOMEM;
    }
    *q = *w;
    rs_list_add_tail(&v->backlog, &q->link);
    if (!v->on_backlogged) {
        rs_list_add_tail(&vc->backlogged, &v->backlog_link);
        v->on_backlogged = 1;
    }
    return RS_OK;
}

static void work_recycle(rs_vctx_t *vc, rs_vwork_t *w)
{
    rs_list_add_head(&vc->work_free, &w->link);
}

/* Posts now when the budgets allow and nothing is queued before it, else queues. */
static rs_status_t submit(rs_vep_t *v, rs_vwork_t *w)
{
    if (v->failed)
        return RS_ERR_UNREACHABLE;
    if (rs_list_empty(&v->backlog) && can_post(v, w)) {
        int rc = post_wr(v, w, 0);
        if (rc != 0) {
            rs_error("verbs: ibv_post_send failed: %s", strerror(rc));
            return RS_ERR_TRANSPORT;
        }
        return RS_OK;
    }
    return enqueue(v, w);
}

/* ---------------------------------------------------------- completions */

/*
 * Retires ring entries up to seq; the entry at seq gets last. Older entries
 * without a completion of their own succeeded (the queue completes in
 * order), unless the QP was already failing: then they were flushed.
 */
static void retire(rs_vep_t *v, uint64_t seq, rs_status_t last)
{
    rs_vctx_t *vc = v->vc;
    rs_status_t ok = last == RS_OK || !v->failed ? RS_OK : RS_ERR_UNREACHABLE;
    RS_ASSERT(seq < v->tail);
    while (v->head <= seq) {
        rs_vwr_t *e = &v->ring[v->head % v->ring_size];
        rs_status_t st = v->head == seq ? last : ok;
        if (e->tail)
            v->tail_out = 0;
        else
            vc->cq_free++;
        if (e->rd) {
            RS_ASSERT(v->rd_out > 0);
            v->rd_out--;
        }
        if (e->op != NULL) {
            if (st == RS_OK && e->atomic)
                memcpy(&e->op->result, e->slot->buf, sizeof(uint64_t));
            rs_tp_op_complete(e->op, st);
        }
        slot_release(vc, e->slot, e->atomic);
        memset(e, 0, sizeof(*e));
        v->head++;
    }
}

void rs_verbs_handle_send_wc(rs_vctx_t *vc, const struct ibv_wc *wc)
{
    rs_vep_t *v = rs_verbs_qp_table_find(vc, wc->qp_num);
    if (v == NULL || v->uid != (uint32_t)(wc->wr_id >> 32))
        return; /* from a QP destroyed meanwhile */
    uint32_t s32 = (uint32_t)wc->wr_id;
    uint64_t seq = v->head + (uint32_t)(s32 - (uint32_t)v->head);
    if (seq >= v->tail) {
        rs_error("verbs: completion for an unknown work request on QP %u", wc->qp_num);
        return;
    }
    rs_status_t st = rs_verbs_wc_status(wc->status);
    int first_error = st != RS_OK && !v->failed;
    if (first_error)
        rs_warn("verbs: work request failed on QP %u: %s (vendor error 0x%x)", wc->qp_num,
                ibv_wc_status_str(wc->status), wc->vendor_err);
    retire(v, seq, st);
    if (first_error && !v->failed)
        rs_tp_ep_failed(v->ep, st == RS_ERR_UNREACHABLE ? st : RS_ERR_TRANSPORT);
}

/* ------------------------------------------- backlogs, tails, deferred */

unsigned rs_verbs_post_backlogs(rs_vctx_t *vc)
{
    unsigned n = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &vc->backlogged)
    {
        rs_vep_t *v = RS_CONTAINER_OF(pos, rs_vep_t, backlog_link);
        while (!rs_list_empty(&v->backlog)) {
            rs_vwork_t *w = rs_list_first(&v->backlog, rs_vwork_t, link);
            if (!can_post(v, w))
                break;
            int rc = post_wr(v, w, 0);
            rs_list_del(&w->link);
            if (rc != 0) {
                rs_error("verbs: ibv_post_send failed: %s", strerror(rc));
                slot_release(vc, w->slot, is_atomic(w->opcode));
                if (w->op != NULL)
                    rs_tp_op_complete(w->op, RS_ERR_TRANSPORT);
                work_recycle(vc, w);
                rs_tp_ep_failed(v->ep, RS_ERR_TRANSPORT);
                break;
            }
            work_recycle(vc, w);
            n++;
        }
        if (rs_list_empty(&v->backlog))
            list_leave(&v->backlog_link, &v->on_backlogged);
    }
    return n;
}

unsigned rs_verbs_post_tails(rs_vctx_t *vc)
{
    unsigned n = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &vc->tails)
    {
        rs_vep_t *v = RS_CONTAINER_OF(pos, rs_vep_t, tail_link);
        if (v->unsignaled == 0 || v->failed) {
            list_leave(&v->tail_link, &v->on_tails);
            continue;
        }
        if (v->tail_out || v->tail - v->head >= v->ring_size)
            continue; /* a signaled WR is in flight: its completion brings us back */
        rs_vwork_t w = {.opcode = IBV_WR_RDMA_WRITE};
        int rc = post_wr(v, &w, 1);
        if (rc != 0) {
            rs_error("verbs: posting a signal-only write failed: %s", strerror(rc));
            list_leave(&v->tail_link, &v->on_tails);
            rs_tp_ep_failed(v->ep, RS_ERR_TRANSPORT);
            continue;
        }
        list_leave(&v->tail_link, &v->on_tails);
        n++;
    }
    return n;
}

unsigned rs_verbs_run_deferred(rs_vctx_t *vc)
{
    unsigned n = 0;
    while (!rs_list_empty(&vc->deferred)) {
        rs_vdeferred_t *d = rs_list_first(&vc->deferred, rs_vdeferred_t, link);
        rs_list_del(&d->link);
        rs_tp_op_complete(d->op, d->status);
        free(d);
        n++;
    }
    return n;
}

static rs_status_t defer(rs_vep_t *v, rs_op_t *op, rs_status_t status)
{
    rs_vdeferred_t *d = malloc(sizeof(*d));
    if (d == NULL) {
        rs_error("verbs: out of memory");
        return RS_ERR_NOMEM;
    }
    d->v = v;
    d->op = op;
    d->status = status;
    rs_list_add_tail(&v->vc->deferred, &d->link);
    return RS_OK;
}

void rs_verbs_work_free_all(rs_vctx_t *vc)
{
    while (!rs_list_empty(&vc->work_free)) {
        rs_vwork_t *w = rs_list_first(&vc->work_free, rs_vwork_t, link);
        rs_list_del(&w->link);
        free(w);
    }
}

/* ------------------------------------------------------------- failure */

/*
 * The QP goes to the error state: the device flushes every WR in flight,
 * and each ring entry completes from its flush completion (the generic
 * layer forces what a broken device never returns). Queued ops never
 * reached the device: they complete now.
 */
void rs_verbs_ep_fail(rs_ep_t *ep)
{
    rs_vep_t *v = ep->be;
    if (v == NULL || v->failed)
        return;
    rs_vctx_t *vc = v->vc;
    v->failed = 1;
    if (v->qp != NULL) {
        struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
        int rc = ibv_modify_qp(v->qp, &attr, IBV_QP_STATE);
        if (rc != 0)
            rs_warn("verbs: moving QP %u to the error state failed: %s", v->qp_num, strerror(rc));
    }
    if (v->id != NULL && v->can_post)
        rdma_disconnect(v->id); /* the peer learns at once (errors: already gone) */

    rs_status_t st = ep->status != RS_OK ? ep->status : RS_ERR_CANCELED;
    while (!rs_list_empty(&v->backlog)) {
        rs_vwork_t *w = rs_list_first(&v->backlog, rs_vwork_t, link);
        rs_list_del(&w->link);
        slot_release(vc, w->slot, is_atomic(w->opcode));
        if (w->op != NULL)
            rs_tp_op_complete(w->op, st);
        work_recycle(vc, w);
    }
    list_leave(&v->backlog_link, &v->on_backlogged);
    list_leave(&v->tail_link, &v->on_tails);
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &vc->deferred)
    {
        rs_vdeferred_t *d = RS_CONTAINER_OF(pos, rs_vdeferred_t, link);
        if (d->v == v) {
            rs_list_del(&d->link);
            rs_tp_op_complete(d->op, st);
            free(d);
        }
    }
}

/* After the QP is destroyed: what the device never returned completes here. */
void rs_verbs_ep_release_sq(rs_vep_t *v)
{
    rs_vctx_t *vc = v->vc;
    if (v->ring != NULL && v->head < v->tail) {
        v->failed = 1;
        retire(v, v->tail - 1, RS_ERR_CANCELED);
    }
    free(v->ring);
    v->ring = NULL;
    (void)vc;
}

/* ------------------------------------------------------ the operations */

rs_status_t rs_verbs_put(rs_ep_t *ep, rs_op_t *op, const void *src, size_t len, rs_mr_t *mr,
                         rs_rkey_t *rkey, uint64_t raddr, int notify, uint32_t imm)
{
    rs_vep_t *v = ep->be;
    if (len > UINT32_MAX >> 1) {
        rs_error("verbs: a put of %zu bytes exceeds the 2 GiB limit of one RDMA write", len);
        return RS_ERR_INVALID;
    }
    rs_vwork_t w = {
        .op = op,
        .opcode = notify ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
        .len = (uint32_t)len,
        .laddr = (uintptr_t)src,
        .lkey = ((struct ibv_mr *)mr->be)->lkey,
        .raddr = raddr,
        .rkey = (uint32_t)(uintptr_t)rkey->be,
        .imm = imm,
    };
    return submit(v, &w);
}

rs_status_t rs_verbs_get(rs_ep_t *ep, rs_op_t *op, void *dst, size_t len, rs_mr_t *mr,
                         rs_rkey_t *rkey, uint64_t raddr)
{
    rs_vep_t *v = ep->be;
    if (len > UINT32_MAX >> 1) {
        rs_error("verbs: a get of %zu bytes exceeds the 2 GiB limit of one RDMA read", len);
        return RS_ERR_INVALID;
    }
    if (v->rd_cap == 0) {
        rs_error("verbs: the peer accepts no RDMA reads on this connection");
        return RS_ERR_UNSUPPORTED;
    }
    rs_vwork_t w = {
        .op = op,
        .opcode = IBV_WR_RDMA_READ,
        .len = (uint32_t)len,
        .laddr = (uintptr_t)dst,
        .lkey = ((struct ibv_mr *)mr->be)->lkey,
        .raddr = raddr,
        .rkey = (uint32_t)(uintptr_t)rkey->be,
    };
    return submit(v, &w);
}

rs_status_t rs_verbs_fetch_add(rs_ep_t *ep, rs_op_t *op, rs_rkey_t *rkey, uint64_t raddr,
                               uint64_t add)
{
    rs_vep_t *v = ep->be;
    rs_vctx_t *vc = v->vc;
    if (vc->dattr.atomic_cap == IBV_ATOMIC_NONE || v->rd_cap == 0) {
        rs_error("verbs: the device or the peer does not support atomic operations");
        return RS_ERR_UNSUPPORTED;
    }
    if (raddr % sizeof(uint64_t) != 0) {
        rs_error("verbs: fetch-and-add on an address not 8-byte aligned");
        return RS_ERR_INVALID;
    }
    rs_vslot_t *slot = rs_verbs_slot_get(vc, &vc->atomic_pool);
    if (slot == NULL)
        return RS_ERR_NOMEM;
    rs_vwork_t w = {
        .op = op,
        .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
        .len = sizeof(uint64_t),
        .laddr = (uintptr_t)slot->buf,
        .lkey = slot->lkey,
        .raddr = raddr,
        .rkey = (uint32_t)(uintptr_t)rkey->be,
        .add = add,
        .slot = slot,
    };
    rs_status_t st = submit(v, &w);
    if (st != RS_OK)
        slot_release(vc, slot, 1);
    return st;
}

rs_status_t rs_verbs_flush(rs_ep_t *ep, rs_op_t *op)
{
    rs_vep_t *v = ep->be;
    if (v->failed)
        return RS_ERR_UNREACHABLE;
    if (v->head == v->tail && rs_list_empty(&v->backlog))
        return defer(v, op, RS_OK); /* nothing in flight: done at the next progress */
    /* A signaled zero-length write completes after everything posted before it. */
    rs_vwork_t w = {.op = op, .opcode = IBV_WR_RDMA_WRITE, .force_signal = 1};
    return submit(v, &w);
}

rs_status_t rs_verbs_msg_send(rs_ep_t *ep, rs_op_t *op, unsigned type, const void *data, size_t len)
{
    rs_vep_t *v = ep->be;
    rs_vctx_t *vc = v->vc;
    if (len > vc->msg_max)
        return RS_ERR_MSG_SIZE;
    if (v->failed)
        return RS_ERR_UNREACHABLE;
    rs_vwork_t w = {.op = op, .opcode = IBV_WR_SEND_WITH_IMM, .len = (uint32_t)len, .imm = type};
    int now = rs_list_empty(&v->backlog) && can_post(v, &w);
    if (now && len <= v->inline_max) {
        /* Inline: the device copies the bytes while posting; no registered copy needed. */
        w.laddr = (uintptr_t)data;
        return submit(v, &w);
    }
    if (len > 0) {
        w.slot = rs_verbs_slot_get(vc, &vc->msg_pool);
        if (w.slot == NULL)
            return RS_ERR_NOMEM;
        memcpy(w.slot->buf, data, len);
        w.laddr = (uintptr_t)w.slot->buf;
        w.lkey = w.slot->lkey;
    }
    rs_status_t st = submit(v, &w);
    if (st != RS_OK)
        slot_release(vc, w.slot, 0);
    return st;
}
