/*
 * The front door under attack, through the programs users run: rshuffled
 * and a broadcast node (an agent process). Each gets every kind of garbage
 * (front_attack.h) and slow connections that never finish their hello.
 * Checked: both processes stay up, bad connections are closed at once,
 * slow ones by the hello deadline, the descriptor count comes back to where
 * it was (no CLOSE-WAIT, no leak), and real clients get in during a flood
 * of slow connections: a shuffle whose every record is verified, and a
 * broadcast get whose bytes hash right.
 *
 * RSHUFFLE_TEST_SECURITY_N sets the connections per kind of attack (default 40).
 * Before the front door, the first message alone aborted either process
 * inside UCX's socket connection manager.
 */
#include <rshuffle/client.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>

#include "bt_agent.h"
#include "front_attack.h"
#include "rshuffled_child.h"
#include "shuffle_check.h"

#define BOUND_MS              2000 /* a bad connection is closed within this (a loaded machine) */
#define SETTLE_MS             5000 /* descriptors come back within this */
#define BC_SIZE               (3u << 20)
#define BT_CONNECT_TIMEOUT_MS 2000 /* what bt_agent configures */

static pid_t daemon_pid;

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static const char *token(void)
{
    const char *t = getenv("RSHUFFLE_JOB_TOKEN");
    return t != NULL ? t : "rshuffle";
}

static unsigned hello_timeout_ms(void)
{
    const char *t = getenv("RSHUFFLE_CONNECT_TIMEOUT_MS");
    return t != NULL ? (unsigned)atoi(t) : 5000;
}

/* Pushes nrec records into the worker at addr and reads every one back. */
static void shuffle_verify(const char *addr, uint64_t shuffle_id, uint32_t nrec)
{
    const char *workers[1] = {addr};
    rs_shuffle_desc_t d = {
        .shuffle_id = (uint32_t)shuffle_id, .n_partitions = 4, .n_workers = 1, .workers = workers};
    rs_pusher_destroy(sc_push(&d, nrec, 40));
    sc_read_check(&d, nrec, 40);
}

/*
 * Garbage, then slow connections, against pid's port; the descriptor count
 * must come back to fd0 after each.
 */
static void attack(const char *who, pid_t pid, uint16_t port, int fd0, unsigned n,
                   unsigned hello_ms)
{
    fa_counts_t c = {0};
    uint64_t t0 = now_ms();
    fa_garbage(port, token(), n, BOUND_MS, &c);
    assert_true(fa_alive(pid));
    int fds = fa_fd_settle(pid, fd0, SETTLE_MS);
    assert_int_equal(fds, fd0);
    uint64_t t1 = now_ms();
    fa_slow_loris(port, n, (int)hello_ms + BOUND_MS, &c);
    assert_true(fa_alive(pid));
    fds = fa_fd_settle(pid, fd0, SETTLE_MS);
    assert_int_equal(fds, fd0);
    printf("[info] %s: %u connections (%u garbage in %llu ms, longest wait for a close %u ms); "
           "%u slow ones all closed by the server within %u ms (hello deadline %u ms); "
           "descriptors back to %d\n",
           who, c.conns, c.conns - c.slow, (unsigned long long)(t1 - t0), c.closed_ms, c.slow,
           c.slow_ms, hello_ms, fd0);
}

static int teardown_daemon(void **state)
{
    (void)state;
    rsd_kill(&daemon_pid);
    return 0;
}

static void test_rshuffled_survives(void **state)
{
    (void)state;
    unsigned n = fa_rounds(40);
    alarm(120 + n / 4);
    char addr[256];
    static const char *const args[] = {"--mem", "32M", "--log", "error", NULL};
    daemon_pid = rsd_start(args, NULL, addr, sizeof(addr));
    uint16_t port = (uint16_t)atoi(strrchr(addr, ':') + 1);

    shuffle_verify(addr, 1, 2000); /* warm: what a first client sets up stays */
    int fd0 = fa_fd_settle(daemon_pid, -1, 300);
    attack("rshuffled", daemon_pid, port, fd0, n, hello_timeout_ms());

    /* Real clients get in while more slow connections than the cap wait. */
    int *slow = fa_slow_open(port, n);
    shuffle_verify(addr, 2, 20000);
    fa_slow_close(slow, n);
    assert_true(fa_alive(daemon_pid));
}

static void test_bcast_node_survives(void **state)
{
    (void)state;
    /* The agents are forked: UCX does not carry live contexts (the default
     * client's lanes of the test before) into a child. */
    rs_client_default_shutdown();
    unsigned n = fa_rounds(40);
    bt_alarm(120 + n / 4);
    uint16_t port = fa_free_port();
    char env[64];
    snprintf(env, sizeof(env), "RSHUFFLE_BCAST_PORT=%u", port);
    bt_agent_t src, warm, late;
    bt_spawn_env(&src, NULL, RS_BCAST_TORRENT, env);
    uint8_t desc[RS_BCAST_DESC_MAX];
    size_t desc_len;
    bt_publish(&src, BC_SIZE, 7, desc, &desc_len);

    bt_result_t r;
    bt_spawn(&warm, NULL, RS_BCAST_TORRENT);
    bt_get_start(&warm, desc, desc_len);
    bt_get_wait(&warm, &r);
    assert_int_equal(r.status, RS_OK);
    bt_release(&warm);
    bt_quit(&warm);

    int fd0 = fa_fd_settle(src.pid, -1, 300);
    attack("broadcast node", src.pid, port, fd0, n, BT_CONNECT_TIMEOUT_MS);

    int *slow = fa_slow_open(port, n);
    bt_spawn(&late, NULL, RS_BCAST_TORRENT);
    bt_get_start(&late, desc, desc_len);
    bt_get_wait(&late, &r);
    fa_slow_close(slow, n);
    assert_int_equal(r.status, RS_OK);
    assert_int_equal(r.len, BC_SIZE);
    assert_true(r.hash == bt_expected_hash(BC_SIZE, 7));
    bt_release(&late);
    bt_quit(&late);
    assert_true(fa_alive(src.pid));
    bt_quit(&src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rshuffled_survives, teardown_daemon),
        cmocka_unit_test(test_bcast_node_survives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
