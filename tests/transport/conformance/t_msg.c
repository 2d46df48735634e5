/*
 * Control messages: request/reply round trips, ordering on one endpoint,
 * the data copied at send time, the size limit (msg_max delivered, one byte
 * more refused), user types only, and the context fd waking a poll().
 */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "suite.h"

#define MAX_SEED 0x6d6178u

/* ------------------------------------------------------------- the server */

typedef struct msg_server {
    uint32_t msg_max;
    uint8_t *out;
    t_msg_counts_t counts;
    uint64_t next_seq;
    rs_ep_t *delayed_ep;
    uint64_t delayed_due;
} msg_server_t;

static void ms_send(rs_ep_t *ep, unsigned type, const void *data, size_t len)
{
    rs_status_t st = rs_msg_send(ep, type, data, len, NULL, NULL);
    H_CHECK(st == RS_OK, "rs_msg_send type %u len %zu: %s", type, len, rs_strerror(st));
}

static void ms_req(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    msg_server_t *s = arg;
    const uint8_t *in = data;
    if (len < 4 || len > s->msg_max) {
        s->counts.bad_len++;
        return;
    }
    memcpy(s->out, in, 4);
    for (size_t i = 4; i < len; i++)
        s->out[i] = in[i] ^ 0xa5;
    ms_send(ep, T_MSG_REPLY, s->out, len);
}

static void ms_seq(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    msg_server_t *s = arg;
    uint64_t seq;
    (void)ep;
    if (len < 8) {
        s->counts.bad_len++;
        return;
    }
    memcpy(&seq, data, 8);
    if (seq != s->next_seq || h_pat_check((const uint8_t *)data + 8, len - 8, seq, 0) != -1)
        s->counts.seq_errors++;
    s->next_seq = seq + 1;
    s->counts.seq_count++;
}

static void ms_query(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    msg_server_t *s = arg;
    (void)data;
    (void)len;
    ms_send(ep, T_MSG_COUNTS, &s->counts, sizeof(s->counts));
}

static void ms_max(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    msg_server_t *s = arg;
    uint32_t res[2] = {len == s->msg_max && h_pat_check(data, len, MAX_SEED, 0) == -1,
                       (uint32_t)len};
    ms_send(ep, T_MSG_MAX_OK, res, sizeof(res));
}

static void ms_delayed(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    msg_server_t *s = arg;
    (void)data;
    (void)len;
    s->delayed_ep = ep;
    s->delayed_due = h_now_ms() + 100;
}

static int ms_tick(void *arg, rs_ctx_t *ctx)
{
    msg_server_t *s = arg;
    (void)ctx;
    if (s->delayed_ep == NULL)
        return -1;
    uint64_t now = h_now_ms();
    if (now < s->delayed_due)
        return (int)(s->delayed_due - now);
    uint32_t v = 0xfd;
    ms_send(s->delayed_ep, T_MSG_DELAY_REP, &v, sizeof(v));
    s->delayed_ep = NULL;
    return -1;
}

/* Args: method, serve mode. Answers the T_MSG_* protocol of suite.h. */
int role_msg_server(h_chan_t *ch, int argc, char **argv)
{
    H_CHECK(argc == 2, "usage: method mode");
    msg_server_t s = {0};
    rs_ctx_t *ctx = h_ctx(NULL);
    s.msg_max = rs_ctx_config(ctx)->msg_max;
    s.out = malloc(s.msg_max);
    H_CHECK(s.out != NULL, "out of memory");
    H_CHECK_OK(rs_set_msg_handler(ctx, T_MSG_REQ, ms_req, &s));
    H_CHECK_OK(rs_set_msg_handler(ctx, T_MSG_SEQ, ms_seq, &s));
    H_CHECK_OK(rs_set_msg_handler(ctx, T_MSG_QUERY, ms_query, &s));
    H_CHECK_OK(rs_set_msg_handler(ctx, T_MSG_MAX, ms_max, &s));
    H_CHECK_OK(rs_set_msg_handler(ctx, T_MSG_DELAYED, ms_delayed, &s));
    rs_listener_t *l = NULL;
    rs_status_t st = h_offer(ctx, ch, h_method_parse(argv[0]), &l);
    H_CHECK_OK(st);
    h_serve(ctx, ch, h_serve_mode_parse(argv[1]), NULL, ms_tick, &s);
    if (l != NULL)
        rs_listener_destroy(l);
    h_ctx_destroy(ctx);
    free(s.out);
    return 0;
}

/* ------------------------------------------------------------- the client */

typedef struct msg_client {
    uint32_t replies;
    uint32_t reply_seq[256];
    size_t last_len;
    uint8_t *last; /* msg_max bytes */
    int counts_n;
    t_msg_counts_t counts;
    int max_n;
    uint32_t max_res[2];
    int delay_n;
} msg_client_t;

static void mc_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    msg_client_t *c = arg;
    (void)ep;
    uint32_t seq = 0;
    if (len >= 4)
        memcpy(&seq, data, 4);
    if (c->replies < 256)
        c->reply_seq[c->replies] = seq;
    memcpy(c->last, data, len);
    c->last_len = len;
    c->replies++;
}

static void mc_counts(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    msg_client_t *c = arg;
    (void)ep;
    if (len == sizeof(c->counts))
        memcpy(&c->counts, data, len);
    c->counts_n++;
}

static void mc_max(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    msg_client_t *c = arg;
    (void)ep;
    if (len == sizeof(c->max_res))
        memcpy(c->max_res, data, len);
    c->max_n++;
}

static void mc_delay(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    msg_client_t *c = arg;
    (void)ep;
    (void)data;
    (void)len;
    c->delay_n++;
}

static size_t req_len(uint32_t i, uint32_t msg_max)
{
    if (i == 0)
        return 4;
    if (i == 1)
        return msg_max;
    return 4 + ((size_t)i * 131u) % (msg_max - 3);
}

static void make_req(uint8_t *buf, uint32_t seq, size_t len)
{
    memcpy(buf, &seq, 4);
    h_pat_fill(buf + 4, len - 4, 0x7000u + seq, 0);
}

static void check_reply(const msg_client_t *c, uint32_t seq, size_t len)
{
    assert_int_equal(c->last_len, len);
    uint32_t got;
    memcpy(&got, c->last, 4);
    assert_int_equal(got, seq);
    for (size_t i = 4; i < len; i++)
        if ((uint8_t)(c->last[i] ^ 0xa5) != h_pat_byte(0x7000u + seq, i - 4))
            fail_msg("reply %u: byte %zu differs", seq, i);
}

static void send_ok(rs_ctx_t *ctx, rs_ep_t *ep, unsigned type, const void *data, size_t len,
                    h_op_t *op)
{
    rs_status_t st;
    uint64_t deadline = h_now_ms() + 10000;
    while ((st = rs_msg_send(ep, type, data, len, h_op_cb, op)) == RS_ERR_BUSY &&
           h_now_ms() < deadline)
        h_pump(ctx);
    assert_int_equal(st, RS_OK);
}

static void messages(h_method_t method)
{
    h_child_t server;
    h_spawn(&server, "msg_server", h_method_name(method), "fd", NULL);
    rs_ctx_t *ctx = h_ctx(NULL);
    rs_ep_t *ep = NULL;
    assert_int_equal(h_connect(ctx, &server.ch, method, &ep), RS_OK);

    const uint32_t msg_max = rs_ctx_config(ctx)->msg_max;
    msg_client_t c = {0};
    c.last = malloc(msg_max);
    uint8_t *buf = malloc(2 * (size_t)msg_max);
    h_op_t *ops = calloc(2000, sizeof(*ops));
    assert_non_null(c.last);
    assert_non_null(buf);
    assert_non_null(ops);
    assert_int_equal(rs_set_msg_handler(ctx, T_MSG_REPLY, mc_reply, &c), RS_OK);
    assert_int_equal(rs_set_msg_handler(ctx, T_MSG_COUNTS, mc_counts, &c), RS_OK);
    assert_int_equal(rs_set_msg_handler(ctx, T_MSG_MAX_OK, mc_max, &c), RS_OK);

    /* Sequential round trips, 4 bytes to msg_max. */
    for (uint32_t i = 0; i < 200; i++) {
        size_t len = req_len(i, msg_max);
        h_op_t op = {0};
        make_req(buf, i, len);
        send_ok(ctx, ep, T_MSG_REQ, buf, len, &op);
        assert_true(H_UNTIL(ctx, c.replies == i + 1 && atomic_load(&op.calls) > 0, 10000));
        assert_int_equal(atomic_load(&op.calls), 1);
        assert_int_equal(atomic_load(&op.status), RS_OK);
        check_reply(&c, i, len);
    }

    /* 64 requests in flight: the replies come back in order. */
    c.replies = 0;
    for (uint32_t i = 0; i < 64; i++) {
        size_t len = req_len(i + 2, msg_max);
        make_req(buf, i, len);
        send_ok(ctx, ep, T_MSG_REQ, buf, len, &ops[i]);
    }
    assert_true(H_UNTIL(ctx, c.replies == 64, 20000));
    for (uint32_t i = 0; i < 64; i++) {
        assert_int_equal(c.reply_seq[i], i);
        assert_true(H_UNTIL(ctx, atomic_load(&ops[i].calls) > 0, 10000));
        assert_int_equal(atomic_load(&ops[i].status), RS_OK);
    }

    /* 2000 messages from one buffer, overwritten right after each send. */
    memset(ops, 0, 2000 * sizeof(*ops));
    for (uint64_t i = 0; i < 2000; i++) {
        size_t len = 8 + (size_t)(i % 57) * 3;
        memcpy(buf, &i, 8);
        h_pat_fill(buf + 8, len - 8, i, 0);
        send_ok(ctx, ep, T_MSG_SEQ, buf, len, &ops[i]);
        memset(buf, 0xee, len);
        if (i % 64 == 0)
            (void)rs_progress(ctx);
    }
    h_op_t qop = {0};
    send_ok(ctx, ep, T_MSG_QUERY, NULL, 0, &qop);
    assert_true(H_UNTIL(ctx, c.counts_n == 1, 20000));
    assert_int_equal(c.counts.seq_count, 2000);
    assert_int_equal(c.counts.seq_errors, 0);
    assert_int_equal(c.counts.bad_len, 0);
    for (int i = 0; i < 2000; i++) {
        assert_true(H_UNTIL(ctx, atomic_load(&ops[i].calls) > 0, 10000));
        assert_int_equal(atomic_load(&ops[i].calls), 1);
        assert_int_equal(atomic_load(&ops[i].status), RS_OK);
    }

    /* One byte over msg_max is refused and never sent; msg_max itself arrives intact. */
    h_op_t refused[4] = {0};
    h_pat_fill(buf, 2 * (size_t)msg_max, MAX_SEED, 0);
    assert_int_equal(rs_msg_send(ep, T_MSG_MAX, buf, (size_t)msg_max + 1, h_op_cb, &refused[0]),
                     RS_ERR_MSG_SIZE);
    assert_int_equal(rs_msg_send(ep, T_MSG_MAX, buf, 2 * (size_t)msg_max, h_op_cb, &refused[1]),
                     RS_ERR_MSG_SIZE);
    /* Only user types: the internal ones (>= RS_MSG_TYPES) are not the caller's. */
    assert_int_equal(rs_msg_send(ep, RS_MSG_TYPES, buf, 8, h_op_cb, &refused[2]), RS_ERR_INVALID);
    assert_int_equal(rs_msg_send(ep, 255, buf, 8, h_op_cb, &refused[3]), RS_ERR_INVALID);
    assert_int_equal(rs_set_msg_handler(ctx, RS_MSG_TYPES, mc_max, &c), RS_ERR_INVALID);
    h_op_t mop = {0};
    send_ok(ctx, ep, T_MSG_MAX, buf, msg_max, &mop);
    assert_true(H_UNTIL(ctx, c.max_n == 1, 10000));
    assert_int_equal(c.max_res[0], 1);
    assert_int_equal(c.max_res[1], msg_max);
    (void)H_UNTIL(ctx, false, 50);
    for (int i = 0; i < 4; i++)
        assert_int_equal(atomic_load(&refused[i].calls), 0);
    assert_int_equal(c.max_n, 1);

    /* The endpoint still works. */
    h_op_t last = {0};
    c.replies = 0;
    make_req(buf, 7, 100);
    send_ok(ctx, ep, T_MSG_REQ, buf, 100, &last);
    assert_true(H_UNTIL(ctx, c.replies == 1, 10000));
    check_reply(&c, 7, 100);
    assert_true(H_UNTIL(ctx, rs_ep_outstanding(ep) == 0, 10000));

    rs_ep_close(ep);
    h_ctx_destroy(ctx);
    free(c.last);
    free(buf);
    free(ops);
    assert_int_equal(h_child_stop(&server, 20000), 0);
}

void test_messages_listen(void **state)
{
    (void)state;
    messages(H_LISTEN);
}

void test_messages_address(void **state)
{
    (void)state;
    messages(H_ADDRESS);
}

/* A reply arriving ~100 ms later wakes a poll() on the armed context fd. */
void test_event_fd_wakes(void **state)
{
    (void)state;
    h_child_t server;
    h_spawn(&server, "msg_server", h_method_name(h_default_method()), "wait", NULL);
    rs_ctx_t *ctx = h_ctx(NULL);
    rs_ep_t *ep = NULL;
    assert_int_equal(h_connect(ctx, &server.ch, h_default_method(), &ep), RS_OK);
    msg_client_t c = {0};
    assert_int_equal(rs_set_msg_handler(ctx, T_MSG_DELAY_REP, mc_delay, &c), RS_OK);
    int fd = rs_ctx_fd(ctx);
    assert_true(fd >= 0);

    uint32_t v = 1;
    h_op_t op = {0};
    assert_int_equal(rs_msg_send(ep, T_MSG_DELAYED, &v, sizeof(v), h_op_cb, &op), RS_OK);
    int sleeps = 0, lost = 0;
    uint64_t deadline = h_now_ms() + 10000;
    while ((c.delay_n == 0 || atomic_load(&op.calls) == 0) && h_now_ms() < deadline) {
        while (rs_progress(ctx) > 0)
            ;
        if (c.delay_n > 0 && atomic_load(&op.calls) > 0)
            break;
        rs_status_t st = rs_ctx_arm(ctx);
        if (st == RS_ERR_BUSY)
            continue;
        assert_int_equal(st, RS_OK);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, 3000);
        sleeps++;
        if (r == 0)
            lost++;
    }
    assert_int_equal(c.delay_n, 1);
    assert_int_equal(atomic_load(&op.status), RS_OK);
    assert_true(sleeps > 0);
    assert_int_equal(lost, 0);

    rs_ep_close(ep);
    h_ctx_destroy(ctx);
    assert_int_equal(h_child_stop(&server, 20000), 0);
}
