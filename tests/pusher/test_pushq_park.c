/*
 * A parked engine and a napping writer (docs/shuffle.md, "Progress"). Close
 * parks the engine thread before it flushes a task's last buffers; if the
 * engine was in a round then, the writer that found the queue full napped
 * until the engine freed a slot, which a parked engine never does: the
 * writer slept its whole slice, once in about two map tasks. Here the
 * engine thread is held inside a round that frees nothing while the writer
 * waits for a slot, then parked and let go: the writer must drive the
 * queue itself at once. The writer's nap and the engine's idle sleep are
 * lengthened to 30 s (a fault hook), so a missed wake-up fails the 10 s
 * bound instead of costing 10-20 ms. Without the wake at parking it fails
 * every time; an engine that, idle before such a round, sleeps once more
 * before it parks (its other fix) fails it about one run in three. And a
 * drain of a parked queue runs what is queued itself (it waited for the
 * parked engine until its bound).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "pusher/pushq.h"
#include "pusher/pushq_int.h"

#include "common/clock.h"

#define BUF_LEN  4096
#define DEPTH    4
#define SUBMITS  (4 * DEPTH)
#define BOUND_MS 10000 /* far below the 30 s slices, far above a wake-up at load 10 */
#define SLICE_MS 30000

typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t writer;
    int engine_in; /* the engine thread waits in take */
    int open;      /* take takes from now on */
    unsigned taken;
    int done; /* the writer submitted everything */
    rs_status_t writer_status;
} gate_t;

/*
 * While the gate is shut nothing is taken: the engine thread waits in take
 * (its round holding the driver token) and the writer's own rounds say busy.
 */
static rs_status_t gate_take(void *arg, rs_pushq_t *q, rs_pbuf_int_t *b)
{
    gate_t *g = arg;
    pthread_mutex_lock(&g->lock);
    if (!g->open && !pthread_equal(pthread_self(), g->writer)) {
        g->engine_in = 1;
        pthread_cond_broadcast(&g->cond);
        uint64_t limit = rs_now_ns() + RS_MS_TO_NS(BOUND_MS);
        while (!g->open && rs_now_ns() < limit) {
            struct timespec ts = rs_ns_to_timespec(rs_now_ns() + RS_MS_TO_NS(10));
            pthread_cond_timedwait(&g->cond, &g->lock, &ts);
        }
        pthread_mutex_unlock(&g->lock);
        return RS_ERR_BUSY; /* this round frees nothing */
    }
    int open = g->open;
    pthread_mutex_unlock(&g->lock);
    if (!open)
        return RS_ERR_BUSY;
    g->taken++; /* one round at a time: the driver token orders these */
    rs_pushq_release(q, &b->pub);
    return RS_OK;
}

typedef struct writer_arg {
    rs_pushq_t *q;
    gate_t *g;
} writer_arg_t;

static void *writer_main(void *arg)
{
    writer_arg_t *a = arg;
    rs_status_t s = RS_OK;
    for (int i = 0; i < SUBMITS && s == RS_OK; i++) {
        rs_pbuf_t *buf;
        s = rs_pushq_buf_get(a->q, BUF_LEN, &buf);
        if (s == RS_OK)
            s = rs_push_q_submit(a->q, 0, buf, BUF_LEN);
    }
    pthread_mutex_lock(&a->g->lock);
    a->g->writer_status = s;
    a->g->done = 1;
    pthread_cond_broadcast(&a->g->cond);
    pthread_mutex_unlock(&a->g->lock);
    return NULL;
}

/*
 * Waits (bounded) until *flag is set or, with slot_wait, the writer waits
 * for a slot. With wake, it wakes the engine thread meanwhile: asleep for
 * its 30 s, it would leave the queued buffers to the writer's own rounds.
 */
static int wait_for(gate_t *g, rs_pushq_t *q, const int *flag, int slot_wait, int wake)
{
    uint64_t limit = rs_now_ns() + RS_MS_TO_NS(BOUND_MS);
    pthread_mutex_lock(&g->lock);
    int ok;
    while (!(ok = slot_wait ? atomic_load(&q->writer_waiting) == WAIT_SLOT : *flag) &&
           rs_now_ns() < limit) {
        if (wake)
            rs_push_q_wake(q);
        struct timespec ts = rs_ns_to_timespec(rs_now_ns() + RS_MS_TO_NS(1));
        pthread_cond_timedwait(&g->cond, &g->lock, &ts);
    }
    pthread_mutex_unlock(&g->lock);
    return ok;
}

/* A queue whose rounds take through g, with 30 s slices (the fault hook). */
static rs_pushq_t *gated_queue(gate_t *g)
{
    rs_pushq_config_t cfg;
    rs_pushq_config_defaults(&cfg);
    cfg.buf_len = BUF_LEN;
    cfg.slab_bytes = (SUBMITS + 4) * rs_push_block_len(BUF_LEN); /* never short of buffers */
    cfg.queue_depth = DEPTH;
    cfg.wait_ms = 2 * SLICE_MS;
    rs_pushq_hooks_t hooks = {.take = gate_take, .fd = -1, .arg = g};
    rs_pushq_t *q = NULL;
    assert_int_equal(rs_push_q_create(&cfg, &hooks, &q), RS_OK);
    rs_push_fault_slices_ms(q, SLICE_MS);
    return q;
}

static void test_parked_engine_wakes_writer(void **state)
{
    (void)state;
    gate_t g = {.lock = PTHREAD_MUTEX_INITIALIZER};
    rs_cond_init_monotonic(&g.cond);
    rs_pushq_t *q = gated_queue(&g);

    writer_arg_t wa = {.q = q, .g = &g};
    pthread_t writer;
    pthread_mutex_lock(&g.lock); /* g.writer is set before the writer's first take */
    assert_int_equal(pthread_create(&writer, NULL, writer_main, &wa), 0);
    g.writer = writer;
    pthread_mutex_unlock(&g.lock);

    /* The engine thread holds a round that frees nothing; the writer naps for a slot. */
    assert_true(wait_for(&g, q, &g.engine_in, 0, 1));
    uint64_t pending; /* the wakes sent meanwhile: none may cut the engine's next sleep short */
    ssize_t r = read(q->efd, &pending, sizeof(pending));
    (void)r;
    assert_true(wait_for(&g, q, NULL, 1, 0));
    rs_push_q_park_held(q); /* as close does */
    uint64_t t0 = rs_now_ns();
    pthread_mutex_lock(&g.lock);
    g.open = 1;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.lock);

    int done = wait_for(&g, q, &g.done, 0, 0);
    double ms = (double)(rs_now_ns() - t0) / 1e6;
    print_message("writer done %d after %.1f ms\n", done, ms);
    assert_true(done); /* a missed wake-up: asleep for 30 s */
    assert_int_equal(pthread_join(writer, NULL), 0);
    assert_int_equal(g.writer_status, RS_OK);
    uint64_t limit = rs_now_ns() + RS_MS_TO_NS(BOUND_MS); /* what the last push left queued */
    while (rs_push_q_outstanding(q) != 0 && rs_now_ns() < limit)
        rs_push_q_drive(q);
    assert_int_equal(g.taken, SUBMITS);
    rs_pushq_destroy(q);
    pthread_cond_destroy(&g.cond);
}

/*
 * Draining a queue whose engine thread is parked (a lane between tasks)
 * with buffers still queued: nothing else will run them, so drain does.
 */
static void test_drain_parked(void **state)
{
    (void)state;
    gate_t g = {.lock = PTHREAD_MUTEX_INITIALIZER, .writer = pthread_self()};
    rs_cond_init_monotonic(&g.cond);
    rs_pushq_t *q = gated_queue(&g);
    rs_push_q_park_held(q);
    for (int i = 0; i < DEPTH; i++) { /* the gate is shut: they stay queued */
        rs_pbuf_t *buf;
        assert_int_equal(rs_pushq_buf_get(q, BUF_LEN, &buf), RS_OK);
        assert_int_equal(rs_push_q_submit(q, 0, buf, BUF_LEN), RS_OK);
    }
    assert_int_equal(rs_push_q_outstanding(q), DEPTH);
    pthread_mutex_lock(&g.lock);
    g.open = 1;
    pthread_mutex_unlock(&g.lock);
    assert_int_equal(rs_pushq_drain(q, BOUND_MS), RS_OK); /* else asleep for 30 s */
    assert_int_equal(g.taken, DEPTH);
    rs_pushq_destroy(q);
    pthread_cond_destroy(&g.cond);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parked_engine_wakes_writer),
        cmocka_unit_test(test_drain_parked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
