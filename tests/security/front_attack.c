/* A hostile client of a front door (front_attack.h). */
#include "front_attack.h"

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "transport/ucx/front_wire.h"

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

unsigned fa_rounds(unsigned dflt)
{
    const char *v = getenv("RSHUFFLE_TEST_SECURITY_N");
    return v != NULL && atoi(v) > 0 ? (unsigned)atoi(v) : dflt;
}

int fa_fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

int fa_fd_settle(pid_t pid, int want, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    int n;
    while ((n = fa_fd_count(pid)) != want && now_ms() < end)
        usleep(10000);
    return n;
}

int fa_alive(pid_t pid)
{
    int st;
    return waitpid(pid, &st, WNOHANG) == 0;
}

uint16_t fa_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    socklen_t len = sizeof(sa);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static int tcp_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* Sends what it can (the server may reset us first). */
static void send_some(int fd, const void *buf, size_t len)
{
    ssize_t unused = send(fd, buf, len, MSG_NOSIGNAL);
    (void)unused;
}

/*
 * Waits up to ms for the server to close fd (end of stream or reset),
 * keeping what it sent first in out; returns the wait in ms, -1 if fd is
 * still open.
 */
static int wait_closed(int fd, int ms, uint8_t *out, size_t cap, size_t *got)
{
    uint64_t t0 = now_ms(), end = t0 + (uint64_t)ms;
    size_t n = 0;
    for (;;) {
        uint64_t now = now_ms();
        if (now >= end)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(end - now)) <= 0)
            continue;
        uint8_t tmp[512];
        ssize_t r = recv(fd, tmp, sizeof(tmp), MSG_DONTWAIT);
        if (r > 0) {
            size_t k = (size_t)r < cap - n ? (size_t)r : cap - n;
            if (out != NULL)
                memcpy(out + n, tmp, k);
            n += k;
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
            if (got != NULL)
                *got = n;
            return (int)(now_ms() - t0);
        }
    }
}

/* One connection: send buf, expect the server to close within bound_ms; returns its reply. */
static size_t judged(uint16_t port, const void *buf, size_t len, int bound_ms, fa_counts_t *c,
                     uint8_t *reply, size_t cap)
{
    int fd = tcp_connect(port);
    c->conns++;
    send_some(fd, buf, len);
    size_t got = 0;
    int ms = wait_closed(fd, bound_ms, reply, cap, &got);
    close(fd);
    if (ms < 0)
        fail_msg("the server kept a bad connection open for %d ms", bound_ms);
    if ((unsigned)ms > c->closed_ms)
        c->closed_ms = (unsigned)ms;
    return got;
}

static void fire_and_forget(uint16_t port, const void *buf, size_t len, fa_counts_t *c)
{
    int fd = tcp_connect(port);
    c->conns++;
    send_some(fd, buf, len);
    close(fd);
}

static void check_reply(const uint8_t *buf, size_t len, unsigned status)
{
    rs_ucx_front_reply_t r;
    assert_int_equal(rs_ucx_front_reply_parse(buf, len, &r), (int)len);
    assert_int_equal(r.status, status);
}

void fa_garbage(uint16_t port, const char *token, unsigned n, int bound_ms, fa_counts_t *c)
{
    uint64_t x = 0x9e3779b97f4a7c15ull ^ port;
    static uint8_t buf[4096];
    static uint8_t reply[RS_FRONT_REPLY_MAX];

    /* The message that aborted UCX 1.13's socket connection manager. */
    uint8_t killer[64] = {0x2f};
    assert_int_equal(judged(port, killer, sizeof(killer), bound_ms, c, NULL, 0), 0);

    for (unsigned i = 0; i < n; i++) { /* random payloads, 1..512 bytes */
        size_t len = 1 + rnd(&x) % 512;
        for (size_t k = 0; k < len; k++)
            buf[k] = (uint8_t)rnd(&x);
        if (i % 8 == 0)
            (void)judged(port, buf, len, bound_ms, c, NULL, 0);
        else
            fire_and_forget(port, buf, len, c);
    }
    for (unsigned i = 0; i < n; i++) { /* 4 KiB of garbage, then close */
        for (size_t k = 0; k < sizeof(buf); k++)
            buf[k] = (uint8_t)rnd(&x);
        fire_and_forget(port, buf, sizeof(buf), c);
    }

    uint8_t hello[RS_FRONT_HELLO_MAX + 8];
    size_t hl = rs_ucx_front_hello_build(hello, "not-the-token", 13, 0);
    size_t got = judged(port, hello, hl, bound_ms, c, reply, sizeof(reply));
    check_reply(reply, got, RS_FRONT_REFUSE);

    hl = rs_ucx_front_hello_build(hello, token, strlen(token), 0);
    got = judged(port, hello, hl, bound_ms, c, reply, sizeof(reply));
    check_reply(reply, got, RS_FRONT_ACCEPT);

    uint8_t bad[RS_FRONT_HELLO_MAX + 8];
    memcpy(bad, hello, hl);
    bad[6] = bad[7] = 0xff; /* token length 65535 */
    assert_int_equal(judged(port, bad, hl, bound_ms, c, reply, sizeof(reply)), 0);
    memcpy(bad, hello, hl);
    bad[6] = RS_JOB_TOKEN_MAX + 1; /* one over the bound */
    bad[7] = 0;
    assert_int_equal(judged(port, bad, hl, bound_ms, c, reply, sizeof(reply)), 0);
    memcpy(bad, hello, hl);
    bad[0] ^= 1; /* magic */
    assert_int_equal(judged(port, bad, hl, bound_ms, c, reply, sizeof(reply)), 0);
    memcpy(bad, hello, hl);
    bad[4] = RS_FRONT_VERSION + 1; /* version */
    assert_int_equal(judged(port, bad, hl, bound_ms, c, reply, sizeof(reply)), 0);
    memcpy(bad, hello, hl);
    bad[hl] = 'x'; /* a byte after the hello */
    assert_int_equal(judged(port, bad, hl + 1, bound_ms, c, reply, sizeof(reply)), 0);
    memcpy(bad, hello, hl);
    bad[6] = (uint8_t)(strlen(token) + 1); /* says one byte more than it sends, then closes */
    fire_and_forget(port, bad, hl, c);

    for (unsigned i = 0; i < n; i++) { /* random mutations of a valid hello */
        size_t len = hl;
        memcpy(bad, hello, hl);
        switch (rnd(&x) % 3) {
            case 0:
                bad[rnd(&x) % len] ^= (uint8_t)(1u << rnd(&x) % 8);
                break;
            case 1:
                len = rnd(&x) % len;
                break;
            default:
                for (int k = 1 + (int)(rnd(&x) % 8); k > 0; k--)
                    bad[len++] = (uint8_t)rnd(&x);
                break;
        }
        fire_and_forget(port, bad, len, c);
    }
}

int *fa_slow_open(uint16_t port, unsigned n)
{
    int *fds = calloc(n, sizeof(*fds));
    assert_non_null(fds);
    uint8_t hello[RS_FRONT_HELLO_MAX];
    (void)rs_ucx_front_hello_build(hello, "rshuffle", 8, 0);
    for (unsigned i = 0; i < n; i++) {
        fds[i] = tcp_connect(port);
        send_some(fds[i], hello, 3 + i % 6); /* a valid prefix, never finished */
    }
    return fds;
}

void fa_slow_close(int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        close(fds[i]);
    free(fds);
}

void fa_slow_loris(uint16_t port, unsigned n, int bound_ms, fa_counts_t *c)
{
    uint64_t t0 = now_ms();
    int *fds = fa_slow_open(port, n);
    c->conns += n;
    c->slow += n;
    uint64_t end = now_ms() + (uint64_t)bound_ms;
    for (unsigned i = 0; i < n; i++) {
        uint64_t now = now_ms();
        int left = now < end ? (int)(end - now) : 0;
        if (wait_closed(fds[i], left, NULL, 0, NULL) < 0)
            fail_msg("slow connection %u of %u still open after %d ms", i, n, bound_ms);
    }
    unsigned ms = (unsigned)(now_ms() - t0);
    if (ms > c->slow_ms)
        c->slow_ms = ms;
    fa_slow_close(fds, n);
}
