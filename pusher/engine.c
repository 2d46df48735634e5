/*
 * The push engine: runs on the push queue's thread. Frames each full buffer
 * (codec none: sealed in place; lz4/snappy: compressed into a sized
 * registered buffer), asks each of the partition's replicas' workers for
 * space in bulk, writes the frame to each with a notified put into the
 * granted range (one buffer, R puts: the transport copies), keeps at most
 * max_inflight bytes in flight per worker, and finally sends the map commit.
 * With R >= 2 a worker that dies is dropped and the others go on
 * (docs/shuffle.md, "Replication and failover").
 */
#include "pusher/internal.h"

#include "common/assert.h"
#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

/* A worker full and unable to spill (disk full): given up after this at most. */
#define RS_PUSH_SPILL_FAIL_MS 2000

void rs_push_fail(rs_pusher_t *p, rs_status_t status, const char *why)
{
    int expected = RS_OK;
    if (atomic_compare_exchange_strong(&p->error, &expected, (int)status))
        rs_error("pusher (shuffle %u map %u attempt %u): %s: %s", p->desc.shuffle_id, p->map_id,
                 p->attempt, why, rs_strerror(status));
    rs_push_q_fail(p->q, status);
}

static rs_status_t perr(rs_pusher_t *p)
{
    return (rs_status_t)atomic_load(&p->error);
}

static void batch_release(rs_pusher_t *p, rs_pbuf_int_t *b)
{
    rs_pushq_release(p->q, &b->pub);
}

/* A send left its list or its put completed: the buffer goes back after the last one. */
static void batch_unref(rs_pusher_t *p, rs_pbuf_int_t *b)
{
    RS_ASSERT(b->refs > 0);
    if (--b->refs == 0)
        batch_release(p, b);
}

/* ----------------------------------------------------------------- grants */

static uint64_t room(const pgrant_t *g)
{
    return g->len - g->used;
}

static void worker_lost(pworker_t *w, rs_status_t status, const char *why);

/* A message to w could not go out: with R >= 2 w is lost, else the pusher fails. */
static void send_failed(pworker_t *w, rs_status_t status, const char *what)
{
    if (w->p->replicas > 1)
        worker_lost(w, status, what);
    else
        rs_push_fail(w->p, status, what);
}

/* Remembers that the pusher is done with g; the next request tells the worker. */
static void retire(pworker_t *w, uint32_t partition, pgrant_t *g)
{
    if (g->len == 0)
        return;
    if (w->n_retires == w->cap_retires) {
        uint32_t cap = w->cap_retires ? 2 * w->cap_retires : 64;
        pretire_t *n = realloc(w->retires, cap * sizeof(*n));
        if (n == NULL) {
            /* The worker then learns at the commit; until then the room stays held. */
            rs_warn("pusher: out of memory queueing a grant retire");
            *g = (pgrant_t){0};
            return;
        }
        w->retires = n;
        w->cap_retires = cap;
    }
    w->retires[w->n_retires++] =
        (pretire_t){.partition = partition, .slot = g->slot, .used = g->used};
    *g = (pgrant_t){0};
}

/* Worker short of memory: every grant not needed by a waiting batch goes back. */
static void reclaim(pworker_t *w)
{
    w->reclaim = 0;
    for (uint32_t i = 0; i < w->p->desc.n_partitions; i++) {
        ppart_t *pp = &w->parts[i];
        w->p->stats.reclaimed += (pp->next.len > 0) + (pp->n_pending == 0 && pp->cur.len > 0);
        retire(w, i, &pp->next);
        if (pp->n_pending == 0)
            retire(w, i, &pp->cur);
        pp->ahead_refused = 1; /* no asking ahead until a grant comes without pressure */
    }
}

static int in_backoff(const pworker_t *w)
{
    return w->retry_at != 0 && rs_now_coarse_ns() < w->retry_at;
}

/*
 * One request per worker at a time: retires first, then space for the
 * partitions whose waiting batches do not fit (their exhausted grant
 * retires with it), then next grants asked ahead for streaming partitions.
 */
static void request_grants(pworker_t *w)
{
    rs_pusher_t *p = w->p;
    if (w->req_out || w->commit_sent)
        return; /* after the commit the worker has retired every grant: nothing to ask or tell */
    /* Close is still handing over last buffers: asked for together after (merged writes now). */
    int flushing = atomic_load_explicit(&p->flushing, memory_order_relaxed);
    if (flushing && !rs_push_merge_wants(w))
        return;
    if (w->reclaim)
        reclaim(w);
    /*
     * Closing, the commit retires every grant left: a request of retires
     * or grants ahead alone would only put a round trip before the next
     * one that carries space a last batch waits for.
     */
    int closing = atomic_load_explicit(&p->closing, memory_order_relaxed);
    if (closing && w->n_needy == 0 && !rs_push_merge_wants(w))
        return;
    int backoff = in_backoff(w);
    size_t max_n = rs_sproto_grant_max(p->msg_max);
    size_t max_req = rs_sproto_grant_req_max(p->msg_max);
    if (max_req < max_n)
        max_n = max_req;
    uint8_t *buf = p->msg_buf;
    /* Retires first (the worker frees before it grants), but leave room for what waits. */
    int waits = w->n_needy > 0 || rs_push_merge_wants(w);
    uint32_t n = 0, n_ret = 0, ret_max = waits ? (uint32_t)max_n / 2 : (uint32_t)max_n;
    for (; w->ret_head + n_ret < w->n_retires && n < ret_max; n_ret++, n++) {
        const pretire_t *rt = &w->retires[w->ret_head + n_ret];
        uint32_t flags = rt->partition == RS_MERGED_PART ? RS_GRANT_MERGED : 0;
        rs_sproto_grant_want_put(buf, p->msg_max, n,
                                 &(rs_grant_want_t){.partition = rt->partition,
                                                    .flags = flags,
                                                    .retire_slot = rt->slot,
                                                    .retire_used = rt->used});
    }
    /* Merged writes waiting for their grant (merge.c): one entry each. */
    if (!backoff)
        n = rs_push_merge_ask(w, buf, p->msg_max, n, (uint32_t)max_n);
    /* Partitions whose first blocked batch needs space, in the order they blocked. */
    while (!backoff && !flushing && w->n_needy > 0 && n < max_n) {
        uint32_t part = w->needy[w->needy_head];
        w->needy_head = (w->needy_head + 1) % p->desc.n_partitions;
        w->n_needy--;
        ppart_t *pp = &w->parts[part];
        pp->needy = 0;
        if (pp->in_req || rs_list_empty(&pp->blocked))
            continue; /* asked for already, or unblocked meanwhile */
        rs_pbuf_int_t *b = rs_list_first(&pp->blocked, rs_psend_t, link)->b;
        uint64_t need = rs_sproto_round(b->frame_len);
        rs_grant_want_t wt = {.partition = part,
                              .flags = b->full ? RS_GRANT_BULK : 0,
                              .want = need,
                              .retire_slot = RS_SLOT_NONE};
        if (pp->cur.len > 0) { /* exhausted: it retires with this request */
            wt.retire_slot = pp->cur.slot;
            wt.retire_used = pp->cur.used;
            pp->cur = (pgrant_t){0};
        }
        retire(w, part, &pp->next); /* too small for this batch */
        rs_sproto_grant_want_put(buf, p->msg_max, n++, &wt);
        pp->in_req = 1;
    }
    /* Next grants for streaming partitions, so their writes never wait for a round trip. */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < w->n_ahead; i++) {
        uint32_t part = w->ahead[i];
        ppart_t *pp = &w->parts[part];
        if (closing || flushing || pp->in_req || pp->next.len > 0 || pp->cur.len == 0 ||
            pp->ahead_refused) {
            pp->ahead_queued = 0;
            continue;
        }
        if (backoff || n == max_n) {
            w->ahead[kept++] = part;
            continue;
        }
        pp->ahead_queued = 0;
        pp->ahead_out = 1;
        pp->in_req = 1;
        rs_sproto_grant_want_put(buf, p->msg_max, n++,
                                 &(rs_grant_want_t){.partition = part,
                                                    .flags = RS_GRANT_AHEAD | RS_GRANT_BULK,
                                                    .want = pp->ahead_want,
                                                    .retire_slot = RS_SLOT_NONE});
    }
    w->n_ahead = kept;
    if (n == 0)
        return;
    rs_smsg_grant_req_t m = {.status = RS_OK, .req_id = ++w->req_id, .n = n};
    size_t len;
    rs_status_t s = rs_sproto_grant_req_encode(&m, buf, p->msg_max, &len);
    if (s == RS_OK)
        s = rs_msg_send(w->ep, RS_SMSG_GRANT_REQ, buf, len, NULL, NULL);
    if (s != RS_OK) {
        send_failed(w, s, "sending a grant request");
        return;
    }
    w->ret_head += n_ret;
    if (w->ret_head == w->n_retires) {
        w->ret_head = w->n_retires = 0;
    } else if (w->ret_head > w->n_retires / 2) { /* compact now and then, not per request */
        memmove(w->retires, w->retires + w->ret_head,
                (w->n_retires - w->ret_head) * sizeof(*w->retires));
        w->n_retires -= w->ret_head;
        w->ret_head = 0;
    }
    w->req_out = 1;
    p->stats.grant_requests++;
}

static int holds(const rs_pusher_t *p, uint32_t part, uint32_t w);

void rs_push_prefetch(rs_pusher_t *p, const uint32_t *hint)
{
    size_t max_n = rs_sproto_grant_req_max(p->msg_max);
    if (rs_sproto_grant_max(p->msg_max) < max_n)
        max_n = rs_sproto_grant_max(p->msg_max);
    for (uint32_t i = 0; i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        if (w->dead || !w->attached || w->attach_status != RS_OK || w->req_out)
            continue;
        uint32_t n = 0;
        for (uint32_t part = 0; part < p->desc.n_partitions && n < max_n; part++) {
            if (hint[part] == 0 || !holds(p, part, w->index))
                continue;
            if (hint[part] + RS_FRAME_HEADER_SIZE < p->merge_below)
                continue; /* its batch will go in a merged write */
            rs_grant_want_t wt = {.partition = part,
                                  .want = rs_sproto_round(hint[part] + RS_FRAME_HEADER_SIZE),
                                  .retire_slot = RS_SLOT_NONE};
            rs_sproto_grant_want_put(p->msg_buf, p->msg_max, n++, &wt);
            w->parts[part].in_req = 1;
        }
        if (n == 0)
            continue;
        rs_smsg_grant_req_t m = {.status = RS_OK, .req_id = ++w->req_id, .n = n};
        size_t len;
        rs_status_t s = rs_sproto_grant_req_encode(&m, p->msg_buf, p->msg_max, &len);
        if (s == RS_OK)
            s = rs_msg_send(w->ep, RS_SMSG_GRANT_REQ, p->msg_buf, len, NULL, NULL);
        if (s != RS_OK) { /* a hint only: close asks in the usual way */
            for (uint32_t part = 0; part < p->desc.n_partitions; part++)
                w->parts[part].in_req = 0;
            continue;
        }
        w->req_out = 1;
        w->prefetch_id = m.req_id;
        p->stats.grant_requests++;
    }
}

/* ------------------------------------------------------------------ puts */

static void try_post(pworker_t *w);

static void drop_list(pworker_t *w, rs_list_t *list)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, list)
    {
        rs_psend_t *sd = RS_CONTAINER_OF(pos, rs_psend_t, link);
        rs_list_del(&sd->link);
        w->parts[sd->b->partition].n_pending--;
        batch_unref(w->p, sd->b);
    }
}

static void drop_pending(pworker_t *w)
{
    rs_push_merge_drop(w);
    drop_list(w, &w->pending);
    for (uint32_t i = 0; w->n_blocked > 0 && i < w->p->desc.n_partitions; i++) {
        drop_list(w, &w->parts[i].blocked);
        w->n_blocked -= w->parts[i].n_blocked;
        w->parts[i].n_blocked = 0;
    }
    w->n_blocked = 0;
}

/* A partition whose batches wait for space joins the queue of those to ask for (once). */
static void needs_grant(pworker_t *w, uint32_t part, ppart_t *pp)
{
    if (pp->needy || pp->in_req || pp->n_blocked == 0)
        return;
    pp->needy = 1;
    w->needy[(w->needy_head + w->n_needy++) % w->p->desc.n_partitions] = part;
}

/* A grant came: the partition's blocked batches go back to pending, in order. */
static void unblock(pworker_t *w, ppart_t *pp)
{
    while (!rs_list_empty(&pp->blocked)) {
        rs_psend_t *sd = rs_list_first(&pp->blocked, rs_psend_t, link);
        rs_list_del(&sd->link);
        rs_list_add_tail(&w->pending, &sd->link);
    }
    w->n_blocked -= pp->n_blocked;
    pp->n_blocked = 0;
}

/*
 * With R >= 2: w is gone (dead, or silent past the peer timeout). Its queued
 * sends are dropped (the other holders have theirs), its puts in flight
 * complete with errors, and nothing more is sent to it; its commit is not
 * waited for. Partitions with no batch yet move to the next live workers of
 * their rings; started ones go on with their other holders (the batches
 * already written would have to be read back from one of them to copy them
 * to a new holder: docs/shuffle.md). The pusher fails only when a partition
 * has no holder left.
 */
static void worker_lost(pworker_t *w, rs_status_t status, const char *why)
{
    rs_pusher_t *p = w->p;
    if (w->dead)
        return;
    w->dead = 1;
    w->req_out = 0;
    p->stats.workers_lost++;
    rs_push_lane_conn_lost(w->conn); /* the client's other lanes hear of it once */
    rs_warn("pusher (shuffle %u map %u attempt %u): worker %s lost (%s: %s): its partitions go on "
            "with their other replicas",
            p->desc.shuffle_id, p->map_id, p->attempt, p->desc.workers[w->index], why,
            rs_strerror(status));
    drop_pending(w);
    if (!w->commit_done) {
        w->commit_done = 1;
        w->commit_status = status;
    }
    rs_push_seat_unstarted(p);
    if (!rs_push_replicas_live(p))
        rs_push_fail(p, status, "every replica of a partition lost");
}

/* Partition part's R holders (rs_pusher.hold). */
static uint32_t *holders(const rs_pusher_t *p, uint32_t part)
{
    return &p->hold[(size_t)part * p->replicas];
}

int rs_push_replicas_live(const rs_pusher_t *p)
{
    for (uint32_t part = 0; part < p->desc.n_partitions; part++) {
        const uint32_t *h = holders(p, part);
        int live = 0;
        for (uint32_t k = 0; k < p->replicas && !live; k++)
            live = !p->workers[h[k]].dead;
        if (!live) {
            rs_error("pusher (shuffle %u map %u): partition %u has no live holder left",
                     p->desc.shuffle_id, p->map_id, part);
            return 0;
        }
    }
    return 1;
}

/*
 * The first R workers of part's ring that are not lost; with fewer live,
 * lost ones fill the rest (never sent to). Distinct workers either way.
 */
static void seat(rs_pusher_t *p, uint32_t part)
{
    uint32_t nw = p->desc.n_workers, n = 0;
    uint32_t *h = holders(p, part);
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t j = 0; j < nw && n < p->replicas; j++) {
            uint32_t w = (p->place[part] + j) % nw;
            if (p->workers[w].dead == pass)
                h[n++] = w;
        }
    }
    RS_ASSERT(n == p->replicas); /* R <= W: rs_shuffle_replicas */
}

/* Was a batch of part framed? Then a holder counts it (one was live: else the pusher failed). */
static int started(const rs_pusher_t *p, uint32_t part)
{
    const uint32_t *h = holders(p, part);
    for (uint32_t k = 0; k < p->replicas; k++) {
        if (p->workers[h[k]].counts[part].batches > 0)
            return 1;
    }
    return 0;
}

void rs_push_seat_unstarted(rs_pusher_t *p)
{
    for (uint32_t part = 0; part < p->desc.n_partitions; part++) {
        if (!started(p, part))
            seat(p, part);
    }
}

/* Does worker w hold part? */
static int holds(const rs_pusher_t *p, uint32_t part, uint32_t w)
{
    const uint32_t *h = holders(p, part);
    for (uint32_t k = 0; k < p->replicas; k++) {
        if (h[k] == w)
            return 1;
    }
    return 0;
}

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
    else if (status != RS_OK && perr(p) == RS_OK) /* else: canceled by a failure or destroy */
        worker_lost(w, status, "a write failed");
    batch_unref(p, b);
    if (perr(p) != RS_OK || w->dead)
        drop_pending(w);
    else if (w->inflight_full || w->n_retires > w->ret_head || w->reclaim)
        try_post(w); /* else nothing waits for this room: no scan per completion */
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
    else if (status != RS_OK && perr(p) == RS_OK)
        worker_lost(w, status, "a write failed");
    rs_push_merge_release(m);
    if (perr(p) != RS_OK || w->dead)
        drop_pending(w);
    else if (w->inflight_full || w->n_retires > w->ret_head || w->reclaim || rs_push_merge_wants(w))
        try_post(w);
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
        retire(w, RS_MERGED_PART, &g);
    }
    return RS_OK;
}

/* Queues a streaming partition for a next grant once half of its current one is used. */
static void maybe_ahead(pworker_t *w, uint32_t part, ppart_t *pp, uint64_t need)
{
    pp->ahead_want = need;
    if (pp->ahead_queued || pp->ahead_out || pp->ahead_refused || pp->next.len > 0 ||
        room(&pp->cur) > pp->cur.len / 2)
        return;
    pp->ahead_queued = 1;
    w->ahead[w->n_ahead++] = part;
}

/*
 * Posts every waiting batch that has granted room, in order within each
 * partition (a partition stops at its first batch that does not fit), and
 * asks for space for the rest.
 */
static void try_post(pworker_t *w)
{
    rs_pusher_t *p = w->p;
    if (perr(p) != RS_OK || w->dead) {
        drop_pending(w);
        return;
    }
    w->inflight_full = 0;
    rs_status_t ms = post_merged(w);
    if (ms != RS_OK) {
        if (p->replicas > 1) {
            worker_lost(w, ms, "posting a write");
        } else {
            rs_push_fail(p, ms, "posting a write");
            drop_pending(w);
        }
        return;
    }
    int again;
    do {
        again = 0;
        rs_list_t *pos, *tmp;
        rs_list_for_each_safe(pos, tmp, &w->pending)
        {
            rs_psend_t *sd = RS_CONTAINER_OF(pos, rs_psend_t, link);
            rs_pbuf_int_t *b = sd->b;
            ppart_t *pp = &w->parts[b->partition];
            uint64_t need = rs_sproto_round(b->frame_len);
            if (pp->n_blocked == 0 && room(&pp->cur) < need && room(&pp->next) >= need) {
                retire(w, b->partition, &pp->cur);
                pp->cur = pp->next;
                pp->next = (pgrant_t){0};
            }
            if (pp->n_blocked > 0 || room(&pp->cur) < need) {
                /* Waits for a grant, behind the partition's earlier batches: not scanned again. */
                rs_list_del(&sd->link);
                rs_list_add_tail(&pp->blocked, &sd->link);
                pp->n_blocked++;
                w->n_blocked++;
                needs_grant(w, b->partition, pp);
                continue;
            }
            if (w->inflight > 0 && w->inflight + b->frame_len > p->cfg.max_inflight) {
                w->inflight_full = 1;
                break;
            }
            pgrant_t *g = &pp->cur;
            uint64_t roff = g->off + g->used;
            uint32_t imm = rs_imm_make(g->slot, g->used);
            g->used += need;
            /* The send's queue reference becomes its put's. */
            rs_list_del(&sd->link);
            pp->n_pending--;
            if (sd->dup > 0) { /* fault injection: the same batch again, to the next range */
                sd->dup--;
                rs_list_add_head(&w->pending, &sd->link);
                pp->n_pending++;
                b->refs++;
                again = 1;
            }
            w->inflight += b->frame_len;
            w->batches++;
            rs_status_t s = rs_put_notify(w->ep, b->frame, b->frame_len, rs_push_q_mr(p->q),
                                          w->rkey, roff, imm, on_put_done, sd);
            if (s != RS_OK) {
                w->inflight -= b->frame_len;
                w->batches--;
                batch_unref(p, b); /* a queued copy (dup) still holds it: dropped below */
                if (p->replicas > 1) {
                    worker_lost(w, s, "posting a write");
                } else {
                    rs_push_fail(p, s, "posting a write");
                    drop_pending(w);
                }
                return;
            }
            if (b->full) {
                maybe_ahead(w, b->partition, pp, need);
            } else if (pp->n_pending == 0) {
                /*
                 * A partition that does not stream gives its grant back once
                 * nothing of it waits: with many small partitions, held
                 * grants would pin a slot and an extent each until commit.
                 */
                retire(w, b->partition, &pp->cur);
                retire(w, b->partition, &pp->next);
            }
            if (again)
                break; /* the copy goes in the next pass */
        }
    } while (again);
    if (w->n_needy > 0 || w->n_ahead > 0 || w->n_retires > w->ret_head || w->reclaim ||
        rs_push_merge_wants(w))
        request_grants(w);
}

/* ----------------------------------------------------------------- take */

/*
 * Room for b's compressed frame: 1 with *s_p RS_OK (*out_p the output
 * buffer), RS_ERR_BUSY (wait: compressed batches in flight free room as they
 * complete) or another error; 0 when b goes uncompressed instead (frames
 * carry their codec). Uncompressed: a frame bound no grant holds, or no room
 * while the engine holds no output of its own, since then the slab is full
 * of the writer's buffers and nothing the engine does frees any (waiting
 * deadlocked the writer until wait_ms).
 */
static int compress_room(rs_pusher_t *p, rs_pushq_t *q, rs_pbuf_int_t *b, rs_pbuf_int_t **out_p,
                         rs_status_t *s_p)
{
    size_t bound = rs_frame_bound(p->cfg.codec, b->used);
    if (bound == 0 || bound > RS_GRANT_MAX)
        return 0;
    *s_p = rs_push_q_alloc_now(q, bound, out_p);
    if (*s_p == RS_ERR_BUSY && rs_push_q_transients(q) == 0) {
        rs_push_q_unstarve(q);
        return 0;
    }
    return 1;
}

rs_status_t rs_push_engine_take(rs_pusher_t *p, rs_pushq_t *q, rs_pbuf_int_t *b)
{
    if (perr(p) != RS_OK) {
        rs_pushq_release(q, &b->pub);
        return RS_OK;
    }
    if (b->used == 0) { /* nothing to push (an empty swap) */
        rs_pushq_release(q, &b->pub);
        return RS_OK;
    }
    /*
     * A small batch waits for room in its holders' merged writes while
     * merged writes in flight will free some; sent on its own it would cost
     * a grant and a write of its own (with 20,000 partitions, one in eight).
     */
    size_t est = b->sealed ? b->frame_len : b->used + RS_FRAME_HEADER_SIZE;
    for (uint32_t k = 0; p->merge_below != 0 && k < p->replicas; k++) {
        pworker_t *w = &p->workers[holders(p, b->partition)[k]];
        if (!rs_push_merge_room(w, est) && rs_push_merge_pending(p)) {
            for (uint32_t j = 0; j <= k; j++) /* sealed ones ask for their grants */
                try_post(&p->workers[holders(p, b->partition)[j]]);
            return RS_ERR_BUSY;
        }
    }
    rs_frame_ids_t ids = {.shuffle_id = p->desc.shuffle_id,
                          .map_id = p->map_id,
                          .attempt = p->attempt,
                          .partition = b->partition,
                          .seq = b->seq};
#ifdef RS_FAULT_INJECTION
    if (p->fault == RS_FAULT_HUGE_SEQ) /* a batch number no pusher of ours sends */
        ids.seq = UINT64_MAX;
#endif
    rs_pbuf_int_t *out = b;
    size_t flen;
    rs_status_t s;
    if (b->sealed) { /* swapped, codec none: the writer sealed it */
        out->frame = b->pub.data - RS_FRAME_HEADER_SIZE;
        flen = b->frame_len;
        s = RS_OK;
    } else if (p->cfg.codec == RS_CODEC_NONE || !compress_room(p, q, b, &out, &s)) {
        /* Zero copy: the header goes into the room before the records. */
        uint8_t *frame = b->pub.data - RS_FRAME_HEADER_SIZE;
        s = rs_frame_seal(frame, RS_FRAME_HEADER_SIZE + b->pub.len, b->used, 0, &ids, &flen);
        out->frame = frame;
    } else {
        if (s == RS_ERR_BUSY)
            return RS_ERR_BUSY; /* in-flight batches free room as they complete */
        if (s == RS_OK) {
            s = rs_frame_encode(p->cfg.codec, 0, &ids, b->pub.data, b->used, out->pub.data,
                                out->pub.len, &flen);
            out->frame = out->pub.data;
            out->partition = b->partition;
            if (s != RS_OK)
                rs_pushq_release(q, &out->pub);
        }
    }
    if (s != RS_OK) {
        rs_push_fail(p, s, "framing a batch");
        rs_pushq_release(q, &b->pub);
        return RS_OK;
    }
    rs_frame_t f;
    rs_frame_parse(out->frame, flen, &f);
    out->frame_len = (uint32_t)flen;
    /* A streaming partition: it fills buffers of the largest size it gets. */
    out->full = b->used + RS_RECORD_HDR > b->pub.len / 2 && b->pub.len >= p->part_cap / 2;
    out->refs = 0;
    uint32_t part = b->partition;
    /* One send per live holder; each worker's commit counts what it should hold (and settles
     * the holders: every later batch goes to the same ones). */
    for (uint32_t k = 0; k < p->replicas; k++) {
        pworker_t *w = &p->workers[holders(p, part)[k]];
        rs_psend_t *sd = &out->sends[k];
        *sd = (rs_psend_t){.b = out, .w = w};
        rs_list_init(&sd->link);
        if (w->dead)
            continue;
        rs_commit_entry_t *c = &w->counts[part];
        c->batches++;
        c->bytes += flen;
        c->checksum += f.checksum;
        out->refs++;
    }
    p->stats.batches++;
    p->stats.raw_bytes += b->used;
    p->stats.bytes += flen;
    if (out != b) /* compressed: the raw buffer is free for the writer again */
        rs_pushq_release(q, &b->pub);

    if (out->refs == 0) { /* no live replica: the pusher failed already (worker_lost) */
        batch_release(p, out);
        return RS_OK;
    }
    uint32_t dup = 0, n_post = 0;
    pworker_t *post[RS_SHUFFLE_REPLICAS_MAX];
#ifdef RS_FAULT_INJECTION
    if (p->fault != RS_FAULT_NONE && ++p->fault_count % (uint64_t)p->fault_every == 0) {
        if (p->fault == RS_FAULT_CORRUPT) /* after the checksum: as if damaged on the way */
            out->pub.data[(out->frame + flen - 1) - out->pub.data] ^= 0x5a;
        else if (p->fault == RS_FAULT_DUPLICATE)
            dup = 1;
    }
#endif
    for (uint32_t k = 0; k < p->replicas; k++) {
        rs_psend_t *sd = &out->sends[k];
        pworker_t *w = sd->w;
        if (w->dead)
            continue;
        post[n_post++] = w;
        if (dup == 0 && rs_push_merge_add(w, out)) { /* copied into w's merged write */
            out->refs--;
            continue;
        }
        sd->dup = dup;
        rs_list_add_tail(&w->pending, &sd->link);
        w->parts[part].n_pending++;
    }
    if (out->refs == 0) /* every send merged: the buffer goes back now */
        batch_release(p, out);
    /* Queued everywhere first: a write failing at one replica drops only its own send. */
    for (uint32_t i = 0; i < n_post; i++)
        try_post(post[i]);
    return RS_OK;
}

/* ---------------------------------------------------------------- commit */

static void send_commit(pworker_t *w)
{
    rs_pusher_t *p = w->p;
    size_t per = rs_sproto_commit_max(p->msg_max);
    uint8_t *buf = p->msg_buf;
    uint32_t part = 0;
    for (;;) {
        uint32_t n = 0;
        for (; part < p->desc.n_partitions && n < per; part++) {
            /* R >= 2: every partition held is listed, so readers can tell a holder of nothing. */
            if (w->counts[part].batches == 0 && (p->replicas == 1 || !holds(p, part, w->index)))
                continue;
            rs_commit_entry_t e = w->counts[part];
            e.partition = part;
            rs_sproto_commit_put(buf, p->msg_max, n++, &e);
        }
        int last = part >= p->desc.n_partitions;
        rs_smsg_commit_t m = {.status = RS_OK,
                              .n = n,
                              .last = (uint32_t)last,
                              .total_batches = last ? w->batches : 0};
        size_t len;
        rs_status_t s = rs_sproto_commit_encode(&m, buf, p->msg_max, &len);
        if (s == RS_OK)
            s = rs_msg_send(w->ep, RS_SMSG_COMMIT, buf, len, NULL, NULL);
        if (s != RS_OK) {
            send_failed(w, s, "sending the commit");
            break;
        }
        if (last)
            break;
    }
    w->commit_sent = 1;
}

static void commit_progress(rs_pusher_t *p)
{
    if (!atomic_load(&p->closing) || p->commit_finished)
        return;
    if (perr(p) == RS_OK && rs_push_q_outstanding(p->q) != 0)
        return;
    /* Every batch is with the engine: merged writes still filling go now. */
    for (uint32_t i = 0; perr(p) == RS_OK && i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        if (w->mcur != NULL && !w->dead) {
            rs_push_merge_seal(w);
            try_post(w);
        }
    }
    /* Compressed batches outlive their raw buffers: wait for them too. */
    for (uint32_t i = 0; perr(p) == RS_OK && i < p->desc.n_workers; i++)
        if (!rs_list_empty(&p->workers[i].pending) || p->workers[i].n_blocked != 0 ||
            p->workers[i].inflight != 0 || rs_push_merge_busy(&p->workers[i]))
            return;
    int all = 1;
    for (uint32_t i = 0; i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        if (perr(p) != RS_OK && !w->commit_done) {
            w->commit_done = 1;
            w->commit_status = perr(p);
        }
        if (!w->commit_sent && !w->commit_done)
            send_commit(w);
        all &= w->commit_done;
    }
    if (!all)
        return;
    pthread_mutex_lock(&p->lock);
    __atomic_store_n(&p->commit_finished, 1, __ATOMIC_RELEASE); /* close spins on it unlocked */
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

/* ---------------------------------------------------------------- hooks */

/*
 * A worker that owes an answer (a grant, a write's completion, the commit's
 * reply) and sent nothing for peer_timeout_ms is taken as gone: a stopped
 * process keeps its connection up, so the transport alone never says so.
 */
static void check_alive(pworker_t *w, uint64_t now)
{
    rs_pusher_t *p = w->p;
    int owed = w->req_out || w->inflight > 0 || (w->commit_sent && !w->commit_done);
    if (!owed || perr(p) != RS_OK || w->dead) {
        w->wait_since = 0;
        return;
    }
    if (w->wait_since == 0)
        w->wait_since = now;
    uint64_t since = w->heard_at > w->wait_since ? w->heard_at : w->wait_since;
    if (now - since <= RS_MS_TO_NS(rs_ctx_config(p->ctx)->peer_timeout_ms))
        return;
    if (p->replicas > 1) { /* counts as dead, exactly like a killed one */
        worker_lost(w, RS_ERR_TIMEOUT, "answered nothing for the peer timeout");
        return;
    }
    rs_error("pusher: worker %s answered nothing for %u ms (peer timeout)",
             p->desc.workers[w->index], rs_ctx_config(p->ctx)->peer_timeout_ms);
    rs_push_fail(p, RS_ERR_TIMEOUT, "worker not answering");
    w->req_out = 0;
    drop_pending(w);
    if (!w->commit_done) {
        w->commit_done = 1;
        w->commit_status = RS_ERR_TIMEOUT;
    }
}

unsigned rs_push_engine_poll(rs_pusher_t *p)
{
    unsigned n = rs_progress(p->ctx);
    if (atomic_load_explicit(&p->flushed, memory_order_acquire) &&
        atomic_exchange(&p->flushed, 0)) {
        for (uint32_t i = 0; i < p->desc.n_workers; i++)
            if (!p->workers[i].dead)
                try_post(&p->workers[i]);
        n++;
    }
    uint64_t now = rs_now_coarse_ns();
    for (uint32_t i = 0; i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        check_alive(w, now);
        if (i == 0 && rs_push_q_writer_short(p->q))
            rs_push_merge_blocks_free(p); /* kept blocks must not starve the writer */
        if (!w->dead && rs_push_merge_age(w, now))
            try_post(w); /* a merged write filling for long: sealed, asked for */
        if (!w->dead && !w->req_out && w->retry_at != 0 && now >= w->retry_at) {
            w->retry_at = 0;
            try_post(w);
        }
    }
    commit_progress(p);
    return n;
}

/* -------------------------------------------------------------- messages */

/*
 * The live worker of ep for the lane's current pusher (NULL: no pusher, not
 * ours, or lost: its late messages are ignored). A connection carries the
 * tasks of a lane one after the other: what arrives before the reply to
 * this task's attach answers an earlier task and is dropped (the worker
 * answers in order).
 */
static pworker_t *worker_any(void *arg, rs_ep_t *ep)
{
    rs_push_lane_t *l = arg;
    rs_pusher_t *p = atomic_load_explicit(&l->p, memory_order_relaxed);
    pworker_t *w = rs_ep_user(ep);
    return (p != NULL && w != NULL && w->p == p && !w->dead && w->attach_sent) ? w : NULL;
}

static pworker_t *worker_of(void *arg, rs_ep_t *ep)
{
    pworker_t *w = worker_any(arg, ep);
    return (w != NULL && w->attached) ? w : NULL;
}

static void on_attach_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    pworker_t *w = worker_any(arg, ep);
    rs_smsg_attach_reply_t r;
    if (w == NULL || w->attached)
        return;
    rs_status_t s = rs_sproto_attach_reply_decode(data, len, &r);
    if (s == RS_OK)
        s = r.status;
    if (s == RS_OK && w->conn->rkey == NULL) /* one worker process per connection: one arena */
        s = rs_rkey_unpack(ep, r.rkey, r.rkey_len, &w->conn->rkey);
    if (s == RS_OK)
        w->rkey = w->conn->rkey;
    w->attach_status = s;
    w->attached = 1;
}

static void on_grant(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    pworker_t *w = worker_of(arg, ep);
    rs_pusher_t *p = w != NULL ? w->p : NULL;
    rs_smsg_grant_t r;
    rs_status_t s = rs_sproto_grant_decode(data, len, &r);
    if (w == NULL)
        return;
    int prefetch = s == RS_OK && w->prefetch_id != 0 && r.req_id == w->prefetch_id;
    if (prefetch)
        w->prefetch_id = 0;
    if (s == RS_OK && prefetch && r.status != RS_OK) {
        r.n = 0; /* refused as a whole: a hint only, close asks again */
        for (uint32_t i = 0; i < p->desc.n_partitions; i++)
            w->parts[i].in_req = 0;
    } else if (s == RS_OK)
        s = r.status;
    w->req_out = 0;
    w->heard_at = rs_now_coarse_ns();
    if (s != RS_OK) {
        rs_push_fail(p, s, "grant request refused by a worker");
        drop_pending(w);
        return;
    }
    int backpressure = 0, granted = 0, busy = 0, spill_failed = 0;
    for (uint32_t i = 0; i < r.n; i++) {
        rs_grant_t g = rs_sproto_grant_get(&r, i);
        /* A merged write's grant (merge.c); len 0: a retire's answer, nothing waits on it. */
        if (g.partition == RS_MERGED_PART && g.status == RS_OK && g.len == 0)
            continue;
        if (g.partition == RS_MERGED_PART) {
            rs_status_t ms = rs_push_merge_granted(w, &g);
            if (ms == RS_ERR_BACKPRESSURE || ms == RS_ERR_IO) {
                backpressure = 1;
                spill_failed |= ms == RS_ERR_IO;
            } else if (ms == RS_ERR_BUSY) {
                busy = 1;
            } else if (ms != RS_OK) {
                rs_push_fail(p, ms, "merged grant refused by a worker");
                drop_pending(w);
                return;
            } else {
                granted = 1;
            }
            continue;
        }
        if (g.partition >= p->desc.n_partitions) {
            rs_push_fail(p, RS_ERR_PROTOCOL, "grant for an unknown partition");
            drop_pending(w);
            return;
        }
        ppart_t *pp = &w->parts[g.partition];
        int ahead = pp->ahead_out;
        pp->in_req = 0;
        pp->ahead_out = 0;
        if (prefetch && g.status != RS_OK) {
            needs_grant(w, g.partition, pp); /* asked for at open: what waits asks now */
            continue;
        }
        if (g.status == RS_ERR_BACKPRESSURE || g.status == RS_ERR_IO) {
            backpressure = 1;
            spill_failed |= g.status == RS_ERR_IO; /* full, and its spill disk takes nothing */
            needs_grant(w, g.partition, pp);       /* asked again after retry_ms */
            continue;
        }
        if (g.status == RS_ERR_BUSY) { /* no grant ahead while the worker is short */
            pp->ahead_refused = 1;
            busy |= !ahead; /* no slot free for a batch that waits: ask again a little later */
            needs_grant(w, g.partition, pp);
            continue;
        }
        if (g.status != RS_OK || g.len > RS_GRANT_MAX || g.slot >= RS_GRANT_SLOTS) {
            rs_push_fail(p, g.status != RS_OK ? (rs_status_t)g.status : RS_ERR_PROTOCOL,
                         "grant refused by a worker");
            drop_pending(w);
            return;
        }
        if (g.len == 0) {
            needs_grant(w, g.partition, pp); /* a retire only: what waits still asks */
            continue;
        }
        pgrant_t ng = {.slot = g.slot, .off = g.off, .len = g.len};
        unblock(w, pp);
        if (pp->cur.len == 0)
            pp->cur = ng;
        else if (pp->next.len == 0)
            pp->next = ng;
        else
            retire(w, g.partition, &ng); /* cannot happen: give it straight back */
        if (!ahead) {
            pp->ahead_refused = 0;
            granted = 1;
        }
    }
    uint64_t now = rs_now_coarse_ns();
    if (backpressure) {
        p->stats.backpressure++;
        if (w->bp_since == 0)
            w->bp_since = now;
        /* A worker that cannot spill will not free memory: a shorter bound. */
        uint32_t bound = p->cfg.backpressure_ms;
        if (spill_failed && bound > RS_PUSH_SPILL_FAIL_MS)
            bound = RS_PUSH_SPILL_FAIL_MS;
        if (now - w->bp_since > RS_MS_TO_NS(bound)) {
            /* With R >= 2 a replica that cannot take its partitions' data is a lost one. */
            rs_status_t why = spill_failed ? RS_ERR_IO : RS_ERR_BACKPRESSURE;
            if (p->replicas >= 2) {
                worker_lost(w, why,
                            spill_failed ? "full, and its spill failed (disk full: its log "
                                           "names the directory)"
                                         : "memory full for too long");
                return;
            }
            rs_push_fail(p, why,
                         spill_failed ? "worker memory full and its spill failed (no space left "
                                        "on its spill disk, or an I/O error: its log names the "
                                        "directory)"
                                      : "worker memory full for too long");
            drop_pending(w);
            return;
        }
        w->retry_at = now + RS_MS_TO_NS(r.retry_ms ? r.retry_ms : 10);
        w->reclaim = 1; /* our own idle grants may be what holds the memory */
    } else if (granted) {
        w->bp_since = 0;
    }
    if (busy && !backpressure) {
        w->retry_at = now + RS_MS_TO_NS(10);
        w->reclaim = 1; /* idle grants hold slots too */
    }
    try_post(w);
}

/* The worker is short of memory: give back the grants no batch waits for. */
static void on_reclaim(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    pworker_t *w = worker_of(arg, ep);
    rs_pusher_t *p = w != NULL ? w->p : NULL;
    rs_status_t carried;
    if (w == NULL || rs_sproto_status_decode(data, len, RS_SMSG_RECLAIM, &carried) != RS_OK)
        return;
    w->reclaim = 1;
    w->heard_at = rs_now_coarse_ns();
    if (perr(p) == RS_OK)
        try_post(w);
}

static void on_nack(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    pworker_t *w = worker_of(arg, ep);
    rs_smsg_nack_t n;
    if (w == NULL || rs_sproto_nack_decode(data, len, &n) != RS_OK)
        return;
    rs_pusher_t *p = w->p;
    rs_error("pusher: a worker refused a batch of partition %u: %s", n.partition,
             rs_strerror(n.status));
    rs_push_fail(p, n.status, "batch refused");
}

static void on_commit_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    pworker_t *w = worker_of(arg, ep);
    rs_pusher_t *p = w != NULL ? w->p : NULL;
    if (w == NULL)
        return;
    rs_status_t carried;
    rs_status_t s = rs_sproto_status_decode(data, len, RS_SMSG_COMMIT_REPLY, &carried);
    if (s == RS_OK)
        s = carried;
    if (s != RS_OK)
        rs_error("pusher: worker %s refused the commit of map %u attempt %u: %s",
                 p->desc.workers[w->index], p->map_id, p->attempt, rs_strerror(s));
    w->commit_status = s;
    w->commit_done = 1;
    w->heard_at = rs_now_coarse_ns();
}

static void on_ep(void *arg, rs_ep_t *ep, rs_status_t status)
{
    pworker_t *w = worker_any(arg, ep); /* also while open waits for the attach */
    if (w == NULL || status == RS_OK)
        return;
    rs_pusher_t *p = w->p;
    if (p->replicas > 1) {
        if (perr(p) == RS_OK) /* else: failed already, or closed by rs_pusher_destroy */
            worker_lost(w, status, "connection lost");
        return;
    }
    rs_error("pusher: worker %s is gone: %s", p->desc.workers[w->index], rs_strerror(status));
    rs_push_fail(p, status, "worker connection lost");
    w->req_out = 0;
    drop_pending(w);
    if (!w->commit_done) {
        w->commit_done = 1;
        w->commit_status = status;
    }
}

rs_status_t rs_push_install_handlers(rs_push_lane_t *l)
{
    rs_status_t s;
    if ((s = rs_set_msg_handler(l->ctx, RS_SMSG_ATTACH_REPLY, on_attach_reply, l)) != RS_OK ||
        (s = rs_set_msg_handler(l->ctx, RS_SMSG_GRANT, on_grant, l)) != RS_OK ||
        (s = rs_set_msg_handler(l->ctx, RS_SMSG_NACK, on_nack, l)) != RS_OK ||
        (s = rs_set_msg_handler(l->ctx, RS_SMSG_COMMIT_REPLY, on_commit_reply, l)) != RS_OK ||
        (s = rs_set_msg_handler(l->ctx, RS_SMSG_RECLAIM, on_reclaim, l)) != RS_OK)
        return s;
    rs_set_ep_handler(l->ctx, on_ep, l);
    return RS_OK;
}

#ifdef RS_FAULT_INJECTION
void rs_push_fault(rs_pusher_t *p, int fault, int every)
{
    p->fault = fault;
    p->fault_every = every > 0 ? every : 1;
}
#endif
