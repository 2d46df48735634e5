/*
 * Merged writes (docs/shuffle.md, "Merged pushes"): a sealed frame shorter
 * than merge_below is copied, on the engine thread, into its worker's
 * merged write (a block of the pool, merge_len bytes) at the next 64-byte
 * offset, and its own buffer goes back at once. A merged write is sealed
 * when the next frame does not fit, when it has been filling for
 * RS_PUSH_MERGE_AGE_NS (before close), or at close; it then asks one
 * RS_GRANT_MERGED grant of exactly its length and is written with one
 * notified put at offset 0 of it. The worker walks the frames inside and indexes each into its
 * partition; the commit counts are the same as for single batches.
 */
#include "pusher/internal.h"

#include "common/clock.h"

#include <stdlib.h>
#include <string.h>

#define RS_PUSH_MERGE_LEN    (256u << 10)   /* a merged write's block at most */
#define RS_PUSH_MERGE_MIN    (16u << 10)    /* smaller blocks (a tiny pool): no merging */
#define RS_PUSH_MERGE_AGE_NS RS_MS_TO_NS(2) /* a write filling longer is sealed */

static int perr_ok(const rs_pusher_t *p)
{
    return atomic_load(&p->error) == RS_OK;
}

void rs_push_merge_setup(rs_pusher_t *p)
{
    p->merge_below = 0;
    p->merge_len = 0;
    if (p->cfg.merge_below == 0 || p->desc.n_workers == 0)
        return;
    /* An eighth of the pool for the merged writes being filled, at most one per worker. */
    size_t len = p->cfg.pool_bytes / 8 / p->desc.n_workers;
    if (len > RS_PUSH_MERGE_LEN)
        len = RS_PUSH_MERGE_LEN;
    len &= ~(size_t)(RS_SPROTO_ALIGN - 1);
    if (len < RS_PUSH_MERGE_MIN)
        return;
    size_t below = p->cfg.merge_below < len / 4 ? p->cfg.merge_below : len / 4;
    p->merge_len = (uint32_t)len;
    p->merge_below = (uint32_t)below;
    /* Blocks kept for reuse: an eighth of the pool at most. */
    size_t keep = p->cfg.pool_bytes / 8 / len;
    p->merge_keep = (uint32_t)(keep < RS_PUSH_MERGE_KEEP ? keep : RS_PUSH_MERGE_KEEP);
}

/*
 * A new merged write for w: 1, or 0 when the pool has no room for its block
 * now. Blocks of completed writes are kept for the next ones (up to
 * merge_keep): carved anew each time, a 256 KiB block seldom finds a hole
 * in a slab cut into 20,000 partitions' small buffers.
 */
static int merge_open(pworker_t *w)
{
    rs_pusher_t *p = w->p;
    pmerge_t *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return 0;
    if (p->n_mfree > 0) {
        m->buf = p->mfree[--p->n_mfree];
    } else if (rs_push_q_alloc_now(p->q, p->merge_len, &m->buf) != RS_OK) {
        free(m);
        return 0;
    }
    m->w = w;
    m->opened = rs_now_coarse_ns();
    rs_list_init(&m->link);
    w->mcur = m;
    return 1;
}

int rs_push_merge_room(pworker_t *w, size_t len)
{
    rs_pusher_t *p = w->p;
    if (len >= p->merge_below || rs_push_worker_is(w, RS_PW_LOST))
        return 1;
    if (w->mcur != NULL && w->mcur->used + rs_sproto_round(len) <= p->merge_len)
        return 1;
    rs_push_merge_seal(w);
    return merge_open(w);
}

int rs_push_merge_add(pworker_t *w, const rs_pbuf_int_t *b)
{
    rs_pusher_t *p = w->p;
    if (b->frame_len >= p->merge_below ||
        rs_push_worker_is(w, RS_PW_LOST)) /* merge_below 0: never */
        return 0;
    uint32_t need = (uint32_t)rs_sproto_round(b->frame_len);
    if (w->mcur != NULL && w->mcur->used + need > p->merge_len)
        rs_push_merge_seal(w);
    if (w->mcur == NULL && !merge_open(w))
        return 0; /* no room in the pool now: this batch goes on its own */
    pmerge_t *m = w->mcur;
    uint8_t *at = m->buf->pub.data + m->used;
    memcpy(at, b->frame, b->frame_len);
    memset(at + b->frame_len, 0, need - b->frame_len); /* no stale pool bytes on the wire */
    m->used += need;
    m->n++;
    return 1;
}

void rs_push_merge_seal(pworker_t *w)
{
    pmerge_t *m = w->mcur;
    if (m == NULL)
        return;
    w->mcur = NULL;
    if (m->n == 0) {
        /*
         * Opened for a batch that then went alone (its frame came out
         * larger than estimated, or it waited for another holder's room):
         * a grant of 0 bytes is no request a worker accepts.
         */
        rs_push_merge_release(m);
        return;
    }
    RS_ASSERT(m->used > 0 && m->used % RS_SPROTO_ALIGN == 0);
    m->state = RS_PM_SEALED;
    rs_list_add_tail(&w->merges, &m->link);
    w->m_unasked++;
}

int rs_push_merge_age(pworker_t *w, uint64_t now)
{
    const rs_pusher_t *p = w->p;
    /*
     * Close hands plain batches over at copy speed and then seals every
     * write (commit.c): aging meanwhile only cuts one write in two, as
     * often as a slow or loaded hand-over outlasts the age.
     */
    if (p->cfg.codec == RS_CODEC_NONE &&
        (atomic_load_explicit(&p->flushing, memory_order_relaxed) ||
         atomic_load_explicit(&p->closing, memory_order_relaxed)))
        return 0;
    if (w->mcur == NULL || now - w->mcur->opened < RS_PUSH_MERGE_AGE_NS)
        return 0;
    rs_push_merge_seal(w);
    return 1;
}

int rs_push_merge_busy(const pworker_t *w)
{
    return w->mcur != NULL || !rs_list_empty(&w->merges);
}

int rs_push_merge_wants(const pworker_t *w)
{
    return w->m_unasked > 0;
}

uint32_t rs_push_merge_ask(pworker_t *w, uint8_t *buf, size_t cap, uint32_t n, uint32_t max_n)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->merges)
    {
        if (n >= max_n || w->m_unasked == 0)
            break;
        pmerge_t *m = RS_CONTAINER_OF(pos, pmerge_t, link);
        if (m->state != RS_PM_SEALED)
            continue;
        rs_grant_want_t wt = {.partition = RS_MERGED_PART,
                              .flags = RS_GRANT_MERGED,
                              .want = m->used,
                              .retire_slot = RS_SLOT_NONE};
        rs_sproto_grant_want_put(buf, cap, n++, &wt);
        m->state = RS_PM_ASKED;
        w->m_unasked--;
    }
    return n;
}

rs_status_t rs_push_merge_granted(pworker_t *w, const rs_grant_t *g)
{
    pmerge_t *m = NULL;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->merges)
    {
        pmerge_t *c = RS_CONTAINER_OF(pos, pmerge_t, link);
        if (c->state == RS_PM_ASKED) {
            m = c;
            break;
        }
    }
    if (m == NULL)
        return RS_ERR_PROTOCOL; /* a merged grant nobody asked for */
    rs_status_t s = (rs_status_t)g->status;
    if (s == RS_ERR_BACKPRESSURE || s == RS_ERR_IO || s == RS_ERR_BUSY) {
        m->state = RS_PM_SEALED; /* asked again, after retry_ms */
        w->m_unasked++;
        return s;
    }
    if (s != RS_OK)
        return s;
    if (g->len < m->used || g->slot >= RS_GRANT_SLOTS || !rs_push_grant_in_arena(w, g->off, g->len))
        return RS_ERR_PROTOCOL; /* too short, or outside the worker's arena */
    m->state = RS_PM_GRANTED;
    m->slot = g->slot;
    m->off = g->off;
    return RS_OK;
}

pmerge_t *rs_push_merge_next(pworker_t *w)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->merges)
    {
        pmerge_t *m = RS_CONTAINER_OF(pos, pmerge_t, link);
        if (m->state != RS_PM_GRANTED)
            continue;
        if (w->inflight > 0 && w->inflight + m->used > w->p->cfg.max_inflight) {
            w->inflight_full = 1; /* a completion resumes it */
            return NULL;
        }
        rs_list_del(&m->link);
        return m;
    }
    return NULL;
}

void rs_push_merge_release(pmerge_t *m)
{
    rs_pusher_t *p = m->w->p;
    if (p->n_mfree < p->merge_keep && perr_ok(p) && !rs_push_q_writer_short(p->q))
        p->mfree[p->n_mfree++] = m->buf;
    else
        rs_pushq_release(p->q, &m->buf->pub);
    free(m);
}

void rs_push_merge_blocks_free(rs_pusher_t *p)
{
    while (p->n_mfree > 0)
        rs_pushq_release(p->q, &p->mfree[--p->n_mfree]->pub);
}

int rs_push_merge_pending(const rs_pusher_t *p)
{
    if (p->m_inflight > 0)
        return 1;
    for (uint32_t i = 0; i < p->desc.n_workers; i++)
        if (!rs_list_empty(&p->workers[i].merges))
            return 1;
    return 0;
}

void rs_push_merge_drop(pworker_t *w)
{
    if (w->mcur != NULL)
        rs_push_merge_release(w->mcur);
    w->mcur = NULL;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->merges)
    {
        pmerge_t *m = RS_CONTAINER_OF(pos, pmerge_t, link);
        rs_list_del(&m->link);
        rs_push_merge_release(m);
    }
    w->m_unasked = 0;
}
