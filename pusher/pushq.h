/*
 * Internals of the push-buffer pool and hand-off queue, for the push engine
 * (pusher/engine.c, take.c and the files below them: pusher/internal.h),
 * which drives the queue's thread through hooks.
 */
#ifndef RS_PUSHER_PUSHQ_H
#define RS_PUSHER_PUSHQ_H

#include <rshuffle/pusher.h>

#include "common/list.h"

struct rs_pbuf_int;

/*
 * One copy of a batch on its way to one of its partition's replicas
 * (engine): queued in that worker's pending list or its partition's blocked
 * list, then written by a put whose completion names it.
 */
typedef struct rs_psend {
    rs_list_t link;
    struct rs_pbuf_int *b;
    void *w;      /* the engine's worker */
    uint32_t dup; /* fault injection: sends left beyond the first */
} rs_psend_t;

/* A buffer's private side; pub comes first so rs_pbuf_t * converts back. */
typedef struct rs_pbuf_int {
    rs_pbuf_t pub;
    uint64_t off;   /* block offset in the slab */
    uint64_t block; /* block length: RS_PBUF_HEAD_ROOM + len, rounded */
    uint32_t partition;
    size_t used;
    struct rs_pbuf_int *next;                  /* idle list */
    rs_psend_t sends[RS_SHUFFLE_REPLICAS_MAX]; /* engine: one per replica */
    const uint8_t *frame;                      /* engine: the sealed frame to write */
    uint32_t frame_len;
    uint32_t refs;           /* engine: sends queued plus puts in flight; released at 0 */
    uint32_t full;           /* the writer filled it to its length (a streaming partition) */
    uint64_t seq;            /* batch number, given by the writer at hand-off */
    int sealed;              /* the writer sealed the frame already (swap, codec none) */
    int transient;           /* engine-made: its block is freed on release */
    struct rs_pbuf_int *all; /* every descriptor, for cleanup */
} rs_pbuf_int_t;

static inline rs_pbuf_int_t *rs_pbuf_int(rs_pbuf_t *b)
{
    return (rs_pbuf_int_t *)b;
}

/*
 * How the engine thread runs. take: a full buffer at the queue's head;
 * RS_OK when the engine took it, RS_ERR_BUSY to leave it queued (then poll
 * runs and take is retried). poll: background work (transport progress);
 * returns events handled. arm: 0 when the thread may sleep on fd. idle:
 * called with nothing queued (may be NULL).
 */
typedef struct rs_pushq_hooks {
    rs_status_t (*take)(void *arg, rs_pushq_t *q, rs_pbuf_int_t *b);
    unsigned (*poll)(void *arg);
    int (*arm)(void *arg);
    int fd; /* -1: none */
    void *arg;
} rs_pushq_hooks_t;

rs_status_t rs_push_q_create(const rs_pushq_config_t *cfg, const rs_pushq_hooks_t *hooks,
                             rs_pushq_t **q_p);

/*
 * A buffer of any length for the engine itself (e.g. compressed output),
 * carved without waiting: RS_ERR_BUSY when the slab has no room now.
 */
rs_status_t rs_push_q_alloc_now(rs_pushq_t *q, size_t len, rs_pbuf_int_t **b_p);

/*
 * Makes the whole slab resident now, as carving would piece by piece, and
 * keeps descriptors for up to n buffers at once (spares, made now): an
 * executor warming its lanes pays the first touches before its tasks do.
 */
void rs_push_q_make_resident(rs_pushq_t *q, uint32_t n);

/* Can the slab ever hold a buffer of len bytes? */
int rs_push_q_fits(const rs_pushq_t *q, size_t len);

/* Hands a buffer to the engine without taking one back (append mode). */
rs_status_t rs_push_q_submit(rs_pushq_t *q, uint32_t partition, rs_pbuf_t *buf, size_t used);

/* A writer buffer without waiting: RS_ERR_BUSY when none is idle and the slab is full. */
rs_status_t rs_push_q_try_get(rs_pushq_t *q, size_t len, rs_pbuf_t **buf_p);

/* The registered slab (NULL without a context). */
rs_mr_t *rs_push_q_mr(rs_pushq_t *q);

/* Makes every later writer call fail with status (the first error sticks). */
void rs_push_q_fail(rs_pushq_t *q, rs_status_t status);

/* Stops and joins the engine thread (idempotent); the pool stays usable. */
void rs_push_q_stop(rs_pushq_t *q);

/* Wakes the engine thread (from another thread). */
void rs_push_q_wake(rs_pushq_t *q);

/* Buffers handed over and not yet released. */
uint64_t rs_push_q_outstanding(rs_pushq_t *q);

/* Buffers the engine holds: handed over, plus its own (compressed output). */
uint64_t rs_push_q_engine_held(rs_pushq_t *q);

/* Is the writer waiting for slab room (a buffer) now? */
int rs_push_q_writer_short(rs_pushq_t *q);
/* Engine-made buffers (rs_push_q_alloc_now) not yet released. */
uint64_t rs_push_q_transients(rs_pushq_t *q);

/* The engine no longer waits for slab room (it went on without the buffer). */
void rs_push_q_unstarve(rs_pushq_t *q);

/* Does the engine wait for slab room (for compressed output)? */
int rs_push_q_starved(rs_pushq_t *q);

/* Writer: drives the engine, or waits a short slice for it to release something. */
void rs_push_q_nap(rs_pushq_t *q);

/*
 * Runs one engine round on the calling thread unless another thread is
 * running one (then -1): the events it handled. No spare core is assumed,
 * so a writer that waits for the engine drives it.
 */
int rs_push_q_drive(rs_pushq_t *q);

/*
 * Takes the driver token for the caller (0; -1 while a round runs): no
 * engine round runs until rs_push_q_unhold. A lane changes tasks so.
 */
int rs_push_q_hold(rs_pushq_t *q);
void rs_push_q_unhold(rs_pushq_t *q);

/*
 * Parks the engine thread: it sleeps on its eventfd alone and runs no
 * round, so a thread that drives the engine itself (open, close, an idle
 * lane) does not share its core with it. The first hand-off of a buffer
 * unparks it (so does rs_push_q_unpark).
 */
void rs_push_q_park(rs_pushq_t *q);
void rs_push_q_unpark(rs_pushq_t *q);
/*
 * Parked until rs_push_q_reuse, hand-offs included: a closing task drives
 * its last buffers and commit itself (no hand-over to a thread that may
 * not get a core).
 */
void rs_push_q_park_held(rs_pushq_t *q);

/*
 * A lane's next task: the sticky error cleared and its own wait bound.
 * Nothing may be queued or held by the engine (rs_push_q_engine_held 0).
 */
void rs_push_q_reuse(rs_pushq_t *q, uint32_t wait_ms);

#ifdef RS_FAULT_INJECTION
/*
 * Test only: a writer's wait slice (10 ms) and the engine thread's idle
 * sleep (20 ms) become ms, so that a wake-up either should have had shows
 * as a stall, not as a short nap.
 */
void rs_push_fault_slices_ms(rs_pushq_t *q, uint32_t ms);
#endif

#endif
