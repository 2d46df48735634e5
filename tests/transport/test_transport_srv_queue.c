/*
 * RSHUFFLE_UCX_QUEUE=local (the default) or own: a connection accepted from
 * a peer of this host has its own receive queue too. We listen; each round
 * a client process of this host connects through the front door, floods us
 * with messages and is SIGKILLed while we drain; it can die between
 * reserving a slot of the queue it sends into and filling it. A live client
 * process, connected at the start and kept for every round, then pings us,
 * and the ping must arrive: the dead client blocked only the queue of the
 * connection we accepted from it. With RSHUFFLE_UCX_QUEUE=shared the same
 * rounds only count how often the shared queue blocked (then we renew and
 * the live client connects again). A second test: a hello whose connection
 * never follows leaves no worker behind once connect_timeout_ms is past.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/transport.h>
#include "transport/ucx/front_wire.h"
#include "transport/ucx/ucx.h"
#include "tt_util.h"

#define ROUNDS       40
#define FLOOD_MSG    7000 /* bytes: the copy into the slot is most of a send */
#define FLOOD_GAP_NS 2000 /* between sends: slower than we drain, so the queue has room */
#define MSG_FLOOD    1
#define MSG_PING     2
#define BLOCKED_MS   300 /* a ping not here by then: the queue is blocked */
#define DELIVERY_MS  3000

static uint16_t read_port(int rd)
{
    uint16_t port;
    if (read(rd, &port, sizeof(port)) != sizeof(port))
        _exit(2);
    return port;
}

/* A client to be killed: connects through the front door once told the port, then floods. */
static void flooder(int rd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    uint16_t port = read_port(rd);
    alarm(30);
    rs_config_t cfg;
    rs_ctx_t *ctx;
    rs_ep_t *ep;
    if (rs_config_init(&cfg) != RS_OK || rs_ctx_create(&cfg, &ctx) != RS_OK ||
        rs_connect(ctx, "127.0.0.1", port, &ep) != RS_OK)
        _exit(2);
    tt_flood(ctx, ep, MSG_FLOOD, FLOOD_MSG, FLOOD_GAP_NS);
}

/* The live client: 'c' (re)connects and answers 'k', 'p' pings; exits when the pipe closes. */
static void live_client(int rd, int wr)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    uint16_t port = read_port(rd);
    rs_config_t cfg;
    rs_ctx_t *ctx;
    rs_ep_t *ep = NULL;
    if (rs_config_init(&cfg) != RS_OK || rs_ctx_create(&cfg, &ctx) != RS_OK ||
        fcntl(rd, F_SETFL, O_NONBLOCK) != 0)
        _exit(2);
    for (;;) {
        char cmd;
        ssize_t r = read(rd, &cmd, 1);
        if (r == 0)
            _exit(0);
        if (r == 1 && cmd == 'c') {
            if (ep != NULL)
                rs_ep_close(ep);
            if (rs_connect(ctx, "127.0.0.1", port, &ep) != RS_OK || write(wr, "k", 1) != 1)
                _exit(3);
        } else if (r == 1 && cmd == 'p') {
            if (rs_msg_send(ep, MSG_PING, "ping", 4, NULL, NULL) != RS_OK)
                _exit(4);
        }
        rs_progress(ctx);
        usleep(100); /* the cores are shared with the flooder and us */
    }
}

typedef struct side {
    rs_ep_t *last; /* the connection accepted last */
    long accepted, floods, pings;
} side_t;

static void on_ep(void *arg, rs_ep_t *ep, rs_status_t status)
{
    side_t *s = arg;
    if (status == RS_OK) {
        s->last = ep;
        s->accepted++;
    }
}

/* The live client (re)connects; returns the connection we accepted from it. */
static rs_ep_t *live_connect(rs_ctx_t *ctx, side_t *s, int to_live, int from_live)
{
    long before = s->accepted;
    assert_int_equal(write(to_live, "c", 1), 1);
    char k = 0;
    uint64_t end = tt_now_ms() + DELIVERY_MS;
    while ((s->accepted == before || read(from_live, &k, 1) != 1) && tt_now_ms() < end)
        rs_progress(ctx);
    assert_int_equal(k, 'k');
    assert_true(s->accepted > before);
    return s->last;
}

/* The live client pings us; 1 when we get it within ms. */
static int ping(rs_ctx_t *ctx, side_t *s, int to_live, int ms)
{
    long before = s->pings;
    assert_int_equal(write(to_live, "p", 1), 1);
    return tt_progress_count(ctx, NULL, &s->pings, before + 1, ms) > before;
}

static void test_killed_client_blocks_only_its_connection(void **state)
{
    (void)state;
    const char *q = getenv("RSHUFFLE_UCX_QUEUE");
    int own = q == NULL || strcmp(q, "shared") != 0; /* local and own: this host's peers' own */
    int to_flooder[ROUNDS][2], to_live[2], from_live[2];
    pid_t pids[ROUNDS], live;
    /* Every client is forked before any context exists here; each waits for its port. */
    assert_int_equal(pipe(to_live), 0);
    assert_int_equal(pipe(from_live), 0);
    live = fork();
    assert_true(live >= 0);
    if (live == 0) {
        close(to_live[1]); /* our own copy would keep the pipe from closing */
        close(from_live[0]);
        live_client(to_live[0], from_live[1]);
    }
    close(to_live[0]);
    close(from_live[1]);
    assert_int_equal(fcntl(from_live[0], F_SETFL, O_NONBLOCK), 0);
    for (int i = 0; i < ROUNDS; i++) {
        assert_int_equal(pipe(to_flooder[i]), 0);
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0)
            flooder(to_flooder[i][0]);
        close(to_flooder[i][0]);
    }

    rs_config_t cfg;
    tt_config(&cfg);
    rs_ctx_t *ctx;
    rs_listener_t *l;
    side_t s = {0};
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
    assert_int_equal((rs_ctx_caps(ctx) & RS_CAP_RENEW) != 0, !own);
    assert_int_equal(rs_set_msg_handler(ctx, MSG_FLOOD, tt_count_msg, &s.floods), RS_OK);
    assert_int_equal(rs_set_msg_handler(ctx, MSG_PING, tt_count_msg, &s.pings), RS_OK);
    rs_set_ep_handler(ctx, on_ep, &s);
    assert_int_equal(rs_listen(ctx, "127.0.0.1", 0, &l), RS_OK);
    uint16_t port = rs_listener_port(l);
    assert_int_equal(write(to_live[1], &port, sizeof(port)), (ssize_t)sizeof(port));
    rs_ep_t *kept = live_connect(ctx, &s, to_live[1], from_live[0]);
    assert_true(ping(ctx, &s, to_live[1], DELIVERY_MS));

    int blocked = 0;
    uint64_t t0 = tt_now_ms();
    for (int i = 0; i < ROUNDS; i++) {
        long accepted = s.accepted;
        assert_int_equal(write(to_flooder[i][1], &port, sizeof(port)), (ssize_t)sizeof(port));
        uint64_t end = tt_now_ms() + 5000;
        while (s.accepted == accepted && tt_now_ms() < end)
            rs_progress(ctx);
        assert_true(s.accepted > accepted);
        rs_ep_t *fep = s.last;
        tt_kill_mid_flood(ctx, pids[i], fep, &s.floods, 200);
        int got = ping(ctx, &s, to_live[1], BLOCKED_MS);
        blocked += !got;
        if (own) {
            assert_true(got); /* the dead client blocked only fep's own queue */
            assert_int_equal(rs_ctx_renew_due(ctx), 0);
        }
        rs_ep_close(fep);
        close(to_flooder[i][1]);
        if (!got) { /* shared: the queue is blocked for good; start again on a renewed one */
            rs_ep_close(kept);
            assert_int_equal(rs_ctx_renew(ctx), RS_OK);
            kept = live_connect(ctx, &s, to_live[1], from_live[0]);
        }
    }
    print_message("%s queues: a killed client blocked the live client's messages to its server "
                  "in %d of %d rounds (%llu ms)\n",
                  own ? "own" : "shared", blocked, ROUNDS, (unsigned long long)(tt_now_ms() - t0));
    close(to_live[1]);
    assert_int_equal(waitpid(live, NULL, 0), live);
    close(from_live[0]);
    rs_ep_close(kept);
    rs_ctx_destroy(ctx);
}

static long fds_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    long n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* Sends a hello with our job token and place key; returns the socket once the reply is in. */
static int hello_only(rs_ctx_t *ctx, uint16_t port, const char *token)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    unsigned char buf[RS_FRONT_REPLY_MAX];
    size_t n = rs_ucx_front_hello_build(buf, token, strlen(token), rs_ucx_place_key());
    assert_int_equal(send(fd, buf, n, 0), (ssize_t)n);
    assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
    size_t got = 0;
    rs_ucx_front_reply_t reply;
    uint64_t end = tt_now_ms() + DELIVERY_MS;
    while (rs_ucx_front_reply_parse(buf, got, &reply) <= 0 && tt_now_ms() < end) {
        rs_progress(ctx);
        ssize_t r = recv(fd, buf + got, sizeof(buf) - got, 0);
        if (r > 0)
            got += (size_t)r;
        assert_true(r != 0 || got > 0);
    }
    assert_true(rs_ucx_front_reply_parse(buf, got, &reply) > 0);
    assert_int_equal(reply.status, RS_FRONT_ACCEPT);
    return fd;
}

static void test_hello_without_connection_leaves_nothing(void **state)
{
    (void)state;
    const char *q = getenv("RSHUFFLE_UCX_QUEUE");
    int own = q == NULL || strcmp(q, "shared") != 0;
    rs_config_t cfg;
    tt_config(&cfg);
    cfg.connect_timeout_ms = 300;
    rs_ctx_t *ctx;
    rs_listener_t *l;
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
    assert_int_equal(rs_listen(ctx, "127.0.0.1", 0, &l), RS_OK);
    for (int i = 0; i < 10; i++)
        rs_progress(ctx);
    long base = fds_open();
    int fds[4];
    uint64_t t0 = tt_now_ms();
    for (int i = 0; i < 4; i++)
        fds[i] = hello_only(ctx, rs_listener_port(l), cfg.job_token);
    uint64_t hellos_ms = tt_now_ms() - t0; /* the server's worker for each is made meanwhile */
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    long waiting = fds_open();
    /* Each hello of this host's client got a worker of its own (descriptors with it). */
    if (own)
        assert_true(waiting > base);
    uint64_t end = tt_now_ms() + cfg.connect_timeout_ms + 1000;
    while (tt_now_ms() < end)
        rs_progress(ctx);
    print_message("4 hellos answered in %llu ms; descriptors: %ld before, %ld with the 4 waiting, "
                  "%ld after the timeout\n",
                  (unsigned long long)hellos_ms, base, waiting, fds_open());
    /* The context keeps one epoll for its own workers' fds once it made one (own.c). */
    assert_int_equal(fds_open(), base + own);
    rs_ctx_destroy(ctx);
}

int main(void)
{
    tt_alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_client_blocks_only_its_connection),
        cmocka_unit_test(test_hello_without_connection_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
