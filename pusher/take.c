/*
 * A buffer from the writer's queue: framed (codec none: sealed in place;
 * lz4/snappy: compressed into a sized registered buffer), counted for each
 * holder's commit, and queued to each live holder (or copied into its
 * merged write), then posted.
 */
#include "pusher/internal.h"

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

/*
 * A small batch waits for room in its holders' merged writes while
 * merged writes in flight will free some; sent on its own it would cost
 * a grant and a write of its own (with 20,000 partitions, one in eight).
 * 1: b waits (its holders' sealed writes asked for their grants).
 */
static int merge_wait(rs_pusher_t *p, const rs_pbuf_int_t *b)
{
    size_t est = b->sealed ? b->frame_len : b->used + RS_FRAME_HEADER_SIZE;
    for (uint32_t k = 0; p->merge_below != 0 && k < p->replicas; k++) {
        pworker_t *w = &p->workers[rs_push_holders(p, b->partition)[k]];
        if (!rs_push_merge_room(w, est) && rs_push_merge_pending(p)) {
            for (uint32_t j = 0; j <= k; j++) /* sealed ones ask for their grants */
                rs_push_try_post(&p->workers[rs_push_holders(p, b->partition)[j]]);
            return 1;
        }
    }
    return 0;
}

/*
 * Frames b: in place (sealed by the writer, or codec none: zero copy) or
 * compressed into a buffer of its own. RS_ERR_BUSY: wait for room (b
 * kept); RS_OK: *out_p holds the frame (*flen_p bytes), or is NULL when
 * framing failed (the pusher failed, b released).
 */
static rs_status_t frame_batch(rs_pusher_t *p, rs_pushq_t *q, rs_pbuf_int_t *b,
                               rs_pbuf_int_t **out_p, size_t *flen_p)
{
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
        *out_p = NULL;
        return RS_OK;
    }
    *out_p = out;
    *flen_p = flen;
    return RS_OK;
}

/*
 * One send per live holder of out's partition; each worker's commit
 * counts what it should hold (and settles the holders: every later batch
 * goes to the same ones). Sets out->refs to the live holders.
 */
static void count_sends(rs_pusher_t *p, rs_pbuf_int_t *out, size_t flen, uint64_t checksum)
{
    uint32_t part = out->partition;
    out->refs = 0;
    for (uint32_t k = 0; k < p->replicas; k++) {
        pworker_t *w = &p->workers[rs_push_holders(p, part)[k]];
        rs_psend_t *sd = &out->sends[k];
        *sd = (rs_psend_t){.b = out, .w = w};
        rs_list_init(&sd->link);
        if (rs_push_worker_is(w, RS_PW_LOST))
            continue;
        rs_commit_entry_t *c = &w->counts[part];
        c->batches++;
        c->bytes += flen;
        c->checksum += checksum;
        out->refs++;
    }
}

/*
 * Each live holder's send copied into its merged write or queued, then
 * posted: queued everywhere first, so a write failing at one replica
 * drops only its own send.
 */
static void queue_sends(rs_pusher_t *p, rs_pbuf_int_t *out, size_t flen)
{
    uint32_t part = out->partition;
    uint32_t dup = 0, n_post = 0;
    pworker_t *post[RS_SHUFFLE_REPLICAS_MAX];
#ifdef RS_FAULT_INJECTION
    if (p->fault != RS_FAULT_NONE && ++p->fault_count % (uint64_t)p->fault_every == 0) {
        if (p->fault == RS_FAULT_CORRUPT) /* after the checksum: as if damaged on the way */
            out->pub.data[(out->frame + flen - 1) - out->pub.data] ^= 0x5a;
        else if (p->fault == RS_FAULT_DUPLICATE)
            dup = 1;
    }
#else
    (void)flen;
#endif
    for (uint32_t k = 0; k < p->replicas; k++) {
        rs_psend_t *sd = &out->sends[k];
        pworker_t *w = sd->w;
        if (rs_push_worker_is(w, RS_PW_LOST))
            continue;
        post[n_post++] = w;
        if (dup == 0 && rs_push_merge_add(w, out)) { /* copied into w's merged write */
            RS_ASSERT(out->refs > 0);
            out->refs--;
            continue;
        }
        sd->dup = dup;
        rs_list_add_tail(&w->pending, &sd->link);
        w->parts[part].n_pending++;
    }
    if (out->refs == 0) /* every send merged: the buffer goes back now */
        rs_push_batch_release(p, out);
    for (uint32_t i = 0; i < n_post; i++)
        rs_push_try_post(post[i]);
}

rs_status_t rs_push_engine_take(rs_pusher_t *p, rs_pushq_t *q, rs_pbuf_int_t *b)
{
    if (rs_push_err(p) != RS_OK) {
        rs_pushq_release(q, &b->pub);
        return RS_OK;
    }
    if (b->used == 0) { /* nothing to push (an empty swap) */
        rs_pushq_release(q, &b->pub);
        return RS_OK;
    }
    if (merge_wait(p, b))
        return RS_ERR_BUSY;
    /*
     * With 20,000 partitions the holders' counts for this one are seldom in
     * cache: fetched now, they arrive while the frame is sealed (its
     * checksum), not when count_sends adds to them.
     */
    const uint32_t *h = rs_push_holders(p, b->partition);
    for (uint32_t k = 0; k < p->replicas; k++)
        __builtin_prefetch(&p->workers[h[k]].counts[b->partition], 1, 3);
    rs_pbuf_int_t *out;
    size_t flen;
    if (frame_batch(p, q, b, &out, &flen) == RS_ERR_BUSY)
        return RS_ERR_BUSY;
    if (out == NULL)
        return RS_OK; /* framing failed: the pusher failed */
    rs_frame_t f;
    rs_frame_parse(out->frame, flen, &f);
    out->frame_len = (uint32_t)flen;
    /* A streaming partition: it fills buffers of the largest size it gets. */
    out->full = b->used + RS_RECORD_HDR > b->pub.len / 2 && b->pub.len >= p->part_cap / 2;
    count_sends(p, out, flen, f.checksum);
    p->stats.batches++;
    p->stats.raw_bytes += b->used;
    p->stats.bytes += flen;
    if (out != b) /* compressed: the raw buffer is free for the writer again */
        rs_pushq_release(q, &b->pub);

    if (out->refs == 0) { /* no live replica: the pusher failed already (worker_lost) */
        rs_push_batch_release(p, out);
        return RS_OK;
    }
    queue_sends(p, out, flen);
    return RS_OK;
}

#ifdef RS_FAULT_INJECTION
void rs_push_fault(rs_pusher_t *p, int fault, int every)
{
    p->fault = fault;
    p->fault_every = every > 0 ? every : 1;
}
#endif
