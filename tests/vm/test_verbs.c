/*
 * The verbs backend's own machinery on a real RDMA device (run inside the
 * Soft-RoCE guest by the vm_softroce target; it needs RSHUFFLE_TEST_HOST =
 * an address of the device). Tiny queues force every slow path: the
 * software backlog behind a full send queue, the per-QP read/atomic budget,
 * selective signaling and its tail writes, receiver-not-ready retries on a
 * small shared receive queue; a QP driven into the error state must
 * complete every outstanding op exactly once.
 */
#include "transport/verbs/verbs.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tt_util.h"

#define SQ      16
#define SRQ     16
#define RD      2
#define INLINE  32
#define SIG     3
#define MSG_MAX 4096
#define WAIT_MS 20000

typedef struct pair {
    rs_ctx_t *srv, *cli;
    rs_listener_t *l;
    rs_ep_t *cep, *sep;
} pair_t;

static const char *host(void)
{
    const char *h = getenv("RSHUFFLE_TEST_HOST");
    if (h == NULL || h[0] == '\0')
        fail_msg("RSHUFFLE_TEST_HOST must name an address of the RDMA device");
    return h;
}

static void tiny_config(rs_config_t *cfg)
{
    assert_int_equal(rs_config_init(cfg), RS_OK);
    cfg->transport = RS_TRANSPORT_VERBS;
    cfg->progress_thread = 0;
    cfg->peer_timeout_ms = 8000;
    cfg->connect_timeout_ms = 8000;
    cfg->msg_max = MSG_MAX;
    cfg->verbs_sq_depth = SQ;
    cfg->verbs_srq_depth = SRQ;
    cfg->verbs_cq_depth = 64;
    cfg->verbs_inline = INLINE;
    cfg->verbs_signal_every = SIG;
    cfg->verbs_max_rd_atom = RD;
}

static void srv_ep_cb(void *arg, rs_ep_t *ep, rs_status_t st)
{
    pair_t *p = arg;
    if (st == RS_OK)
        __atomic_store_n(&p->sep, ep, __ATOMIC_RELEASE);
}

static void pump(pair_t *p)
{
    if (rs_progress(p->cli) + rs_progress(p->srv) == 0)
        usleep(100);
}

#define UNTIL(p, cond, ms)                    \
    __extension__({                           \
        uint64_t end_ = tt_now_ms() + (ms);   \
        while (!(cond) && tt_now_ms() < end_) \
            pump(p);                          \
        (cond);                               \
    })

/* Server (listening on host) and a client connected to it. */
static void pair_open(pair_t *p, const char *listen_host, int by_address)
{
    rs_config_t cfg;
    tiny_config(&cfg);
    memset(p, 0, sizeof(*p));
    assert_int_equal(rs_ctx_create(&cfg, &p->srv), RS_OK);
    assert_int_equal(rs_ctx_create(&cfg, &p->cli), RS_OK);
    assert_string_equal(rs_ctx_backend(p->cli), "verbs");
    rs_set_ep_handler(p->srv, srv_ep_cb, p);
    assert_int_equal(rs_listen(p->srv, listen_host, 0, &p->l), RS_OK);
    /* The server answers the handshake while rs_connect blocks this thread. */
    assert_int_equal(rs_progress_thread_start(p->srv), RS_OK);
    if (by_address) {
        unsigned char blob[RS_ADDR_BLOB_MAX];
        size_t len = 0;
        assert_int_equal(rs_ctx_address(p->srv, blob, sizeof(blob), &len), RS_OK);
        assert_int_equal(rs_connect_address(p->cli, blob, len, &p->cep), RS_OK);
    } else {
        assert_int_equal(rs_connect(p->cli, host(), rs_listener_port(p->l), &p->cep), RS_OK);
    }
    uint64_t end = tt_now_ms() + WAIT_MS;
    while (__atomic_load_n(&p->sep, __ATOMIC_ACQUIRE) == NULL && tt_now_ms() < end)
        usleep(1000);
    rs_progress_thread_stop(p->srv);
    assert_non_null(p->sep);
}

static void pair_close(pair_t *p)
{
    rs_ctx_destroy(p->cli);
    rs_ctx_destroy(p->srv);
}

static uint8_t pat(uint64_t i)
{
    return (uint8_t)(i * 131 + (i >> 8) * 7 + 1);
}

static void fill(uint8_t *buf, size_t len, uint64_t start)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = pat(start + i);
}

static int check(const uint8_t *buf, size_t len, uint64_t start)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != pat(start + i))
            return 0;
    return 1;
}

static rs_vep_t *vep(rs_ep_t *ep)
{
    return ep->be;
}

/* 256 puts (inline and not, most without a callback) through a send queue of 16. */
static void test_puts_through_backlog(void **state)
{
    (void)state;
    enum { N = 256, SLOT = 1024 };
    pair_t p;
    pair_open(&p, host(), 0);
    rs_mr_t *dst, *src;
    assert_int_equal(rs_mem_alloc(p.srv, N * SLOT, RS_MEM_REMOTE_WRITE, &dst), RS_OK);
    assert_int_equal(rs_mem_alloc(p.cli, N * SLOT, RS_MEM_LOCAL, &src), RS_OK);
    uint8_t *s = rs_mr_addr(src);
    fill(s, N * SLOT, 0);
    rs_rkey_t *rk = tt_rkey_for(p.cep, dst);

    static tt_done_t d[N];
    memset(d, 0, sizeof(d));
    for (int i = 0; i < N; i++) {
        size_t len = i % 4 == 0 ? 16 : 1 + (size_t)(i * 37) % SLOT;
        int with_cb = i % 5 == 0;
        assert_int_equal(rs_put(p.cep, s + i * SLOT, len, src, rk, (uint64_t)i * SLOT,
                                with_cb ? tt_done_cb : NULL, with_cb ? &d[i] : NULL),
                         RS_OK);
    }
    assert_false(rs_list_empty(&vep(p.cep)->backlog)); /* the send queue overflowed */
    assert_true(vep(p.cep)->tail - vep(p.cep)->head <= SQ + 1);
    tt_done_t fl = {0};
    assert_int_equal(rs_ep_flush(p.cep, tt_done_cb, &fl), RS_OK);
    assert_true(UNTIL(&p, fl.calls == 1, WAIT_MS));
    assert_int_equal(fl.status, RS_OK);
    for (int i = 0; i < N; i += 5) {
        assert_int_equal(d[i].calls, 1);
        assert_int_equal(d[i].status, RS_OK);
    }
    assert_int_equal(rs_ep_outstanding(p.cep), 0);
    const uint8_t *t = rs_mr_addr(dst);
    for (int i = 0; i < N; i++) {
        size_t len = i % 4 == 0 ? 16 : 1 + (size_t)(i * 37) % SLOT;
        assert_true(check(t + i * SLOT, len, (uint64_t)i * SLOT));
    }
    rs_rkey_destroy(rk);
    pair_close(&p);
}

/* 64 gets with at most RD reads in flight on the QP. */
static void test_gets_respect_read_budget(void **state)
{
    (void)state;
    enum { N = 64, CHUNK = 1024 };
    pair_t p;
    pair_open(&p, host(), 0);
    rs_mr_t *srcmr, *dstmr;
    assert_int_equal(rs_mem_alloc(p.srv, N * CHUNK, RS_MEM_REMOTE_READ, &srcmr), RS_OK);
    assert_int_equal(rs_mem_alloc(p.cli, N * CHUNK, RS_MEM_LOCAL, &dstmr), RS_OK);
    fill(rs_mr_addr(srcmr), N * CHUNK, 77);
    rs_rkey_t *rk = tt_rkey_for(p.cep, srcmr);
    uint8_t *dst = rs_mr_addr(dstmr);

    static tt_done_t d[N];
    memset(d, 0, sizeof(d));
    for (int i = 0; i < N; i++)
        assert_int_equal(rs_get(p.cep, dst + i * CHUNK, CHUNK, dstmr, rk, (uint64_t)i * CHUNK,
                                tt_done_cb, &d[i]),
                         RS_OK);
    rs_vep_t *v = vep(p.cep);
    assert_true(v->rd_cap >= 1 && v->rd_cap <= RD);
    assert_false(rs_list_empty(&v->backlog));
    uint64_t end = tt_now_ms() + WAIT_MS;
    int finished = 0;
    while (finished < N && tt_now_ms() < end) {
        assert_true(v->rd_out <= v->rd_cap);
        pump(&p);
        finished = 0;
        for (int i = 0; i < N; i++)
            finished += d[i].calls;
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(d[i].calls, 1);
        assert_int_equal(d[i].status, RS_OK);
    }
    assert_true(check(dst, N * CHUNK, 77));
    rs_rkey_destroy(rk);
    pair_close(&p);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Fetch-and-add: 100 increments see 0..99 once each; a 64-bit operand round-trips. */
static void test_fetch_add(void **state)
{
    (void)state;
    enum { N = 100 };
    pair_t p;
    pair_open(&p, host(), 0);
    rs_mr_t *mr;
    assert_int_equal(rs_mem_alloc(p.srv, 4096, RS_MEM_REMOTE_ATOMIC | RS_MEM_REMOTE_READ, &mr),
                     RS_OK);
    rs_rkey_t *rk = tt_rkey_for(p.cep, mr);
    static uint64_t old[N];
    static tt_done_t d[N];
    memset(d, 0, sizeof(d));
    for (int i = 0; i < N; i++)
        assert_int_equal(rs_fetch_add(p.cep, rk, 8, 1, &old[i], tt_done_cb, &d[i]), RS_OK);
    int finished = 0;
    uint64_t end = tt_now_ms() + WAIT_MS;
    while (finished < N && tt_now_ms() < end) {
        assert_true(vep(p.cep)->rd_out <= vep(p.cep)->rd_cap);
        pump(&p);
        finished = 0;
        for (int i = 0; i < N; i++)
            finished += d[i].calls;
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(d[i].calls, 1);
        assert_int_equal(d[i].status, RS_OK);
    }
    qsort(old, N, sizeof(old[0]), cmp_u64);
    for (int i = 0; i < N; i++)
        assert_int_equal(old[i], (uint64_t)i);
    uint64_t *word = (uint64_t *)((char *)rs_mr_addr(mr) + 8);
    assert_int_equal(*word, N);

    const uint64_t big = 0x0102030405060708ull;
    uint64_t o1 = 1, o2 = 0;
    tt_done_t a = {0}, b = {0};
    assert_int_equal(rs_fetch_add(p.cep, rk, 16, big, &o1, tt_done_cb, &a), RS_OK);
    assert_int_equal(rs_fetch_add(p.cep, rk, 16, 0, &o2, tt_done_cb, &b), RS_OK);
    assert_true(UNTIL(&p, a.calls == 1 && b.calls == 1, WAIT_MS));
    assert_int_equal(o1, 0);
    assert_int_equal(o2, big);
    assert_int_equal(*(uint64_t *)((char *)rs_mr_addr(mr) + 16), big);
    rs_rkey_destroy(rk);
    pair_close(&p);
}

typedef struct msg_state {
    int received, zero_len, bad;
} msg_state_t;

static size_t msg_len(int i)
{
    return 4 + (size_t)(i * 53) % (MSG_MAX - 4);
}

static void on_msg(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    msg_state_t *m = arg;
    uint32_t seq;
    if (len < 4) {
        m->bad++;
        return;
    }
    memcpy(&seq, data, 4);
    if (seq != (uint32_t)m->received || len != msg_len(m->received) ||
        !check((const uint8_t *)data + 4, len - 4, seq))
        m->bad++;
    m->received++;
}

static void on_empty(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    (void)data;
    msg_state_t *m = arg;
    if (len != 0)
        m->bad++;
    m->zero_len++;
}

/* 300 messages into 16 posted receives: order, content, RNR retries. */
static void test_messages_small_srq(void **state)
{
    (void)state;
    enum { N = 300 };
    pair_t p;
    pair_open(&p, host(), 0);
    msg_state_t m = {0};
    assert_int_equal(rs_set_msg_handler(p.srv, 7, on_msg, &m), RS_OK);
    assert_int_equal(rs_set_msg_handler(p.srv, 8, on_empty, &m), RS_OK);
    static uint8_t buf[MSG_MAX];
    static tt_done_t d[N];
    memset(d, 0, sizeof(d));
    for (int i = 0; i < N; i++) {
        uint32_t seq = (uint32_t)i;
        size_t len = msg_len(i);
        memcpy(buf, &seq, 4);
        fill(buf + 4, len - 4, seq);
        int with_cb = i % 10 == 0;
        assert_int_equal(
            rs_msg_send(p.cep, 7, buf, len, with_cb ? tt_done_cb : NULL, with_cb ? &d[i] : NULL),
            RS_OK);
        memset(buf, 0xee, len); /* the data was copied before rs_msg_send returned */
        if (i % 50 == 0)
            assert_int_equal(rs_msg_send(p.cep, 8, NULL, 0, NULL, NULL), RS_OK);
    }
    assert_true(UNTIL(&p, m.received == N && m.zero_len == N / 50, WAIT_MS));
    assert_int_equal(m.bad, 0);
    assert_true(UNTIL(&p, rs_ep_outstanding(p.cep) == 0, WAIT_MS));
    for (int i = 0; i < N; i += 10) {
        assert_int_equal(d[i].calls, 1);
        assert_int_equal(d[i].status, RS_OK);
    }
    pair_close(&p);
}

typedef struct notify_state {
    const uint8_t *region;
    uint32_t next;
    int bad;
} notify_state_t;

static size_t notify_len(uint32_t i)
{
    return i % 3 == 0 ? 16 : 512;
}

static void on_notify(void *arg, rs_ep_t *ep, uint32_t imm)
{
    (void)ep;
    notify_state_t *n = arg;
    /* In order, and the put's bytes are there when the notification is. */
    if (imm != n->next || !check(n->region + (size_t)imm * 512, notify_len(imm), imm * 1000u))
        n->bad++;
    n->next++;
}

static void test_notify_visible_in_order(void **state)
{
    (void)state;
    enum { N = 100 };
    pair_t p;
    pair_open(&p, host(), 0);
    rs_mr_t *dst, *src;
    assert_int_equal(rs_mem_alloc(p.srv, N * 512, RS_MEM_REMOTE_WRITE, &dst), RS_OK);
    assert_int_equal(rs_mem_alloc(p.cli, N * 512, RS_MEM_LOCAL, &src), RS_OK);
    notify_state_t n = {.region = rs_mr_addr(dst)};
    rs_set_notify_handler(p.srv, on_notify, &n);
    uint8_t *s = rs_mr_addr(src);
    rs_rkey_t *rk = tt_rkey_for(p.cep, dst);
    for (uint32_t i = 0; i < N; i++) {
        fill(s + i * 512, notify_len(i), i * 1000u);
        assert_int_equal(rs_put_notify(p.cep, s + i * 512, notify_len(i), src, rk,
                                       (uint64_t)i * 512, i, NULL, NULL),
                         RS_OK);
    }
    assert_true(UNTIL(&p, n.next == N, WAIT_MS));
    assert_int_equal(n.bad, 0);
    assert_true(UNTIL(&p, rs_ep_outstanding(p.cep) == 0, WAIT_MS));
    rs_rkey_destroy(rk);
    pair_close(&p);
}

/* Ops left unsignaled at the end of a burst still complete (a tail write retires them). */
static void test_unsignaled_tail(void **state)
{
    (void)state;
    pair_t p;
    pair_open(&p, host(), 0);
    rs_mr_t *dst, *src;
    assert_int_equal(rs_mem_alloc(p.srv, 4096, RS_MEM_REMOTE_WRITE, &dst), RS_OK);
    assert_int_equal(rs_mem_alloc(p.cli, 4096, RS_MEM_LOCAL, &src), RS_OK);
    rs_rkey_t *rk = tt_rkey_for(p.cep, dst);
    fill(rs_mr_addr(src), 4096, 5);
    tt_done_t last = {0};
    for (int i = 0; i < 5; i++)
        assert_int_equal(rs_put(p.cep, (char *)rs_mr_addr(src) + i * 100, 100, src, rk,
                                (uint64_t)i * 100, i == 4 ? tt_done_cb : NULL, &last),
                         RS_OK);
    rs_vep_t *v = vep(p.cep);
    assert_int_equal(v->unsignaled, 2); /* the 3rd was signaled (signal_every 3), 4 and 5 not */
    assert_true(UNTIL(&p, rs_ep_outstanding(p.cep) == 0 && last.calls == 1, WAIT_MS));
    assert_int_equal(last.status, RS_OK);
    assert_int_equal(v->unsignaled, 0);
    assert_true(check(rs_mr_addr(dst), 500, 5));
    rs_rkey_destroy(rk);
    pair_close(&p);
}

/*
 * A put to a region the server deregistered: the QP goes to the error state;
 * the failing put, the WRs behind it (signaled or not) and the queued ops
 * all complete exactly once, with an error.
 */
static void test_qp_error_flushes_everything(void **state)
{
    (void)state;
    enum { N = 40 };
    pair_t p;
    pair_open(&p, host(), 0);
    rs_mr_t *gone, *ok, *src;
    assert_int_equal(rs_mem_alloc(p.srv, 4096, RS_MEM_REMOTE_WRITE, &gone), RS_OK);
    assert_int_equal(rs_mem_alloc(p.srv, N * 1024, RS_MEM_REMOTE_ALL, &ok), RS_OK);
    assert_int_equal(rs_mem_alloc(p.cli, N * 1024, RS_MEM_LOCAL, &src), RS_OK);
    rs_rkey_t *rk_gone = tt_rkey_for(p.cep, gone);
    rs_rkey_t *rk_ok = tt_rkey_for(p.cep, ok);
    rs_mem_free(gone);

    char *s = rs_mr_addr(src);
    tt_done_t bad = {0};
    static tt_done_t d[N + 2];
    memset(d, 0, sizeof(d));
    assert_int_equal(rs_put(p.cep, s, 64, src, rk_gone, 0, tt_done_cb, &bad), RS_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(
            rs_put(p.cep, s + i * 1024, 1024, src, rk_ok, (uint64_t)i * 1024, tt_done_cb, &d[i]),
            RS_OK);
    static uint64_t old;
    assert_int_equal(rs_get(p.cep, s, 512, src, rk_ok, 0, tt_done_cb, &d[N]), RS_OK);
    assert_int_equal(rs_fetch_add(p.cep, rk_ok, 0, 1, &old, tt_done_cb, &d[N + 1]), RS_OK);

    int all = 0;
    uint64_t end = tt_now_ms() + WAIT_MS;
    while (tt_now_ms() < end) {
        pump(&p);
        all = bad.calls;
        for (int i = 0; i < N + 2; i++)
            all += d[i].calls;
        if (all >= N + 3)
            break;
    }
    assert_int_equal(bad.calls, 1);
    assert_int_not_equal(bad.status, RS_OK);
    for (int i = 0; i < N + 2; i++) {
        assert_int_equal(d[i].calls, 1);
        assert_int_not_equal(d[i].status, RS_OK);
    }
    assert_int_not_equal(rs_ep_status(p.cep), RS_OK);
    assert_int_equal(rs_ep_outstanding(p.cep), 0);
    assert_int_equal(rs_put(p.cep, s, 8, src, rk_ok, 0, NULL, NULL), RS_ERR_UNREACHABLE);
    rs_rkey_destroy(rk_gone);
    rs_rkey_destroy(rk_ok);
    pair_close(&p);
}

/* Closing an endpoint with most ops still in the backlog completes each once. */
static void test_close_with_backlog(void **state)
{
    (void)state;
    enum { N = 100 };
    pair_t p;
    pair_open(&p, host(), 0);
    rs_mr_t *dst, *src;
    assert_int_equal(rs_mem_alloc(p.srv, N * 256, RS_MEM_REMOTE_WRITE, &dst), RS_OK);
    assert_int_equal(rs_mem_alloc(p.cli, N * 256, RS_MEM_LOCAL, &src), RS_OK);
    rs_rkey_t *rk = tt_rkey_for(p.cep, dst);
    static tt_done_t d[N];
    memset(d, 0, sizeof(d));
    for (int i = 0; i < N; i++)
        assert_int_equal(rs_put(p.cep, (char *)rs_mr_addr(src) + i * 256, 256, src, rk,
                                (uint64_t)i * 256, tt_done_cb, &d[i]),
                         RS_OK);
    assert_false(rs_list_empty(&vep(p.cep)->backlog));
    rs_ep_close(p.cep); /* callbacks of its ops run before this returns */
    for (int i = 0; i < N; i++) {
        assert_int_equal(d[i].calls, 1);
        assert_true(d[i].status == RS_OK || d[i].status == RS_ERR_CANCELED);
    }
    /* The server learns the client left. */
    assert_true(UNTIL(&p, rs_ep_status(p.sep) != RS_OK, WAIT_MS));
    pair_close(&p);
}

/* A wildcard listener's context address names an address of the device. */
static void test_address_of_wildcard_listener(void **state)
{
    (void)state;
    pair_t p;
    pair_open(&p, "0.0.0.0", 1);
    msg_state_t m = {0};
    assert_int_equal(rs_set_msg_handler(p.srv, 8, on_empty, &m), RS_OK);
    assert_int_equal(rs_msg_send(p.cep, 8, NULL, 0, NULL, NULL), RS_OK);
    assert_true(UNTIL(&p, m.zero_len == 1, WAIT_MS));
    pair_close(&p);
}

int main(int argc, char **argv)
{
    alarm(240);
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* e.g. test_fetch_add */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_puts_through_backlog),
        cmocka_unit_test(test_gets_respect_read_budget),
        cmocka_unit_test(test_fetch_add),
        cmocka_unit_test(test_messages_small_srq),
        cmocka_unit_test(test_notify_visible_in_order),
        cmocka_unit_test(test_unsignaled_tail),
        cmocka_unit_test(test_qp_error_flushes_everything),
        cmocka_unit_test(test_close_with_backlog),
        cmocka_unit_test(test_address_of_wildcard_listener),
    };
    return cmocka_run_group_tests_name("verbs backend internals", tests, NULL, NULL);
}
