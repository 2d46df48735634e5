/* The map side's writer calls: open, append, swap, close (docs/shuffle.md). */
#include "pusher/internal.h"
#include "pusher/config.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/resident.h"
#include "shuffle/name.h"

#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* close drives the engine itself until this long passes without an event. */
#define RS_CLOSE_SPIN_NS 1000000
/* open polls for the attach replies this long before it sleeps. */
#define RS_ATTACH_SPIN_NS 200000

#define PART_BUF_MIN 64          /* smallest partition buffer, bytes (+ RS_PBUF_HEAD_ROOM) */
#define PART_HOT_MIN (16u << 10) /* hot_bytes never cuts a buffer below this */

/*
 * A partition's buffer within hot_bytes / P (not below PART_HOT_MIN): a
 * record lands in a line of its partition's buffer, and a buffer is read
 * again at its seal and its put; while all partitions' buffers together
 * stay in cache, the appends' stores and those reads hit it
 * (docs/shuffle.md, "Buffers that stay in cache").
 */
static size_t hot_cap(const rs_pusher_config_t *cfg, uint32_t n_partitions)
{
    if (cfg->hot_bytes == 0)
        return SIZE_MAX;
    size_t hot = (cfg->hot_bytes / n_partitions) & ~(size_t)63;
    return hot > PART_HOT_MIN ? hot : PART_HOT_MIN;
}

static rs_status_t werr(rs_pusher_t *p)
{
    return (rs_status_t)atomic_load(&p->error);
}

/* The client was destroyed under an open task: it fails, nothing of it is committed. */
static rs_status_t client_check(rs_pusher_t *p)
{
    if (p->lane != NULL && rs_lane_client_closed(&p->lane->base))
        rs_push_fail(p, RS_ERR_CANCELED, "the client was destroyed");
    return werr(p);
}

/*
 * write_check's conditions as one test of plain loads, for the per-record
 * path: 1 when p takes records (write_check would say RS_OK).
 */
static inline int takes_records(const rs_pusher_t *p)
{
    return p->lane != NULL && !rs_lane_client_closed(&p->lane->base) &&
           atomic_load_explicit(&p->error, memory_order_relaxed) == RS_OK &&
           !atomic_load_explicit(&p->closing, memory_order_relaxed);
}

/* May p take more data? Its client lives and close has not begun. */
static rs_status_t write_check(rs_pusher_t *p)
{
    rs_status_t s = client_check(p);
    if (s == RS_OK && atomic_load(&p->closing))
        s = RS_ERR_STATE; /* after close: it would land after the commit */
    return s;
}

/* Sends w's attach on the lane's connection to its worker (made now on first use). */
static rs_status_t attach_send(rs_pusher_t *p, pworker_t *w)
{
    const char *addr = p->desc.workers[w->index];
    rs_status_t s = rs_push_lane_conn(p->lane, addr, &w->conn);
    if (s != RS_OK) {
        if (p->replicas > 1) /* the open may go on without it: not an error yet */
            rs_warn("pusher: cannot connect to worker %u (%s): %s", w->index, addr, rs_strerror(s));
        else
            rs_error("pusher: cannot connect to worker %u (%s): %s", w->index, addr,
                     rs_strerror(s));
        return s;
    }
    w->ep = w->conn->ep;
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
    if (s != RS_OK)
        return s;
    /* Set before the send: the reply (or the connection's loss) finds w. */
    rs_ep_set_user(w->ep, w);
    rs_push_worker_set(w, RS_PW_ATTACH_SENT);
    s = rs_msg_send(w->ep, RS_SMSG_ATTACH, buf, len, NULL, NULL);
    if (s != RS_OK)
        rs_error("pusher: cannot send the attach to worker %s: %s", addr, rs_strerror(s));
    return s;
}

/* Waits for w's attach reply (bounded by connect_timeout_ms from since). */
static rs_status_t attach_wait(rs_pusher_t *p, pworker_t *w, uint64_t deadline)
{
    const char *addr = p->desc.workers[w->index];
    uint64_t spin_end = rs_now_ns() + RS_ATTACH_SPIN_NS;
    while (!rs_push_worker_is(w, RS_PW_ATTACHED) && !rs_push_worker_is(w, RS_PW_LOST) &&
           werr(p) == RS_OK && rs_ep_status(w->ep) == RS_OK && rs_now_coarse_ns() < deadline) {
        if (rs_progress(p->ctx) > 0 || rs_push_worker_is(w, RS_PW_ATTACHED))
            continue;
        if (rs_now_ns() < spin_end)
            sched_yield(); /* the answer is microseconds away: a sleep costs a wake-up */
        else
            rs_wait(p->ctx, 1);
    }
    if (!rs_push_worker_is(w, RS_PW_ATTACHED) && werr(p) != RS_OK)
        return werr(p); /* another worker failed the pusher meanwhile (R = 1) */
    if (!rs_push_worker_is(w, RS_PW_ATTACHED)) {
        rs_status_t s = rs_ep_status(w->ep) != RS_OK ? rs_ep_status(w->ep) : RS_ERR_TIMEOUT;
        if (rs_push_worker_is(w, RS_PW_LOST) && w->commit_status != RS_OK)
            s = w->commit_status;
        rs_error("pusher: worker %s did not answer the attach: %s", addr, rs_strerror(s));
        return s;
    }
    if (w->attach_status != RS_OK)
        rs_error("pusher: worker %s refused shuffle %u: %s", addr, p->desc.shuffle_id,
                 rs_strerror(w->attach_status));
    return w->attach_status;
}

/*
 * Is w's connection fit for the lane's next task? Its worker answered this
 * task's attach, owes no write, sent nothing the pusher could not take and,
 * once a commit went out, accepted it. Anything else (a worker lost,
 * refused, silent or garbled) closes the connection.
 */
static int conn_reusable(const pworker_t *w)
{
    if (rs_push_worker_is(w, RS_PW_LOST) || !rs_push_worker_is(w, RS_PW_ATTACHED) ||
        w->attach_status != RS_OK || w->garbled || w->inflight != 0 || w->ep == NULL ||
        rs_ep_status(w->ep) != RS_OK)
        return 0;
    return !rs_push_worker_is(w, RS_PW_COMMIT_SENT) ||
           (rs_push_worker_is(w, RS_PW_COMMIT_DONE) && w->commit_status == RS_OK);
}

/* Places n elements of size bytes at the next 16-byte boundary after *end (*at); 0 on overflow. */
static int carve(size_t *end, size_t n, size_t size, size_t *at)
{
    size_t start = (*end + 15) & ~(size_t)15, len;
    if (start < *end || __builtin_mul_overflow(n, size, &len) ||
        __builtin_add_overflow(start, len, end))
        return 0;
    *at = start;
    return 1;
}

/* Where a task's arrays lie in its one allocation (arrays_layout). */
typedef struct arrays_at {
    size_t place, hold, cur, wr, next, sent, workers, w, end;
} arrays_at_t;

#define ARRAYS_PER_WORKER (sizeof(ppart_t) + sizeof(rs_commit_entry_t) + 2 * sizeof(uint32_t))

/* Lays out a task's arrays for np partitions, nw workers and r replicas; 0 on overflow. */
static int arrays_layout(size_t np, size_t nw, size_t r, arrays_at_t *at)
{
    at->end = 0;
    /* Per worker: parts, counts, ahead, needy; each worker's block keeps 8-byte alignment. */
    _Static_assert(sizeof(ppart_t) % 8 == 0 && sizeof(rs_commit_entry_t) % 8 == 0,
                   "per-worker arrays must stay 8-byte aligned");
    return carve(&at->end, np, sizeof(uint32_t), &at->place) &&
           carve(&at->end, np * r, sizeof(uint32_t), &at->hold) &&
           carve(&at->end, np, sizeof(rs_pbuf_t *), &at->cur) &&
           carve(&at->end, np, sizeof(pwrite_t), &at->wr) &&
           carve(&at->end, np, sizeof(size_t), &at->next) &&
           carve(&at->end, np, sizeof(size_t), &at->sent) &&
           carve(&at->end, nw, sizeof(pworker_t), &at->workers) &&
           carve(&at->end, np * nw, ARRAYS_PER_WORKER, &at->w);
}

/* The lane's kept block when it holds len bytes (zeroed), else a fresh one; NULL: no memory. */
static void *arrays_get(rs_push_lane_t *l, size_t len, size_t *got_p)
{
    void *a = l->arrays;
    if (a != NULL && l->arrays_len >= len) {
        *got_p = l->arrays_len;
        l->arrays = NULL;
        memset(a, 0, len); /* resident: cheaper than fresh pages' faults */
        return a;
    }
    *got_p = len;
    return calloc(1, len);
}

/* Gives p's arrays to its lane for the next task (the larger block stays). */
static void arrays_keep(rs_pusher_t *p)
{
    rs_push_lane_t *l = p->lane;
    if (p->arrays == NULL)
        return;
    if (l->arrays == NULL || l->arrays_len < p->arrays_len) {
        free(l->arrays);
        l->arrays = p->arrays;
        l->arrays_len = p->arrays_len;
    } else {
        free(p->arrays);
    }
    p->arrays = NULL;
}

void rs_push_arrays_warm(rs_push_lane_t *l, const rs_shuffle_desc_t *desc)
{
    uint32_t r;
    arrays_at_t at;
    if (rs_shuffle_replicas(desc, &r) != RS_OK ||
        !arrays_layout(desc->n_partitions, desc->n_workers, r, &at) ||
        (l->arrays != NULL && l->arrays_len >= at.end))
        return;
    void *a = calloc(1, at.end);
    if (a == NULL)
        return;                        /* the first task allocates them */
    (void)rs_resident_make(a, at.end); /* a hint: calloc's fresh pages are not resident yet */
    free(l->arrays);
    l->arrays = a;
    l->arrays_len = at.end;
}

/*
 * Every per-partition and per-worker array of a task, zeroed, in one
 * allocation (one per task, not five per worker), kept by the lane for
 * its next task.
 */
static rs_status_t arrays_alloc(rs_pusher_t *p)
{
    size_t np = p->desc.n_partitions, nw = p->desc.n_workers, per = ARRAYS_PER_WORKER;
    arrays_at_t at;
    uint8_t *a = arrays_layout(np, nw, p->replicas, &at)
                     ? arrays_get(p->lane, at.end, &p->arrays_len)
                     : NULL;
    if (a == NULL)
        return RS_ERR_NOMEM;
    p->arrays = a;
    p->place = (uint32_t *)(a + at.place);
    p->hold = (uint32_t *)(a + at.hold);
    p->cur = (rs_pbuf_t **)(a + at.cur);
    p->wr = (pwrite_t *)(a + at.wr);
    p->next_len = (size_t *)(a + at.next);
    p->sent = (size_t *)(a + at.sent);
    p->workers = (pworker_t *)(a + at.workers);
    uint8_t *wa = a + at.w; /* 8-byte members first: every array stays aligned */
    for (size_t i = 0; i < nw; i++, wa += np * per) {
        pworker_t *w = &p->workers[i];
        w->parts = (ppart_t *)wa;
        w->counts = (rs_commit_entry_t *)(wa + np * sizeof(ppart_t));
        w->ahead = (uint32_t *)(wa + np * (sizeof(ppart_t) + sizeof(rs_commit_entry_t)));
        w->needy = w->ahead + np;
    }
    return RS_OK;
}

/* What the workers' entries own (the arrays hold the entries themselves). */
static void workers_free(rs_pusher_t *p)
{
    for (uint32_t i = 0; p->workers != NULL && i < p->desc.n_workers; i++)
        free(p->workers[i].retires);
    p->workers = NULL;
}

/*
 * Gives the lane back (once): no engine round runs meanwhile; connections
 * not fit for reuse are closed (their canceled writes release buffers now,
 * while p lives), buffers of the writer go back to the pool, and the lane
 * is kept only when nothing of this task stays in it.
 */
static void lane_release(rs_pusher_t *p)
{
    rs_push_lane_t *l = p->lane;
    if (l == NULL)
        return;
    rs_push_lane_hold(l);
    for (uint32_t i = 0; p->workers != NULL && i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        if (w->conn == NULL)
            continue;
        if (w->ep != NULL && rs_ep_user(w->ep) == w)
            rs_ep_set_user(w->ep, NULL);
        if (!conn_reusable(w) && w->conn->ep == w->ep)
            rs_push_lane_conn_close(w->conn);
        w->ep = NULL;
    }
    for (uint32_t i = 0; p->cur != NULL && i < p->desc.n_partitions; i++) {
        if (p->cur[i] != NULL)
            rs_pushq_buf_put(p->q, p->cur[i]);
        p->cur[i] = NULL;
    }
    for (uint32_t i = 0; p->workers != NULL && i < p->desc.n_workers; i++)
        rs_push_merge_drop(&p->workers[i]); /* merged writes not posted (a failed task) */
    rs_push_merge_blocks_free(p);
    int reusable = p->user_bufs == 0 && rs_push_q_engine_held(p->q) == 0;
    atomic_store(&l->p, NULL);
    rs_push_lane_unhold(l);
    if (reusable) { /* no write in flight: nothing calls back into the arrays */
        workers_free(p);
        arrays_keep(p);
    }
    p->lane = NULL;
    rs_lane_give(&l->base, reusable); /* not reusable: destroyed now, while p lives */
}

static void pusher_free(rs_pusher_t *p)
{
    int expected = RS_OK;
    atomic_compare_exchange_strong(&p->error, &expected, (int)RS_ERR_CANCELED);
    lane_release(p); /* a lane kept gets the arrays (p->arrays NULL then) */
    workers_free(p);
    free(p->arrays);
    free(p->msg_buf);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static int hint_fits(const rs_pusher_t *p)
{
    const rs_push_lane_t *l = p->lane;
    return l->hint != NULL && l->hint_any && l->hint_shuffle == p->desc.shuffle_id &&
           l->hint_parts == p->desc.n_partitions;
}

/* First buffers sized to what the lane's last task of this shuffle sent per partition. */
static void hint_apply(rs_pusher_t *p)
{
    const rs_push_lane_t *l = p->lane;
    if (!hint_fits(p))
        return;
    for (uint32_t i = 0; i < p->desc.n_partitions; i++) {
        size_t len = l->hint[i];
        if (len > p->part_cap)
            len = p->part_cap;
        if (len > p->first_len)
            p->next_len[i] = len;
    }
}

/*
 * Keeps what this committed task sent per partition, a quarter more plus
 * 256 bytes for the next task's spread (a partition that got nothing gets
 * no grant asked for); the buffers of one task still fit half the pool
 * (part_cap), so the hint never starves the pool. The margin is room a
 * worker holds from the task's open to its commit (the unused part then
 * goes back, between other tasks' grants): half as much again spilled
 * 48-52 MiB with 760 MiB arenas at 1 GiB, 64 tasks, 200 partitions (a
 * quarter: 0). A partition that outgrows it fills its buffer to the grant
 * and sends the rest merged.
 */
static void hint_keep(rs_pusher_t *p)
{
    rs_push_lane_t *l = p->lane;
    uint32_t np = p->desc.n_partitions;
    if (l->hint == NULL || l->hint_parts != np) {
        uint32_t *h = calloc(np, sizeof(*h));
        if (h == NULL)
            return; /* a hint only: the next task starts small */
        free(l->hint);
        l->hint = h;
        l->hint_parts = np;
    }
    l->hint_shuffle = p->desc.shuffle_id;
    l->hint_any = 0;
    for (uint32_t i = 0; i < np; i++) {
        size_t len = p->sent[i] ? p->sent[i] + p->sent[i] / 4 + 256 : 0; /* 0: nothing asked */
        len = (len + 63) & ~(size_t)63;
        l->hint[i] = (uint32_t)(len < p->part_cap ? len : p->part_cap);
        l->hint_any |= l->hint[i] != 0;
    }
}

/* Attaches every worker: all attaches sent first, then their replies waited for. */
static rs_status_t attach_all(rs_pusher_t *p)
{
    uint32_t nw = p->desc.n_workers;
    rs_status_t s, lost_s = RS_OK;
    uint64_t timeout = RS_MS_TO_NS(rs_ctx_config(p->ctx)->connect_timeout_ms);
    uint64_t deadline = 0;
    for (uint32_t pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < nw; i++) {
            pworker_t *w = &p->workers[i];
            if (rs_push_worker_is(w, RS_PW_LOST))
                continue; /* R >= 2: lost meanwhile (worker_lost counted it) */
            if (pass == 0) {
                s = attach_send(p, w);
                if (deadline == 0 || s == RS_OK)
                    deadline = rs_now_coarse_ns() + timeout; /* connects are sequential */
            } else {
                s = attach_wait(p, w, deadline);
            }
            if (s == RS_OK && (s = werr(p)) == RS_OK)
                continue;
            if (rs_push_worker_is(w, RS_PW_LOST) && werr(p) == RS_OK) {
                lost_s = w->commit_status; /* lost meanwhile (worker_lost counted it) */
                continue;
            }
            /* A worker that answers and refuses (another R, another partition count) is an error.
             */
            if (p->replicas == 1 || rs_push_worker_is(w, RS_PW_ATTACHED) || werr(p) != RS_OK)
                return werr(p) != RS_OK ? werr(p) : s;
            /* Replicated: its partitions go to the next live workers of their rings. */
            rs_warn("pusher: going on without worker %s (%u replicas)", p->desc.workers[i],
                    p->replicas);
            rs_push_worker_set(w, RS_PW_LOST);
            rs_push_commit_end(w, s); /* nothing to commit there, nothing to wait for */
            p->stats.workers_lost++;
            lost_s = s;
        }
    }
    uint32_t lost = 0;
    for (uint32_t i = 0; i < nw; i++)
        lost += rs_push_worker_is(&p->workers[i], RS_PW_LOST);
    if (lost == 0)
        return werr(p); /* nobody lost: the holders seated before the attaches stand */
    rs_push_seat_unstarted(p);
    if (!rs_push_replicas_live(p))
        return lost_s != RS_OK ? lost_s : RS_ERR_UNREACHABLE;
    return werr(p);
}

rs_status_t rs_pusher_open(const rs_shuffle_desc_t *desc, uint32_t map_id, uint32_t attempt,
                           const rs_pusher_config_t *cfg, rs_pusher_t **pusher_p)
{
    rs_client_t *c = rs_client_default();
    if (c == NULL)
        return RS_ERR_NOMEM;
    return rs_pusher_open_in(c, desc, map_id, attempt, cfg, pusher_p);
}

rs_status_t rs_pusher_open_in(rs_client_t *client, const rs_shuffle_desc_t *desc, uint32_t map_id,
                              uint32_t attempt, const rs_pusher_config_t *cfg,
                              rs_pusher_t **pusher_p)
{
    if (client == NULL || pusher_p == NULL || desc == NULL || desc->n_partitions == 0 ||
        desc->n_workers == 0 || desc->workers == NULL)
        return RS_ERR_INVALID;
    rs_pusher_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return RS_ERR_NOMEM;
    pthread_mutex_init(&p->lock, NULL);
    rs_cond_init_monotonic(&p->cond);
    p->client = client;
    rs_push_lane_key_t key;
    rs_status_t s = rs_push_lane_key_make(cfg, desc->n_partitions, &p->cfg, &key);
    if (s != RS_OK)
        goto err_free;
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
    size_t hot = hot_cap(&p->cfg, desc->n_partitions);
    if (hot < p->part_cap)
        p->part_cap = hot;
    if (p->part_cap < p->cfg.min_buf) {
        size_t small = share > RS_PBUF_HEAD_ROOM ? (share - RS_PBUF_HEAD_ROOM) & ~(size_t)63 : 0;
        p->part_cap = small > PART_BUF_MIN ? small : PART_BUF_MIN;
    }
    p->first_len = p->cfg.min_buf < p->part_cap ? p->cfg.min_buf : p->part_cap;
    p->map_id = map_id;
    p->attempt = attempt;
    if ((s = rs_shuffle_replicas(desc, &p->replicas)) != RS_OK)
        goto err_free;
    if ((s = rs_push_lane_get(client, &key, &p->lane)) != RS_OK)
        goto err_free;
    p->ctx = p->lane->ctx;
    p->q = p->lane->q;
    if ((s = arrays_alloc(p)) != RS_OK)
        goto err_free;
    uint32_t np = desc->n_partitions, nw = desc->n_workers;
    for (uint32_t i = 0; i < np; i++) {
        if ((s = rs_shuffle_place(desc, i, &p->place[i])) != RS_OK)
            goto err_free;
    }
    for (uint32_t i = 0; i < nw; i++) {
        pworker_t *w = &p->workers[i];
        w->p = p;
        w->index = i;
        rs_list_init(&w->pending);
        rs_list_init(&w->merges);
        for (uint32_t k = 0; k < np; k++)
            rs_list_init(&w->parts[k].blocked);
    }
    rs_push_seat_unstarted(p); /* holders valid before any handler can see a loss */
    hint_apply(p);
    rs_push_merge_setup(p);
    p->msg_max = rs_ctx_config(p->ctx)->msg_max;
    if ((p->msg_buf = malloc(p->msg_max)) == NULL) {
        s = RS_ERR_NOMEM;
        goto err_free;
    }
    /*
     * From here on the lane's handlers see p: every field they touch is
     * set. The attaches run with the engine held (no round meanwhile), on
     * this thread.
     */
    rs_push_lane_hold(p->lane);
    rs_push_lane_check(p->lane);
    rs_push_q_reuse(p->q, p->cfg.wait_ms);
    atomic_store(&p->lane->p, p);
    s = attach_all(p);
    if (s == RS_OK && hint_fits(p))
        rs_push_prefetch(p, p->lane->hint);
    rs_push_lane_unhold(p->lane);
    if (s != RS_OK)
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

/* Hands the partition's current buffer to the engine. */
static rs_status_t flush_partition(rs_pusher_t *p, uint32_t part)
{
    rs_pbuf_t *b = p->cur[part];
    if (b == NULL)
        return RS_OK;
    p->cur[part] = NULL;
    size_t used = p->wr[part].fill;
    p->wr[part] = (pwrite_t){0};
    p->sent[part] += used;
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
            if (p->cur[i] != NULL && p->wr[i].fill > 0 &&
                (best == UINT32_MAX || p->wr[i].fill > p->wr[best].fill))
                best = i;
        if (best == UINT32_MAX)
            return rs_pushq_buf_get(p->q, len, &p->cur[part]); /* bounded wait */
        if ((s = flush_partition(p, best)) != RS_OK)
            return s;
    }
    return s;
}

/*
 * The partition's buffer has no room for need bytes: checks the record
 * against the limits, hands the full buffer on and takes the next one.
 */
static __attribute__((noinline)) rs_status_t append_room(rs_pusher_t *p, uint32_t partition,
                                                         uint32_t len, size_t need)
{
    rs_status_t s;
    pwrite_t *wr = &p->wr[partition];
    if (len > RS_PUSH_RECORD_MAX) {
        rs_error("pusher: a record of %u bytes is over the limit "
                 "(RS_PUSH_RECORD_MAX, %u bytes)",
                 len, RS_PUSH_RECORD_MAX);
        return RS_ERR_INVALID;
    }
    if (!rs_push_q_fits(p->q, need)) {
        rs_error("pusher: a record of %u bytes does not fit the push pool (%zu bytes)", len,
                 p->cfg.pool_bytes);
        return RS_ERR_INVALID;
    }
    rs_pbuf_t *b = p->cur[partition];
    if (b != NULL) {
        size_t grown = b->len * 2 < p->part_cap ? b->len * 2 : p->part_cap;
        if (grown > p->next_len[partition])
            p->next_len[partition] = grown; /* it filled: the next one is bigger */
        if ((s = flush_partition(p, partition)) != RS_OK)
            return s;
    }
    if ((s = partition_buffer(p, partition, need)) != RS_OK)
        return s;
    b = p->cur[partition];
    RS_ASSERT(b->len >= need && b->len <= UINT32_MAX);
    *wr = (pwrite_t){.data = b->data, .fill = 0, .cap = (uint32_t)b->len};
    return RS_OK;
}

/*
 * Takes need bytes of the partition's buffer (which has room) for a
 * record of len bytes and writes its header; returns where its bytes go.
 */
static inline uint8_t *append_at(rs_pusher_t *p, pwrite_t *wr, uint32_t len, size_t need)
{
    uint8_t *dst = wr->data + wr->fill;
    uint32_t at = wr->fill + (uint32_t)need;
    wr->fill = at;
    p->records++;
    /*
     * Records land in many partitions' buffers at once, more write streams
     * than the hardware prefetcher follows: fetch the lines the next record
     * of this partition is likely to write now, so that it hits cache.
     */
    __builtin_prefetch(wr->data + at, 1, 3);
    __builtin_prefetch(wr->data + at + need - 1, 1, 3);
    rs_record_hdr_put(dst, len);
    return dst + RS_RECORD_HDR;
}

/*
 * Every append or reserve that is not a record fitting an open pusher's
 * buffer: the checks (bad_arg: the caller's own argument is wrong), room
 * for the record in the partition's buffer, and where its bytes go.
 */
static __attribute__((noinline)) rs_status_t record_slow(rs_pusher_t *p, uint32_t partition,
                                                         uint32_t len, int bad_arg, uint8_t **dst_p)
{
    if (p == NULL)
        return RS_ERR_INVALID;
    rs_status_t s = write_check(p);
    if (s != RS_OK)
        return s;
    if (partition >= p->desc.n_partitions || bad_arg)
        return RS_ERR_INVALID;
    size_t need = rs_record_size(len);
    pwrite_t *wr = &p->wr[partition];
    if (wr->cap - wr->fill < need && (s = append_room(p, partition, len, need)) != RS_OK)
        return s;
    *dst_p = append_at(p, wr, len, need);
    return RS_OK;
}

static __attribute__((noinline)) rs_status_t append_slow(rs_pusher_t *p, uint32_t partition,
                                                         const void *rec, uint32_t len)
{
    uint8_t *dst;
    rs_status_t s = record_slow(p, partition, len, rec == NULL && len > 0, &dst);
    if (s == RS_OK && len > 0)
        memcpy(dst, rec, len);
    return s;
}

/*
 * The per-record path: the argument checks and takes_records, then the
 * copy. Anything else (a full buffer, an error, a closed client) is
 * append_slow's, so this one saves no registers.
 */
rs_status_t rs_pusher_append(rs_pusher_t *p, uint32_t partition, const void *rec, uint32_t len)
{
    if (__builtin_expect(
            p == NULL || partition >= p->desc.n_partitions || rec == NULL || !takes_records(p), 0))
        return append_slow(p, partition, rec, len);
    pwrite_t *wr = &p->wr[partition];
    size_t need = rs_record_size(len);
    /* A record that fits a buffer is within both limits; the rest is append_room's. */
    if (__builtin_expect(wr->cap - wr->fill < need, 0))
        return append_slow(p, partition, rec, len);
    uint8_t *dst = append_at(p, wr, len, need);
    memcpy(dst, rec, len); /* last: nothing lives across it */
    return RS_OK;
}

static __attribute__((noinline)) rs_status_t reserve_slow(rs_pusher_t *p, uint32_t partition,
                                                          uint32_t len, void **rec_p)
{
    uint8_t *dst;
    rs_status_t s = record_slow(p, partition, len, rec_p == NULL, &dst);
    if (s == RS_OK)
        *rec_p = dst;
    return s;
}

rs_status_t rs_pusher_reserve(rs_pusher_t *p, uint32_t partition, uint32_t len, void **rec_p)
{
    if (__builtin_expect(p == NULL || partition >= p->desc.n_partitions || rec_p == NULL ||
                             !takes_records(p),
                         0))
        return reserve_slow(p, partition, len, rec_p);
    pwrite_t *wr = &p->wr[partition];
    size_t need = rs_record_size(len);
    if (__builtin_expect(wr->cap - wr->fill < need, 0))
        return reserve_slow(p, partition, len, rec_p);
    *rec_p = append_at(p, wr, len, need);
    return RS_OK;
}

rs_status_t rs_pusher_buf_get(rs_pusher_t *p, size_t len, rs_pbuf_t **buf_p)
{
    if (p == NULL || buf_p == NULL || len + RS_FRAME_HEADER_SIZE > RS_GRANT_MAX)
        return RS_ERR_INVALID;
    if (p->lane == NULL || atomic_load(&p->closing))
        return RS_ERR_STATE; /* as append and swap: nothing more to write */
    rs_status_t s = rs_pushq_buf_get(p->q, len, buf_p);
    if (s == RS_OK)
        p->user_bufs++;
    return s;
}

void rs_pusher_buf_put(rs_pusher_t *p, rs_pbuf_t *buf)
{
    if (p == NULL || p->lane == NULL)
        return; /* closed: the lane went back with this buffer counted as held */
    rs_pushq_buf_put(p->q, buf);
    p->user_bufs--;
}

rs_status_t rs_pusher_swap(rs_pusher_t *p, uint32_t partition, rs_pbuf_t *full, size_t used,
                           rs_pbuf_t **fresh_p)
{
    if (p == NULL || fresh_p == NULL)
        return RS_ERR_INVALID;
    rs_status_t s = write_check(p);
    if (s != RS_OK)
        return s;
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
    if (p == NULL)
        return RS_ERR_INVALID;
    if (p->lane == NULL)
        return werr(p) != RS_OK ? werr(p) : RS_ERR_STATE; /* closed already */
    rs_status_t s = client_check(p);
    /*
     * Compressed batches need output room that only posted writes free, so
     * their requests cannot wait for the whole flush.
     */
    if (p->cfg.codec == RS_CODEC_NONE)
        atomic_store(&p->flushing, 1);
    rs_push_q_park_held(p->q);
    for (uint32_t i = 0; i < p->desc.n_partitions && s == RS_OK; i++)
        s = flush_partition(p, i);
    if (atomic_exchange(&p->flushing, 0))
        atomic_store_explicit(&p->flushed, 1, memory_order_release);
    if (s != RS_OK)
        rs_push_fail(p, s, "flushing at close");
    atomic_store(&p->closing, 1);
    /*
     * This thread drives the engine to the end of the commit (no spare core
     * assumed): the engine thread is parked, so the two never share a core
     * nor wait for each other's rounds; between events it sleeps on the
     * transport's descriptor.
     */
    rs_push_q_park(p->q);
    uint64_t deadline = rs_now_coarse_ns() + RS_MS_TO_NS(p->cfg.wait_ms);
    uint64_t spin_end = rs_now_ns() + RS_CLOSE_SPIN_NS;
    while (!__atomic_load_n(&p->commit_finished, __ATOMIC_ACQUIRE)) {
        int n = rs_push_q_drive(p->q);
        if (n > 0) {
            spin_end = rs_now_ns() + RS_CLOSE_SPIN_NS;
            continue;
        }
        if (__atomic_load_n(&p->commit_finished, __ATOMIC_ACQUIRE))
            break;
        if (rs_now_coarse_ns() >= deadline) {
            rs_push_fail(p, RS_ERR_TIMEOUT, "close: writes or commits not done in time");
            break;
        }
        if (n < 0 || rs_now_ns() < spin_end) {
            sched_yield(); /* an answer is microseconds away, or a last engine round ends */
            continue;
        }
        if (rs_ctx_arm(p->ctx) == RS_OK) {
            struct pollfd pfd = {.fd = rs_ctx_fd(p->ctx), .events = POLLIN};
            poll(&pfd, 1, 1); /* a timed retry (backpressure) is caught by the bound */
        }
    }
    pthread_mutex_lock(&p->lock);
    int finished = p->commit_finished;
    pthread_mutex_unlock(&p->lock);
    s = werr(p);
    if (s == RS_OK && finished) { /* lost workers (R >= 2) are not waited for */
        for (uint32_t i = 0; i < p->desc.n_workers && s == RS_OK; i++)
            if (!rs_push_worker_is(&p->workers[i], RS_PW_LOST))
                s = p->workers[i].commit_status;
    }
    if (s == RS_OK)
        hint_keep(p);
    /* The attempt is over either way: its lane goes back (a failed one's counts stay put). */
    lane_release(p);
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
