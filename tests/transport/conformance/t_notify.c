/*
 * 10,000 notified puts in flight from two processes with two endpoints each:
 * every notification finds its slot complete. Each put writes a pattern
 * seeded by its sequence number (also its notification) into its own slot;
 * the target's notify handler checks the whole slot when it runs.
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

#define N_PUTTERS 2
#define EPS_EACH  2
#define PER_EP    2500
#define SLOT      2048
#define N_TOTAL   (N_PUTTERS * EPS_EACH * PER_EP)
#define SEED(seq) (0x1000000u + (seq))
#define T_CNT     H_TAG('C', 'N', 'T', '?')

/* Length of put seq: 1 .. SLOT bytes, spread over the range. */
static uint32_t put_len(uint32_t seq)
{
    return 1 + (uint32_t)(((uint64_t)seq * 7919u) % SLOT);
}

typedef struct nt_counts {
    uint64_t count, dups, bad, wrong_ep, out_of_range, accepted;
    int64_t first_bad;
} nt_counts_t;

typedef struct notify_target {
    rs_mr_t *mr;
    uint8_t *seen;
    atomic_uint_fast64_t count, dups, bad, wrong_ep, out_of_range, accepted;
    atomic_int_fast64_t first_bad;
} notify_target_t;

/* A peer passed the handshake: it gets the region's key (and nothing before). */
static void nt_ep_event(void *arg, rs_ep_t *ep, rs_status_t status)
{
    notify_target_t *t = arg;
    if (status != RS_OK)
        return;
    uint8_t blob[RS_RKEY_BLOB_MAX];
    size_t len = 0;
    rs_status_t st = rs_mr_pack_rkey(t->mr, blob, sizeof(blob), &len);
    H_CHECK_OK(st);
    st = rs_msg_send(ep, T_MSG_RKEY, blob, len, NULL, NULL);
    H_CHECK_OK(st);
    atomic_fetch_add(&t->accepted, 1);
}

static void nt_notify(void *arg, rs_ep_t *ep, uint32_t imm)
{
    static const uint8_t zero[SLOT];
    notify_target_t *t = arg;
    if (imm >= N_TOTAL) {
        atomic_fetch_add(&t->out_of_range, 1);
        return;
    }
    /* Every notification of one endpoint comes from one writer. */
    uintptr_t writer = imm / PER_EP + 1, known = (uintptr_t)rs_ep_user(ep);
    if (known == 0)
        rs_ep_set_user(ep, (void *)writer);
    else if (known != writer)
        atomic_fetch_add(&t->wrong_ep, 1);
    if (t->seen[imm]++ != 0)
        atomic_fetch_add(&t->dups, 1);

    const uint8_t *slot = (const uint8_t *)rs_mr_addr(t->mr) + (size_t)imm * SLOT;
    uint32_t len = put_len(imm);
    if (h_pat_check(slot, len, SEED(imm), 0) != -1 || memcmp(slot + len, zero, SLOT - len) != 0) {
        int64_t none = -1;
        atomic_compare_exchange_strong(&t->first_bad, &none, (int64_t)imm);
        atomic_fetch_add(&t->bad, 1);
    }
    atomic_fetch_add(&t->count, 1);
}

static void nt_cmd(void *arg, rs_ctx_t *ctx, h_chan_t *ch, uint32_t tag, const void *data,
                   size_t len)
{
    notify_target_t *t = arg;
    (void)ctx;
    (void)data;
    (void)len;
    H_CHECK(tag == T_CNT, "unknown command");
    /* The putters' callbacks ran; the notifications must be here or about to be. */
    uint64_t deadline = h_now_ms() + 30000;
    while (atomic_load(&t->count) < N_TOTAL && h_now_ms() < deadline)
        usleep(1000);
    nt_counts_t c = {
        .count = atomic_load(&t->count),
        .dups = atomic_load(&t->dups),
        .bad = atomic_load(&t->bad),
        .wrong_ep = atomic_load(&t->wrong_ep),
        .out_of_range = atomic_load(&t->out_of_range),
        .accepted = atomic_load(&t->accepted),
        .first_bad = atomic_load(&t->first_bad),
    };
    H_CHECK(h_send(ch, H_RSLT, &c, sizeof(c)), "channel closed");
}

/* The target: a zeroed region of N_TOTAL slots, served by the progress thread. */
int role_notify_target(h_chan_t *ch, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    notify_target_t t = {0};
    atomic_store(&t.first_bad, -1);
    t.seen = calloc(N_TOTAL, 1);
    H_CHECK(t.seen != NULL, "out of memory");

    rs_ctx_t *ctx = h_ctx(NULL);
    rs_status_t st = rs_mem_alloc(ctx, (size_t)N_TOTAL * SLOT, RS_MEM_REMOTE_WRITE, &t.mr);
    H_CHECK_OK(st);
    memset(rs_mr_addr(t.mr), 0, (size_t)N_TOTAL * SLOT);
    rs_set_ep_handler(ctx, nt_ep_event, &t);
    rs_set_notify_handler(ctx, nt_notify, &t);
    rs_listener_t *l = NULL;
    st = h_offer(ctx, ch, h_default_method(), &l);
    H_CHECK_OK(st);

    h_serve(ctx, ch, H_SERVE_THREAD, nt_cmd, NULL, &t);

    if (l != NULL)
        rs_listener_destroy(l);
    rs_mem_free(t.mr);
    h_ctx_destroy(ctx);
    free(t.seen);
    return 0;
}

/* ------------------------------------------------------------ the putters */

typedef struct np_ep {
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    uint8_t blob[RS_RKEY_BLOB_MAX];
    size_t blob_len; /* set by the message handler */
    uint32_t writer, next;
} np_ep_t;

typedef struct notify_putter {
    np_ep_t eps[EPS_EACH];
    int n_eps;
} notify_putter_t;

static void np_rkey_msg(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    notify_putter_t *p = arg;
    for (int i = 0; i < p->n_eps; i++) {
        if (p->eps[i].ep == ep) {
            H_CHECK(len > 0 && len <= RS_RKEY_BLOB_MAX && p->eps[i].blob_len == 0,
                    "rkey message of %zu bytes", len);
            memcpy(p->eps[i].blob, data, len);
            p->eps[i].blob_len = len;
            return;
        }
    }
    H_CHECK(0, "a message callback for an endpoint rs_connect has not returned");
}

static bool np_all_keys(notify_putter_t *p)
{
    for (int i = 0; i < p->n_eps; i++)
        if (p->eps[i].blob_len == 0)
            return false;
    return true;
}

/*
 * Arg: first writer index; the target's port or address comes over the
 * channel. Two endpoints to it, PER_EP notified puts each.
 */
int role_notify_putter(h_chan_t *ch, int argc, char **argv)
{
    H_CHECK(argc == 1, "usage: first_writer");
    uint32_t first_writer = (uint32_t)atoi(argv[0]);
    static h_peer_t peer;
    H_CHECK(h_recv_peer(ch, &peer, 30000), "no port or address for the target");
    notify_putter_t p = {.n_eps = EPS_EACH};
    const size_t n_local = EPS_EACH * PER_EP;

    rs_ctx_t *ctx = h_ctx(NULL);
    rs_status_t st = rs_set_msg_handler(ctx, T_MSG_RKEY, np_rkey_msg, &p);
    H_CHECK_OK(st);
    for (int i = 0; i < EPS_EACH; i++) {
        st = h_connect_peer(ctx, &peer, &p.eps[i].ep);
        H_CHECK(st == RS_OK, "connect by %s: %s", h_method_name(peer.method), rs_strerror(st));
        p.eps[i].writer = first_writer + (uint32_t)i;
    }
    H_CHECK(H_UNTIL(ctx, np_all_keys(&p), 30000), "no remote key from the target");
    for (int i = 0; i < EPS_EACH; i++) {
        st = rs_rkey_unpack(p.eps[i].ep, p.eps[i].blob, p.eps[i].blob_len, &p.eps[i].rkey);
        H_CHECK_OK(st);
        H_CHECK(rs_rkey_len(p.eps[i].rkey) == (uint64_t)N_TOTAL * SLOT, "rkey length");
    }

    rs_mr_t *src_mr = NULL;
    st = rs_mem_alloc(ctx, n_local * SLOT, RS_MEM_LOCAL, &src_mr);
    H_CHECK_OK(st);
    uint8_t *src = rs_mr_addr(src_mr);
    h_op_t *ops = calloc(n_local, sizeof(*ops));
    H_CHECK(ops != NULL, "out of memory");
    for (int i = 0; i < EPS_EACH; i++) {
        for (uint32_t k = 0; k < PER_EP; k++) {
            uint32_t seq = p.eps[i].writer * PER_EP + k;
            h_pat_fill(src + ((size_t)i * PER_EP + k) * SLOT, put_len(seq), SEED(seq), 0);
        }
    }

    /* Post everything, round robin over the endpoints; BUSY means progress and retry. */
    size_t posted = 0;
    uint64_t deadline = h_now_ms() + 60000;
    while (posted < n_local) {
        H_CHECK(h_now_ms() < deadline, "posting did not finish: %zu of %zu", posted, n_local);
        for (int i = 0; i < EPS_EACH; i++) {
            np_ep_t *e = &p.eps[i];
            for (int burst = 0; burst < 64 && e->next < PER_EP; burst++) {
                uint32_t seq = e->writer * PER_EP + e->next;
                size_t j = (size_t)i * PER_EP + e->next;
                st = rs_put_notify(e->ep, src + j * SLOT, put_len(seq), src_mr, e->rkey,
                                   (uint64_t)seq * SLOT, seq, h_op_cb, &ops[j]);
                if (st == RS_ERR_BUSY)
                    break;
                H_CHECK(st == RS_OK, "rs_put_notify seq %u: %s", seq, rs_strerror(st));
                e->next++;
                posted++;
            }
        }
        (void)rs_progress(ctx);
    }
    size_t done = 0, ok = 0;
    for (size_t j = 0; j < n_local; j++) {
        H_CHECK(H_UNTIL(ctx, atomic_load(&ops[j].calls) > 0, 60000), "op %zu never completed", j);
        done++;
        ok += atomic_load(&ops[j].status) == RS_OK;
    }
    for (size_t j = 0; j < n_local; j++)
        H_CHECK(atomic_load(&ops[j].calls) == 1, "op %zu: %d callbacks", j,
                atomic_load(&ops[j].calls));
    uint64_t res[2] = {done, ok};
    H_CHECK(h_send(ch, H_DONE, res, sizeof(res)), "channel closed");

    /* Stay connected until the parent has counted at the target. */
    h_serve(ctx, ch, H_SERVE_WAIT, NULL, NULL, NULL);
    for (int i = 0; i < EPS_EACH; i++) {
        rs_rkey_destroy(p.eps[i].rkey);
        rs_ep_close(p.eps[i].ep);
    }
    free(ops);
    rs_mem_free(src_mr);
    h_ctx_destroy(ctx);
    return 0;
}

void test_notified_puts(void **state)
{
    (void)state;
    h_child_t target, putters[N_PUTTERS];
    static h_peer_t peer;
    h_spawn(&target, "notify_target", NULL);
    assert_true(h_recv_peer(&target.ch, &peer, 30000));
    char writer_arg[N_PUTTERS][16];
    for (int i = 0; i < N_PUTTERS; i++) {
        snprintf(writer_arg[i], sizeof(writer_arg[i]), "%d", i * EPS_EACH);
        h_spawn(&putters[i], "notify_putter", writer_arg[i], NULL);
        assert_true(h_send_peer(&putters[i].ch, &peer));
    }
    for (int i = 0; i < N_PUTTERS; i++) {
        uint64_t res[2] = {0};
        assert_int_equal(h_recv(&putters[i].ch, H_DONE, res, sizeof(res), 90000), sizeof(res));
        assert_int_equal(res[0], EPS_EACH * PER_EP);
        assert_int_equal(res[1], EPS_EACH * PER_EP);
    }
    nt_counts_t c = {0};
    assert_true(h_send(&target.ch, T_CNT, NULL, 0));
    assert_int_equal(h_recv(&target.ch, H_RSLT, &c, sizeof(c), 40000), sizeof(c));
    if (c.bad != 0)
        print_error("first notification without its data: seq %lld\n", (long long)c.first_bad);
    assert_int_equal(c.bad, 0);
    assert_int_equal(c.dups, 0);
    assert_int_equal(c.wrong_ep, 0);
    assert_int_equal(c.out_of_range, 0);
    assert_int_equal(c.count, N_TOTAL);
    assert_int_equal(c.accepted, N_PUTTERS * EPS_EACH);
    for (int i = 0; i < N_PUTTERS; i++)
        assert_int_equal(h_child_stop(&putters[i], 20000), 0);
    assert_int_equal(h_child_stop(&target, 20000), 0);
}
