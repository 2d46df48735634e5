/*
 * Progress and callbacks: no callback runs inside the call that posted its
 * op; the progress thread, rs_wait and the fd/arm pair each deliver events
 * (to a connection whose own worker arm skips, too);
 * rs_ep_close from inside a callback is deferred safely.
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/transport.h>
#include "tt_util.h"

#define REGION (256u << 10)

typedef struct fixture {
    tt_pair_t p;
    rs_mr_t *smr, *cmr;
    rs_rkey_t *rkey;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    tt_pair_open_regions(&f->p, NULL, REGION, &f->smr, &f->cmr, &f->rkey);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    tt_pair_close(&f->p);
    free(f);
    return 0;
}

/* ------------------------------------------- no callback in the posting call */

static int posting;
static int cb_while_posting;
static int cb_count;

static void guard_cb(void *arg, rs_status_t status)
{
    (void)arg;
    assert_int_equal(status, RS_OK);
    if (posting)
        cb_while_posting++;
    cb_count++;
}

#define POST(call)                       \
    do {                                 \
        posting = 1;                     \
        assert_int_equal((call), RS_OK); \
        posting = 0;                     \
    } while (0)

static void test_no_callback_inside_post(void **state)
{
    fixture_t *f = *state;
    rs_ep_t *ep = f->p.cep;
    unsigned char *buf = rs_mr_addr(f->cmr);
    uint64_t old;
    int posted = 0;
    cb_count = cb_while_posting = 0;
    for (int round = 0; round < 50; round++) {
        POST(rs_put(ep, buf, 64, f->cmr, f->rkey, 0, guard_cb, NULL));
        POST(rs_put(ep, buf, 65536, f->cmr, f->rkey, 4096, guard_cb, NULL));
        POST(rs_put_notify(ep, buf, 64, f->cmr, f->rkey, 128, (uint32_t)round, guard_cb, NULL));
        POST(rs_get(ep, buf + 4096, 64, f->cmr, f->rkey, 0, guard_cb, NULL));
        POST(rs_fetch_add(ep, f->rkey, 8 * (uint64_t)round, 1, &old, guard_cb, NULL));
        POST(rs_msg_send(ep, 5, buf, 16, guard_cb, NULL));
        POST(rs_ep_flush(ep, guard_cb, NULL));
        posted += 7;
        /* Posting from inside a callback is fine, and also deferred. */
        if (round % 10 == 0)
            rs_progress(f->p.cli);
    }
    uint64_t end = tt_now_ms() + 10000;
    while (cb_count < posted && tt_now_ms() < end) {
        rs_progress(f->p.cli);
        rs_progress(f->p.srv);
    }
    assert_int_equal(cb_count, posted);
    assert_int_equal(cb_while_posting, 0);
}

/* ------------------------------------------------------ progress thread */

typedef struct thread_seen {
    pthread_t main;
    int calls;
    int on_other_thread;
} thread_seen_t;

static void thread_cb(void *arg, rs_status_t status)
{
    thread_seen_t *t = arg;
    assert_int_equal(status, RS_OK);
    if (!pthread_equal(pthread_self(), t->main))
        __atomic_add_fetch(&t->on_other_thread, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&t->calls, 1, __ATOMIC_ACQ_REL);
}

static void test_progress_thread(void **state)
{
    fixture_t *f = *state;
    thread_seen_t t = {.main = pthread_self()};
    unsigned char *buf = rs_mr_addr(f->cmr);
    assert_int_equal(rs_progress_thread_start(f->p.srv), RS_OK);
    assert_int_equal(rs_progress_thread_start(f->p.cli), RS_OK);
    assert_int_equal(rs_progress_thread_start(f->p.cli), RS_OK);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(rs_put(f->p.cep, buf, 4096, f->cmr, f->rkey, 0, thread_cb, &t), RS_OK);
        assert_int_equal(rs_get(f->p.cep, buf, 4096, f->cmr, f->rkey, 0, thread_cb, &t), RS_OK);
    }
    /* This thread never progresses: the threads deliver everything. */
    uint64_t end = tt_now_ms() + 10000;
    while (__atomic_load_n(&t.calls, __ATOMIC_ACQUIRE) < 200 && tt_now_ms() < end)
        usleep(1000);
    assert_int_equal(t.calls, 200);
    assert_int_equal(t.on_other_thread, 200);
    rs_progress_thread_stop(f->p.cli);
    rs_progress_thread_stop(f->p.cli);
    rs_progress_thread_stop(f->p.srv);
}

/* ------------------------------------------------------- rs_wait, fd/arm */

static int msgs;

static void count_msg(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)arg;
    (void)ep;
    (void)data;
    (void)len;
    msgs++;
}

static void test_wait_and_fd(void **state)
{
    fixture_t *f = *state;
    msgs = 0;
    assert_int_equal(rs_set_msg_handler(f->p.srv, 3, count_msg, NULL), RS_OK);
    /* Settle both sides, then nothing is pending. */
    while (rs_progress(f->p.srv) + rs_progress(f->p.cli) > 0)
        ;
    assert_int_equal(rs_wait(f->p.srv, 30), RS_ERR_TIMEOUT);

    assert_int_equal(rs_msg_send(f->p.cep, 3, "ping", 4, NULL, NULL), RS_OK);
    rs_progress(f->p.cli);
    uint64_t end = tt_now_ms() + 5000;
    while (msgs == 0 && tt_now_ms() < end)
        rs_wait(f->p.srv, 100);
    assert_int_equal(msgs, 1);

    /* External event loop: arm, sleep on the fd, progress. */
    int fd = rs_ctx_fd(f->p.srv);
    assert_true(fd >= 0);
    while (rs_ctx_arm(f->p.srv) == RS_ERR_BUSY)
        rs_progress(f->p.srv);
    assert_int_equal(rs_msg_send(f->p.cep, 3, "ping", 4, NULL, NULL), RS_OK);
    rs_progress(f->p.cli);
    end = tt_now_ms() + 5000;
    while (msgs == 1 && tt_now_ms() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        assert_true(poll(&pfd, 1, 5000) >= 0);
        rs_progress(f->p.srv);
        rs_progress(f->p.cli);
    }
    assert_int_equal(msgs, 2);
}

/*
 * A client's connections to a peer of this host have UCX workers of their own, which arm skips
 * once they are armed and idle: a message to one of three must still make rs_ctx_fd readable
 * and be delivered by the progress after the poll.
 */
static void test_fd_wakes_for_idle_connection(void **state)
{
    fixture_t *f = *state;
    msgs = 0;
    assert_int_equal(rs_set_msg_handler(f->p.cli, 4, count_msg, NULL), RS_OK);
    rs_ep_t *more[2];
    assert_int_equal(rs_progress_thread_start(f->p.srv), RS_OK);
    for (int i = 0; i < 2; i++)
        assert_int_equal(
            rs_connect(f->p.cli, "127.0.0.1", rs_listener_port(f->p.listener), &more[i]), RS_OK);
    uint64_t end = tt_now_ms() + 3000;
    while (__atomic_load_n(&f->p.accepted, __ATOMIC_ACQUIRE) < 3 && tt_now_ms() < end)
        usleep(1000);
    rs_progress_thread_stop(f->p.srv);
    assert_int_equal(f->p.accepted, 3);
    rs_ep_t *last = f->p.sep; /* the last one accepted */

    int fd = rs_ctx_fd(f->p.cli);
    for (int round = 0; round < 3; round++) {
        end = tt_now_ms() + 5000;
        while (rs_ctx_arm(f->p.cli) == RS_ERR_BUSY && tt_now_ms() < end)
            rs_progress(f->p.cli);
        assert_int_equal(rs_ctx_arm(f->p.cli), RS_OK); /* armed, idle: nothing to arm again */
        assert_int_equal(rs_msg_send(last, 4, "ping", 4, NULL, NULL), RS_OK);
        rs_progress(f->p.srv);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&pfd, 1, 5000), 1);
        while (msgs == round && tt_now_ms() < end) {
            rs_progress(f->p.cli);
            rs_progress(f->p.srv);
        }
        assert_int_equal(msgs, round + 1);
    }
    rs_ep_close(more[0]);
    rs_ep_close(more[1]);
}

/* ------------------------------------------- rs_ep_close inside a callback */

typedef struct closer {
    rs_ep_t *ep;
    int calls;
} closer_t;

static void close_in_cb(void *arg, rs_status_t status)
{
    closer_t *c = arg;
    (void)status;
    if (c->calls++ == 0)
        rs_ep_close(c->ep); /* deferred: the endpoint goes away after the callback */
}

static void test_close_inside_callback(void **state)
{
    fixture_t *f = *state;
    closer_t c = {.ep = f->p.cep};
    unsigned char *buf = rs_mr_addr(f->cmr);
    assert_int_equal(rs_put(f->p.cep, buf, 64, f->cmr, f->rkey, 0, close_in_cb, &c), RS_OK);
    assert_int_equal(rs_put(f->p.cep, buf, 64, f->cmr, f->rkey, 0, close_in_cb, &c), RS_OK);
    uint64_t end = tt_now_ms() + 5000;
    while (c.calls < 2 && tt_now_ms() < end) {
        rs_progress(f->p.cli);
        rs_progress(f->p.srv);
    }
    assert_int_equal(c.calls, 2);
    for (int i = 0; i < 20; i++)
        rs_progress(f->p.cli);
    f->p.cep = NULL; /* gone (its rkey with it) */
}

int main(void)
{
    tt_alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_callback_inside_post, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_and_fd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fd_wakes_for_idle_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_inside_callback, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
