/*
 * Posting writes: each waiting batch with granted room goes as a notified
 * put into its partition's grant (merged writes as one put each), at most
 * max_inflight bytes in flight per worker; their completions free the
 * batches and resume posting.
 */
#include "pusher/internal.h"

#include "common/assert.h"
#include "common/clock.h"

static void on_put_done(void *arg, rs_status_t status)
{
    rs_psend_t *sd = arg;
    rs_pbuf_int_t *b = sd->b;
    pworker_t *w = sd->w;
    rs_pusher_t *p = w->p;
    RS_ASSERT(w->inflight >= b->frame_len && b->refs > 0); /* completes a put that was posted */
    w->inflight -= b->frame_len;
    w->heard_at = rs_now_coarse_ns();
    if (status != RS_OK && p->replicas == 1)
        rs_push_fail(p, status, "write to a worker");
    else if (status != RS_OK &&
             rs_push_err(p) == RS_OK) /* else: canceled by a failure or destroy */
        rs_push_worker_lost(w, status, "a write failed");
    rs_push_batch_unref(p, b);
    if (rs_push_err(p) != RS_OK || rs_push_worker_is(w, RS_PW_LOST))
        rs_push_drop_pending(w);
    else if (w->inflight_full || w->n_retires > w->ret_head || w->reclaim)
        rs_push_try_post(w); /* else nothing waits for this room: no scan per completion */
}

/* A merged write's put completed (merge.c). */
static void on_merge_done(void *arg, rs_status_t status)
{
    pmerge_t *m = arg;
    pworker_t *w = m->w;
    rs_pusher_t *p = w->p;
    RS_ASSERT(w->inflight >= m->used && p->m_inflight > 0);
    w->inflight -= m->used;
    p->m_inflight--;
    w->heard_at = rs_now_coarse_ns();
    if (status != RS_OK && p->replicas == 1)
        rs_push_fail(p, status, "write to a worker");
    else if (status != RS_OK && rs_push_err(p) == RS_OK)
        rs_push_worker_lost(w, status, "a write failed");
    rs_push_merge_release(m);
    if (rs_push_err(p) != RS_OK || rs_push_worker_is(w, RS_PW_LOST))
        rs_push_drop_pending(w);
    else if (w->inflight_full || w->n_retires > w->ret_head || w->reclaim || rs_push_merge_wants(w))
        rs_push_try_post(w);
}

/* Posts w's granted merged writes while in-flight room lasts; RS_OK or the failed post's. */
static rs_status_t post_merged(pworker_t *w)
{
    rs_pusher_t *p = w->p;
    pmerge_t *m;
    while ((m = rs_push_merge_next(w)) != NULL) {
        w->inflight += m->used;
        w->batches += m->n;
        rs_status_t s = rs_put_notify(w->ep, m->buf->pub.data, m->used, rs_push_q_mr(p->q), w->rkey,
                                      m->off, rs_imm_make(m->slot, 0), on_merge_done, m);
        if (s != RS_OK) {
            w->inflight -= m->used;
            w->batches -= m->n;
            rs_push_merge_release(m);
            return s;
        }
        p->m_inflight++;
        p->stats.merged_writes++;
        p->stats.merged_batches += m->n;
        /* Written whole: retired with the next request (its bytes settle it at the worker). */
        pgrant_t g = {.slot = m->slot, .off = m->off, .len = m->used, .used = m->used};
        rs_push_retire(w, RS_MERGED_PART, &g);
    }
    return RS_OK;
}

/* Queues a streaming partition for a next grant once half of its current one is used. */
static void maybe_ahead(pworker_t *w, uint32_t part, ppart_t *pp, uint64_t need)
{
    pp->ahead_want = need;
    if (pp->ahead_queued || pp->ahead_out || pp->ahead_refused || pp->next.len > 0 ||
        rs_push_room(&pp->cur) > pp->cur.len / 2)
        return;
    pp->ahead_queued = 1;
    RS_ASSERT(w->n_ahead < w->p->desc.n_partitions); /* each partition once */
    w->ahead[w->n_ahead++] = part;
}

/* A send whose partition's grant has no room for it: queued behind its blocked batches. */
static void block(pworker_t *w, rs_psend_t *sd, ppart_t *pp)
{
    /* Waits for a grant, behind the partition's earlier batches: not scanned again. */
    rs_list_del(&sd->link);
    rs_list_add_tail(&pp->blocked, &sd->link);
    pp->n_blocked++;
    w->n_blocked++;
    rs_push_needs_grant(w, sd->b->partition, pp);
}

/* A write failed to post: with R >= 2 w is lost, else the pusher fails. */
static void post_failed(pworker_t *w, rs_status_t s)
{
    rs_pusher_t *p = w->p;
    if (p->replicas > 1) {
        rs_push_worker_lost(w, s, "posting a write");
    } else {
        rs_push_fail(p, s, "posting a write");
        rs_push_drop_pending(w);
    }
}

enum { POST_NEXT, POST_FULL, POST_FAILED };

/*
 * Posts the pending send sd into its partition's grant, or blocks it (no
 * room): POST_NEXT; POST_FULL: w's in-flight bound stops posting;
 * POST_FAILED: the post failed (w lost or the pusher failed). *again: a
 * fault-injected copy went back to the head of pending.
 */
static int post_send(pworker_t *w, rs_psend_t *sd, int *again)
{
    rs_pusher_t *p = w->p;
    rs_pbuf_int_t *b = sd->b;
    ppart_t *pp = &w->parts[b->partition];
    uint64_t need = rs_sproto_round(b->frame_len);
    if (pp->n_blocked == 0 && rs_push_room(&pp->cur) < need && rs_push_room(&pp->next) >= need) {
        rs_push_retire(w, b->partition, &pp->cur);
        pp->cur = pp->next;
        pp->next = (pgrant_t){0};
    }
    if (pp->n_blocked > 0 || rs_push_room(&pp->cur) < need) {
        block(w, sd, pp);
        return POST_NEXT;
    }
    if (w->inflight > 0 && w->inflight + b->frame_len > p->cfg.max_inflight) {
        w->inflight_full = 1;
        return POST_FULL;
    }
    pgrant_t *g = &pp->cur;
    uint64_t roff = g->off + g->used;
    uint32_t imm = rs_imm_make(g->slot, g->used);
    g->used += need;
    /* The send's queue reference becomes its put's. */
    rs_list_del(&sd->link);
    RS_ASSERT(pp->n_pending > 0);
    pp->n_pending--;
    if (sd->dup > 0) { /* fault injection: the same batch again, to the next range */
        sd->dup--;
        rs_list_add_head(&w->pending, &sd->link);
        pp->n_pending++;
        b->refs++;
        *again = 1;
    }
    w->inflight += b->frame_len;
    w->batches++;
    rs_status_t s = rs_put_notify(w->ep, b->frame, b->frame_len, rs_push_q_mr(p->q), w->rkey, roff,
                                  imm, on_put_done, sd);
    if (s != RS_OK) {
        w->inflight -= b->frame_len;
        w->batches--;
        rs_push_batch_unref(p, b); /* a queued copy (dup) still holds it: dropped below */
        post_failed(w, s);
        return POST_FAILED;
    }
    if (b->full) {
        maybe_ahead(w, b->partition, pp, need);
    } else if (pp->n_pending == 0) {
        /*
         * A partition that does not stream gives its grant back once
         * nothing of it waits: with many small partitions, held
         * grants would pin a slot and an extent each until commit.
         */
        rs_push_retire(w, b->partition, &pp->cur);
        rs_push_retire(w, b->partition, &pp->next);
    }
    return POST_NEXT;
}

/*
 * Posts every waiting batch that has granted room, in order within each
 * partition (a partition stops at its first batch that does not fit), and
 * asks for space for the rest.
 */
void rs_push_try_post(pworker_t *w)
{
    rs_pusher_t *p = w->p;
    if (rs_push_err(p) != RS_OK || rs_push_worker_is(w, RS_PW_LOST)) {
        rs_push_drop_pending(w);
        return;
    }
    w->inflight_full = 0;
    rs_status_t ms = post_merged(w);
    if (ms != RS_OK) {
        post_failed(w, ms);
        return;
    }
    int again;
    do {
        again = 0;
        rs_list_t *pos, *tmp;
        rs_list_for_each_safe(pos, tmp, &w->pending)
        {
            int r = post_send(w, RS_CONTAINER_OF(pos, rs_psend_t, link), &again);
            if (r == POST_FAILED)
                return;
            if (r == POST_FULL || again)
                break; /* again: the copy goes in the next pass */
        }
    } while (again);
    if (w->n_needy > 0 || w->n_ahead > 0 || w->n_retires > w->ret_head || w->reclaim ||
        rs_push_merge_wants(w))
        rs_push_request_grants(w);
}
