/*
 * The loopback backend's own promises and hooks (loopback.h): FIFO delivery
 * per endpoint pair, drop, rewrite, hold and release, and kill (the peer's endpoint
 * fails, posts after it fail, its regions and listeners are gone).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tests/loopback/loopback.h"
#include "tt_util.h"

#define N_MSGS 200

typedef struct rx {
    long n;
    unsigned type[N_MSGS];
    uint32_t seq[N_MSGS];
    size_t len[N_MSGS];
} rx_t;

static rx_t rx;

static void on_msg(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    uint32_t seq = 0;
    if (len >= 4)
        memcpy(&seq, data, 4);
    if (rx.n < N_MSGS) {
        rx.type[rx.n] = (unsigned)(uintptr_t)arg;
        rx.seq[rx.n] = seq;
        rx.len[rx.n] = len;
    }
    rx.n++;
}

static void open_pair(tt_pair_t *p)
{
    memset(&rx, 0, sizeof(rx));
    rs_lb_reset();
    tt_pair_open(p, NULL, NULL);
    assert_string_equal(rs_ctx_backend(p->cli), RS_LB_NAME);
    for (uintptr_t t = 1; t <= 4; t++)
        assert_int_equal(rs_set_msg_handler(p->srv, (unsigned)t, on_msg, (void *)t), RS_OK);
}

static void send_seq(tt_pair_t *p, unsigned type, uint32_t seq, tt_done_t *d)
{
    assert_int_equal(rs_msg_send(p->cep, type, &seq, sizeof(seq), tt_done_cb, d), RS_OK);
}

/* Messages of several types arrive in the order they were sent. */
static void test_fifo(void **state)
{
    (void)state;
    tt_pair_t p;
    open_pair(&p);
    tt_done_t d = {0};
    for (uint32_t i = 0; i < N_MSGS; i++)
        send_seq(&p, 1 + i % 3, i, &d);
    assert_int_equal(tt_progress_count(p.cli, p.srv, &rx.n, N_MSGS, 2000), N_MSGS);
    for (uint32_t i = 0; i < N_MSGS; i++) {
        assert_int_equal(rx.seq[i], i);
        assert_int_equal(rx.type[i], 1 + i % 3);
    }
    assert_int_equal(tt_wait_calls(p.cli, p.srv, &d, N_MSGS, 2000), N_MSGS);
    assert_int_equal(d.status, RS_OK);
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_int_equal(c.sent[1] + c.sent[2] + c.sent[3], N_MSGS);
    assert_int_equal(c.delivered[1] + c.delivered[2] + c.delivered[3], N_MSGS);
    tt_pair_close(&p);
}

/* Dropped messages complete for the sender and never arrive; the rest do, in order. */
static void test_drop(void **state)
{
    (void)state;
    tt_pair_t p;
    open_pair(&p);
    rs_lb_drop(2, 2);
    tt_done_t d = {0};
    for (uint32_t i = 0; i < 6; i++)
        send_seq(&p, i < 4 ? 2 : 1, i, &d);
    assert_int_equal(tt_wait_calls(p.cli, p.srv, &d, 6, 2000), 6);
    assert_int_equal(d.status, RS_OK);
    assert_int_equal(tt_progress_count(p.cli, p.srv, &rx.n, 4, 2000), 4);
    const uint32_t want[4] = {2, 3, 4, 5};
    for (int i = 0; i < 4; i++)
        assert_int_equal(rx.seq[i], want[i]);
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_int_equal(c.dropped[2], 2);
    assert_int_equal(c.delivered[2], 2);
    tt_pair_close(&p);
}

/* The next message of the type is rewritten (made 2 bytes here); the rest arrive as sent. */
static size_t shorten(void *arg, unsigned char *data, size_t len)
{
    (void)len;
    (void)data;
    *(int *)arg += 1;
    return 2;
}

static void test_rewrite_then_deliver(void **state)
{
    (void)state;
    tt_pair_t p;
    open_pair(&p);
    int calls = 0;
    rs_lb_mangle(2, 1, shorten, &calls);
    tt_done_t d = {0};
    for (uint32_t i = 0; i < 4; i++)
        send_seq(&p, i < 3 ? 2 : 1, i, &d);
    assert_int_equal(tt_wait_calls(p.cli, p.srv, &d, 4, 2000), 4);
    assert_int_equal(tt_progress_count(p.cli, p.srv, &rx.n, 4, 2000), 4);
    assert_int_equal(calls, 1);
    assert_int_equal(rx.len[0], 2);
    assert_int_equal(rx.seq[0], 0); /* under 4 bytes: on_msg reads none */
    for (uint32_t i = 1; i < 4; i++) {
        assert_int_equal(rx.len[i], 4);
        assert_int_equal(rx.seq[i], i);
    }
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_int_equal(c.mangled[2], 1);
    assert_int_equal(c.delivered[2], 3);
    tt_pair_close(&p);
}

/* A held type waits, and so does what follows it on the same pair, until released. */
static void test_hold_release(void **state)
{
    (void)state;
    tt_pair_t p;
    open_pair(&p);
    rs_lb_hold(3);
    tt_done_t d = {0};
    send_seq(&p, 1, 0, &d);
    send_seq(&p, 3, 1, &d);
    send_seq(&p, 1, 2, &d);
    assert_int_equal(tt_progress_count(p.cli, p.srv, &rx.n, 1, 2000), 1);
    long never = 0;
    tt_progress_count(p.cli, p.srv, &never, 1, 100); /* 100 ms of progress */
    assert_int_equal(rx.n, 1);
    assert_int_equal(rs_ctx_arm(p.srv), RS_OK); /* held messages do not keep it busy */
    rs_lb_release(3);
    assert_int_equal(tt_progress_count(p.cli, p.srv, &rx.n, 3, 2000), 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(rx.seq[i], i);
    tt_pair_close(&p);
}

static int srv_events;
static rs_status_t srv_last;
static void on_ep(void *arg, rs_ep_t *ep, rs_status_t status)
{
    (void)arg;
    (void)ep;
    srv_events++;
    srv_last = status;
}

/* A killed context: its peers' endpoints die, their posts fail, its listener refuses. */
static void test_kill(void **state)
{
    (void)state;
    tt_pair_t p;
    rs_mr_t *smr, *cmr;
    rs_rkey_t *rkey;
    memset(&rx, 0, sizeof(rx));
    tt_pair_open_regions(&p, NULL, 4096, &smr, &cmr, &rkey);
    uint16_t port = rs_listener_port(p.listener);
    assert_ptr_equal(rs_lb_ctx_of_port(port), p.srv);
    rs_set_ep_handler(p.srv, on_ep, NULL);
    srv_events = 0;

    /* A put queued before the kill fails with it. */
    tt_done_t put = {0};
    memset(rs_mr_addr(cmr), 0xab, 64);
    assert_int_equal(rs_put(p.cep, rs_mr_addr(cmr), 64, cmr, rkey, 0, tt_done_cb, &put), RS_OK);
    assert_int_equal(rs_lb_kill(p.srv), RS_OK);
    assert_int_equal(tt_wait_calls(p.cli, p.srv, &put, 1, 2000), 1);
    assert_int_equal(put.status, RS_ERR_UNREACHABLE);
    assert_int_equal(((uint8_t *)rs_mr_addr(smr))[0], 0); /* nothing landed */

    int dead = 0;
    uint64_t end = tt_now_ms() + 2000;
    while (!(dead = rs_ep_status(p.cep) == RS_ERR_UNREACHABLE) && tt_now_ms() < end) {
        rs_progress(p.cli);
        rs_progress(p.srv);
    }
    assert_true(dead);
    uint32_t seq = 1;
    assert_int_equal(rs_msg_send(p.cep, 1, &seq, 4, NULL, NULL), RS_ERR_UNREACHABLE);
    /* Its own side of the connection failed too (the user hears it). */
    end = tt_now_ms() + 2000;
    while (srv_events == 0 && tt_now_ms() < end)
        rs_progress(p.srv);
    assert_int_equal(srv_events, 1);
    assert_int_equal(srv_last, RS_ERR_UNREACHABLE);

    rs_ep_t *ep2 = NULL;
    assert_int_equal(rs_connect(p.cli, "127.0.0.1", port, &ep2), RS_ERR_REFUSED);
    assert_null(ep2);
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_int_equal(c.kills, 1);
    assert_true(c.refused >= 1);
    rs_rkey_destroy(rkey);
    tt_pair_close(&p);
    assert_int_equal(rs_lb_kill(p.srv), RS_ERR_NOT_FOUND); /* destroyed: not a context now */
}

int main(void)
{
    tt_alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_drop),
        cmocka_unit_test(test_rewrite_then_deliver),
        cmocka_unit_test(test_hold_release),
        cmocka_unit_test(test_kill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
