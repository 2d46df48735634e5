#include "tt_util.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cmocka.h>

uint64_t tt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void tt_config(rs_config_t *cfg)
{
    assert_int_equal(rs_config_init(cfg), RS_OK);
    cfg->transport = RS_TRANSPORT_UCX;
    cfg->peer_timeout_ms = 2000;
    cfg->connect_timeout_ms = 3000;
    cfg->progress_thread = 0;
}

static void pair_ep_cb(void *arg, rs_ep_t *ep, rs_status_t status)
{
    tt_pair_t *p = arg;
    if (status == RS_OK) {
        __atomic_store_n(&p->sep, ep, __ATOMIC_RELEASE);
        __atomic_add_fetch(&p->accepted, 1, __ATOMIC_ACQ_REL);
    } else {
        __atomic_add_fetch(&p->ep_errors, 1, __ATOMIC_ACQ_REL);
    }
}

void tt_pair_open(tt_pair_t *p, const rs_config_t *srv_cfg, const rs_config_t *cli_cfg)
{
    rs_config_t s, c;
    memset(p, 0, sizeof(*p));
    if (srv_cfg != NULL) {
        s = *srv_cfg;
    } else {
        tt_config(&s);
    }
    if (cli_cfg != NULL) {
        c = *cli_cfg;
    } else {
        tt_config(&c);
    }
    assert_int_equal(rs_ctx_create(&s, &p->srv), RS_OK);
    rs_set_ep_handler(p->srv, pair_ep_cb, p);
    assert_int_equal(rs_listen(p->srv, "127.0.0.1", 0, &p->listener), RS_OK);
    assert_true(rs_listener_port(p->listener) != 0);
    /* The server must answer while rs_connect blocks in this thread. */
    assert_int_equal(rs_progress_thread_start(p->srv), RS_OK);
    assert_int_equal(rs_ctx_create(&c, &p->cli), RS_OK);
    assert_int_equal(rs_connect(p->cli, "127.0.0.1", rs_listener_port(p->listener), &p->cep),
                     RS_OK);
    uint64_t end = tt_now_ms() + 3000;
    while (__atomic_load_n(&p->sep, __ATOMIC_ACQUIRE) == NULL && tt_now_ms() < end)
        usleep(1000);
    rs_progress_thread_stop(p->srv);
    assert_non_null(p->sep);
    assert_int_equal(rs_ep_status(p->cep), RS_OK);
    assert_int_equal(rs_ep_status(p->sep), RS_OK);
}

void tt_pair_close(tt_pair_t *p)
{
    rs_ctx_destroy(p->cli);
    rs_ctx_destroy(p->srv);
    memset(p, 0, sizeof(*p));
}

int tt_progress_until(rs_ctx_t *a, rs_ctx_t *b, volatile int *flag, int timeout_ms)
{
    uint64_t end = tt_now_ms() + (uint64_t)timeout_ms;
    while (!*flag && tt_now_ms() < end) {
        if (a != NULL)
            rs_progress(a);
        if (b != NULL)
            rs_progress(b);
    }
    return *flag;
}

long tt_progress_count(rs_ctx_t *a, rs_ctx_t *b, volatile long *count, long want, int timeout_ms)
{
    uint64_t end = tt_now_ms() + (uint64_t)timeout_ms;
    while (*count < want && tt_now_ms() < end) {
        if (a != NULL)
            rs_progress(a);
        if (b != NULL)
            rs_progress(b);
    }
    return *count;
}

void tt_spin_ns(long ns)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < ns);
}

void tt_flood(rs_ctx_t *ctx, rs_ep_t *ep, unsigned type, size_t len, long gap_ns)
{
    unsigned char *msg = calloc(1, len);
    if (msg == NULL)
        _exit(2);
    for (;;) {
        (void)rs_msg_send(ep, type, msg, len, NULL, NULL);
        rs_progress(ctx);
        tt_spin_ns(gap_ns);
    }
}

void tt_count_msg(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep, (void)data, (void)len;
    ++*(long *)arg;
}

void tt_kill_mid_flood(rs_ctx_t *ctx, pid_t pid, rs_ep_t *ep, volatile long *floods, long want)
{
    long from = *floods;
    uint64_t end = tt_now_ms() + 5000;
    while (*floods < from + want && tt_now_ms() < end)
        rs_progress(ctx);
    assert_true(*floods >= from + want);
    kill(pid, SIGKILL);
    end = tt_now_ms() + 20;
    while (tt_now_ms() < end)
        rs_progress(ctx);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    end = tt_now_ms() + 3000; /* the pidfd scan notices within a period */
    while (rs_ep_status(ep) == RS_OK && tt_now_ms() < end)
        rs_progress(ctx);
    assert_int_equal(rs_ep_peer_exited(ep), 1);
}

void tt_done_cb(void *arg, rs_status_t status)
{
    tt_done_t *d = arg;
    d->calls++;
    d->status = status;
}

int tt_wait_calls(rs_ctx_t *a, rs_ctx_t *b, tt_done_t *d, int want, int timeout_ms)
{
    uint64_t end = tt_now_ms() + (uint64_t)timeout_ms;
    while (d->calls < want && tt_now_ms() < end) {
        if (a != NULL)
            rs_progress(a);
        if (b != NULL)
            rs_progress(b);
    }
    return d->calls;
}

rs_rkey_t *tt_rkey_for(rs_ep_t *ep, rs_mr_t *mr)
{
    unsigned char blob[RS_RKEY_BLOB_MAX];
    size_t len = 0;
    assert_int_equal(rs_mr_pack_rkey(mr, blob, sizeof(blob), &len), RS_OK);
    assert_true(len > 0 && len <= RS_RKEY_BLOB_MAX);
    rs_rkey_t *rkey = NULL;
    assert_int_equal(rs_rkey_unpack(ep, blob, len, &rkey), RS_OK);
    return rkey;
}

void tt_pair_open_regions(tt_pair_t *p, const rs_config_t *cli_cfg, size_t len, rs_mr_t **smr,
                          rs_mr_t **cmr, rs_rkey_t **rkey)
{
    tt_pair_open(p, NULL, cli_cfg);
    assert_int_equal(rs_mem_alloc(p->srv, len, RS_MEM_REMOTE_ALL, smr), RS_OK);
    assert_int_equal(rs_mem_alloc(p->cli, len, RS_MEM_LOCAL, cmr), RS_OK);
    memset(rs_mr_addr(*smr), 0, len);
    *rkey = tt_rkey_for(p->cep, *smr);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test timed out (alarm)\n";
    ssize_t unused = write(2, msg, sizeof(msg) - 1);
    (void)unused;
    _exit(124);
}

void tt_alarm(unsigned seconds)
{
    signal(SIGALRM, on_alarm);
    alarm(seconds);
}
