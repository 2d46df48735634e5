/*
 * Remote fetch-and-add from two processes on one counter: the old values
 * they get back are every value 0 .. 2N-1 exactly once, and the counter
 * ends at 2N.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "suite.h"

#define N_ADDS      5000 /* per adder */
#define WINDOW      64
#define COUNTER_OFF 64
#define T_READ      H_TAG('R', 'E', 'A', 'D')

typedef struct fadd_target {
    rs_mr_t *mr;
} fadd_target_t;

static void fadd_target_cmd(void *arg, rs_ctx_t *ctx, h_chan_t *ch, uint32_t tag, const void *data,
                            size_t len)
{
    fadd_target_t *t = arg;
    (void)ctx;
    (void)data;
    (void)len;
    H_CHECK(tag == T_READ, "unknown command");
    uint64_t v =
        __atomic_load_n((uint64_t *)((uint8_t *)rs_mr_addr(t->mr) + COUNTER_OFF), __ATOMIC_SEQ_CST);
    H_CHECK(h_send(ch, H_RSLT, &v, sizeof(v)), "channel closed");
}

/* Holds the counter (zero) at COUNTER_OFF of a 4 KiB region; progress thread. */
int role_fadd_target(h_chan_t *ch, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fadd_target_t t = {0};
    rs_ctx_t *ctx = h_ctx(NULL);
    rs_status_t st = rs_mem_alloc(ctx, 4096, RS_MEM_REMOTE_ALL, &t.mr);
    H_CHECK_OK(st);
    memset(rs_mr_addr(t.mr), 0, 4096);
    rs_listener_t *l = NULL;
    st = h_offer(ctx, ch, h_default_method(), &l);
    H_CHECK_OK(st);
    h_send_rkey(ch, t.mr);
    h_serve(ctx, ch, H_SERVE_THREAD, fadd_target_cmd, NULL, &t);
    if (l != NULL)
        rs_listener_destroy(l);
    rs_mem_free(t.mr);
    h_ctx_destroy(ctx);
    return 0;
}

/*
 * Gets the target's port or address and its rkey blob, says DONE (ready),
 * waits GO, adds, sends the old values.
 */
int role_fadd_adder(h_chan_t *ch, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    rs_ctx_t *ctx = h_ctx(NULL);
    rs_ep_t *ep = NULL;
    rs_rkey_t *rkey = NULL;
    rs_status_t st = h_connect(ctx, ch, h_default_method(), &ep);
    H_CHECK(st == RS_OK, "connect: %s", rs_strerror(st));
    st = h_recv_rkey(ch, ep, &rkey);
    H_CHECK_OK(st);
    H_CHECK(h_send(ch, H_DONE, NULL, 0), "channel closed");
    uint8_t go;
    H_CHECK(h_recv(ch, H_GO, &go, sizeof(go), 30000) == 0, "no GO");

    uint64_t *old = calloc(N_ADDS, sizeof(*old));
    h_op_t *ops = calloc(N_ADDS, sizeof(*ops));
    H_CHECK(old != NULL && ops != NULL, "out of memory");
    size_t posted = 0, done = 0;
    uint64_t deadline = h_now_ms() + 60000;
    while (done < N_ADDS) {
        H_CHECK(h_now_ms() < deadline, "fetch-adds stuck: %zu posted, %zu done", posted, done);
        while (posted < N_ADDS && posted - done < WINDOW) {
            st = rs_fetch_add(ep, rkey, COUNTER_OFF, 1, &old[posted], h_op_cb, &ops[posted]);
            if (st == RS_ERR_BUSY)
                break;
            H_CHECK_OK(st);
            posted++;
        }
        h_pump(ctx);
        while (done < posted && atomic_load(&ops[done].calls) > 0) {
            H_CHECK(atomic_load(&ops[done].status) == RS_OK, "fetch-add %zu: %s", done,
                    rs_strerror(atomic_load(&ops[done].status)));
            done++;
        }
    }
    for (size_t i = 0; i < N_ADDS; i++)
        H_CHECK(atomic_load(&ops[i].calls) == 1, "op %zu: %d callbacks", i,
                atomic_load(&ops[i].calls));
    H_CHECK(h_send(ch, H_RSLT, old, N_ADDS * sizeof(*old)), "channel closed");
    h_serve(ctx, ch, H_SERVE_WAIT, NULL, NULL, NULL);

    free(old);
    free(ops);
    rs_rkey_destroy(rkey);
    rs_ep_close(ep);
    h_ctx_destroy(ctx);
    return 0;
}

void test_fetch_add_two_processes(void **state)
{
    (void)state;
    h_child_t target, adders[2];
    uint8_t blob[RS_RKEY_BLOB_MAX];
    static h_peer_t peer;
    h_spawn(&target, "fadd_target", NULL);
    assert_true(h_recv_peer(&target.ch, &peer, 30000));
    ssize_t blen = h_recv(&target.ch, H_RKEY, blob, sizeof(blob), 30000);
    assert_true(blen > 0);
    for (int i = 0; i < 2; i++) {
        h_spawn(&adders[i], "fadd_adder", NULL);
        assert_true(h_send_peer(&adders[i].ch, &peer));
        assert_true(h_send(&adders[i].ch, H_RKEY, blob, (size_t)blen));
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(h_recv(&adders[i].ch, H_DONE, NULL, 0, 30000), 0);
    for (int i = 0; i < 2; i++)
        assert_true(h_send(&adders[i].ch, H_GO, NULL, 0));

    uint8_t *seen = calloc(2 * N_ADDS, 1);
    uint64_t *old = calloc(N_ADDS, sizeof(*old));
    assert_non_null(seen);
    assert_non_null(old);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(h_recv(&adders[i].ch, H_RSLT, old, N_ADDS * sizeof(*old), 90000),
                         N_ADDS * sizeof(*old));
        for (size_t k = 0; k < N_ADDS; k++) {
            assert_in_range(old[k], 0, 2 * N_ADDS - 1);
            if (seen[old[k]]++ != 0)
                fail_msg("value %llu returned twice", (unsigned long long)old[k]);
        }
    }
    for (size_t v = 0; v < 2 * N_ADDS; v++)
        assert_int_equal(seen[v], 1);
    free(seen);
    free(old);

    uint64_t final = 0;
    assert_true(h_send(&target.ch, T_READ, NULL, 0));
    assert_int_equal(h_recv(&target.ch, H_RSLT, &final, sizeof(final), 30000), sizeof(final));
    assert_int_equal(final, 2 * N_ADDS);
    for (int i = 0; i < 2; i++)
        assert_int_equal(h_child_stop(&adders[i], 20000), 0);
    assert_int_equal(h_child_stop(&target, 20000), 0);
}
