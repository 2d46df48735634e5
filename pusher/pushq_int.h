/*
 * The push queue's state, shared by the buffer pool (pusher/pool.c) and the
 * ring and its engine thread (pusher/pushq.c); nothing outside those two
 * files sees it.
 */
#ifndef RS_PUSHER_PUSHQ_INT_H
#define RS_PUSHER_PUSHQ_INT_H

#include "pusher/pushq.h"

#include "common/range_alloc.h"

#include <pthread.h>
#include <stdatomic.h>

#define PUSHQ_CLASSES  8  /* distinct idle buffer lengths kept */
#define PUSHQ_NAP_MS   10 /* writer wait slice (guards against a lost wake) */
#define PUSHQ_SLEEP_MS 20 /* engine sleep bound without a hook fd */

typedef struct pushq_class {
    size_t len;
    rs_pbuf_int_t *head;
} pushq_class_t;

struct rs_pushq {
    rs_pushq_config_t cfg;
    rs_pushq_hooks_t hooks;
    rs_pushq_fn_t fn;
    void *fn_arg;

    uint8_t *slab;
    rs_mr_t *mr;
    size_t resident; /* the slab's first bytes made resident (pool.c), under lock */

    pthread_mutex_t lock; /* the allocator and descriptors; writer waits */
    pthread_cond_t cond;  /* writer waits here */
    rs_range_alloc_t ra;
    rs_pbuf_int_t *spare; /* descriptors without a block */
    rs_pbuf_int_t *all;
    uint32_t n_desc; /* on all */

    /* Writer-private: idle buffers by exact length (no lock on the swap path). */
    pushq_class_t idle[PUSHQ_CLASSES];

    /* Released by the engine, taken by the writer all at once (lock-free stack). */
    _Alignas(64) _Atomic(rs_pbuf_int_t *) returned;
    _Atomic int engine_starved; /* the engine needs slab room: writer frees idle buffers */

    rs_pbuf_int_t **ring;
    uint32_t ring_mask;
    _Alignas(64) _Atomic uint64_t head; /* next to consume (engine) */
    _Alignas(64) _Atomic uint64_t tail; /* next to fill (writer) */

    _Alignas(64) _Atomic int engine_sleeping;
    _Atomic int driver;    /* 1 while a thread (engine or writer) runs an engine round */
    _Atomic int parked;    /* the engine thread sleeps on efd only: the writer drives (lanes) */
    _Atomic int park_held; /* parked until the next task: hand-offs do not unpark (close) */
    /* A writer's wait slice and the engine's idle sleep bound: PUSHQ_NAP_MS and
     * PUSHQ_SLEEP_MS, which a fault hook lengthens while the engine runs. */
    _Atomic uint32_t nap_ms, sleep_ms;
    _Alignas(64) _Atomic int writer_waiting;
    _Atomic uint64_t wake_at; /* a writer waiting for a buffer: woken once released reaches it */
    _Atomic int stop;
    _Atomic int error;
    _Atomic uint64_t submitted, released;
    _Atomic uint64_t transients; /* engine-made buffers alive */
    int efd;
    pthread_t thread;
    int thread_started;
};

static inline uint64_t rs_push_block_len(size_t len)
{
    return ((uint64_t)len + RS_PBUF_HEAD_ROOM + 63) & ~(uint64_t)63;
}

/* What a sleeping writer waits for. */
enum { WAIT_NONE = 0, WAIT_BUFFER = 1, WAIT_SLOT = 2 };

/* Engine: slab room came back (wakes a waiting writer). */
void rs_push_pool_signal(rs_pushq_t *q);

/* Engine: a buffer came back; released: the count of buffers released so far. */
void rs_push_pool_signal_buffer(rs_pushq_t *q, uint64_t released);

/* Engine: a slot came free. */
void rs_push_pool_signal_slot(rs_pushq_t *q);

/* Returns b's block to the slab and b to the spare descriptors (lock held). */
void rs_push_pool_drop_locked(rs_pushq_t *q, rs_pbuf_int_t *b);

/* Carves a block for len bytes (lock held); RS_ERR_NO_SPACE when the slab is full. */
rs_status_t rs_push_pool_carve_locked(rs_pushq_t *q, size_t len, rs_pbuf_int_t **b_p);

/* Writer: files a buffer among the private idle lists. */
void rs_push_pool_idle_put(rs_pushq_t *q, rs_pbuf_int_t *b);

/* Writer: moves everything the engine released into the private lists; how many. */
int rs_push_pool_collect(rs_pushq_t *q);

/* Writer: an idle buffer of exactly len bytes, or a new one; RS_ERR_BUSY if none fits now. */
rs_status_t rs_push_pool_try_take(rs_pushq_t *q, size_t len, rs_pbuf_int_t **b_p);

/* Writer: sleeps one slice waiting for what (WAIT_BUFFER or WAIT_SLOT). */
void rs_push_pool_nap(rs_pushq_t *q, int what);

/* Allocates (and registers, with a context) the slab. */
rs_status_t rs_push_pool_slab_alloc(rs_pushq_t *q);

void rs_push_pool_slab_free(rs_pushq_t *q);

#endif
