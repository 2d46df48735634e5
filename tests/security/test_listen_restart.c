/*
 * rshuffled killed with SIGKILL and restarted on the same port listens at
 * once (within 1 s), although the port still has connections of the old
 * process in TIME-WAIT and FIN-WAIT; while it listens, nobody else can
 * take the port (RS_ERR_EXISTS). UCX's own listener had no SO_REUSEADDR:
 * the restart failed with "already exists" for about a minute.
 */
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/transport.h>

#include "front_attack.h"
#include "rshuffled_child.h"
#include "transport/ucx/front_wire.h"

#define RESTART_MS 1000

static pid_t daemon_pid;

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static int tcp_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* A whole front-door exchange: the server closes first, so its end waits in TIME-WAIT. */
static void exchange(uint16_t port)
{
    int fd = tcp_connect(port);
    uint8_t buf[RS_FRONT_REPLY_MAX];
    const char *token = getenv("RSHUFFLE_JOB_TOKEN") ? getenv("RSHUFFLE_JOB_TOKEN") : "rshuffle";
    size_t n = rs_ucx_front_hello_build(buf, token, strlen(token), 0);
    assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
    size_t got = 0;
    ssize_t r;
    while ((r = recv(fd, buf + got, sizeof(buf) - got, 0)) > 0)
        got += (size_t)r;
    rs_ucx_front_reply_t reply;
    assert_int_equal(rs_ucx_front_reply_parse(buf, got, &reply), (int)got);
    assert_int_equal(reply.status, RS_FRONT_ACCEPT);
    close(fd);
}

static int teardown(void **state)
{
    (void)state;
    rsd_kill(&daemon_pid);
    return 0;
}

static void test_restart_after_sigkill(void **state)
{
    (void)state;
    alarm(60);
    char addr[256];
    /* A small arena: what is timed is the port being usable again, not the arena's prefault. */
    static const char *const args0[] = {"--log", "error", "--mem", "16M", NULL};
    daemon_pid = rsd_start(args0, NULL, addr, sizeof(addr));
    uint16_t port = (uint16_t)atoi(strrchr(addr, ':') + 1);

    for (int i = 0; i < 4; i++)
        exchange(port);
    int *held = fa_slow_open(port, 4); /* open when the process dies: FIN-WAIT on its side */
    rsd_kill(&daemon_pid);

    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", port);
    const char *const args1[] = {"--log", "error", "--mem", "16M", "--listen", listen, NULL};
    uint64_t t0 = now_ms();
    daemon_pid = rsd_start(args1, NULL, addr, sizeof(addr));
    uint64_t ms = now_ms() - t0;
    printf("[info] restarted on port %u after SIGKILL: listening after %llu ms\n", port,
           (unsigned long long)ms);
    assert_true(ms <= RESTART_MS);
    assert_int_equal(atoi(strrchr(addr, ':') + 1), port);
    fa_slow_close(held, 4);
    exchange(port);

    /* SO_REUSEADDR does not let a second listener share the port. */
    rs_ctx_t *ctx;
    assert_int_equal(rs_ctx_create(NULL, &ctx), RS_OK);
    rs_listener_t *l = NULL;
    assert_int_equal(rs_listen(ctx, "127.0.0.1", port, &l), RS_ERR_EXISTS);
    assert_null(l);
    rs_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_restart_after_sigkill, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
