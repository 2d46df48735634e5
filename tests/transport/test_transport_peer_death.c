/*
 * A peer killed with SIGKILL while we stream puts to it over shared memory
 * (address connect, no TCP anywhere): puts to a dead peer's still-mapped
 * segment keep "completing", so only the liveness watch can notice. Every
 * later post must be refused, and the endpoint handler told, within
 * peer_timeout_ms; closing and destroying afterwards must not hang.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/transport.h>
#include "tt_util.h"

#define PEER_TIMEOUT_MS 1000

static void write_all(int fd, const void *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k <= 0)
            _exit(3);
        p = (const char *)p + k;
        n -= (size_t)k;
    }
}

static int read_all(int fd, void *p, size_t n)
{
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k <= 0)
            return -1;
        p = (char *)p + k;
        n -= (size_t)k;
    }
    return 0;
}

/* The victim: publishes its address and a region's key, then progresses. */
static void victim(int wr)
{
    /* Never outlive the test, whatever happens to it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(30);
    rs_ctx_t *ctx;
    rs_mr_t *mr;
    unsigned char addr[RS_ADDR_BLOB_MAX], blob[RS_RKEY_BLOB_MAX];
    size_t alen, blen;
    if (rs_ctx_create(NULL, &ctx) != RS_OK ||
        rs_mem_alloc(ctx, 1 << 20, RS_MEM_REMOTE_ALL, &mr) != RS_OK ||
        rs_ctx_address(ctx, addr, sizeof(addr), &alen) != RS_OK ||
        rs_mr_pack_rkey(mr, blob, sizeof(blob), &blen) != RS_OK)
        _exit(2);
    write_all(wr, &alen, sizeof(alen));
    write_all(wr, addr, alen);
    write_all(wr, &blen, sizeof(blen));
    write_all(wr, blob, blen);
    for (;;)
        rs_progress(ctx);
}

typedef struct events {
    int died;
    rs_status_t status;
    uint64_t at_ms;
} events_t;

static void ep_event(void *arg, rs_ep_t *ep, rs_status_t status)
{
    events_t *e = arg;
    (void)ep;
    if (status != RS_OK && e->died++ == 0) {
        e->status = status;
        e->at_ms = tt_now_ms();
    }
}

static void test_killed_peer_over_shm(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        victim(fds[1]);
    }
    close(fds[1]);
    unsigned char addr[RS_ADDR_BLOB_MAX], blob[RS_RKEY_BLOB_MAX];
    size_t alen = 0, blen = 0;
    assert_int_equal(read_all(fds[0], &alen, sizeof(alen)), 0);
    assert_true(alen <= sizeof(addr));
    assert_int_equal(read_all(fds[0], addr, alen), 0);
    assert_int_equal(read_all(fds[0], &blen, sizeof(blen)), 0);
    assert_true(blen <= sizeof(blob));
    assert_int_equal(read_all(fds[0], blob, blen), 0);
    close(fds[0]);

    rs_config_t cfg;
    tt_config(&cfg);
    cfg.peer_timeout_ms = PEER_TIMEOUT_MS;
    rs_ctx_t *ctx;
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    rs_mr_t *mr;
    events_t ev = {0};
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
    rs_set_ep_handler(ctx, ep_event, &ev);
    assert_int_equal(rs_connect_address(ctx, addr, alen, &ep), RS_OK);
    assert_int_equal(rs_rkey_unpack(ep, blob, blen, &rkey), RS_OK);
    assert_int_equal(rs_mem_alloc(ctx, 1 << 20, RS_MEM_LOCAL, &mr), RS_OK);

    tt_done_t d = {0};
    uint64_t t0 = tt_now_ms(), killed_at = 0, refused_at = 0;
    long posted = 0;
    while (tt_now_ms() - t0 < 5000) {
        rs_status_t st = rs_put(ep, rs_mr_addr(mr), 4096, mr, rkey, 0, tt_done_cb, &d);
        if (st != RS_OK) {
            assert_int_equal(st, RS_ERR_UNREACHABLE);
            refused_at = tt_now_ms();
            break;
        }
        posted++;
        rs_progress(ctx);
        if (killed_at == 0 && tt_now_ms() - t0 > 200) {
            kill(pid, SIGKILL);
            killed_at = tt_now_ms();
        }
    }
    assert_true(killed_at != 0);
    assert_true(refused_at != 0);
    assert_true(refused_at - killed_at < PEER_TIMEOUT_MS);
    assert_int_equal(ev.died, 1);
    assert_int_equal(ev.status, RS_ERR_UNREACHABLE);
    assert_true(ev.at_ms - killed_at < PEER_TIMEOUT_MS);
    /* Everything posted completed exactly once (the bound holds for them too). */
    assert_int_equal(tt_wait_calls(ctx, NULL, &d, (int)posted, PEER_TIMEOUT_MS), posted);

    uint64_t t1 = tt_now_ms();
    rs_ep_close(ep);
    rs_mem_free(mr);
    rs_ctx_destroy(ctx);
    assert_true(tt_now_ms() - t1 < 2000);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
}

int main(void)
{
    tt_alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_peer_over_shm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
