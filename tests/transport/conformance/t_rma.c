/*
 * One-sided puts and gets land byte-exact at the right offsets and touch
 * nothing around them; remote-key blobs and remote ranges are checked
 * before anything is posted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "suite.h"

/* ------------------------------------------------------------ the target */

typedef struct rma_target {
    rs_mr_t *mr;
    atomic_uint notifies;
} rma_target_t;

static void rma_target_notify(void *arg, rs_ep_t *ep, uint32_t imm)
{
    rma_target_t *t = arg;
    (void)ep;
    (void)imm;
    atomic_fetch_add(&t->notifies, 1);
}

static void rma_target_cmd(void *arg, rs_ctx_t *ctx, h_chan_t *ch, uint32_t tag, const void *data,
                           size_t len)
{
    rma_target_t *t = arg;
    t_verify_t res = {.bad = -1};
    (void)ctx;

    if (tag == T_FREE) { /* the region goes; keys to it are stale from now on */
        H_CHECK(t->mr != NULL, "FREE twice");
        rs_mem_free(t->mr);
        t->mr = NULL;
        res.notifies = atomic_load(&t->notifies);
        H_CHECK(h_send(ch, H_RSLT, &res, sizeof(res)), "channel closed");
        return;
    }
    H_CHECK(t->mr != NULL, "a command after FREE");
    uint8_t *base = rs_mr_addr(t->mr);
    if (tag == T_VRFY) {
        H_CHECK(len == sizeof(h_model_t), "VRFY of %zu bytes", len);
        h_model_t m;
        memcpy(&m, data, sizeof(m));
        res.bad = h_model_check(&m, base, rs_mr_len(t->mr));
    } else if (tag == T_FILL) {
        H_CHECK(len == sizeof(h_range_t), "FILL of %zu bytes", len);
        h_range_t r;
        memcpy(&r, data, sizeof(r));
        H_CHECK(r.off + r.len <= rs_mr_len(t->mr), "FILL out of the region");
        h_pat_fill(base + r.off, r.len, r.seed, 0);
    } else {
        H_CHECK(0, "unknown command %.4s", (const char *)&tag);
    }
    res.notifies = atomic_load(&t->notifies);
    H_CHECK(h_send(ch, H_RSLT, &res, sizeof(res)), "channel closed");
}

/*
 * A target region filled with the background pattern, offered by listening
 * or by address. Args: method, serve mode, region length.
 */
int role_rma_target(h_chan_t *ch, int argc, char **argv)
{
    H_CHECK(argc == 3, "usage: method mode region_len");
    h_method_t method = h_method_parse(argv[0]);
    h_serve_mode_t mode = h_serve_mode_parse(argv[1]);
    size_t region = strtoull(argv[2], NULL, 10);
    rma_target_t t = {0};
    rs_listener_t *l = NULL;

    rs_ctx_t *ctx = h_ctx(NULL);
    rs_set_notify_handler(ctx, rma_target_notify, &t);
    rs_status_t st = rs_mem_alloc(ctx, region, RS_MEM_REMOTE_ALL, &t.mr);
    H_CHECK_OK(st);
    H_CHECK(rs_mr_len(t.mr) == region, "rs_mr_len %zu, asked %zu", rs_mr_len(t.mr), region);
    h_pat_fill(rs_mr_addr(t.mr), region, T_BG_SEED, 0);
    st = h_offer(ctx, ch, method, &l);
    H_CHECK_OK(st);
    h_send_rkey(ch, t.mr);

    h_serve(ctx, ch, mode, rma_target_cmd, NULL, &t);

    if (l != NULL)
        rs_listener_destroy(l);
    if (t.mr != NULL)
        rs_mem_free(t.mr);
    h_ctx_destroy(ctx);
    return 0;
}

static t_verify_t verify(h_child_t *c, const h_model_t *m)
{
    t_verify_t res = {.bad = -2};
    assert_true(h_send(&c->ch, T_VRFY, m, sizeof(*m)));
    assert_int_equal(h_recv(&c->ch, H_RSLT, &res, sizeof(res), 60000), sizeof(res));
    return res;
}

/* Verifies until the target saw `notifies` notifications (they may trail the callback). */
static t_verify_t verify_notified(h_child_t *c, const h_model_t *m, uint32_t notifies)
{
    t_verify_t res = verify(c, m);
    for (int i = 0; i < 500 && res.notifies < notifies; i++) {
        usleep(10000);
        res = verify(c, m);
    }
    return res;
}

static void fill(h_child_t *c, h_model_t *m, uint64_t off, uint64_t len, uint64_t seed)
{
    h_range_t r = {.off = off, .len = len, .seed = seed};
    t_verify_t res;
    assert_true(h_send(&c->ch, T_FILL, &r, sizeof(r)));
    assert_int_equal(h_recv(&c->ch, H_RSLT, &res, sizeof(res), 60000), sizeof(res));
    h_model_add(m, off, len, seed);
}

/* Waits until every op in ops[0..n) completed once, with RS_OK. */
static void wait_ops_ok(rs_ctx_t *ctx, h_op_t *ops, size_t n, int timeout_ms)
{
    for (size_t i = 0; i < n; i++) {
        assert_true(H_UNTIL(ctx, atomic_load(&ops[i].calls) > 0, timeout_ms));
        assert_int_equal(atomic_load(&ops[i].calls), 1);
        assert_int_equal(atomic_load(&ops[i].status), RS_OK);
    }
}

static void flush_ok(rs_ctx_t *ctx, rs_ep_t *ep)
{
    h_op_t op = {0};
    assert_int_equal(rs_ep_flush(ep, h_op_cb, &op), RS_OK);
    wait_ops_ok(ctx, &op, 1, 60000);
}

/* ------------------------------------------------------------- put / get */

typedef struct xfer {
    uint64_t len, roff, loff, seed;
} xfer_t;

#define N_XFER 4

static void put_get(h_method_t method)
{
    char region_arg[32];
    snprintf(region_arg, sizeof(region_arg), "%u", T_BIG_REGION);
    h_child_t target;
    h_spawn(&target, "rma_target", h_method_name(method), "wait", region_arg, NULL);

    rs_ctx_t *ctx = h_ctx(NULL);
    rs_ep_t *ep = NULL;
    rs_rkey_t *rkey = NULL;
    assert_int_equal(h_connect(ctx, &target.ch, method, &ep), RS_OK);
    assert_non_null(ep);
    assert_int_equal(rs_ep_status(ep), RS_OK);
    assert_int_equal(h_recv_rkey(&target.ch, ep, &rkey), RS_OK);
    assert_int_equal(rs_rkey_len(rkey), T_BIG_REGION);

    /* Sources in caller memory registered with rs_mem_reg. */
    const size_t local_len = T_BIG_REGION;
    void *src = NULL;
    assert_int_equal(posix_memalign(&src, 4096, local_len), 0);
    rs_mr_t *src_mr = NULL, *dst_mr = NULL;
    assert_int_equal(rs_mem_reg(ctx, src, local_len, RS_MEM_LOCAL, &src_mr), RS_OK);
    assert_int_equal(rs_mem_alloc(ctx, local_len, RS_MEM_LOCAL, &dst_mr), RS_OK);
    uint8_t *dst = rs_mr_addr(dst_mr);

    /* 1 B, 4 KiB, 64 KiB + 3 and 16 MiB, at odd offsets; the last ends at the region's end. */
    const xfer_t puts[N_XFER] = {
        {1, 5, 0, 101},
        {4096, 8191, 67, 102},
        {65536 + 3, 65553, 8193, 103},
        {16u << 20, 262144, 200003, 104},
    };
    h_op_t ops[N_XFER] = {0};
    h_model_t model = {.bg_seed = T_BG_SEED};
    for (int i = 0; i < N_XFER; i++) {
        h_pat_fill((uint8_t *)src + puts[i].loff, puts[i].len, puts[i].seed, 0);
        h_model_add(&model, puts[i].roff, puts[i].len, puts[i].seed);
    }
    for (int i = 0; i < N_XFER; i++)
        assert_int_equal(rs_put(ep, (uint8_t *)src + puts[i].loff, puts[i].len, src_mr, rkey,
                                puts[i].roff, h_op_cb, &ops[i]),
                         RS_OK);
    wait_ops_ok(ctx, ops, N_XFER, 60000);
    flush_ok(ctx, ep);
    assert_int_equal(verify(&target, &model).bad, -1);

    /* Gets of the same sizes into a local region with its own background. */
    fill(&target, &model, 300000, 100, 201);
    fill(&target, &model, T_BIG_REGION - 2, 2, 202);
    const uint64_t local_bg = 0x10c;
    h_pat_fill(dst, local_len, local_bg, 0);
    const xfer_t gets[N_XFER] = {
        {1, T_BIG_REGION - 1, 11, 0},
        {4096, 3, 4099, 0},
        {65536 + 3, 131000, 70001, 0},
        {16u << 20, 262144, 200003, 0},
    };
    h_op_t gops[N_XFER] = {0};
    for (int i = 0; i < N_XFER; i++)
        assert_int_equal(rs_get(ep, dst + gets[i].loff, gets[i].len, dst_mr, rkey, gets[i].roff,
                                h_op_cb, &gops[i]),
                         RS_OK);
    wait_ops_ok(ctx, gops, N_XFER, 60000);

    uint8_t *exp = malloc(16u << 20);
    assert_non_null(exp);
    uint64_t prev_end = 0;
    for (int i = 0; i < N_XFER; i++) {
        h_model_expect(&model, gets[i].roff, gets[i].len, exp);
        assert_memory_equal(dst + gets[i].loff, exp, gets[i].len);
        /* Nothing between this get's bytes and the previous one's changed. */
        assert_int_equal(h_pat_check(dst + prev_end, gets[i].loff - prev_end, local_bg, prev_end),
                         -1);
        prev_end = gets[i].loff + gets[i].len;
    }
    assert_int_equal(h_pat_check(dst + prev_end, local_len - prev_end, local_bg, prev_end), -1);

    /*
     * A vectored read: ranges out of order, adjacent, overlapping, of one
     * byte and of 1 MiB, the last ending at the region's end, each to its
     * own place; then RS_GETV_MAX ranges of 64 B. One callback each time.
     */
    h_pat_fill(dst, local_len, local_bg, 0);
    const xfer_t vs[] = {
        {4096, 262144 + 8192, 64, 0},
        {1, 7, 9000, 0},
        {100, 262144, 9100, 0},
        {100, 262144 + 100, 9300, 0},
        {1u << 20, 262144 + 8200, 1u << 21, 0},
        {2, T_BIG_REGION - 2, 11, 0},
    };
    enum { N_VS = sizeof(vs) / sizeof(vs[0]) };
    rs_get_seg_t seg[RS_GETV_MAX];
    for (int i = 0; i < N_VS; i++)
        seg[i] = (rs_get_seg_t){.dst = dst + vs[i].loff, .len = vs[i].len, .roff = vs[i].roff};
    h_op_t vop = {0};
    assert_int_equal(rs_getv(ep, seg, N_VS, dst_mr, rkey, h_op_cb, &vop), RS_OK);
    wait_ops_ok(ctx, &vop, 1, 60000);
    for (int i = 0; i < N_VS; i++) {
        h_model_expect(&model, vs[i].roff, vs[i].len, exp);
        assert_memory_equal(dst + vs[i].loff, exp, vs[i].len);
    }
    assert_int_equal(h_pat_check(dst + 13, 64 - 13, local_bg, 13), -1); /* between ranges */
    for (unsigned i = 0; i < RS_GETV_MAX; i++)
        seg[i] = (rs_get_seg_t){.dst = dst + (4u << 20) + 64 * i,
                                .len = 64,
                                .roff = (uint64_t)(RS_GETV_MAX - i) * 4096 + 3};
    h_op_t vmax = {0};
    assert_int_equal(rs_getv(ep, seg, RS_GETV_MAX, dst_mr, rkey, h_op_cb, &vmax), RS_OK);
    wait_ops_ok(ctx, &vmax, 1, 60000);
    for (unsigned i = 0; i < RS_GETV_MAX; i++) {
        h_model_expect(&model, seg[i].roff, 64, exp);
        assert_memory_equal(seg[i].dst, exp, 64);
    }
    assert_int_equal(atomic_load(&vop.calls), 1);
    assert_int_equal(atomic_load(&vmax.calls), 1);
    free(exp);
    /* Gets changed nothing at the target. */
    assert_int_equal(verify(&target, &model).bad, -1);

    assert_int_equal(rs_ep_outstanding(ep), 0);
    rs_rkey_destroy(rkey);
    rs_ep_close(ep);
    rs_mem_free(src_mr);
    rs_mem_free(dst_mr);
    free(src);
    h_ctx_destroy(ctx);
    assert_int_equal(h_child_stop(&target, 20000), 0);
}

void test_put_get_listen(void **state)
{
    (void)state;
    put_get(H_LISTEN);
}

void test_put_get_address(void **state)
{
    (void)state;
    put_get(H_ADDRESS);
}

/* ------------------------------------------------- remote keys and ranges */

#define SMALL_REGION (64u << 10)

static void expect_unpack_refused(rs_ep_t *ep, const uint8_t *blob, size_t len, const char *what,
                                  size_t where)
{
    rs_rkey_t *sentinel = (rs_rkey_t *)&sentinel, *rk = sentinel;
    rs_status_t st = rs_rkey_unpack(ep, blob, len, &rk);
    if (st != RS_ERR_BAD_RKEY && !(len == 0 && st == RS_ERR_INVALID))
        fail_msg("%s blob (%zu of %zu): rs_rkey_unpack returned %s, not RS_ERR_BAD_RKEY", what,
                 where, len, rs_strerror(st));
    assert_ptr_equal(rk, sentinel);
}

void test_rkey_blob_and_range(void **state)
{
    (void)state;
    char region_arg[32];
    snprintf(region_arg, sizeof(region_arg), "%u", SMALL_REGION);
    h_child_t target;
    h_spawn(&target, "rma_target", h_method_name(h_default_method()), "wait", region_arg, NULL);

    rs_ctx_t *ctx = h_ctx(NULL);
    rs_ep_t *ep = NULL;
    assert_int_equal(h_connect(ctx, &target.ch, h_default_method(), &ep), RS_OK);
    uint8_t blob[RS_RKEY_BLOB_MAX], bad[RS_RKEY_BLOB_MAX];
    ssize_t n = h_recv(&target.ch, H_RKEY, blob, sizeof(blob), 30000);
    assert_true(n > 0);
    size_t blen = (size_t)n;

    /* Every truncation and every single-bit or whole-byte corruption is refused. */
    for (size_t len = 0; len < blen; len++)
        expect_unpack_refused(ep, blob, len, "truncated", len);
    for (size_t i = 0; i < blen; i++) {
        memcpy(bad, blob, blen);
        bad[i] ^= (uint8_t)(1u << (i % 8));
        expect_unpack_refused(ep, bad, blen, "bit-flipped", i);
        bad[i] = (uint8_t)~blob[i];
        expect_unpack_refused(ep, bad, blen, "byte-inverted", i);
    }
    rs_rkey_t *rkey = NULL;
    assert_int_equal(rs_rkey_unpack(ep, blob, blen, &rkey), RS_OK);
    assert_int_equal(rs_rkey_len(rkey), SMALL_REGION);

    rs_mr_t *mr = NULL;
    assert_int_equal(rs_mem_alloc(ctx, 2 * SMALL_REGION + 64, RS_MEM_LOCAL, &mr), RS_OK);
    uint8_t *buf = rs_mr_addr(mr);
    h_pat_fill(buf, 2 * SMALL_REGION + 64, 0x5e, 0);

    /*
     * Out-of-range ops are refused before anything is posted. The handshake's
     * own sends may still be completing (verbs reaps unsignaled sends through a
     * later signaled one): wait for the endpoint to be idle first.
     */
    assert_true(H_UNTIL(ctx, rs_ep_outstanding(ep) == 0, 5000));
    const uint64_t L = SMALL_REGION;
    const struct {
        uint64_t roff, len;
    } oor[] = {
        {L - 3, 4}, {L, 1}, {L + 4096, 1}, {UINT64_MAX - 1, 4}, {UINT64_MAX, 1}, {0, L + 1},
    };
    enum { N_OOR = sizeof(oor) / sizeof(oor[0]) };
    h_op_t refused[3 * N_OOR + 4] = {0};
    int k = 0;
    for (int i = 0; i < N_OOR; i++, k += 3) {
        assert_int_equal(rs_put(ep, buf, oor[i].len, mr, rkey, oor[i].roff, h_op_cb, &refused[k]),
                         RS_ERR_OUT_OF_RANGE);
        assert_int_equal(
            rs_put_notify(ep, buf, oor[i].len, mr, rkey, oor[i].roff, 7, h_op_cb, &refused[k + 1]),
            RS_ERR_OUT_OF_RANGE);
        assert_int_equal(
            rs_get(ep, buf, oor[i].len, mr, rkey, oor[i].roff, h_op_cb, &refused[k + 2]),
            RS_ERR_OUT_OF_RANGE);
        assert_int_equal(rs_ep_outstanding(ep), 0);
    }
    /* A vectored read with one range out of range, none, or too many: nothing is read. */
    rs_get_seg_t vseg[RS_GETV_MAX + 1];
    for (unsigned i = 0; i <= RS_GETV_MAX; i++)
        vseg[i] = (rs_get_seg_t){.dst = buf + 64 * (i % 16), .len = 64, .roff = 64 * i};
    vseg[2].roff = L - 3;
    h_op_t vrefused[3] = {0};
    assert_int_equal(rs_getv(ep, vseg, 4, mr, rkey, h_op_cb, &vrefused[0]), RS_ERR_OUT_OF_RANGE);
    vseg[2].roff = 128;
    assert_int_equal(rs_getv(ep, vseg, 0, mr, rkey, h_op_cb, &vrefused[1]), RS_ERR_INVALID);
    assert_int_equal(rs_getv(ep, vseg, RS_GETV_MAX + 1, mr, rkey, h_op_cb, &vrefused[2]),
                     RS_ERR_INVALID);
    assert_int_equal(rs_ep_outstanding(ep), 0);
    uint64_t old = 0;
    assert_int_equal(rs_fetch_add(ep, rkey, L, 1, &old, h_op_cb, &refused[k++]),
                     RS_ERR_OUT_OF_RANGE);
    assert_int_equal(rs_fetch_add(ep, rkey, UINT64_MAX - 7, 1, &old, h_op_cb, &refused[k++]),
                     RS_ERR_OUT_OF_RANGE);
    /* Misaligned: refused too (out of range or invalid), never posted. */
    assert_int_not_equal(rs_fetch_add(ep, rkey, L - 4, 1, &old, h_op_cb, &refused[k++]), RS_OK);
    assert_int_not_equal(rs_fetch_add(ep, rkey, 4, 1, &old, h_op_cb, &refused[k++]), RS_OK);
    assert_int_equal(rs_ep_outstanding(ep), 0);
    flush_ok(ctx, ep);
    (void)H_UNTIL(ctx, false, 100);
    for (int i = 0; i < k; i++)
        assert_int_equal(atomic_load(&refused[i].calls), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(atomic_load(&vrefused[i].calls), 0);
    h_model_t model = {.bg_seed = T_BG_SEED};
    t_verify_t v = verify(&target, &model);
    assert_int_equal(v.bad, -1);
    assert_int_equal(v.notifies, 0);

    /* The exact edges are accepted: last bytes, first bytes, last aligned word. */
    h_op_t ops[3] = {0};
    h_pat_fill(buf, 4, 401, 0);
    h_pat_fill(buf + 64, 3, 402, 0);
    assert_int_equal(rs_put(ep, buf, 4, mr, rkey, L - 4, h_op_cb, &ops[0]), RS_OK);
    assert_int_equal(rs_put_notify(ep, buf + 64, 3, mr, rkey, 0, 0x600d, h_op_cb, &ops[1]), RS_OK);
    assert_int_equal(rs_fetch_add(ep, rkey, L - 16, 5, &old, h_op_cb, &ops[2]), RS_OK);
    wait_ops_ok(ctx, ops, 3, 30000);
    flush_ok(ctx, ep);
    uint8_t bgword[8];
    h_pat_fill(bgword, 8, T_BG_SEED, L - 16);
    uint64_t expected_old;
    memcpy(&expected_old, bgword, 8);
    assert_int_equal(old, expected_old);

    h_op_t gops[2] = {0};
    assert_int_equal(rs_get(ep, buf + 128, 1, mr, rkey, L - 1, h_op_cb, &gops[0]), RS_OK);
    assert_int_equal(rs_get(ep, buf + 136, 8, mr, rkey, L - 16, h_op_cb, &gops[1]), RS_OK);
    wait_ops_ok(ctx, gops, 2, 30000);
    assert_int_equal(buf[128], h_pat_byte(401, 3));
    uint64_t now_val = expected_old + 5, got;
    memcpy(&got, buf + 136, 8);
    assert_int_equal(got, now_val);

    h_model_add(&model, L - 4, 4, 401);
    h_model_add(&model, 0, 3, 402);
    h_model_add_literal(&model, L - 16, &now_val, 8);
    v = verify_notified(&target, &model, 1);
    assert_int_equal(v.bad, -1);
    assert_int_equal(v.notifies, 1);

    rs_rkey_destroy(rkey);
    rs_ep_close(ep);
    rs_mem_free(mr);
    h_ctx_destroy(ctx);
    assert_int_equal(h_child_stop(&target, 20000), 0);
}

/* ------------------------------------------- reused ranges and stale keys */

#define REUSE_REGION (1u << 20)
#define REUSE_ROUNDS 64
#define N_REUSE      3

/*
 * Same-host UCX over shared memory reaches the target's memory from here
 * (attach or our mapping of it), so a stale put fails at its origin. Over
 * messages (TCP) or RDMA a put completes when it is sent and the target
 * refuses it (nothing is written); a get fails everywhere.
 */
static bool stale_put_fails_here(void)
{
    rs_config_t cfg;
    h_config(&cfg);
    const char *tls = getenv("UCX_TLS");
    return cfg.transport == RS_TRANSPORT_UCX && h_remote() == NULL && tls != NULL &&
           (strstr(tls, "posix") != NULL || strstr(tls, "sysv") != NULL);
}

/* An op after the region is gone fails: refused at posting or completed with an error. */
static void expect_failed(rs_ctx_t *ctx, rs_status_t st, h_op_t *op, bool must_fail,
                          const char *what)
{
    if (st != RS_OK) {
        assert_true(st < 0);
        return;
    }
    assert_true(H_UNTIL(ctx, atomic_load(&op->calls) > 0, 60000));
    assert_int_equal(atomic_load(&op->calls), 1);
    if (must_fail && atomic_load(&op->status) == RS_OK)
        fail_msg("%s through a stale key completed RS_OK", what);
}

/*
 * Puts into the same ranges round after round (a ring), a range another put
 * ends in, and gets of a range read before: every round lands byte-exact,
 * whichever path a backend takes for reused memory. Then the target frees
 * the region: puts into ranges used before and never used fail where the
 * origin reaches the memory itself (stale_put_fails_here), a get fails
 * everywhere; none faults this process.
 */
void test_reused_ranges_stale_key(void **state)
{
    (void)state;
    char region_arg[32];
    snprintf(region_arg, sizeof(region_arg), "%u", REUSE_REGION);
    h_child_t target;
    h_spawn(&target, "rma_target", h_method_name(h_default_method()), "wait", region_arg, NULL);

    rs_ctx_t *ctx = h_ctx(NULL);
    rs_ep_t *ep = NULL;
    rs_rkey_t *rkey = NULL;
    assert_int_equal(h_connect(ctx, &target.ch, h_default_method(), &ep), RS_OK);
    assert_int_equal(h_recv_rkey(&target.ch, ep, &rkey), RS_OK);
    rs_mr_t *mr = NULL;
    assert_int_equal(rs_mem_alloc(ctx, REUSE_REGION, RS_MEM_LOCAL, &mr), RS_OK);
    uint8_t *buf = rs_mr_addr(mr);

    /* The second ends in the first's last page; the third spans 49 pages. */
    const xfer_t xs[N_REUSE] = {
        {65536 + 5, 4093, 0, 0},
        {100, 70000, 70001, 0},
        {200000, 300001, 80003, 0},
    };
    h_model_t model = {.bg_seed = T_BG_SEED};
    for (int round = 0; round < REUSE_ROUNDS; round++) {
        h_op_t ops[N_REUSE] = {0};
        model.n = 0;
        for (int i = 0; i < N_REUSE; i++) {
            uint64_t seed = 1000u + (uint64_t)round * N_REUSE + (uint64_t)i;
            h_pat_fill(buf + xs[i].loff, xs[i].len, seed, 0);
            h_model_add(&model, xs[i].roff, xs[i].len, seed);
            assert_int_equal(
                rs_put(ep, buf + xs[i].loff, xs[i].len, mr, rkey, xs[i].roff, h_op_cb, &ops[i]),
                RS_OK);
        }
        wait_ops_ok(ctx, ops, N_REUSE, 60000);
        if (round % 8 == 0 || round == REUSE_ROUNDS - 1) {
            flush_ok(ctx, ep);
            assert_int_equal(verify(&target, &model).bad, -1);
        }
    }

    /* The same range read twice (once before, once after it was reread). */
    uint8_t *exp = malloc(xs[2].len);
    assert_non_null(exp);
    h_model_expect(&model, xs[2].roff, xs[2].len, exp);
    for (int pass = 0; pass < 2; pass++) {
        h_op_t g = {0};
        memset(buf + 500000, 0, xs[2].len);
        assert_int_equal(rs_get(ep, buf + 500000, xs[2].len, mr, rkey, xs[2].roff, h_op_cb, &g),
                         RS_OK);
        wait_ops_ok(ctx, &g, 1, 60000);
        assert_memory_equal(buf + 500000, exp, xs[2].len);
    }
    free(exp);

    /*
     * UCX's mapped shared segments (RSHUFFLE_UCX_MEM=shared) cannot tell a
     * freed region from a live one: a put there lands in the old segment.
     */
    const char *mem = getenv("RSHUFFLE_UCX_MEM");
    if (mem == NULL || strcmp(mem, "shared") != 0) {
        t_verify_t res;
        assert_true(h_send(&target.ch, T_FREE, NULL, 0));
        assert_int_equal(h_recv(&target.ch, H_RSLT, &res, sizeof(res), 60000), sizeof(res));
        bool here = stale_put_fails_here();
        h_op_t late[4] = {0};
        expect_failed(ctx, rs_put(ep, buf, xs[0].len, mr, rkey, xs[0].roff, h_op_cb, &late[0]),
                      &late[0], here, "a put into a range used before");
        expect_failed(ctx, rs_put(ep, buf, 4096, mr, rkey, 700000, h_op_cb, &late[1]), &late[1],
                      here, "a put into a range never used");
        expect_failed(ctx, rs_get(ep, buf, xs[2].len, mr, rkey, xs[2].roff, h_op_cb, &late[2]),
                      &late[2], true, "a get of a range read before");
        expect_failed(ctx, rs_put(ep, buf, 100, mr, rkey, xs[1].roff, h_op_cb, &late[3]), &late[3],
                      here, "a second put into a range used before");
    }

    rs_rkey_destroy(rkey);
    rs_ep_close(ep);
    rs_mem_free(mr);
    h_ctx_destroy(ctx);
    assert_int_equal(h_child_stop(&target, 20000), 0);
}
