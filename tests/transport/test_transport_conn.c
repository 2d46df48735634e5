/*
 * Connections: the job-token handshake (a wrong token is refused with
 * RS_ERR_AUTH and leaves nothing behind on the server), connecting by
 * worker address, refused and timed-out connects, a peer that closes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/transport.h>
#include "transport/internal.h"
#include "tt_util.h"

static size_t n_eps(rs_ctx_t *ctx)
{
    size_t n = 0;
    rs_tp_lock(ctx);
    for (rs_list_t *pos = ctx->eps.next; pos != &ctx->eps; pos = pos->next)
        n++;
    rs_tp_unlock(ctx);
    return n;
}

typedef struct server {
    rs_ctx_t *ctx;
    rs_listener_t *l;
    int accepted, errors, msgs;
    rs_ep_t *last;
} server_t;

static void srv_ep_cb(void *arg, rs_ep_t *ep, rs_status_t status)
{
    server_t *s = arg;
    if (status == RS_OK) {
        /* Atomic: the server's progress thread runs these, the test thread reads. */
        __atomic_store_n(&s->last, ep, __ATOMIC_RELAXED);
        __atomic_fetch_add(&s->accepted, 1, __ATOMIC_RELEASE);
    } else {
        __atomic_fetch_add(&s->errors, 1, __ATOMIC_RELEASE);
    }
}

static void srv_msg_cb(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    server_t *s = arg;
    (void)ep;
    (void)data;
    (void)len;
    __atomic_fetch_add(&s->msgs, 1, __ATOMIC_RELEASE);
}

static void server_open(server_t *s, const char *token)
{
    rs_config_t cfg;
    tt_config(&cfg);
    strcpy(cfg.job_token, token);
    memset(s, 0, sizeof(*s));
    assert_int_equal(rs_ctx_create(&cfg, &s->ctx), RS_OK);
    rs_set_ep_handler(s->ctx, srv_ep_cb, s);
    assert_int_equal(rs_set_msg_handler(s->ctx, 0, srv_msg_cb, s), RS_OK);
    assert_int_equal(rs_listen(s->ctx, "127.0.0.1", 0, &s->l), RS_OK);
    assert_int_equal(rs_progress_thread_start(s->ctx), RS_OK);
}

static void server_close(server_t *s)
{
    rs_ctx_destroy(s->ctx);
}

static rs_ctx_t *client_ctx(const char *token, uint32_t connect_timeout_ms)
{
    rs_config_t cfg;
    rs_ctx_t *ctx;
    tt_config(&cfg);
    strcpy(cfg.job_token, token);
    cfg.connect_timeout_ms = connect_timeout_ms;
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
    return ctx;
}

static void test_wrong_token(void **state)
{
    (void)state;
    server_t s;
    server_open(&s, "job-a");
    rs_ctx_t *cli = client_ctx("job-b", 3000);
    rs_ep_t *ep = NULL;
    assert_int_equal(rs_connect(cli, "127.0.0.1", rs_listener_port(s.l), &ep), RS_ERR_AUTH);
    assert_null(ep);
    assert_int_equal(n_eps(cli), 0);

    /* The same over a worker address. */
    unsigned char addr[RS_ADDR_BLOB_MAX];
    size_t len;
    assert_int_equal(rs_ctx_address(s.ctx, addr, sizeof(addr), &len), RS_OK);
    assert_int_equal(rs_connect_address(cli, addr, len, &ep), RS_ERR_AUTH);
    assert_null(ep);
    rs_ctx_destroy(cli);

    /* The server never reported the peers and dropped their endpoints. */
    uint64_t end = tt_now_ms() + 3000;
    while (n_eps(s.ctx) != 0 && tt_now_ms() < end)
        usleep(1000);
    assert_int_equal(n_eps(s.ctx), 0);
    assert_int_equal(__atomic_load_n(&s.accepted, __ATOMIC_ACQUIRE), 0);
    assert_int_equal(__atomic_load_n(&s.msgs, __ATOMIC_ACQUIRE), 0);

    /* A client with the right token still gets in. */
    cli = client_ctx("job-a", 3000);
    assert_int_equal(rs_connect(cli, "127.0.0.1", rs_listener_port(s.l), &ep), RS_OK);
    assert_int_equal(rs_msg_send(ep, 0, "x", 1, NULL, NULL), RS_OK);
    end = tt_now_ms() + 3000;
    while (__atomic_load_n(&s.msgs, __ATOMIC_ACQUIRE) == 0 && tt_now_ms() < end)
        rs_progress(cli);
    assert_int_equal(__atomic_load_n(&s.msgs, __ATOMIC_ACQUIRE), 1);
    assert_int_equal(__atomic_load_n(&s.accepted, __ATOMIC_ACQUIRE), 1);
    rs_ep_close(ep);
    rs_ctx_destroy(cli);
    server_close(&s);
}

/* Counts the endpoint deaths and orderly closes the library logs. */
static int logged_died, logged_closed;

static void count_log(void *arg, rs_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg;
    (void)level;
    (void)file;
    (void)line;
    if (strstr(msg, "died") != NULL)
        __atomic_add_fetch(&logged_died, 1, __ATOMIC_RELAXED);
    if (strstr(msg, "closed by the peer") != NULL)
        __atomic_add_fetch(&logged_closed, 1, __ATOMIC_RELAXED);
}

static void test_connect_address(void **state)
{
    (void)state;
    server_t s;
    server_open(&s, "rshuffle");
    unsigned char addr[RS_ADDR_BLOB_MAX];
    size_t len;
    assert_int_equal(rs_ctx_address(s.ctx, addr, sizeof(addr), &len), RS_OK);
    rs_ctx_t *cli = client_ctx("rshuffle", 3000);
    rs_ep_t *ep = NULL;
    assert_int_equal(rs_connect_address(cli, addr, len, &ep), RS_OK);
    assert_int_equal(rs_ep_status(ep), RS_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(rs_msg_send(ep, 0, &i, sizeof(i), NULL, NULL), RS_OK);
    uint64_t end = tt_now_ms() + 3000;
    while (__atomic_load_n(&s.msgs, __ATOMIC_ACQUIRE) < 10 && tt_now_ms() < end)
        rs_progress(cli);
    assert_int_equal(__atomic_load_n(&s.msgs, __ATOMIC_ACQUIRE), 10);
    assert_int_equal(__atomic_load_n(&s.accepted, __ATOMIC_ACQUIRE), 1);

    /* The client closes: the server is told the endpoint is gone, and its
     * log says the peer closed it, not that it died. */
    rs_log_level_t level = rs_log_level();
    rs_log_set_level(RS_LOG_DEBUG);
    rs_log_set_handler(count_log, NULL);
    rs_ep_close(ep);
    end = tt_now_ms() + 3000;
    while (__atomic_load_n(&s.errors, __ATOMIC_ACQUIRE) == 0 && tt_now_ms() < end)
        rs_progress(cli);
    rs_log_set_handler(NULL, NULL);
    rs_log_set_level(level);
    assert_int_equal(__atomic_load_n(&s.errors, __ATOMIC_ACQUIRE), 1);
    assert_int_equal(__atomic_load_n(&logged_died, __ATOMIC_RELAXED), 0);
    assert_true(__atomic_load_n(&logged_closed, __ATOMIC_RELAXED) >= 1);
    rs_tp_lock(s.ctx);
    rs_ep_t *last = __atomic_load_n(&s.last, __ATOMIC_ACQUIRE);
    assert_int_equal(rs_ep_status(last), RS_ERR_UNREACHABLE);
    assert_int_equal(rs_msg_send(last, 0, "x", 1, NULL, NULL), RS_ERR_UNREACHABLE);
    rs_ep_close(last);
    rs_tp_unlock(s.ctx);
    rs_ctx_destroy(cli);
    server_close(&s);
}

static void test_refused_and_timeout(void **state)
{
    (void)state;
    rs_ctx_t *cli = client_ctx("rshuffle", 300);
    rs_ep_t *ep = NULL;

    /* Nobody listens: refused, quickly. */
    rs_listener_t *l;
    assert_int_equal(rs_listen(cli, "127.0.0.1", 0, &l), RS_OK);
    uint16_t port = rs_listener_port(l);
    rs_listener_destroy(l);
    uint64_t t0 = tt_now_ms();
    assert_int_equal(rs_connect(cli, "127.0.0.1", port, &ep), RS_ERR_REFUSED);
    assert_true(tt_now_ms() - t0 < 300);

    /* A listener whose context never progresses: no handshake in time. */
    rs_config_t cfg;
    rs_ctx_t *mute;
    tt_config(&cfg);
    assert_int_equal(rs_ctx_create(&cfg, &mute), RS_OK);
    assert_int_equal(rs_listen(mute, "127.0.0.1", 0, &l), RS_OK);
    t0 = tt_now_ms();
    assert_int_equal(rs_connect(cli, "127.0.0.1", rs_listener_port(l), &ep), RS_ERR_TIMEOUT);
    uint64_t took = tt_now_ms() - t0;
    assert_true(took >= 290 && took < 300 + 1500);
    assert_null(ep);
    assert_int_equal(n_eps(cli), 0);
    rs_ctx_destroy(cli);
    rs_ctx_destroy(mute);
}

int main(void)
{
    tt_alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrong_token),
        cmocka_unit_test(test_connect_address),
        cmocka_unit_test(test_refused_and_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
