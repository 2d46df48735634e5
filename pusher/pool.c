/*
 * The push-buffer pool: one slab (registered once when a context is given)
 * carved by a first-fit range allocator; idle buffers are kept per exact
 * length so a swap never returns a buffer of another length. Buffers the
 * engine releases come back through a lock-free stack the writer empties at
 * once; the writer sleeps here, woken by the engine, when it must wait for a
 * buffer or a slot. No system call on the common path.
 */
#include "pusher/pushq_int.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/resident.h"

#include <stdlib.h>

#define POOL_RESIDENT_CHUNK (1u << 20) /* the slab is made resident a MiB at a time */

static void writer_wake(rs_pushq_t *q)
{
    pthread_mutex_lock(&q->lock);
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

/* Engine: slab room came back (wakes a waiting writer). */
void rs_push_pool_signal(rs_pushq_t *q)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&q->writer_waiting, memory_order_relaxed) != WAIT_NONE)
        writer_wake(q);
}

/*
 * Engine: a buffer came back. A writer waiting for one is woken once half of
 * what the engine held when it went to sleep came back (wake_at), not for
 * every buffer: a wake-up (two futex calls and a switch) per several batches.
 */
void rs_push_pool_signal_buffer(rs_pushq_t *q, uint64_t released)
{
    atomic_thread_fence(memory_order_seq_cst);
    int w = atomic_load_explicit(&q->writer_waiting, memory_order_relaxed);
    if (w == WAIT_BUFFER ? released >= atomic_load(&q->wake_at) : w != WAIT_NONE)
        writer_wake(q);
}

/* Is the queue at most half full (a writer waiting for a slot is woken only then)? */
static int queue_half_free(rs_pushq_t *q)
{
    return atomic_load(&q->tail) - atomic_load(&q->head) <= q->cfg.queue_depth / 2;
}

/*
 * Engine: a slot came free. A writer waiting for one is woken once half the
 * queue is free, not for every slot: one wake-up per several buffers.
 */
void rs_push_pool_signal_slot(rs_pushq_t *q)
{
    atomic_thread_fence(memory_order_seq_cst);
    int w = atomic_load_explicit(&q->writer_waiting, memory_order_relaxed);
    if (w == WAIT_SLOT ? queue_half_free(q) : w != WAIT_NONE)
        writer_wake(q);
}

void rs_push_pool_drop_locked(rs_pushq_t *q, rs_pbuf_int_t *b)
{
    rs_range_put(&q->ra, b->off, b->block);
    b->next = q->spare;
    q->spare = b;
}

/* The slab's length as allocated. */
static size_t slab_len(const rs_pushq_t *q)
{
    return (q->cfg.slab_bytes + 63) & ~(size_t)63;
}

/*
 * Makes the slab resident up to end, a chunk at a time, as the first-fit
 * carving reaches it (q->lock held; nobody holds those bytes yet): a task
 * pays for the part of the pool it uses, and pays it as one populate per
 * chunk rather than a fault per page inside its appends (docs/shuffle.md,
 * "The push pool, resident as used").
 */
static void pool_resident_to(rs_pushq_t *q, size_t end)
{
    size_t to = (end + POOL_RESIDENT_CHUNK - 1) & ~(size_t)(POOL_RESIDENT_CHUNK - 1);
    if (to > slab_len(q))
        to = slab_len(q);
    /* A failure (logged) is a hint only: the appends then fault those pages in themselves. */
    (void)rs_resident_make(q->slab + q->resident, to - q->resident);
    q->resident = to;
}

/* A new descriptor, on the list of all (q->lock held); NULL: no memory. */
static rs_pbuf_int_t *desc_new(rs_pushq_t *q)
{
    rs_pbuf_int_t *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->all = q->all;
    q->all = b;
    q->n_desc++;
    return b;
}

void rs_push_q_make_resident(rs_pushq_t *q, uint32_t n)
{
    pthread_mutex_lock(&q->lock);
    if (q->resident < slab_len(q))
        pool_resident_to(q, slab_len(q));
    /* 20,000 partitions hold 40,000 buffers: their descriptors' pages fault here, not in a task. */
    if (n > slab_len(q) / 1024)
        n = (uint32_t)(slab_len(q) / 1024); /* no more than buffers of 1 KiB would need */
    while (q->n_desc < n) {
        rs_pbuf_int_t *b = desc_new(q);
        if (b == NULL)
            break; /* a hint only: carving makes them */
        b->next = q->spare;
        q->spare = b;
    }
    pthread_mutex_unlock(&q->lock);
}

/* Carves a block for len bytes; RS_ERR_NO_SPACE when the slab is full. */
rs_status_t rs_push_pool_carve_locked(rs_pushq_t *q, size_t len, rs_pbuf_int_t **b_p)
{
    uint64_t block = rs_push_block_len(len), off;
    if (rs_range_get(&q->ra, block, &off) != RS_OK)
        return RS_ERR_NO_SPACE;
    if (off + block > q->resident)
        pool_resident_to(q, (size_t)(off + block));
    rs_pbuf_int_t *b = q->spare;
    if (b != NULL) {
        q->spare = b->next;
    } else {
        b = desc_new(q);
        if (b == NULL) {
            rs_range_put(&q->ra, off, block);
            rs_error("push buffer pool: out of memory for a descriptor");
            return RS_ERR_NOMEM;
        }
    }
    b->off = off;
    b->block = block;
    b->pub.data = q->slab + off + RS_PBUF_HEAD_ROOM;
    b->pub.len = len;
    b->transient = 0;
    b->next = NULL;
    *b_p = b;
    return RS_OK;
}

/* Writer: files a buffer among the private idle lists (frees it if no class is left). */
void rs_push_pool_idle_put(rs_pushq_t *q, rs_pbuf_int_t *b)
{
    pushq_class_t *free_slot = NULL;
    for (int i = 0; i < PUSHQ_CLASSES; i++) {
        pushq_class_t *c = &q->idle[i];
        if (c->len == b->pub.len) {
            b->next = c->head;
            c->head = b;
            return;
        }
        if (c->head == NULL && free_slot == NULL)
            free_slot = c;
    }
    if (free_slot == NULL) {
        pthread_mutex_lock(&q->lock);
        rs_push_pool_drop_locked(q, b);
        pthread_mutex_unlock(&q->lock);
        return;
    }
    free_slot->len = b->pub.len;
    b->next = NULL;
    free_slot->head = b;
}

/*
 * Writer: moves everything the engine released into the private lists, the
 * most recently released on top: the writer then reuses the few buffers
 * still in cache instead of rotating through the whole slab.
 */
int rs_push_pool_collect(rs_pushq_t *q)
{
    rs_pbuf_int_t *b = atomic_exchange_explicit(&q->returned, NULL, memory_order_acquire);
    rs_pbuf_int_t *rev = NULL; /* the stack has the most recent first: reverse it */
    while (b != NULL) {
        rs_pbuf_int_t *next = b->next;
        b->next = rev;
        rev = b;
        b = next;
    }
    b = rev;
    int n = 0;
    while (b != NULL) {
        rs_pbuf_int_t *next = b->next;
        rs_push_pool_idle_put(q, b);
        b = next;
        n++;
    }
    return n;
}

static rs_pbuf_int_t *idle_pop(rs_pushq_t *q, size_t len)
{
    for (int i = 0; i < PUSHQ_CLASSES; i++) {
        pushq_class_t *c = &q->idle[i];
        if (c->len == len && c->head != NULL) {
            rs_pbuf_int_t *b = c->head;
            c->head = b->next;
            b->next = NULL;
            return b;
        }
    }
    return NULL;
}

/* Writer: frees idle buffers (of other lengths than keep, or all: keep 0) to the slab. */
static int evict_idle(rs_pushq_t *q, size_t keep)
{
    int freed = 0;
    pthread_mutex_lock(&q->lock);
    for (int i = 0; i < PUSHQ_CLASSES; i++) {
        pushq_class_t *c = &q->idle[i];
        if ((keep != 0 && c->len == keep) || c->head == NULL)
            continue;
        while (c->head != NULL) {
            rs_pbuf_int_t *b = c->head;
            c->head = b->next;
            rs_push_pool_drop_locked(q, b);
            freed = 1;
        }
        c->len = 0;
    }
    pthread_mutex_unlock(&q->lock);
    return freed;
}

/* Writer: an idle buffer of exactly len bytes, or a new one; RS_ERR_BUSY if none fits now. */
rs_status_t rs_push_pool_try_take(rs_pushq_t *q, size_t len, rs_pbuf_int_t **b_p)
{
    /* Released buffers first: the most recent are the ones still in cache. */
    rs_push_pool_collect(q);
    rs_pbuf_int_t *b = idle_pop(q, len);
    if (b != NULL) {
        *b_p = b;
        return RS_OK;
    }
    pthread_mutex_lock(&q->lock);
    rs_status_t st = rs_push_pool_carve_locked(q, len, b_p);
    pthread_mutex_unlock(&q->lock);
    if (st == RS_ERR_NO_SPACE && evict_idle(q, len)) {
        pthread_mutex_lock(&q->lock);
        st = rs_push_pool_carve_locked(q, len, b_p);
        pthread_mutex_unlock(&q->lock);
    }
    return st == RS_ERR_NO_SPACE ? RS_ERR_BUSY : st;
}

/* Writer: sleeps one slice waiting for what (woken early by the engine). */
void rs_push_pool_nap(rs_pushq_t *q, int what)
{
    if (atomic_load(&q->engine_starved))
        evict_idle(q, 0); /* idle buffers the writer does not need block the engine */
    struct timespec ts = rs_ns_to_timespec(
        rs_now_ns() + RS_MS_TO_NS(atomic_load_explicit(&q->nap_ms, memory_order_relaxed)));
    pthread_mutex_lock(&q->lock);
    if (what == WAIT_BUFFER) {
        uint64_t rel = atomic_load(&q->released), held = atomic_load(&q->submitted) - rel;
        atomic_store(&q->wake_at, rel + (held > 2 ? held / 2 : 1));
    }
    atomic_store(&q->writer_waiting, what);
    /* A parked engine drives nothing: once it let the token go, queued buffers are the writer's. */
    if ((what == WAIT_SLOT ? !queue_half_free(q) : atomic_load(&q->returned) == NULL) &&
        !(atomic_load(&q->parked) && atomic_load(&q->driver) == 0 &&
          atomic_load(&q->tail) != atomic_load(&q->head)))
        pthread_cond_timedwait(&q->cond, &q->lock, &ts);
    atomic_store(&q->writer_waiting, WAIT_NONE);
    pthread_mutex_unlock(&q->lock);
}

#ifdef RS_FAULT_INJECTION
void rs_push_fault_slices_ms(rs_pushq_t *q, uint32_t ms)
{
    atomic_store(&q->nap_ms, ms);
    atomic_store(&q->sleep_ms, ms);
}
#endif

rs_status_t rs_push_pool_slab_alloc(rs_pushq_t *q)
{
    size_t len = slab_len(q);
    if (q->cfg.ctx != NULL) {
        /* Lazy, then resident as carving reaches it (pool_resident_to): a task touches the
         * buffers it fills, often a fraction of a pool sized for the most partitions. */
        rs_status_t st = rs_mem_alloc(q->cfg.ctx, len, RS_MEM_LOCAL | RS_MEM_LAZY, &q->mr);
        if (st != RS_OK)
            return st;
        q->slab = rs_mr_addr(q->mr);
        return RS_OK;
    }
    q->slab = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
    if (q->slab == NULL) {
        rs_error("push buffer pool: cannot allocate a %zu-byte slab", len);
        return RS_ERR_NOMEM;
    }
    return RS_OK;
}

void rs_push_pool_slab_free(rs_pushq_t *q)
{
    if (q->mr != NULL)
        rs_mem_free(q->mr);
    else
        free(q->slab);
}
