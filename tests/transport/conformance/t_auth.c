/*
 * The job token: a peer with another token is refused with RS_ERR_AUTH, by
 * host:port and by address; the server never reports it as accepted (so it
 * never sends it a remote key) and never delivers a message from it.
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

#define T_COUNT H_TAG('C', 'N', 'T', '?')

typedef struct auth_server {
    rs_mr_t *mr;
    uint64_t counts[2]; /* accepted peers, user messages received */
} auth_server_t;

/* What an application does on accept: send the new peer its remote key. */
static void as_ep_event(void *arg, rs_ep_t *ep, rs_status_t status)
{
    auth_server_t *s = arg;
    if (status != RS_OK)
        return;
    s->counts[0]++;
    uint8_t blob[RS_RKEY_BLOB_MAX];
    size_t len = 0;
    H_CHECK_OK(rs_mr_pack_rkey(s->mr, blob, sizeof(blob), &len));
    H_CHECK_OK(rs_msg_send(ep, T_MSG_RKEY, blob, len, NULL, NULL));
}

static void as_msg(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    auth_server_t *s = arg;
    (void)ep;
    (void)data;
    (void)len;
    s->counts[1]++;
}

static void as_cmd(void *arg, rs_ctx_t *ctx, h_chan_t *ch, uint32_t tag, const void *data,
                   size_t len)
{
    auth_server_t *s = arg;
    (void)ctx;
    (void)data;
    (void)len;
    H_CHECK(tag == T_COUNT, "unknown command");
    H_CHECK(h_send(ch, H_RSLT, s->counts, sizeof(s->counts)), "channel closed");
}

/* Listens (H_PORT, if it can) and publishes its address (H_ADDR); counts accepts and messages. */
int role_auth_server(h_chan_t *ch, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    auth_server_t s = {0};
    rs_ctx_t *ctx = h_ctx(NULL);
    H_CHECK_OK(rs_mem_alloc(ctx, 4096, RS_MEM_REMOTE_ALL, &s.mr));
    rs_set_ep_handler(ctx, as_ep_event, &s);
    for (unsigned t = 0; t < RS_MSG_TYPES; t++)
        H_CHECK_OK(rs_set_msg_handler(ctx, t, as_msg, &s));
    rs_listener_t *l = NULL, *none = NULL;
    if (h_can_listen())
        H_CHECK_OK(h_offer(ctx, ch, H_LISTEN, &l));
    H_CHECK_OK(h_offer(ctx, ch, H_ADDRESS, &none));
    h_serve(ctx, ch, H_SERVE_WAIT, as_cmd, NULL, &s);
    if (l != NULL)
        rs_listener_destroy(l);
    rs_mem_free(s.mr);
    h_ctx_destroy(ctx);
    return 0;
}

typedef struct intruder {
    int rkeys;    /* T_MSG_RKEY messages received */
    int accepted; /* RS_OK endpoint events */
} intruder_t;

static void in_msg(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    intruder_t *in = arg;
    (void)ep;
    (void)data;
    (void)len;
    in->rkeys++;
}

static void in_ep_event(void *arg, rs_ep_t *ep, rs_status_t status)
{
    intruder_t *in = arg;
    (void)ep;
    if (status == RS_OK)
        in->accepted++;
}

static void server_counts(h_child_t *server, uint64_t counts[2])
{
    assert_true(h_send(&server->ch, T_COUNT, NULL, 0));
    assert_int_equal(h_recv(&server->ch, H_RSLT, counts, 2 * sizeof(uint64_t), 10000),
                     2 * sizeof(uint64_t));
}

void test_wrong_job_token(void **state)
{
    (void)state;
    h_child_t server;
    h_spawn(&server, "auth_server", NULL);
    static h_peer_t peers[2];
    int n_peers = 0;
    if (h_can_listen())
        assert_true(h_recv_peer(&server.ch, &peers[n_peers++], 30000));
    assert_true(h_recv_peer(&server.ch, &peers[n_peers++], 30000));

    rs_config_t good;
    h_config(&good);
    /* Tokens that differ by one appended byte, one dropped byte, entirely. */
    char wrong[3][RS_JOB_TOKEN_MAX + 1];
    size_t tl = strlen(good.job_token);
    snprintf(wrong[0], sizeof(wrong[0]), "%.*s%c", (int)(tl < RS_JOB_TOKEN_MAX ? tl : tl - 1),
             good.job_token, 'x');
    snprintf(wrong[1], sizeof(wrong[1]), "%.*s", (int)(tl > 1 ? tl - 1 : 0), good.job_token);
    snprintf(wrong[2], sizeof(wrong[2]), "intruder-%u", (unsigned)getpid());
    if (wrong[1][0] == '\0')
        strcpy(wrong[1], "y");

    const uint32_t bound = good.connect_timeout_ms + h_slack_ms();
    for (int i = 0; i < 3; i++) {
        rs_config_t cfg = good;
        memcpy(cfg.job_token, wrong[i], sizeof(cfg.job_token));
        rs_ctx_t *ctx = h_ctx(&cfg);
        intruder_t in = {0};
        assert_int_equal(rs_set_msg_handler(ctx, T_MSG_RKEY, in_msg, &in), RS_OK);
        rs_set_ep_handler(ctx, in_ep_event, &in);

        /* Refused by host:port (if the fabric listens) and by address. */
        for (int m = 0; m < n_peers; m++) {
            rs_ep_t *sentinel = (rs_ep_t *)&sentinel, *ep = sentinel;
            uint64_t t0 = h_now_ms();
            assert_int_equal(h_connect_peer(ctx, &peers[m], &ep), RS_ERR_AUTH);
            assert_ptr_equal(ep, sentinel);
            assert_true(h_now_ms() - t0 <= bound);
        }
        /* Whatever the server might still send is never delivered. */
        (void)H_UNTIL(ctx, false, 200);
        assert_int_equal(in.rkeys, 0);
        assert_int_equal(in.accepted, 0);
        h_ctx_destroy(ctx);
    }
    uint64_t counts[2];
    server_counts(&server, counts);
    assert_int_equal(counts[0], 0); /* never accepted: no remote key went out */
    assert_int_equal(counts[1], 0); /* no message delivered */

    /* The right token still gets in, gets the key and is heard. */
    rs_ctx_t *ctx = h_ctx(&good);
    intruder_t in = {0};
    assert_int_equal(rs_set_msg_handler(ctx, T_MSG_RKEY, in_msg, &in), RS_OK);
    rs_ep_t *ep = NULL;
    assert_int_equal(h_connect_peer(ctx, &peers[0], &ep), RS_OK);
    assert_true(H_UNTIL(ctx, in.rkeys == 1, 10000));
    uint32_t hello = 1;
    assert_int_equal(rs_msg_send(ep, T_MSG_HELLO, &hello, sizeof(hello), NULL, NULL), RS_OK);
    uint64_t deadline = h_now_ms() + 10000;
    do {
        (void)H_UNTIL(ctx, false, 20);
        server_counts(&server, counts);
    } while (counts[1] < 1 && h_now_ms() < deadline);
    assert_int_equal(counts[0], 1);
    assert_int_equal(counts[1], 1);
    rs_ep_close(ep);
    h_ctx_destroy(ctx);
    assert_int_equal(h_child_stop(&server, 20000), 0);
}
