/*
 * The bounded hand-off queue and its engine thread: a single-producer (the
 * writer) single-consumer (the engine) ring, and the public rs_pushq_* API
 * over it and the buffer pool (pusher/pool.c). Neither side makes a system
 * call on the common path.
 *
 * No spare core is assumed: whoever holds the driver token runs the
 * engine's rounds. The engine thread takes it while it is awake (spinning
 * on a spare core); when it sleeps, the writer runs the round itself right
 * after handing a buffer over, instead of waking it (a wake-up would make
 * the engine preempt the writer on a shared core: a context switch per
 * buffer). A writer that must wait (no idle buffer, no free slot) also
 * drives first and naps only when the engine thread holds the token.
 */
#include "pusher/pushq_int.h"

#include "common/assert.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define PUSHQ_SPIN_NS 50000 /* engine spins this long before sleeping */

void rs_pushq_config_defaults(rs_pushq_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    cfg->buf_len = 64 << 10;
    cfg->slab_bytes = 16 * ((64 << 10) + RS_PBUF_HEAD_ROOM);
    cfg->queue_depth = 8;
    cfg->wait_ms = 30000;
}

static int deadline_passed(uint64_t deadline)
{
    return rs_now_coarse_ns() >= deadline;
}

static int writer_drive(rs_pushq_t *q);

/* A buffer of len bytes for the writer, waiting at most wait_ms for room. */
static rs_status_t pool_get(rs_pushq_t *q, size_t len, rs_pbuf_int_t **b_p)
{
    if (rs_push_block_len(len) > q->ra.size) {
        rs_error("push buffer pool: a %zu-byte buffer does not fit the %zu-byte slab", len,
                 q->cfg.slab_bytes);
        return RS_ERR_NO_SPACE;
    }
    rs_status_t st = rs_push_pool_try_take(q, len, b_p);
    if (st != RS_ERR_BUSY)
        return st;
    uint64_t deadline = rs_now_coarse_ns() + RS_MS_TO_NS(q->cfg.wait_ms);
    while ((st = rs_push_pool_try_take(q, len, b_p)) == RS_ERR_BUSY) {
        rs_status_t err = (rs_status_t)atomic_load(&q->error);
        if (err != RS_OK)
            return err;
        if (deadline_passed(deadline)) {
            rs_error("push buffer pool: no buffer of %zu bytes within %u ms (slab %zu bytes)", len,
                     q->cfg.wait_ms, q->cfg.slab_bytes);
            return RS_ERR_TIMEOUT;
        }
        if (!writer_drive(q))
            rs_push_pool_nap(q, WAIT_BUFFER);
    }
    return st;
}

/* ----------------------------------------------------------------- queue */

static void engine_wake(rs_pushq_t *q)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&q->engine_sleeping, memory_order_relaxed)) {
        uint64_t one = 1;
        ssize_t n = write(q->efd, &one, sizeof(one));
        (void)n; /* a full counter still wakes the engine */
    }
}

void rs_push_q_wake(rs_pushq_t *q)
{
    engine_wake(q);
}

/* Appends b to the queue, waiting at most wait_ms for a slot. */
static rs_status_t queue_push(rs_pushq_t *q, rs_pbuf_int_t *b)
{
    if (atomic_load_explicit(&q->parked, memory_order_relaxed) &&
        !atomic_load_explicit(&q->park_held, memory_order_relaxed))
        rs_push_q_unpark(q); /* data flows: the engine thread may use a spare core */
    uint64_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    if (tail - atomic_load_explicit(&q->head, memory_order_acquire) >= q->cfg.queue_depth) {
        uint64_t deadline = rs_now_coarse_ns() + RS_MS_TO_NS(q->cfg.wait_ms);
        while (tail - atomic_load(&q->head) >= q->cfg.queue_depth) {
            rs_status_t err = (rs_status_t)atomic_load(&q->error);
            if (err != RS_OK)
                return err;
            if (deadline_passed(deadline)) {
                rs_error("push queue: no free slot within %u ms", q->cfg.wait_ms);
                return RS_ERR_TIMEOUT;
            }
            rs_push_pool_collect(q);
            if (!writer_drive(q))
                rs_push_pool_nap(q, WAIT_SLOT);
        }
    }
    q->ring[tail & q->ring_mask] = b;
    atomic_fetch_add_explicit(&q->submitted, 1, memory_order_relaxed);
    atomic_store_explicit(&q->tail, tail + 1, memory_order_release);
    /* A sleeping engine is not woken: the writer runs the round itself. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&q->engine_sleeping, memory_order_relaxed) && !writer_drive(q))
        engine_wake(q);
    return RS_OK;
}

/* ---------------------------------------------------------------- engine */

static int engine_sleep(rs_pushq_t *q, int queue_blocked)
{
    atomic_store(&q->engine_sleeping, 1);
    /* Re-check after announcing the sleep: a writer that pushed before saw 0. */
    if (!queue_blocked &&
        atomic_load(&q->tail) != atomic_load_explicit(&q->head, memory_order_relaxed)) {
        atomic_store(&q->engine_sleeping, 0);
        return 1;
    }
    if (q->hooks.arm != NULL && q->hooks.arm(q->hooks.arg) != 0) {
        atomic_store(&q->engine_sleeping, 0);
        return 1;
    }
    struct pollfd pfd[2] = {{.fd = q->efd, .events = POLLIN},
                            {.fd = q->hooks.fd, .events = POLLIN}};
    int nfd = q->hooks.fd >= 0 ? 2 : 1;
    int timeout = q->hooks.poll != NULL && q->hooks.fd < 0
                      ? 1
                      : (int)atomic_load_explicit(&q->sleep_ms, memory_order_relaxed);
    int n = poll(pfd, (nfds_t)nfd, timeout);
    atomic_store(&q->engine_sleeping, 0);
    if (n > 0 && (pfd[0].revents & POLLIN)) {
        uint64_t v;
        ssize_t r = read(q->efd, &v, sizeof(v));
        (void)r;
    }
    return n > 0;
}

static int driver_take(rs_pushq_t *q)
{
    int free_token = 0;
    return atomic_compare_exchange_strong(&q->driver, &free_token, 1);
}

static void driver_drop(rs_pushq_t *q)
{
    atomic_store_explicit(&q->driver, 0, memory_order_release);
}

/*
 * One engine round (driver token held): takes what is queued, in order,
 * until take says busy (*blocked), then polls. Returns the events handled.
 */
static unsigned engine_round(rs_pushq_t *q, int *blocked)
{
    RS_ASSERT(atomic_load(&q->driver) == 1); /* one round at a time: the caller holds the token */
    unsigned events = 0;
    *blocked = 0;
    uint64_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
    while (head != atomic_load_explicit(&q->tail, memory_order_acquire)) {
        rs_pbuf_int_t *b = q->ring[head & q->ring_mask];
        if (q->hooks.take(q->hooks.arg, q, b) == RS_ERR_BUSY) {
            *blocked = 1;
            break;
        }
        head++;
        atomic_store_explicit(&q->head, head, memory_order_release);
        rs_push_pool_signal_slot(q);
        events++;
    }
    if (q->hooks.poll != NULL)
        events += q->hooks.poll(q->hooks.arg);
    return events;
}

/* Writer: runs one engine round itself if no thread is running one; 1 if it did. */
static int writer_drive(rs_pushq_t *q)
{
    return rs_push_q_drive(q) >= 0;
}

/* Parked: asleep on the eventfd alone (transport events do not wake it). */
static void engine_park(rs_pushq_t *q)
{
    atomic_store(&q->engine_sleeping, 1);
    /*
     * Parked, this thread frees no slot and no buffer: a writer napping
     * until it does would sleep its whole slice (10 ms; once per map task
     * in two at 200 partitions), so it is woken to drive the rounds itself.
     */
    rs_push_pool_signal(q);
    if (atomic_load(&q->parked) && !atomic_load(&q->stop)) {
        struct pollfd pfd = {.fd = q->efd, .events = POLLIN};
        if (poll(&pfd, 1, (int)atomic_load_explicit(&q->sleep_ms, memory_order_relaxed)) > 0) {
            uint64_t v;
            ssize_t r = read(q->efd, &v, sizeof(v));
            (void)r;
        }
    }
    atomic_store(&q->engine_sleeping, 0);
}

static void *engine_main(void *arg)
{
    rs_pushq_t *q = arg;
    uint64_t idle_since = 0;
    while (!atomic_load_explicit(&q->stop, memory_order_acquire)) {
        if (atomic_load_explicit(&q->parked, memory_order_acquire)) {
            engine_park(q);
            idle_since = 0;
            continue;
        }
        unsigned events = 0;
        int blocked = 0;
        if (driver_take(q)) {
            events = engine_round(q, &blocked);
            driver_drop(q);
        }
        if (events > 0) {
            idle_since = 0;
            continue;
        }
        if (atomic_load_explicit(&q->parked, memory_order_acquire))
            continue; /* parked during the round: park now (waking a napping writer), not sleep */
        uint64_t now = rs_now_ns();
        if (idle_since == 0)
            idle_since = now;
        if (now - idle_since < PUSHQ_SPIN_NS) {
            sched_yield(); /* cores may be fewer than busy threads: let the others run */
            continue;
        }
        engine_sleep(q, blocked);
        idle_since = 0;
    }
    return NULL;
}

/* ---------------------------------------------------------------- public */

static rs_status_t consumer_take(void *arg, rs_pushq_t *q, rs_pbuf_int_t *b)
{
    (void)arg;
    q->fn(q->fn_arg, q, b->partition, &b->pub, b->used);
    return RS_OK;
}

rs_status_t rs_push_q_create(const rs_pushq_config_t *cfg, const rs_pushq_hooks_t *hooks,
                             rs_pushq_t **q_p)
{
    if (cfg == NULL || hooks == NULL || hooks->take == NULL || cfg->buf_len == 0 ||
        cfg->queue_depth == 0 || cfg->slab_bytes < rs_push_block_len(cfg->buf_len)) {
        rs_error("push queue: invalid configuration (buffer %zu bytes, slab %zu, depth %u)",
                 cfg ? cfg->buf_len : 0, cfg ? cfg->slab_bytes : 0, cfg ? cfg->queue_depth : 0);
        return RS_ERR_INVALID;
    }
    rs_pushq_t *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return RS_ERR_NOMEM;
    q->cfg = *cfg;
    q->hooks = *hooks;
    atomic_init(&q->nap_ms, PUSHQ_NAP_MS);
    atomic_init(&q->sleep_ms, PUSHQ_SLEEP_MS);
    rs_status_t st = RS_ERR_NOMEM;
    uint32_t ring = 1;
    while (ring < cfg->queue_depth)
        ring <<= 1;
    q->ring_mask = ring - 1;
    q->ring = calloc(ring, sizeof(*q->ring));
    if (q->ring == NULL)
        goto err_free_q;
    st = rs_push_pool_slab_alloc(q);
    if (st != RS_OK)
        goto err_free_ring;
    st = rs_range_alloc_init(&q->ra, cfg->slab_bytes, 64);
    if (st != RS_OK)
        goto err_free_slab;
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->efd < 0) {
        rs_error("push queue: eventfd: %s", strerror(errno));
        st = RS_ERR_IO;
        goto err_free_ra;
    }
    pthread_mutex_init(&q->lock, NULL);
    rs_cond_init_monotonic(&q->cond);
    if (pthread_create(&q->thread, NULL, engine_main, q) != 0) {
        rs_error("push queue: cannot start the engine thread");
        st = RS_ERR_NOMEM;
        goto err_destroy_sync;
    }
    q->thread_started = 1;
    *q_p = q;
    return RS_OK;

err_destroy_sync:
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
    close(q->efd);
err_free_ra:
    rs_range_alloc_cleanup(&q->ra);
err_free_slab:
    rs_push_pool_slab_free(q);
err_free_ring:
    free(q->ring);
err_free_q:
    free(q);
    return st;
}

rs_status_t rs_pushq_create(const rs_pushq_config_t *cfg, rs_pushq_fn_t fn, void *arg,
                            rs_pushq_t **q_p)
{
    if (fn == NULL)
        return RS_ERR_INVALID;
    /* The consumer must be known before the engine thread starts. */
    rs_pushq_hooks_t hooks = {.take = consumer_take, .fd = -1};
    rs_pushq_t *q;
    rs_status_t st = rs_push_q_create(cfg, &hooks, &q);
    if (st != RS_OK)
        return st;
    q->fn = fn;
    q->fn_arg = arg;
    *q_p = q;
    return RS_OK;
}

rs_status_t rs_pushq_buf_get(rs_pushq_t *q, size_t len, rs_pbuf_t **buf_p)
{
    if (q == NULL || buf_p == NULL || len == 0)
        return RS_ERR_INVALID;
    rs_pbuf_int_t *b;
    rs_status_t st = pool_get(q, len, &b);
    if (st != RS_OK)
        return st;
    *buf_p = &b->pub;
    return RS_OK;
}

void rs_pushq_buf_put(rs_pushq_t *q, rs_pbuf_t *buf)
{
    if (q == NULL || buf == NULL)
        return;
    rs_push_pool_idle_put(q, rs_pbuf_int(buf));
}

rs_status_t rs_pushq_swap(rs_pushq_t *q, uint32_t partition, rs_pbuf_t *full, size_t used,
                          rs_pbuf_t **fresh_p)
{
    if (q == NULL)
        return RS_ERR_INVALID;
    rs_status_t st = (rs_status_t)atomic_load_explicit(&q->error, memory_order_relaxed);
    if (st != RS_OK)
        return st;
    if (full == NULL || fresh_p == NULL || used > full->len)
        return RS_ERR_INVALID;
    /* The idle buffer is taken first, so the writer never gets back the one it hands over. */
    rs_pbuf_int_t *fresh;
    st = pool_get(q, full->len, &fresh);
    if (st != RS_OK)
        return st;
    rs_pbuf_int_t *b = rs_pbuf_int(full);
    b->partition = partition;
    b->used = used;
    st = queue_push(q, b);
    if (st != RS_OK) {
        rs_push_pool_idle_put(q, fresh);
        return st;
    }
    *fresh_p = &fresh->pub;
    return RS_OK;
}

rs_status_t rs_push_q_submit(rs_pushq_t *q, uint32_t partition, rs_pbuf_t *buf, size_t used)
{
    rs_status_t st = (rs_status_t)atomic_load_explicit(&q->error, memory_order_relaxed);
    if (st != RS_OK)
        return st;
    rs_pbuf_int_t *b = rs_pbuf_int(buf);
    b->partition = partition;
    b->used = used;
    return queue_push(q, b);
}

rs_status_t rs_push_q_try_get(rs_pushq_t *q, size_t len, rs_pbuf_t **buf_p)
{
    rs_pbuf_int_t *b;
    rs_status_t st = rs_push_pool_try_take(q, len, &b);
    if (st == RS_OK)
        *buf_p = &b->pub;
    return st;
}

rs_status_t rs_pushq_copy(rs_pushq_t *q, uint32_t partition, const void *src, size_t len)
{
    if (q == NULL || (src == NULL && len > 0))
        return RS_ERR_INVALID;
    rs_status_t st = (rs_status_t)atomic_load_explicit(&q->error, memory_order_relaxed);
    if (st != RS_OK)
        return st;
    rs_pbuf_int_t *b;
    st = pool_get(q, len > q->cfg.buf_len ? len : q->cfg.buf_len, &b);
    if (st != RS_OK)
        return st;
    memcpy(b->pub.data, src, len);
    b->partition = partition;
    b->used = len;
    st = queue_push(q, b);
    if (st != RS_OK)
        rs_pushq_buf_put(q, &b->pub);
    return st;
}

void rs_pushq_release(rs_pushq_t *q, rs_pbuf_t *buf)
{
    if (q == NULL || buf == NULL)
        return;
    rs_pbuf_int_t *b = rs_pbuf_int(buf);
    if (b->transient) { /* engine-made: never counted as handed over */
        atomic_fetch_sub(&q->transients, 1);
        pthread_mutex_lock(&q->lock);
        rs_push_pool_drop_locked(q, b);
        atomic_store(&q->engine_starved, 0);
        pthread_mutex_unlock(&q->lock);
        rs_push_pool_signal(q);
        return;
    }
    b->next = atomic_load_explicit(&q->returned, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&q->returned, &b->next, b, memory_order_release,
                                                  memory_order_relaxed))
        ;
    uint64_t released = atomic_fetch_add_explicit(&q->released, 1, memory_order_release) + 1;
    rs_push_pool_signal_buffer(q, released);
}

rs_status_t rs_push_q_alloc_now(rs_pushq_t *q, size_t len, rs_pbuf_int_t **b_p)
{
    pthread_mutex_lock(&q->lock);
    rs_status_t st = rs_push_pool_carve_locked(q, len, b_p);
    if (st == RS_OK) {
        (*b_p)->transient = 1;
        (*b_p)->used = 0;
        atomic_fetch_add(&q->transients, 1);
    }
    pthread_mutex_unlock(&q->lock);
    if (st == RS_ERR_NO_SPACE) {
        /* Idle buffers the writer keeps may hold the room: ask it to let them go. */
        atomic_store(&q->engine_starved, 1);
        rs_push_pool_signal(q);
        return RS_ERR_BUSY;
    }
    return st;
}

uint64_t rs_push_q_outstanding(rs_pushq_t *q)
{
    return atomic_load(&q->submitted) - atomic_load(&q->released);
}

uint64_t rs_push_q_engine_held(rs_pushq_t *q)
{
    return rs_push_q_outstanding(q) + atomic_load(&q->transients);
}

uint64_t rs_push_q_transients(rs_pushq_t *q)
{
    return atomic_load(&q->transients);
}

void rs_push_q_unstarve(rs_pushq_t *q)
{
    atomic_store(&q->engine_starved, 0);
}

int rs_push_q_fits(const rs_pushq_t *q, size_t len)
{
    return rs_push_block_len(len) <= q->ra.size;
}

int rs_push_q_writer_short(rs_pushq_t *q)
{
    return atomic_load_explicit(&q->writer_waiting, memory_order_relaxed) == WAIT_BUFFER;
}

int rs_push_q_starved(rs_pushq_t *q)
{
    return atomic_load(&q->engine_starved);
}

void rs_push_q_nap(rs_pushq_t *q)
{
    if (rs_push_pool_collect(q) == 0 && !writer_drive(q))
        rs_push_pool_nap(q, WAIT_BUFFER);
}

int rs_push_q_drive(rs_pushq_t *q)
{
    if (!driver_take(q))
        return -1;
    int blocked;
    unsigned n = engine_round(q, &blocked);
    driver_drop(q);
    return (int)n;
}

int rs_push_q_hold(rs_pushq_t *q)
{
    return driver_take(q) ? 0 : -1;
}

void rs_push_q_park(rs_pushq_t *q)
{
    atomic_store(&q->parked, 1);
}

void rs_push_q_park_held(rs_pushq_t *q)
{
    atomic_store(&q->park_held, 1);
    atomic_store(&q->parked, 1);
}

void rs_push_q_unpark(rs_pushq_t *q)
{
    if (atomic_exchange(&q->parked, 0))
        engine_wake(q);
}

void rs_push_q_unhold(rs_pushq_t *q)
{
    driver_drop(q);
}

void rs_push_q_reuse(rs_pushq_t *q, uint32_t wait_ms)
{
    atomic_store(&q->error, RS_OK);
    atomic_store(&q->engine_starved, 0);
    atomic_store(&q->park_held, 0);
    q->cfg.wait_ms = wait_ms;
}

rs_status_t rs_pushq_drain(rs_pushq_t *q, uint32_t timeout_ms)
{
    if (q == NULL)
        return RS_ERR_INVALID;
    uint64_t deadline = rs_now_coarse_ns() + RS_MS_TO_NS(timeout_ms);
    while (rs_push_q_outstanding(q) != 0) {
        if (deadline_passed(deadline)) {
            rs_error("push queue: %llu buffers still with the engine after %u ms",
                     (unsigned long long)rs_push_q_outstanding(q), timeout_ms);
            return RS_ERR_TIMEOUT;
        }
        /* A parked engine (a lane between tasks) runs nothing: the caller does. */
        if (rs_push_pool_collect(q) == 0 && !(atomic_load(&q->parked) && writer_drive(q)))
            rs_push_pool_nap(q, WAIT_BUFFER);
    }
    rs_push_pool_collect(q);
    return RS_OK;
}

rs_mr_t *rs_push_q_mr(rs_pushq_t *q)
{
    return q->mr;
}

void rs_push_q_fail(rs_pushq_t *q, rs_status_t status)
{
    int expected = RS_OK;
    atomic_compare_exchange_strong(&q->error, &expected, (int)status);
    pthread_mutex_lock(&q->lock);
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

void rs_push_q_stop(rs_pushq_t *q)
{
    atomic_store(&q->stop, 1);
    uint64_t one = 1;
    ssize_t n = write(q->efd, &one, sizeof(one));
    (void)n;
    if (q->thread_started)
        pthread_join(q->thread, NULL);
    q->thread_started = 0;
}

void rs_pushq_destroy(rs_pushq_t *q)
{
    if (q == NULL)
        return;
    rs_push_q_stop(q);
    close(q->efd);
    for (rs_pbuf_int_t *b = q->all, *next; b != NULL; b = next) {
        next = b->all;
        free(b);
    }
    rs_range_alloc_cleanup(&q->ra);
    rs_push_pool_slab_free(q);
    free(q->ring);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
    free(q);
}
