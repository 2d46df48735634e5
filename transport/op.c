/*
 * The op pool and deferred completion. rs_tp_op_complete only queues an op on
 * ctx->done; callbacks run from progress (rs_tp_ops_drain), so no callback
 * ever runs inside the call that posted its op, whatever the backend does.
 */
#include "transport/internal.h"

#include "common/assert.h"
#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

#define RS_OP_CHUNK 256

typedef struct rs_op_chunk {
    rs_list_t link;
    rs_op_priv_t ops[RS_OP_CHUNK];
} rs_op_chunk_t;

static int op_pool_grow(rs_ctx_t *ctx)
{
    rs_op_chunk_t *chunk = malloc(sizeof(*chunk));
    if (chunk == NULL)
        return -1;
    rs_list_add_tail(&ctx->op_chunks, &chunk->link);
    for (size_t i = 0; i < RS_OP_CHUNK; i++)
        rs_list_add_tail(&ctx->op_free, &chunk->ops[i].op.link);
    return 0;
}

rs_op_t *rs_tp_op_alloc(rs_ctx_t *ctx, rs_ep_t *ep, rs_op_kind_t kind, rs_op_cb_t cb, void *arg)
{
    RS_ASSERT(ep != NULL && ep->ctx == ctx);
    if (rs_list_empty(&ctx->op_free) && op_pool_grow(ctx) != 0) {
        rs_error("out of memory growing the op pool");
        return NULL;
    }
    rs_op_priv_t *p = RS_CONTAINER_OF(ctx->op_free.next, rs_op_priv_t, op.link);
    rs_list_del(&p->op.link);
    p->ctx = ctx;
    p->op.ep = ep;
    p->op.cb = cb;
    p->op.arg = arg;
    p->op.deadline_ns = rs_now_coarse_ns() + ctx->timeout_ns;
    p->op.old_p = NULL;
    p->op.result = 0;
    p->op.kind = kind;
    p->op.user_done = 0;
    p->status = RS_OK;
    p->be_done = 0;
    p->orphan = 0;
    /* Oldest first: the list head always has the earliest deadline. */
    rs_list_add_tail(&ep->ops, &p->op.link);
    ep->n_ops++;
    ctx->n_ops_live++;
    return &p->op;
}

static void op_release(rs_ctx_t *ctx, rs_op_t *op)
{
    RS_ASSERT(ctx->n_ops_live > 0);
    ctx->n_ops_live--;
    rs_list_add_head(&ctx->op_free, &op->link);
}

static void op_detach(rs_op_t *op)
{
    RS_ASSERT(op->ep != NULL && op->ep->n_ops > 0);
    rs_list_del(&op->link);
    op->ep->n_ops--;
    op->ep = NULL;
}

void rs_tp_op_unpost(rs_op_t *op)
{
    rs_ctx_t *ctx = op->ep->ctx;
    op_detach(op);
    op_release(ctx, op);
}

void rs_tp_op_complete(rs_op_t *op, rs_status_t status)
{
    rs_op_priv_t *p = RS_OP_PRIV(op);
    RS_ASSERT(!p->be_done); /* a backend completes each op exactly once */
    if (p->be_done) {
        rs_error("backend completed op %p twice (ignored)", (void *)op);
        return;
    }
    p->be_done = 1;
    if (op->user_done) {
        /* Forced earlier: the user has (or will have) had the callback. */
        if (p->orphan)
            op_release(p->ctx, op);
        return;
    }
    rs_ep_t *ep = op->ep;
    rs_ctx_t *ctx = ep->ctx;
    /* A dead or closing endpoint reports why, not the backend's view of it. */
    if (status != RS_OK) {
        if (ep->state == RS_EP_CLOSING)
            status = RS_ERR_CANCELED;
        else if (ep->state == RS_EP_DEAD && ep->status != RS_OK)
            status = ep->status;
    }
    op_detach(op);
    p->status = status;
    rs_list_add_tail(&ctx->done, &op->link);
    rs_tp_thread_kick(ctx);
}

void rs_tp_op_force(rs_op_t *op, rs_status_t status)
{
    rs_op_priv_t *p = RS_OP_PRIV(op);
    rs_ctx_t *ctx = p->ctx;
    RS_ASSERT(!op->user_done && !p->be_done); /* forced only while outstanding */
    op_detach(op);
    op->user_done = 1;
    p->status = status;
    rs_list_add_tail(&ctx->done, &op->link);
}

unsigned rs_tp_ops_drain(rs_ctx_t *ctx)
{
    unsigned n = 0;
    while (!rs_list_empty(&ctx->done)) {
        rs_op_priv_t *p = rs_list_first(&ctx->done, rs_op_priv_t, op.link);
        rs_op_t *op = &p->op;
        rs_list_del(&op->link);
        RS_ASSERT(op->ep == NULL); /* detached from its endpoint when queued */
        if (op->kind == RS_OP_FETCH_ADD && p->status == RS_OK && op->old_p != NULL)
            *op->old_p = op->result;
        rs_op_cb_t cb = op->cb;
        void *arg = op->arg;
        rs_status_t status = p->status;
        if (p->be_done) {
            op_release(ctx, op);
        } else {
            /* Forced: kept (linked to nothing) until the backend lets go of it. */
            p->orphan = 1;
        }
        if (cb != NULL) {
            ctx->in_cb++;
            cb(arg, status);
            ctx->in_cb--;
        }
        n++;
    }
    return n;
}

void rs_tp_ops_pool_free(rs_ctx_t *ctx)
{
    if (ctx->n_ops_live != 0)
        rs_debug("%zu ops never completed by the backend", ctx->n_ops_live);
    while (!rs_list_empty(&ctx->op_chunks)) {
        rs_op_chunk_t *chunk = rs_list_first(&ctx->op_chunks, rs_op_chunk_t, link);
        rs_list_del(&chunk->link);
        free(chunk);
    }
    rs_list_init(&ctx->op_free);
}
