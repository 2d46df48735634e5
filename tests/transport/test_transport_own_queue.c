/*
 * RSHUFFLE_UCX_QUEUE=local (the default) or own: a client connection to a
 * peer of this host has its own receive queue. Each
 * round a peer process of this host floods us with messages on a
 * connection we made to it and is SIGKILLed while we drain; it can die
 * between reserving a slot of the queue it sends into and filling it. A
 * live peer (a second context of this process) then pings us on the
 * connection we made to it at the start, kept for every round, and the
 * ping must arrive: the dead peer blocked only its own connection's queue.
 * Nothing is renewed (no RS_CAP_RENEW). With RSHUFFLE_UCX_QUEUE=shared the
 * same rounds only count how often the shared queue blocked.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/transport.h>
#include "tt_util.h"

#define ROUNDS       40
#define FLOOD_MSG    7000 /* bytes: the copy into the slot is most of a send */
#define FLOOD_GAP_NS 2000 /* between sends: slower than we drain, so the queue has room */
#define MSG_FLOOD    1
#define MSG_PING     2
#define BLOCKED_MS   300 /* a ping not here by then: the queue is blocked */
#define DELIVERY_MS  2000

static void on_child_ep(void *arg, rs_ep_t *ep, rs_status_t status)
{
    if (status == RS_OK && *(rs_ep_t **)arg == NULL)
        *(rs_ep_t **)arg = ep;
}

/* The flooder: a server, once told to start; sends its address, then floods whoever connects. */
static void flooder(int rd, int wr)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char go;
    if (read(rd, &go, 1) != 1)
        _exit(2);
    alarm(30);
    rs_config_t cfg;
    rs_ctx_t *ctx;
    rs_ep_t *ep = NULL;
    unsigned char addr[RS_ADDR_BLOB_MAX];
    size_t alen;
    if (rs_config_init(&cfg) != RS_OK || rs_ctx_create(&cfg, &ctx) != RS_OK ||
        rs_ctx_address(ctx, addr, sizeof(addr), &alen) != RS_OK)
        _exit(2);
    rs_set_ep_handler(ctx, on_child_ep, &ep);
    if (write(wr, &alen, sizeof(alen)) != sizeof(alen) || write(wr, addr, alen) != (ssize_t)alen)
        _exit(2);
    while (ep == NULL)
        rs_progress(ctx);
    tt_flood(ctx, ep, MSG_FLOOD, FLOOD_MSG, FLOOD_GAP_NS);
}

typedef struct side {
    rs_ep_t *accepted; /* the live peer's end of our kept connection */
    long floods, pings;
} side_t;

static void on_ep(void *arg, rs_ep_t *ep, rs_status_t status)
{
    side_t *s = arg;
    if (status == RS_OK && s->accepted == NULL)
        s->accepted = ep;
}

/* The live peer pings us; 1 when we get it within ms. */
static int ping(rs_ctx_t *ctx, rs_ctx_t *live, side_t *ls, side_t *s, int ms)
{
    long before = s->pings;
    assert_int_equal(rs_msg_send(ls->accepted, MSG_PING, "ping", 4, NULL, NULL), RS_OK);
    return tt_progress_count(ctx, live, &s->pings, before + 1, ms) > before;
}

static void test_killed_sender_blocks_only_its_connection(void **state)
{
    (void)state;
    const char *q = getenv("RSHUFFLE_UCX_QUEUE");
    int own = q == NULL || strcmp(q, "shared") != 0; /* local and own: this host's peers' own */
    int to_child[ROUNDS][2], from_child[ROUNDS][2];
    pid_t pids[ROUNDS];
    /* Every flooder is forked before any context exists here; each waits for its round. */
    for (int i = 0; i < ROUNDS; i++) {
        assert_int_equal(pipe(to_child[i]), 0);
        assert_int_equal(pipe(from_child[i]), 0);
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0)
            flooder(to_child[i][0], from_child[i][1]);
        close(to_child[i][0]);
        close(from_child[i][1]);
    }

    rs_config_t cfg;
    tt_config(&cfg);
    rs_ctx_t *ctx, *live;
    side_t s = {0}, ls = {0};
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
    assert_int_equal(rs_ctx_create(&cfg, &live), RS_OK);
    assert_int_equal((rs_ctx_caps(ctx) & RS_CAP_RENEW) != 0, !own);
    assert_int_equal(rs_set_msg_handler(ctx, MSG_FLOOD, tt_count_msg, &s.floods), RS_OK);
    assert_int_equal(rs_set_msg_handler(ctx, MSG_PING, tt_count_msg, &s.pings), RS_OK);
    rs_set_ep_handler(live, on_ep, &ls);
    unsigned char addr[RS_ADDR_BLOB_MAX];
    size_t alen;
    assert_int_equal(rs_ctx_address(live, addr, sizeof(addr), &alen), RS_OK);
    assert_int_equal(rs_progress_thread_start(live), RS_OK);
    rs_ep_t *kept;
    assert_int_equal(rs_connect_address(ctx, addr, alen, &kept), RS_OK);
    rs_progress_thread_stop(live);
    assert_non_null(ls.accepted);
    assert_true(ping(ctx, live, &ls, &s, DELIVERY_MS));

    int blocked = 0;
    for (int i = 0; i < ROUNDS; i++) {
        assert_int_equal(write(to_child[i][1], "g", 1), 1);
        assert_int_equal(read(from_child[i][0], &alen, sizeof(alen)), (ssize_t)sizeof(alen));
        assert_true(alen <= sizeof(addr));
        assert_int_equal(read(from_child[i][0], addr, alen), (ssize_t)alen);
        rs_ep_t *fep;
        assert_int_equal(rs_connect_address(ctx, addr, alen, &fep), RS_OK);
        tt_kill_mid_flood(ctx, pids[i], fep, &s.floods, 200);
        int got = ping(ctx, live, &ls, &s, BLOCKED_MS);
        blocked += !got;
        if (own) {
            assert_true(got); /* the dead peer blocked only fep's own queue */
            assert_int_equal(rs_ctx_renew_due(ctx), 0);
        }
        rs_ep_close(fep);
        close(to_child[i][1]);
        close(from_child[i][0]);
        if (!got) { /* shared: the queue is blocked for good; start again on a renewed one */
            rs_ep_close(kept);
            rs_ep_close(ls.accepted);
            ls.accepted = NULL;
            assert_int_equal(rs_ctx_renew(ctx), RS_OK);
            assert_int_equal(rs_ctx_address(live, addr, sizeof(addr), &alen), RS_OK);
            assert_int_equal(rs_progress_thread_start(live), RS_OK);
            assert_int_equal(rs_connect_address(ctx, addr, alen, &kept), RS_OK);
            rs_progress_thread_stop(live);
            assert_non_null(ls.accepted);
        }
    }
    print_message("%s queues: a killed sender blocked the live peer's messages in %d of %d "
                  "rounds\n",
                  own ? "own" : "shared", blocked, ROUNDS);
    rs_ep_close(kept);
    rs_ctx_destroy(live);
    rs_ctx_destroy(ctx);
}

int main(void)
{
    tt_alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_sender_blocks_only_its_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
