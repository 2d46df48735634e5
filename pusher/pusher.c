/* The map side's writer calls: open, append, swap, close (docs/shuffle.md). */
#include "pusher/internal.h"

#include "common/clock.h"
#include "common/env.h"
#include "common/log.h"
#include "shuffle/name.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* close drives the engine itself until this long passes without an event. */
#define RS_CLOSE_SPIN_NS 1000000

void rs_pusher_config_defaults(rs_pusher_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->codec = RS_CODEC_NONE;
    cfg->buf_len = 256 << 10;
    cfg->min_buf = 4 << 10;
    cfg->pool_bytes = 32 << 20;
    cfg->queue_depth = 16;
    cfg->max_inflight = 4 << 20;
    cfg->wait_ms = 30000;
    cfg->backpressure_ms = 30000;
}

rs_status_t rs_pusher_config_from_env(rs_pusher_config_t *cfg)
{
    rs_pusher_config_t c = *cfg;
    static const char *const codecs[] = {"none", "lz4", "snappy", NULL};
    int codec = (int)c.codec;
    uint64_t buf = c.buf_len, pool = c.pool_bytes;
    rs_status_t s;
    if ((s = rs_env_choice("RSHUFFLE_CODEC", codecs, &codec)) != RS_OK ||
        (s = rs_env_u64("RSHUFFLE_PUSH_BUF", 1024, 16 << 20, &buf)) != RS_OK ||
        (s = rs_env_u64("RSHUFFLE_PUSH_POOL", 1 << 20, 1ull << 36, &pool)) != RS_OK ||
        (s = rs_env_u64("RSHUFFLE_PUSH_INFLIGHT", 4096, 1ull << 36, &c.max_inflight)) != RS_OK ||
        (s = rs_env_u32("RSHUFFLE_PUSH_WAIT_MS", 10, 3600000, &c.wait_ms)) != RS_OK ||
        (s = rs_env_u32("RSHUFFLE_PUSH_BACKPRESSURE_MS", 10, 3600000, &c.backpressure_ms)) != RS_OK)
        return s;
    c.codec = (rs_codec_t)codec;
    c.buf_len = buf;
    c.pool_bytes = pool;
    *cfg = c;
    return RS_OK;
}

#define PART_BUF_MIN 64 /* smallest partition buffer, bytes (+ RS_PBUF_HEAD_ROOM) */

static rs_status_t connect_worker(rs_pusher_t *p, pworker_t *w)
{
    const char *addr = p->desc.workers[w->index];
    rs_status_t s = rs_sproto_name_connect(p->ctx, addr, &w->ep);
    if (s != RS_OK) {
        rs_error("pusher: cannot connect to worker %u: %s", w->index, rs_strerror(s));
        return s;
    }
    rs_ep_set_user(w->ep, w);
    rs_smsg_attach_t m = {.status = RS_OK,
                          .role = RS_ROLE_PUSHER,
                          .shuffle_id = p->desc.shuffle_id,
                          .n_partitions = p->desc.n_partitions,
                          .map_id = p->map_id,
                          .attempt = p->attempt,
                          .replicas = p->replicas,
                          .generation = p->desc.generation};
    uint8_t buf[RS_SPROTO_ATTACH_LEN];
    size_t len;
    s = rs_sproto_attach_encode(&m, buf, sizeof(buf), &len);
    if (s == RS_OK)
        s = rs_msg_send(w->ep, RS_SMSG_ATTACH, buf, len, NULL, NULL);
    if (s != RS_OK)
        return s;
    uint64_t deadline = rs_now_coarse_ns() + RS_MS_TO_NS(rs_ctx_config(p->ctx)->connect_timeout_ms);
    while (!w->attached && rs_ep_status(w->ep) == RS_OK && rs_now_coarse_ns() < deadline)
        rs_wait(p->ctx, 10);
    if (!w->attached) {
        s = rs_ep_status(w->ep) != RS_OK ? rs_ep_status(w->ep) : RS_ERR_TIMEOUT;
        rs_error("pusher: worker %s did not answer the attach: %s", addr, rs_strerror(s));
        return s;
    }
    if (w->attach_status != RS_OK)
        rs_error("pusher: worker %s refused shuffle %u: %s", addr, p->desc.shuffle_id,
                 rs_strerror(w->attach_status));
    return w->attach_status;
}

static void pusher_free(rs_pusher_t *p)
{
    /* Order: no engine thread, then endpoints (their canceled writes release buffers into the
     * pool), then the pool's registered slab, then the context. */
    if (p->q != NULL)
        rs_push_q_stop(p->q);
    int expected = RS_OK;
    atomic_compare_exchange_strong(&p->error, &expected, (int)RS_ERR_CANCELED);
    for (uint32_t i = 0; p->workers != NULL && i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        if (w->ep != NULL)
            rs_ep_close(w->ep); /* also releases the rkeys unpacked for it */
    }
    if (p->q != NULL)
        rs_pushq_destroy(p->q);
    if (p->ctx != NULL)
        rs_ctx_destroy(p->ctx);
    for (uint32_t i = 0; p->workers != NULL && i < p->desc.n_workers; i++) {
        free(p->workers[i].parts);
        free(p->workers[i].counts);
        free(p->workers[i].retires);
        free(p->workers[i].ahead);
        free(p->workers[i].needy);
    }
    free(p->workers);
    free(p->msg_buf);
    free(p->place);
    free(p->hold);
    free(p->cur);
    free(p->fill);
    free(p->next_len);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

rs_status_t rs_pusher_open(const rs_shuffle_desc_t *desc, uint32_t map_id, uint32_t attempt,
                           const rs_pusher_config_t *cfg, rs_pusher_t **pusher_p)
{
    if (desc == NULL || desc->n_partitions == 0 || desc->n_workers == 0 || desc->workers == NULL)
        return RS_ERR_INVALID;
    rs_pusher_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return RS_ERR_NOMEM;
    pthread_mutex_init(&p->lock, NULL);
    rs_cond_init_monotonic(&p->cond);
    rs_status_t s;
    if (cfg != NULL) {
        p->cfg = *cfg;
    } else {
        rs_pusher_config_defaults(&p->cfg);
        if ((s = rs_pusher_config_from_env(&p->cfg)) != RS_OK)
            goto err_free;
    }
    if (p->cfg.buf_len == 0 || p->cfg.min_buf == 0 || p->cfg.max_inflight == 0 ||
        p->cfg.buf_len + RS_FRAME_HEADER_SIZE > RS_GRANT_MAX ||
        p->cfg.pool_bytes < 4 * (p->cfg.buf_len + RS_PBUF_HEAD_ROOM)) {
        rs_error("pusher: invalid configuration (buffer %zu, pool %zu)", p->cfg.buf_len,
                 p->cfg.pool_bytes);
        s = RS_ERR_CONFIG;
        goto err_free;
    }
    p->desc = *desc;
    p->desc.placement = NULL; /* resolved once into p->place */
    /*
     * Every partition's buffer fits half the pool. With many partitions the
     * share is below min_buf: buffers then start (and stay) at the share,
     * header room included, down to 64 bytes, so 100,000 partitions hold
     * 100,000 small buffers instead of flushing one-record batches.
     */
    size_t share = p->cfg.pool_bytes / 2 / desc->n_partitions;
    p->part_cap = share < p->cfg.buf_len ? share : p->cfg.buf_len;
    if (p->part_cap < p->cfg.min_buf) {
        size_t small = share > RS_PBUF_HEAD_ROOM ? (share - RS_PBUF_HEAD_ROOM) & ~(size_t)63 : 0;
        p->part_cap = small > PART_BUF_MIN ? small : PART_BUF_MIN;
    }
    p->first_len = p->cfg.min_buf < p->part_cap ? p->cfg.min_buf : p->part_cap;
    p->map_id = map_id;
    p->attempt = attempt;
    uint32_t np = desc->n_partitions, nw = desc->n_workers;
    p->place = calloc(np, sizeof(*p->place));
    p->cur = calloc(np, sizeof(*p->cur));
    p->fill = calloc(np, sizeof(*p->fill));
    p->next_len = calloc(np, sizeof(*p->next_len));
    p->workers = calloc(nw, sizeof(*p->workers));
    s = RS_ERR_NOMEM;
    if (p->place == NULL || p->cur == NULL || p->fill == NULL || p->next_len == NULL ||
        p->workers == NULL)
        goto err_free;
    if ((s = rs_shuffle_replicas(desc, &p->replicas)) != RS_OK)
        goto err_free;
    p->hold = calloc((size_t)np * p->replicas, sizeof(*p->hold));
    if (p->hold == NULL) {
        s = RS_ERR_NOMEM;
        goto err_free;
    }
    for (uint32_t i = 0; i < np; i++) {
        if ((s = rs_shuffle_place(desc, i, &p->place[i])) != RS_OK)
            goto err_free;
    }
    for (uint32_t i = 0; i < nw; i++) {
        pworker_t *w = &p->workers[i];
        w->p = p;
        w->index = i;
        rs_list_init(&w->pending);
        w->parts = calloc(np, sizeof(*w->parts));
        w->counts = calloc(np, sizeof(*w->counts));
        w->ahead = calloc(np, sizeof(*w->ahead));
        w->needy = calloc(np, sizeof(*w->needy));
        if (w->parts == NULL || w->counts == NULL || w->ahead == NULL || w->needy == NULL) {
            s = RS_ERR_NOMEM;
            goto err_free;
        }
        for (uint32_t k = 0; k < np; k++)
            rs_list_init(&w->parts[k].blocked);
    }
    if ((s = rs_ctx_create(p->cfg.transport, &p->ctx)) != RS_OK)
        goto err_free;
    p->msg_max = rs_ctx_config(p->ctx)->msg_max;
    if ((p->msg_buf = malloc(p->msg_max)) == NULL) {
        s = RS_ERR_NOMEM;
        goto err_free;
    }
    if ((s = rs_push_install_handlers(p)) != RS_OK)
        goto err_free;
    rs_status_t lost_s = RS_OK;
    for (uint32_t i = 0; i < nw; i++) {
        if ((s = connect_worker(p, &p->workers[i])) == RS_OK)
            continue;
        /* A worker that answers and refuses (another R, another partition count) is an error. */
        if (p->replicas == 1 || p->workers[i].attached)
            goto err_free;
        /* Replicated: its partitions go to the next live workers of their rings. */
        rs_warn("pusher: going on without worker %s (%u replicas)", desc->workers[i], p->replicas);
        p->workers[i].dead = 1;
        p->workers[i].commit_done = 1; /* nothing to commit there, nothing to wait for */
        p->workers[i].commit_status = s;
        p->stats.workers_lost++;
        lost_s = s;
    }
    rs_push_seat_unstarted(p);
    if (!rs_push_replicas_live(p)) {
        s = lost_s;
        goto err_free;
    }

    rs_pushq_config_t qc = {.buf_len = p->cfg.buf_len,
                            .slab_bytes = p->cfg.pool_bytes,
                            .queue_depth = p->cfg.queue_depth ? p->cfg.queue_depth : 16,
                            .wait_ms = p->cfg.wait_ms,
                            .ctx = p->ctx};
    rs_pushq_hooks_t hooks = rs_push_hooks_template;
    hooks.arg = p;
    hooks.fd = rs_ctx_fd(p->ctx);
    if ((s = rs_push_q_create(&qc, &hooks, &p->q)) != RS_OK)
        goto err_free;
    *pusher_p = p;
    return RS_OK;

err_free:
    pusher_free(p);
    return s;
}

/* The limit is what one grant holds: one frame of one record. */
_Static_assert((uint64_t)RS_PUSH_RECORD_MAX + RS_RECORD_HDR + RS_FRAME_HEADER_SIZE == RS_GRANT_MAX,
               "RS_PUSH_RECORD_MAX must match the grant size");
_Static_assert(RS_PUSH_RECORD_MAX + RS_RECORD_HDR <= RS_CODEC_RAW_MAX,
               "a record fits a codec call");

static rs_status_t werr(rs_pusher_t *p)
{
    return (rs_status_t)atomic_load(&p->error);
}

/* Hands the partition's current buffer to the engine. */
static rs_status_t flush_partition(rs_pusher_t *p, uint32_t part)
{
    rs_pbuf_t *b = p->cur[part];
    if (b == NULL)
        return RS_OK;
    p->cur[part] = NULL;
    size_t used = p->fill[part];
    p->fill[part] = 0;
    if (used == 0) {
        rs_pushq_buf_put(p->q, b);
        return RS_OK;
    }
    rs_pbuf_int_t *bi = rs_pbuf_int(b);
    bi->seq = p->next_seq++;
    bi->sealed = 0; /* the engine seals it: this thread goes on producing records */
    return rs_push_q_submit(p->q, part, b, used);
}

/*
 * A buffer for the partition, sized to its history (doubling each time one
 * filled, up to part_cap), making room by flushing others.
 */
static rs_status_t partition_buffer(rs_pusher_t *p, uint32_t part, size_t need)
{
    size_t len = p->next_len[part] ? p->next_len[part] : p->first_len;
    if (len < need)
        len = need;
    rs_status_t s;
    uint64_t deadline = 0;
    while ((s = rs_push_q_try_get(p->q, len, &p->cur[part])) == RS_ERR_BUSY) {
        if ((s = werr(p)) != RS_OK)
            return s;
        /*
         * The engine's buffers come back as their writes complete: wait for
         * one rather than push partly filled ones (tiny batches when a worker
         * is slow), unless the engine itself waits for room.
         */
        if (rs_push_q_engine_held(p->q) > 0 && !rs_push_q_starved(p->q)) {
            uint64_t now = rs_now_coarse_ns();
            if (deadline == 0) {
                deadline = now + RS_MS_TO_NS(p->cfg.wait_ms);
            } else if (now >= deadline) {
                rs_error("pusher: no push buffer came back within %u ms", p->cfg.wait_ms);
                return RS_ERR_TIMEOUT;
            }
            rs_push_q_nap(p->q);
            continue;
        }
        /* The pool is full of partly filled buffers: push the fullest one. */
        uint32_t best = UINT32_MAX;
        for (uint32_t i = 0; i < p->desc.n_partitions; i++)
            if (p->cur[i] != NULL && p->fill[i] > 0 &&
                (best == UINT32_MAX || p->fill[i] > p->fill[best]))
                best = i;
        if (best == UINT32_MAX)
            return rs_pushq_buf_get(p->q, len, &p->cur[part]); /* bounded wait */
        if ((s = flush_partition(p, best)) != RS_OK)
            return s;
    }
    return s;
}

rs_status_t rs_pusher_append(rs_pusher_t *p, uint32_t partition, const void *rec, uint32_t len)
{
    rs_status_t s = werr(p);
    if (s != RS_OK)
        return s;
    if (atomic_load(&p->closing))
        return RS_ERR_STATE; /* after close: it would land after the commit */
    if (partition >= p->desc.n_partitions || (rec == NULL && len > 0))
        return RS_ERR_INVALID;
    size_t need = rs_record_size(len);
    if (len > RS_PUSH_RECORD_MAX) {
        rs_error("pusher: a record of %u bytes is over the limit (RS_PUSH_RECORD_MAX, %u bytes)",
                 len, RS_PUSH_RECORD_MAX);
        return RS_ERR_INVALID;
    }
    if (!rs_push_q_fits(p->q, need)) {
        rs_error("pusher: a record of %u bytes does not fit the push pool (%zu bytes)", len,
                 p->cfg.pool_bytes);
        return RS_ERR_INVALID;
    }
    rs_pbuf_t *b = p->cur[partition];
    if (b != NULL && p->fill[partition] + need > b->len) {
        size_t grown = b->len * 2 < p->part_cap ? b->len * 2 : p->part_cap;
        if (grown > p->next_len[partition])
            p->next_len[partition] = grown; /* it filled: the next one is bigger */
        if ((s = flush_partition(p, partition)) != RS_OK)
            return s;
        b = NULL;
    }
    if (b == NULL) {
        if ((s = partition_buffer(p, partition, need)) != RS_OK)
            return s;
        b = p->cur[partition];
    }
    p->fill[partition] += rs_record_put(b->data + p->fill[partition], rec, len);
    p->records++;
    return RS_OK;
}

rs_status_t rs_pusher_buf_get(rs_pusher_t *p, size_t len, rs_pbuf_t **buf_p)
{
    if (len + RS_FRAME_HEADER_SIZE > RS_GRANT_MAX)
        return RS_ERR_INVALID;
    return rs_pushq_buf_get(p->q, len, buf_p);
}

void rs_pusher_buf_put(rs_pusher_t *p, rs_pbuf_t *buf)
{
    rs_pushq_buf_put(p->q, buf);
}

rs_status_t rs_pusher_swap(rs_pusher_t *p, uint32_t partition, rs_pbuf_t *full, size_t used,
                           rs_pbuf_t **fresh_p)
{
    rs_status_t s = werr(p);
    if (s != RS_OK)
        return s;
    if (atomic_load(&p->closing))
        return RS_ERR_STATE; /* after close: it would land after the commit */
    if (partition >= p->desc.n_partitions || full == NULL || used > full->len)
        return RS_ERR_INVALID;
    rs_pbuf_int_t *b = rs_pbuf_int(full);
    b->seq = p->next_seq++;
    b->sealed = 0;
    if (p->cfg.codec == RS_CODEC_NONE && used > 0) {
        /*
         * Sealed here, on the caller's thread, as Celeborn's swap computes its
         * CRC before hand-off: the engine then only writes, and a writer that
         * swaps pre-filled buffers checksums in parallel with the engine.
         */
        rs_frame_ids_t ids = {.shuffle_id = p->desc.shuffle_id,
                              .map_id = p->map_id,
                              .attempt = p->attempt,
                              .partition = partition,
                              .seq = b->seq};
        size_t flen;
        s = rs_frame_seal(full->data - RS_FRAME_HEADER_SIZE, RS_FRAME_HEADER_SIZE + full->len, used,
                          0, &ids, &flen);
        if (s != RS_OK)
            return s;
        b->frame_len = (uint32_t)flen;
        b->sealed = 1;
    }
    return rs_pushq_swap(p->q, partition, full, used, fresh_p);
}

rs_status_t rs_pusher_close(rs_pusher_t *p, rs_pusher_stats_t *stats)
{
    rs_status_t s = RS_OK;
    for (uint32_t i = 0; i < p->desc.n_partitions && s == RS_OK; i++)
        s = flush_partition(p, i);
    if (s != RS_OK)
        rs_push_fail(p, s, "flushing at close");
    atomic_store(&p->closing, 1);
    rs_push_q_wake(p->q);
    uint64_t deadline = rs_now_coarse_ns() + RS_MS_TO_NS(p->cfg.wait_ms);
    /* Drive the engine while it has work (no spare core assumed), then wait for it. */
    uint64_t spin_end = rs_now_ns() + RS_CLOSE_SPIN_NS;
    while (!__atomic_load_n(&p->commit_finished, __ATOMIC_ACQUIRE) && rs_now_ns() < spin_end)
        if (rs_push_q_drive(p->q) > 0)
            spin_end = rs_now_ns() + RS_CLOSE_SPIN_NS;
    pthread_mutex_lock(&p->lock);
    while (!p->commit_finished) {
        if (rs_now_coarse_ns() >= deadline) {
            pthread_mutex_unlock(&p->lock);
            rs_push_fail(p, RS_ERR_TIMEOUT, "close: writes or commits not done in time");
            pthread_mutex_lock(&p->lock);
            break;
        }
        struct timespec ts = rs_ns_to_timespec(rs_now_ns() + RS_MS_TO_NS(10));
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    int finished = p->commit_finished;
    pthread_mutex_unlock(&p->lock);
    s = werr(p);
    if (s == RS_OK && finished) { /* lost workers (R >= 2) are not waited for */
        for (uint32_t i = 0; i < p->desc.n_workers && s == RS_OK; i++)
            if (!p->workers[i].dead)
                s = p->workers[i].commit_status;
    }
    /* A failed attempt is over: stop the engine, so its counts can be read (and stay put). */
    if (!finished || s != RS_OK)
        rs_push_q_stop(p->q);
    if (stats != NULL) { /* also after a failure: what was done */
        *stats = p->stats;
        stats->records = p->records;
    }
    return s;
}

void rs_pusher_destroy(rs_pusher_t *p)
{
    if (p == NULL)
        return;
    pusher_free(p);
}
