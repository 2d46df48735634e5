/*
 * The push engine: runs on the push queue's thread. Frames each full buffer
 * (codec none: sealed in place; lz4/snappy: compressed into a sized
 * registered buffer), asks the buffer's worker for space in bulk, writes the
 * frame with a notified put into the granted range, keeps at most
 * max_inflight bytes in flight per worker, and finally sends the map commit.
 */
#include "pusher/internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

void rs__pusher_fail(rs_pusher_t *p, rs_status_t status, const char *why)
{
    int expected = RS_OK;
    if (atomic_compare_exchange_strong(&p->error, &expected, (int)status))
        rs_error("pusher (shuffle %u map %u attempt %u): %s: %s", p->desc.shuffle_id, p->map_id,
                 p->attempt, why, rs_strerror(status));
    rs__pushq_fail(p->q, status);
}

static rs_status_t perr(rs_pusher_t *p)
{
    return (rs_status_t)atomic_load(&p->error);
}

static void batch_release(rs_pusher_t *p, rs_pbuf_int_t *b)
{
    rs_pushq_release(p->q, &b->pub);
}

/* ----------------------------------------------------------------- grants */

static uint64_t room(const pgrant_t *g)
{
    return g->len - g->used;
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
    if (w->req_out)
        return;
    if (w->reclaim)
        reclaim(w);
    int backoff = in_backoff(w);
    size_t max_n = (p->msg_max - sizeof(rs_smsg_grant_t)) / sizeof(rs_grant_t);
    size_t max_req = (p->msg_max - sizeof(rs_smsg_grant_req_t)) / sizeof(rs_grant_want_t);
    if (max_req < max_n)
        max_n = max_req;
    uint8_t *buf = p->msg_buf;
    rs_grant_want_t *wants = (rs_grant_want_t *)(buf + sizeof(rs_smsg_grant_req_t));
    uint32_t n = 0, n_ret = 0;
    for (; n_ret < w->n_retires && n < max_n; n_ret++, n++)
        wants[n] = (rs_grant_want_t){.partition = w->retires[n_ret].partition,
                                     .retire_slot = w->retires[n_ret].slot,
                                     .retire_used = w->retires[n_ret].used};
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->pending)
    {
        if (backoff)
            break;
        rs_pbuf_int_t *b = RS_CONTAINER_OF(pos, rs_pbuf_int_t, link);
        ppart_t *pp = &w->parts[b->partition];
        uint64_t need = rs_sproto_round(b->frame_len);
        if (pp->in_req)
            continue; /* asked for already: bulk room covers the batches behind */
        if (room(&pp->cur) >= need || room(&pp->next) >= need)
            continue; /* it has room: only waiting behind others */
        if (n == max_n)
            break;
        rs_grant_want_t wt = {.partition = b->partition,
                              .flags = b->full ? RS_GRANT_BULK : 0,
                              .want = need,
                              .retire_slot = RS_SLOT_NONE};
        if (pp->cur.len > 0) { /* exhausted: it retires with this request */
            wt.retire_slot = pp->cur.slot;
            wt.retire_used = pp->cur.used;
            pp->cur = (pgrant_t){0};
        }
        retire(w, b->partition, &pp->next); /* too small for this batch */
        wants[n++] = wt;
        pp->in_req = 1;
    }
    /* Next grants for streaming partitions, so their writes never wait for a round trip. */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < w->n_ahead; i++) {
        uint32_t part = w->ahead[i];
        ppart_t *pp = &w->parts[part];
        if (pp->in_req || pp->next.len > 0 || pp->cur.len == 0 || pp->ahead_refused) {
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
        wants[n++] = (rs_grant_want_t){.partition = part,
                                       .flags = RS_GRANT_AHEAD | RS_GRANT_BULK,
                                       .want = pp->ahead_want,
                                       .retire_slot = RS_SLOT_NONE};
    }
    w->n_ahead = kept;
    if (n == 0)
        return;
    rs_smsg_grant_req_t m = {.req_id = ++w->req_id, .n = n};
    rs_smsg_init(&m.h, RS_SMSG_GRANT_REQ, RS_OK);
    memcpy(buf, &m, sizeof(m));
    rs_status_t s = rs_msg_send(w->ep, RS_SMSG_GRANT_REQ, buf,
                                sizeof(m) + n * sizeof(rs_grant_want_t), NULL, NULL);
    if (s != RS_OK) {
        rs__pusher_fail(p, s, "grant request");
        return;
    }
    if (n_ret > 0) {
        memmove(w->retires, w->retires + n_ret, (w->n_retires - n_ret) * sizeof(*w->retires));
        w->n_retires -= n_ret;
    }
    w->req_out = 1;
    p->stats.grant_requests++;
}

/* ------------------------------------------------------------------ puts */

static void try_post(pworker_t *w);

static void drop_pending(pworker_t *w)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->pending)
    {
        rs_pbuf_int_t *b = RS_CONTAINER_OF(pos, rs_pbuf_int_t, link);
        rs_list_del(&b->link);
        w->parts[b->partition].n_pending--;
        if (b->refs == 0)
            batch_release(w->p, b);
    }
}

static void on_put_done(void *arg, rs_status_t status)
{
    rs_pbuf_int_t *b = arg;
    pworker_t *w = b->user;
    rs_pusher_t *p = w->p;
    w->inflight -= b->frame_len;
    if (status != RS_OK)
        rs__pusher_fail(p, status, "write to a worker");
    if (--b->refs == 0 && rs_list_empty(&b->link))
        batch_release(p, b);
    if (perr(p) != RS_OK)
        drop_pending(w);
    else
        try_post(w);
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
    if (perr(p) != RS_OK) {
        drop_pending(w);
        return;
    }
    int blocked, again;
    do {
        uint32_t pass = ++w->pass;
        blocked = again = 0;
        rs_list_t *pos, *tmp;
        rs_list_for_each_safe(pos, tmp, &w->pending)
        {
            rs_pbuf_int_t *b = RS_CONTAINER_OF(pos, rs_pbuf_int_t, link);
            ppart_t *pp = &w->parts[b->partition];
            if (pp->pass == pass)
                continue;
            uint64_t need = rs_sproto_round(b->frame_len);
            if (room(&pp->cur) < need && room(&pp->next) >= need) {
                retire(w, b->partition, &pp->cur);
                pp->cur = pp->next;
                pp->next = (pgrant_t){0};
            }
            if (room(&pp->cur) < need) {
                pp->pass = pass;
                blocked = 1;
                continue;
            }
            if (w->inflight > 0 && w->inflight + b->frame_len > p->cfg.max_inflight)
                break;
            pgrant_t *g = &pp->cur;
            uint64_t roff = g->off + g->used;
            uint32_t imm = rs_imm_make(g->slot, g->used);
            g->used += need;
            rs_list_del(&b->link);
            pp->n_pending--;
            if (b->dup > 0) { /* fault injection: the same batch again, to the next range */
                b->dup--;
                rs_list_add_head(&w->pending, &b->link);
                pp->n_pending++;
                again = 1;
            }
            b->user = w;
            b->refs++;
            w->inflight += b->frame_len;
            w->batches++;
            rs_status_t s = rs_put_notify(w->ep, b->frame, b->frame_len, rs__pushq_mr(p->q),
                                          w->rkey, roff, imm, on_put_done, b);
            if (s != RS_OK) {
                w->inflight -= b->frame_len;
                w->batches--;
                b->refs--;
                rs__pusher_fail(p, s, "posting a write");
                if (b->refs == 0) {
                    if (!rs_list_empty(&b->link)) {
                        rs_list_del(&b->link);
                        pp->n_pending--;
                    }
                    batch_release(p, b);
                }
                drop_pending(w);
                return;
            }
            if (b->full)
                maybe_ahead(w, b->partition, pp, need);
            if (again)
                break; /* the copy goes in the next pass */
        }
    } while (again);
    if (blocked || w->n_ahead > 0 || w->n_retires > 0 || w->reclaim)
        request_grants(w);
}

/* ----------------------------------------------------------------- take */

static rs_status_t engine_take(void *arg, rs_pushq_t *q, rs_pbuf_int_t *b)
{
    rs_pusher_t *p = arg;
    if (perr(p) != RS_OK) {
        rs_pushq_release(q, &b->pub);
        return RS_OK;
    }
    if (b->used == 0) { /* nothing to push (an empty swap) */
        rs_pushq_release(q, &b->pub);
        return RS_OK;
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
    } else if (p->cfg.codec == RS_CODEC_NONE) {
        /* Zero copy: the header goes into the room before the records. */
        uint8_t *frame = b->pub.data - RS_FRAME_HEADER_SIZE;
        s = rs_frame_seal(frame, RS_FRAME_HEADER_SIZE + b->pub.len, b->used, 0, &ids, &flen);
        out->frame = frame;
    } else {
        size_t bound = rs_frame_bound(p->cfg.codec, b->used);
        s = rs__pushq_alloc_now(q, bound, &out);
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
        rs__pusher_fail(p, s, "framing a batch");
        rs_pushq_release(q, &b->pub);
        return RS_OK;
    }
    rs_frame_t f;
    rs_frame_parse(out->frame, flen, &f);
    out->frame_len = (uint32_t)flen;
    /* A streaming partition: it fills buffers of the largest size it gets. */
    out->full = b->used + RS_RECORD_HDR > b->pub.len / 2 && b->pub.len >= p->part_cap / 2;
    out->refs = 0;
    out->dup = 0;
    rs_list_init(&out->link);

    pworker_t *w = &p->workers[p->place[b->partition]];
    rs_commit_entry_t *c = &w->counts[b->partition];
    c->batches++;
    c->bytes += flen;
    c->checksum += f.checksum;
    p->stats.batches++;
    p->stats.raw_bytes += b->used;
    p->stats.bytes += flen;
    if (out != b) /* compressed: the raw buffer is free for the writer again */
        rs_pushq_release(q, &b->pub);

#ifdef RS_FAULT_INJECTION
    if (p->fault != RS_FAULT_NONE && ++p->fault_count % (uint64_t)p->fault_every == 0) {
        if (p->fault == RS_FAULT_CORRUPT) /* after the checksum: as if damaged on the way */
            out->pub.data[(out->frame + flen - 1) - out->pub.data] ^= 0x5a;
        else if (p->fault == RS_FAULT_DUPLICATE)
            out->dup = 1;
    }
#endif
    rs_list_add_tail(&w->pending, &out->link);
    w->parts[b->partition].n_pending++;
    try_post(w);
    return RS_OK;
}

/* ---------------------------------------------------------------- commit */

static void send_commit(pworker_t *w)
{
    rs_pusher_t *p = w->p;
    size_t per = (p->msg_max - sizeof(rs_smsg_commit_t)) / sizeof(rs_commit_entry_t);
    uint8_t *buf = p->msg_buf;
    uint32_t part = 0;
    for (;;) {
        rs_commit_entry_t *e = (rs_commit_entry_t *)(buf + sizeof(rs_smsg_commit_t));
        uint32_t n = 0;
        for (; part < p->desc.n_partitions && n < per; part++) {
            if (w->counts[part].batches == 0)
                continue;
            e[n] = w->counts[part];
            e[n].partition = part;
            n++;
        }
        int last = part >= p->desc.n_partitions;
        rs_smsg_commit_t m = {.n = n, .last = (uint32_t)last, .total_batches = w->batches};
        rs_smsg_init(&m.h, RS_SMSG_COMMIT, RS_OK);
        memcpy(buf, &m, sizeof(m));
        rs_status_t s = rs_msg_send(w->ep, RS_SMSG_COMMIT, buf,
                                    sizeof(m) + n * sizeof(rs_commit_entry_t), NULL, NULL);
        if (s != RS_OK) {
            w->commit_done = 1;
            w->commit_status = s;
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
    if (perr(p) == RS_OK && rs__pushq_outstanding(p->q) != 0)
        return;
    /* Compressed batches outlive their raw buffers: wait for them too. */
    for (uint32_t i = 0; perr(p) == RS_OK && i < p->desc.n_workers; i++)
        if (!rs_list_empty(&p->workers[i].pending) || p->workers[i].inflight != 0)
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
    p->commit_finished = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

/* ---------------------------------------------------------------- hooks */

static unsigned engine_poll(void *arg)
{
    rs_pusher_t *p = arg;
    unsigned n = rs_progress(p->ctx);
    uint64_t now = rs_now_coarse_ns();
    for (uint32_t i = 0; i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        if (!w->req_out && w->retry_at != 0 && now >= w->retry_at) {
            w->retry_at = 0;
            try_post(w);
        }
    }
    commit_progress(p);
    return n;
}

/* A timed retry (backpressure) is caught by the engine's bounded sleep. */
static int engine_arm(void *arg)
{
    rs_pusher_t *p = arg;
    return rs_ctx_arm(p->ctx) == RS_OK ? 0 : 1;
}

const rs_pushq_hooks_t rs__pusher_hooks_template = {
    .take = engine_take,
    .poll = engine_poll,
    .arm = engine_arm,
    .fd = -1,
};

/* -------------------------------------------------------------- messages */

static pworker_t *worker_of(rs_pusher_t *p, rs_ep_t *ep)
{
    pworker_t *w = rs_ep_user(ep);
    return (w != NULL && w->p == p) ? w : NULL;
}

static void on_attach_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_pusher_t *p = arg;
    pworker_t *w = worker_of(p, ep);
    rs_smsg_attach_reply_t r;
    if (w == NULL)
        return;
    rs_status_t s = rs_smsg_status(data, len, RS_SMSG_ATTACH_REPLY);
    if (s == RS_OK) {
        s = rs_smsg_check(data, len, RS_SMSG_ATTACH_REPLY, sizeof(r), 0, 0);
        if (s == RS_OK) {
            memcpy(&r, data, sizeof(r));
            if (r.rkey_len > len - sizeof(r))
                s = RS_ERR_TRUNCATED;
            else
                s = rs_rkey_unpack(ep, (const uint8_t *)data + sizeof(r), r.rkey_len, &w->rkey);
        }
    }
    w->attach_status = s;
    w->attached = 1;
}

static void on_grant(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_pusher_t *p = arg;
    pworker_t *w = worker_of(p, ep);
    rs_smsg_grant_t r;
    rs_status_t s = rs_smsg_check(data, len, RS_SMSG_GRANT, sizeof(r), 0, 0);
    if (w == NULL)
        return;
    if (s == RS_OK) {
        memcpy(&r, data, sizeof(r));
        s = (rs_status_t)r.h.status;
        if (s == RS_OK)
            s = rs_smsg_check(data, len, RS_SMSG_GRANT, sizeof(r), sizeof(rs_grant_t), r.n);
    }
    w->req_out = 0;
    if (s != RS_OK) {
        rs__pusher_fail(p, s, "grant request refused by a worker");
        drop_pending(w);
        return;
    }
    int backpressure = 0, granted = 0;
    const rs_grant_t *gr = (const rs_grant_t *)((const uint8_t *)data + sizeof(r));
    for (uint32_t i = 0; i < r.n; i++) {
        rs_grant_t g;
        memcpy(&g, &gr[i], sizeof(g));
        if (g.partition >= p->desc.n_partitions) {
            rs__pusher_fail(p, RS_ERR_PROTOCOL, "grant for an unknown partition");
            drop_pending(w);
            return;
        }
        ppart_t *pp = &w->parts[g.partition];
        int ahead = pp->ahead_out;
        pp->in_req = 0;
        pp->ahead_out = 0;
        if (g.status == RS_ERR_BACKPRESSURE) {
            backpressure = 1;
            continue;
        }
        if (g.status == RS_ERR_BUSY) { /* no grant ahead while the worker is short */
            pp->ahead_refused = 1;
            continue;
        }
        if (g.status != RS_OK || g.len > RS_GRANT_MAX || g.slot >= RS_GRANT_SLOTS) {
            rs__pusher_fail(p, g.status != RS_OK ? (rs_status_t)g.status : RS_ERR_PROTOCOL,
                            "grant refused by a worker");
            drop_pending(w);
            return;
        }
        if (g.len == 0)
            continue; /* a retire only */
        pgrant_t ng = {.slot = g.slot, .off = g.off, .len = g.len};
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
        if (now - w->bp_since > RS_MS_TO_NS(p->cfg.backpressure_ms)) {
            rs__pusher_fail(p, RS_ERR_BACKPRESSURE, "worker memory full for too long");
            drop_pending(w);
            return;
        }
        w->retry_at = now + RS_MS_TO_NS(r.retry_ms ? r.retry_ms : 10);
        w->reclaim = 1; /* our own idle grants may be what holds the memory */
    } else if (granted) {
        w->bp_since = 0;
    }
    try_post(w);
}

/* The worker is short of memory: give back the grants no batch waits for. */
static void on_reclaim(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_pusher_t *p = arg;
    pworker_t *w = worker_of(p, ep);
    if (w == NULL ||
        rs_smsg_check(data, len, RS_SMSG_RECLAIM, sizeof(rs_smsg_hdr_t), 0, 0) != RS_OK)
        return;
    w->reclaim = 1;
    if (perr(p) == RS_OK)
        try_post(w);
}

static void on_nack(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_pusher_t *p = arg;
    rs_smsg_nack_t n;
    if (worker_of(p, ep) == NULL ||
        rs_smsg_check(data, len, RS_SMSG_NACK, sizeof(n), 0, 0) != RS_OK)
        return;
    memcpy(&n, data, sizeof(n));
    rs_error("pusher: a worker refused a batch of partition %u: %s", n.partition,
             rs_strerror((rs_status_t)n.h.status));
    rs__pusher_fail(p, (rs_status_t)n.h.status, "batch refused");
}

static void on_commit_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_pusher_t *p = arg;
    pworker_t *w = worker_of(p, ep);
    if (w == NULL)
        return;
    rs_status_t s = rs_smsg_status(data, len, RS_SMSG_COMMIT_REPLY);
    if (s != RS_OK)
        rs_error("pusher: worker %s refused the commit of map %u attempt %u: %s",
                 p->desc.workers[w->index], p->map_id, p->attempt, rs_strerror(s));
    w->commit_status = s;
    w->commit_done = 1;
}

static void on_ep(void *arg, rs_ep_t *ep, rs_status_t status)
{
    rs_pusher_t *p = arg;
    pworker_t *w = worker_of(p, ep);
    if (w == NULL || status == RS_OK)
        return;
    rs_error("pusher: worker %s is gone: %s", p->desc.workers[w->index], rs_strerror(status));
    rs__pusher_fail(p, status, "worker connection lost");
    w->req_out = 0;
    drop_pending(w);
    if (!w->commit_done) {
        w->commit_done = 1;
        w->commit_status = status;
    }
}

rs_status_t rs__pusher_install_handlers(rs_pusher_t *p)
{
    rs_status_t s;
    if ((s = rs_set_msg_handler(p->ctx, RS_SMSG_ATTACH_REPLY, on_attach_reply, p)) != RS_OK ||
        (s = rs_set_msg_handler(p->ctx, RS_SMSG_GRANT, on_grant, p)) != RS_OK ||
        (s = rs_set_msg_handler(p->ctx, RS_SMSG_NACK, on_nack, p)) != RS_OK ||
        (s = rs_set_msg_handler(p->ctx, RS_SMSG_COMMIT_REPLY, on_commit_reply, p)) != RS_OK ||
        (s = rs_set_msg_handler(p->ctx, RS_SMSG_RECLAIM, on_reclaim, p)) != RS_OK)
        return s;
    rs_set_ep_handler(p->ctx, on_ep, p);
    return RS_OK;
}

#ifdef RS_FAULT_INJECTION
void rs__pusher_fault(rs_pusher_t *p, int fault, int every)
{
    p->fault = fault;
    p->fault_every = every > 0 ? every : 1;
}
#endif
