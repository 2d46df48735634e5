/*
 * Operations in flight (TCP: gets and fetch-adds wait for a target that
 * does not progress): closing the endpoint or destroying the context
 * completes every op exactly once before returning, and an op outstanding
 * for longer than peer_timeout_ms kills the endpoint with RS_ERR_TIMEOUT.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/transport.h>
#include "tt_util.h"

#define REGION (1u << 20)
#define N_GET  16
#define N_FADD 8
#define N_MSG  4
#define N_OPS  (N_GET + N_FADD + N_MSG + 1)

typedef struct fixture {
    tt_pair_t p;
    rs_mr_t *smr, *cmr;
    rs_rkey_t *rkey;
    tt_done_t ops[N_OPS];
    uint64_t olds[N_FADD];
    int reposts, repost_refused;
} fixture_t;

static int setup_with(void **state, uint32_t peer_timeout_ms)
{
    fixture_t *f = calloc(1, sizeof(*f));
    rs_config_t cli;
    tt_config(&cli);
    cli.peer_timeout_ms = peer_timeout_ms;
    tt_pair_open_regions(&f->p, &cli, REGION, &f->smr, &f->cmr, &f->rkey);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, 2000);
}

static int setup_short(void **state)
{
    return setup_with(state, 300);
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    if (f->p.cli != NULL)
        tt_pair_close(&f->p);
    free(f);
    return 0;
}

/* Posts N_OPS operations; the server is not progressed, so most wait. */
static void post_all(fixture_t *f)
{
    unsigned char *buf = rs_mr_addr(f->cmr);
    int k = 0;
    for (int i = 0; i < N_GET; i++, k++)
        assert_int_equal(rs_get(f->p.cep, buf + i * 65536, 65536, f->cmr, f->rkey,
                                (uint64_t)i * 65536, tt_done_cb, &f->ops[k]),
                         RS_OK);
    for (int i = 0; i < N_FADD; i++, k++)
        assert_int_equal(rs_fetch_add(f->p.cep, f->rkey, 8 * (uint64_t)i, 1, &f->olds[i],
                                      tt_done_cb, &f->ops[k]),
                         RS_OK);
    for (int i = 0; i < N_MSG; i++, k++)
        assert_int_equal(rs_msg_send(f->p.cep, 0, buf, 512, tt_done_cb, &f->ops[k]), RS_OK);
    assert_int_equal(rs_ep_flush(f->p.cep, tt_done_cb, &f->ops[k++]), RS_OK);
    assert_int_equal(k, N_OPS);
    rs_progress(f->p.cli); /* client only */
}

static void expect_all_once(fixture_t *f, rs_status_t allowed_error)
{
    int canceled = 0;
    for (int i = 0; i < N_OPS; i++) {
        if (f->ops[i].calls != 1)
            print_error("op %d: %d calls\n", i, f->ops[i].calls);
        assert_int_equal(f->ops[i].calls, 1);
        if (f->ops[i].status != RS_OK) {
            assert_int_equal(f->ops[i].status, allowed_error);
            canceled++;
        }
    }
    /* Gets need the target: at least those cannot have completed. */
    assert_true(canceled >= N_GET);
}

static void test_ep_close_in_flight(void **state)
{
    fixture_t *f = *state;
    post_all(f);
    assert_true(rs_ep_outstanding(f->p.cep) >= N_GET);
    rs_rkey_t *unused = f->rkey; /* released by the close */
    (void)unused;
    rs_ep_close(f->p.cep);
    expect_all_once(f, RS_ERR_CANCELED);
    /* Nothing fires twice later. */
    for (int i = 0; i < 50; i++)
        rs_progress(f->p.cli);
    expect_all_once(f, RS_ERR_CANCELED);
}

static void test_destroy_in_flight(void **state)
{
    fixture_t *f = *state;
    post_all(f);
    rs_ctx_destroy(f->p.cli);
    rs_ctx_destroy(f->p.srv);
    f->p.cli = NULL;
    expect_all_once(f, RS_ERR_CANCELED);
}

/* A callback that re-posts on its endpoint while it is being closed. */
typedef struct repost {
    fixture_t *f;
    tt_done_t done;
    rs_status_t repost_status;
} repost_t;

static void repost_cb(void *arg, rs_status_t status)
{
    repost_t *r = arg;
    r->done.calls++;
    r->done.status = status;
    unsigned char *buf = rs_mr_addr(r->f->cmr);
    r->repost_status =
        rs_get(r->f->p.cep, buf, 8, r->f->cmr, r->f->rkey, 0, tt_done_cb, &r->f->ops[0]);
}

static void test_callback_reposts_during_close(void **state)
{
    fixture_t *f = *state;
    repost_t r = {.f = f, .repost_status = RS_OK};
    unsigned char *buf = rs_mr_addr(f->cmr);
    assert_int_equal(rs_get(f->p.cep, buf, 4096, f->cmr, f->rkey, 0, repost_cb, &r), RS_OK);
    rs_ep_close(f->p.cep);
    assert_int_equal(r.done.calls, 1);
    assert_int_equal(r.done.status, RS_ERR_CANCELED);
    assert_int_equal(r.repost_status, RS_ERR_CANCELED); /* refused: nothing posted */
    assert_int_equal(f->ops[0].calls, 0);
}

typedef struct ep_events {
    int errors;
    rs_status_t last;
} ep_events_t;

static void cli_ep_cb(void *arg, rs_ep_t *ep, rs_status_t status)
{
    ep_events_t *e = arg;
    (void)ep;
    e->errors++;
    e->last = status;
}

static void test_peer_timeout(void **state)
{
    fixture_t *f = *state;
    ep_events_t ev = {0};
    rs_set_ep_handler(f->p.cli, cli_ep_cb, &ev);
    unsigned char *buf = rs_mr_addr(f->cmr);
    tt_done_t d = {0};
    uint64_t t0 = tt_now_ms();
    assert_int_equal(rs_get(f->p.cep, buf, 65536, f->cmr, f->rkey, 0, tt_done_cb, &d), RS_OK);
    /* Only the client progresses (rs_wait sleeps on its fd between checks). */
    while (d.calls == 0 && tt_now_ms() - t0 < 3000)
        rs_wait(f->p.cli, 50);
    uint64_t took = tt_now_ms() - t0;
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.status, RS_ERR_TIMEOUT);
    assert_true(took >= 290 && took < 300 + 1000);
    assert_int_equal(ev.errors, 1);
    assert_int_equal(ev.last, RS_ERR_TIMEOUT);
    assert_int_equal(rs_ep_status(f->p.cep), RS_ERR_TIMEOUT);
    assert_int_equal(rs_get(f->p.cep, buf, 8, f->cmr, f->rkey, 0, tt_done_cb, &d),
                     RS_ERR_UNREACHABLE);
    assert_int_equal(rs_msg_send(f->p.cep, 0, buf, 8, NULL, NULL), RS_ERR_UNREACHABLE);
    assert_int_equal(rs_ep_outstanding(f->p.cep), 0);
    rs_ep_close(f->p.cep);
    assert_int_equal(d.calls, 1);
}

int main(void)
{
    tt_alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ep_close_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callback_reposts_during_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_timeout, setup_short, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
