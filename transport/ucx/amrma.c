/*
 * UCX backend: one-sided operations carried by our own active messages,
 * for remote keys UCX could only reach by emulation (TCP, or memory no
 * shared-memory transport can map, on a context without an RDMA transport).
 *
 * Why not UCX's own emulation: its target answers every emulated put, get
 * and atomic with an internal request, and UCX 1.13 aborts the whole process
 * (ucp_request_try_send: "Fatal: unexpected error") when that answer cannot
 * be sent because the requester closed meanwhile, e.g. after it timed a
 * stalled target out. Our answers are ordinary AM sends, whose errors are
 * just errors. The target also checks every address against its own
 * registered regions and their access rights before touching memory.
 *
 * Protocol (all on the one AM id, the one-sided header of amhdr.h, 32 bytes):
 *   PUT       data = bytes to write at raddr; value = immediate when the
 *             NOTIFY flag is set (the target writes, then notifies)
 *   GET_REQ   value = length          -> GET_REP   data = bytes, value = status
 *   FADD_REQ  value = addend          -> FADD_REP  value = old value
 *   FLUSH_REQ                         -> FLUSH_REP (after everything before it)
 * Answers carry status RS_OK or the target's refusal in flags. A put
 * completes when its AM left (as UCX's emulated put does), its header in
 * op->be, so the put path allocates nothing; a flush completes when the
 * target answered, so everything before it was applied. Requests waiting for
 * an answer live in slots (stable addresses, reused) found by id.
 */
#include "transport/ucx/ucx.h"

#include "common/assert.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(rs_ucx_rma_wire_t) <= 4 * sizeof(void *), "RMA header fits op->be");

#define PEND_BITS 20
#define PEND_MASK ((1u << PEND_BITS) - 1)

enum {
    PART_SEND = 1,  /* the request AM is still UCX's */
    PART_REPLY = 2, /* the answer has not come */
    PART_FLUSH = 4, /* flush: the endpoint flush of UCX's own operations */
};

/* A request waiting for its answer. */
struct rs_ucx_pending {
    rs_ucx_ctx_t *uc;
    rs_op_t *op; /* NULL: free */
    rs_ucx_ep_t *uep;
    void *dst; /* get: where the answer's bytes go */
    uint64_t len;
    unsigned parts;
    ucs_status_t status;
    uint32_t id;
    uint16_t gen;
    rs_ucx_rma_wire_t hdr; /* the request AM's header, UCX's until PART_SEND clears */
};

/* ------------------------------------------------------- the request table */

static rs_ucx_pending_t *pend_alloc(rs_ucx_ctx_t *uc)
{
    if (uc->pend_nfree == 0) {
        uint32_t n = uc->pend_n ? uc->pend_n * 2 : 64;
        if (n > PEND_MASK + 1)
            return NULL;
        rs_ucx_pending_t **p = realloc(uc->pend, n * sizeof(*p));
        if (p == NULL)
            return NULL;
        uc->pend = p;
        uint32_t *f = realloc(uc->pend_free, n * sizeof(*f));
        if (f == NULL)
            return NULL;
        uc->pend_free = f;
        for (uint32_t i = uc->pend_n; i < n; i++)
            uc->pend[i] = NULL;
        for (uint32_t i = n; i-- > uc->pend_n;)
            uc->pend_free[uc->pend_nfree++] = i;
        uc->pend_n = n;
    }
    uint32_t idx = uc->pend_free[uc->pend_nfree - 1];
    rs_ucx_pending_t *s = uc->pend[idx];
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return NULL;
        s->uc = uc;
        s->gen = 1;
        uc->pend[idx] = s;
    }
    uc->pend_nfree--;
    s->id = ((uint32_t)s->gen << PEND_BITS) | idx;
    s->status = UCS_OK;
    return s;
}

static rs_ucx_pending_t *pend_lookup(rs_ucx_ctx_t *uc, uint32_t id)
{
    uint32_t idx = id & PEND_MASK;
    if (idx >= uc->pend_n)
        return NULL;
    rs_ucx_pending_t *s = uc->pend[idx];
    return s != NULL && s->op != NULL && s->id == id ? s : NULL;
}

static void pend_release(rs_ucx_pending_t *s)
{
    rs_ucx_ctx_t *uc = s->uc;
    RS_ASSERT(s->op != NULL);               /* released once, when its op finishes */
    RS_ASSERT(uc->pend_nfree < uc->pend_n); /* the free list has room for it */
    s->op = NULL;
    s->uep = NULL;
    s->gen = (uint16_t)(s->gen % 0xfff + 1);
    uc->pend_free[uc->pend_nfree++] = s->id & PEND_MASK;
}

/* A part of a pending request finished; the op completes after the last. */
static void pend_part_done(rs_ucx_pending_t *s, unsigned part, ucs_status_t status)
{
    if (!(s->parts & part))
        return;
    s->parts &= ~part;
    if (status != UCS_OK && s->status == UCS_OK)
        s->status = status;
    if (s->parts != 0)
        return;
    rs_op_t *op = s->op;
    ucs_status_t st = s->status;
    pend_release(s);
    rs_tp_op_complete(op, rs_ucx_status(st));
}

void rs_ucx_amrma_ep_failed(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep)
{
    for (uint32_t i = 0; i < uc->pend_n; i++) {
        rs_ucx_pending_t *s = uc->pend[i];
        if (s != NULL && s->op != NULL && s->uep == uep) {
            s->uep = NULL; /* no answer can come any more */
            pend_part_done(s, PART_REPLY, UCS_ERR_CANCELED);
        }
    }
}

void rs_ucx_amrma_free(rs_ucx_ctx_t *uc)
{
    for (uint32_t i = 0; i < uc->pend_n; i++)
        free(uc->pend[i]);
    free(uc->pend);
    free(uc->pend_free);
    uc->pend = NULL;
    uc->pend_free = NULL;
    uc->pend_n = uc->pend_nfree = 0;
}

/* ---------------------------------------------------------------- requester */

static void req_sent_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    pend_part_done(user_data, PART_SEND, status);
}

static void flush_done_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    pend_part_done(user_data, PART_FLUSH, status);
}

rs_status_t rs_ucx_amrma_put(rs_ucx_ep_t *uep, rs_op_t *op, const void *src, size_t len,
                             uint64_t raddr, int notify, uint32_t imm)
{
    rs_ucx_rma_wire_t *hdr = (rs_ucx_rma_wire_t *)&op->be[0];
    rs_ucx_rma_hdr_pack(&(rs_ucx_rma_hdr_t){.dst_id = uep->peer_id,
                                            .src_id = uep->id,
                                            .kind = RS_UCX_PUT,
                                            .flags = notify ? RS_UCX_F_NOTIFY : 0,
                                            .raddr = raddr,
                                            .value = imm},
                        hdr);
    uep->used_amrma = 1;
    ucp_request_param_t p = rs_ucx_am_param(rs_ucx_op_done_cb, op, 0);
    return rs_ucx_post_result(
        op, ucp_am_send_nbx(uep->uep, RS_UCX_AM_ID, hdr, sizeof(*hdr), src, len, &p), "put (AM)");
}

/* Posts a request that waits for an answer; s->parts already set. */
static rs_status_t send_request(rs_ucx_ep_t *uep, rs_ucx_pending_t *s, const char *what)
{
    ucp_request_param_t p = rs_ucx_am_param(req_sent_cb, s, 0);
    ucs_status_ptr_t req =
        ucp_am_send_nbx(uep->uep, RS_UCX_AM_ID, &s->hdr, sizeof(s->hdr), NULL, 0, &p);
    if (UCS_PTR_IS_ERR(req)) {
        pend_release(s);
        return rs_ucx_post_error(req, what);
    }
    uep->used_amrma = 1;
    if (req == NULL)
        pend_part_done(s, PART_SEND, UCS_OK);
    return RS_OK;
}

static rs_ucx_pending_t *new_request(rs_ucx_ep_t *uep, rs_op_t *op, uint16_t kind, uint64_t raddr,
                                     uint64_t value)
{
    rs_ucx_pending_t *s = pend_alloc(rs_ucx_ctx(uep->ctx));
    if (s == NULL) {
        rs_error("out of memory for a request");
        return NULL;
    }
    s->op = op;
    s->uep = uep;
    s->parts = PART_SEND | PART_REPLY;
    rs_ucx_rma_hdr_pack(&(rs_ucx_rma_hdr_t){.dst_id = uep->peer_id,
                                            .src_id = uep->id,
                                            .kind = kind,
                                            .op_id = s->id,
                                            .raddr = raddr,
                                            .value = value},
                        &s->hdr);
    return s;
}

rs_status_t rs_ucx_amrma_get(rs_ucx_ep_t *uep, rs_op_t *op, void *dst, size_t len, uint64_t raddr)
{
    rs_ucx_pending_t *s = new_request(uep, op, RS_UCX_GET_REQ, raddr, len);
    if (s == NULL)
        return RS_ERR_NOMEM;
    s->dst = dst;
    s->len = len;
    return send_request(uep, s, "get (AM)");
}

rs_status_t rs_ucx_amrma_fetch_add(rs_ucx_ep_t *uep, rs_op_t *op, uint64_t raddr, uint64_t add)
{
    rs_ucx_pending_t *s = new_request(uep, op, RS_UCX_FADD_REQ, raddr, add);
    return s == NULL ? RS_ERR_NOMEM : send_request(uep, s, "fetch-add (AM)");
}

rs_status_t rs_ucx_amrma_flush(rs_ucx_ep_t *uep, rs_op_t *op)
{
    rs_ucx_pending_t *s = new_request(uep, op, RS_UCX_FLUSH_REQ, 0, 0);
    if (s == NULL)
        return RS_ERR_NOMEM;
    /* UCX's own operations on this endpoint (mapped keys) are flushed too. */
    s->parts |= PART_FLUSH;
    rs_status_t st = send_request(uep, s, "flush (AM)");
    if (st != RS_OK)
        return st;
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = flush_done_cb,
        .user_data = s,
    };
    ucs_status_ptr_t req = ucp_ep_flush_nbx(uep->uep, &p);
    if (!UCS_PTR_IS_PTR(req))
        pend_part_done(s, PART_FLUSH, UCS_PTR_STATUS(req));
    return RS_OK;
}

/* ------------------------------------------------------------------ target */

/* The registered region holding [addr, addr+len) with the access, or NULL. */
static const rs_ucx_mr_t *region_find(rs_ucx_ctx_t *uc, uint64_t addr, uint64_t len,
                                      unsigned access)
{
    rs_list_t *pos;
    for (pos = uc->regions.next; pos != &uc->regions; pos = pos->next) {
        const rs_ucx_mr_t *m = RS_CONTAINER_OF(pos, rs_ucx_mr_t, link);
        if (addr >= m->base && addr - m->base <= m->len && len <= m->len - (addr - m->base))
            return (m->access & access) == access ? m : NULL;
    }
    return NULL;
}

static void reply_sent_cb(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    ucp_request_free(request);
    free(user_data);
}

/* Answers a request: header copied (freed when sent), data from our memory. */
static void reply(rs_ucx_ep_t *uep, const rs_ucx_rma_hdr_t *req, uint16_t kind, uint16_t flags,
                  uint64_t value, const void *data, size_t len)
{
    if (uep->uep == NULL)
        return;
    rs_ucx_rma_wire_t *hdr = malloc(sizeof(*hdr));
    if (hdr == NULL) {
        rs_error("out of memory answering a request (dropped)");
        return;
    }
    rs_ucx_rma_hdr_pack(&(rs_ucx_rma_hdr_t){.dst_id = uep->peer_id,
                                            .src_id = uep->id,
                                            .kind = kind,
                                            .flags = flags,
                                            .op_id = req->op_id,
                                            .value = value},
                        hdr);
    ucp_request_param_t p = rs_ucx_am_param(reply_sent_cb, hdr, 0);
    ucs_status_ptr_t r = ucp_am_send_nbx(uep->uep, RS_UCX_AM_ID, hdr, sizeof(*hdr), data, len, &p);
    if (!UCS_PTR_IS_PTR(r))
        free(hdr); /* sent at once, or failed: the requester's deadline covers it */
}

static void on_put(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep, const rs_ucx_rma_hdr_t *h, const void *data,
                   size_t len)
{
    if (region_find(uc, h->raddr, len, RS_MEM_REMOTE_WRITE) == NULL) {
        rs_warn("refused a %zu-byte put outside our writable regions", len);
        return;
    }
    memcpy((void *)(uintptr_t)h->raddr, data, len);
    if (h->flags & RS_UCX_F_NOTIFY)
        rs_tp_notify_recv(uep->ep, (uint32_t)h->value);
}

static void on_get(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep, const rs_ucx_rma_hdr_t *h)
{
    if (region_find(uc, h->raddr, h->value, RS_MEM_REMOTE_READ) == NULL) {
        rs_warn("refused a %llu-byte get outside our readable regions",
                (unsigned long long)h->value);
        reply(uep, h, RS_UCX_GET_REP, RS_UCX_F_REFUSED, 0, NULL, 0);
        return;
    }
    reply(uep, h, RS_UCX_GET_REP, 0, h->value, (const void *)(uintptr_t)h->raddr, h->value);
}

static void on_fadd(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep, const rs_ucx_rma_hdr_t *h)
{
    if (h->raddr % 8 != 0 || region_find(uc, h->raddr, 8, RS_MEM_REMOTE_ATOMIC) == NULL) {
        rs_warn("refused a fetch-add outside our atomic regions");
        reply(uep, h, RS_UCX_FADD_REP, RS_UCX_F_REFUSED, 0, NULL, 0);
        return;
    }
    uint64_t old = __atomic_fetch_add((uint64_t *)(uintptr_t)h->raddr, h->value, __ATOMIC_SEQ_CST);
    reply(uep, h, RS_UCX_FADD_REP, 0, old, NULL, 0);
}

static void on_answer(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep, const rs_ucx_rma_hdr_t *h,
                      const void *data, size_t len)
{
    rs_ucx_pending_t *s = pend_lookup(uc, h->op_id);
    if (s == NULL || s->uep != uep) {
        rs_debug("answer for no pending request (dropped)");
        return;
    }
    ucs_status_t st = (h->flags & RS_UCX_F_REFUSED) ? UCS_ERR_INVALID_ADDR : UCS_OK;
    if (st == UCS_OK && h->kind == RS_UCX_GET_REP) {
        if (len == s->len)
            memcpy(s->dst, data, len);
        else
            st = UCS_ERR_MESSAGE_TRUNCATED;
    } else if (st == UCS_OK && h->kind == RS_UCX_FADD_REP) {
        s->op->result = h->value;
    }
    pend_part_done(s, PART_REPLY, st);
}

void rs_ucx_amrma_recv(rs_ctx_t *ctx, const rs_ucx_rma_hdr_t *h, const void *data, size_t len)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    rs_ucx_ep_t *uep = rs_ucx_ep_lookup(uc, h->dst_id);
    /* Memory is touched only for a live endpoint past the handshake. */
    if (uep == NULL || uep->ep == NULL || uep->peer_id != h->src_id ||
        uep->ep->state != RS_EP_READY)
        return;
    switch (h->kind) {
        case RS_UCX_PUT:
            on_put(uc, uep, h, data, len);
            break;
        case RS_UCX_GET_REQ:
            on_get(uc, uep, h);
            break;
        case RS_UCX_FADD_REQ:
            on_fadd(uc, uep, h);
            break;
        case RS_UCX_FLUSH_REQ:
            reply(uep, h, RS_UCX_FLUSH_REP, 0, 0, NULL, 0);
            break;
        case RS_UCX_GET_REP:
        case RS_UCX_FADD_REP:
        case RS_UCX_FLUSH_REP:
            on_answer(uc, uep, h, data, len);
            break;
        default:
            rs_warn("RMA message of unknown kind %u dropped", h->kind);
            break;
    }
}
