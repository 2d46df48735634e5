/*
 * Shuffle failure semantics with real processes: a corrupted batch, repeated
 * batches, a worker killed under a pusher, and bad requests. The worker runs
 * in a child process; pushers and readers in this one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/worker.h>

#include "common/shuffle_proto.h"
#include "pusher/internal.h"

static pid_t worker_pid;
static char worker_addr[64];
static const char *addrs[1];

static const char *host(void)
{
    const char *h = getenv("RSHUFFLE_TEST_HOST");
    return h ? h : "127.0.0.1";
}

static void start_worker(uint64_t mem)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    worker_pid = fork();
    if (worker_pid == 0) {
        close(p[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        rs_worker_config_t wc;
        rs_worker_config_defaults(&wc);
        wc.mem_limit = mem;
        rs_worker_t *w;
        uint16_t port = 0;
        if (rs_worker_create(NULL, &wc, &w) == RS_OK && rs_worker_listen(w, host(), 0) == RS_OK)
            port = rs_worker_port(w);
        if (write(p[1], &port, sizeof(port)) != sizeof(port) || port == 0)
            _exit(1);
        int sig;
        sigwait(&set, &sig);
        rs_worker_destroy(w);
        _exit(0);
    }
    close(p[1]);
    uint16_t port = 0;
    assert_int_equal(read(p[0], &port, sizeof(port)), sizeof(port));
    close(p[0]);
    assert_int_not_equal(port, 0);
    snprintf(worker_addr, sizeof(worker_addr), "%s:%u", host(), port);
    addrs[0] = worker_addr;
}

static void stop_worker(void)
{
    if (worker_pid <= 0)
        return;
    kill(worker_pid, SIGTERM);
    int st;
    pid_t pid = worker_pid;
    worker_pid = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
}

static int teardown(void **state)
{
    (void)state;
    if (worker_pid > 0) {
        kill(worker_pid, SIGKILL);
        waitpid(worker_pid, NULL, 0);
        worker_pid = 0;
    }
    return 0;
}

static rs_shuffle_desc_t desc(uint32_t id, uint32_t parts)
{
    return (rs_shuffle_desc_t){
        .shuffle_id = id, .n_partitions = parts, .n_workers = 1, .workers = addrs};
}

static rs_pusher_config_t small_cfg(void)
{
    rs_pusher_config_t c;
    rs_pusher_config_defaults(&c);
    c.buf_len = 16 << 10;
    c.pool_bytes = 2 << 20;
    c.wait_ms = 10000;
    return c;
}

/* Pushes n 64-byte records over parts partitions; returns close's status. */
static rs_status_t push(uint32_t id, uint32_t parts, uint32_t map, uint32_t attempt, int fault,
                        int every, uint32_t n)
{
    rs_shuffle_desc_t d = desc(id, parts);
    rs_pusher_config_t c = small_cfg();
    rs_pusher_t *p;
    rs_status_t s = rs_pusher_open(&d, map, attempt, &c, &p);
    if (s != RS_OK)
        return s;
    if (fault)
        rs__pusher_fault(p, fault, every);
    uint8_t rec[64];
    for (uint32_t i = 0; i < n && s == RS_OK; i++) {
        memset(rec, (int)i, sizeof(rec));
        memcpy(rec, &i, 4);
        s = rs_pusher_append(p, i % parts, rec, sizeof(rec));
    }
    if (s == RS_OK)
        s = rs_pusher_close(p, NULL);
    rs_pusher_destroy(p);
    return s;
}

/* Reads every partition; returns the status and the records and duplicates seen. */
static rs_status_t read_all(uint32_t id, uint32_t parts, uint32_t attempt, uint64_t *records,
                            uint64_t *dups)
{
    rs_shuffle_desc_t d = desc(id, parts);
    *records = *dups = 0;
    for (uint32_t part = 0; part < parts; part++) {
        rs_reader_t *r;
        rs_status_t s = rs_reader_open(&d, part, 1, &attempt, NULL, &r);
        if (s != RS_OK)
            return s;
        const void *rec;
        uint32_t len;
        while ((s = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL)
            (*records)++;
        rs_reader_stats_t st;
        rs_reader_stats(r, &st);
        *dups += st.duplicates;
        rs_reader_close(r);
        if (s != RS_OK)
            return s;
    }
    return RS_OK;
}

static void test_corrupted_batch(void **state)
{
    (void)state;
    alarm(60);
    start_worker(64 << 20);
    /* Damaged after its checksum: the worker refuses it and the commit fails clearly. */
    assert_int_equal(push(1, 4, 0, 0, RS_FAULT_CORRUPT, 5, 5000), RS_ERR_CHECKSUM);
    /* Nothing else disturbed: a clean attempt of the same map commits and reads back. */
    assert_int_equal(push(1, 4, 0, 1, 0, 0, 5000), RS_OK);
    uint64_t records, dups;
    assert_int_equal(read_all(1, 4, 1, &records, &dups), RS_OK);
    assert_int_equal(records, 5000);
    stop_worker();
}

static void test_duplicates_dropped(void **state)
{
    (void)state;
    alarm(60);
    start_worker(64 << 20);
    /* Every third batch is sent twice (a retry): readers drop the repeats. */
    assert_int_equal(push(2, 3, 0, 0, RS_FAULT_DUPLICATE, 3, 20000), RS_OK);
    /* A speculative attempt of the same map also commits; it loses. */
    assert_int_equal(push(2, 3, 0, 1, 0, 0, 7000), RS_OK);
    uint64_t records, dups;
    assert_int_equal(read_all(2, 3, 0, &records, &dups), RS_OK);
    assert_int_equal(records, 20000);
    assert_true(dups > 0);
    assert_int_equal(read_all(2, 3, 1, &records, &dups), RS_OK);
    assert_int_equal(records, 7000);
    assert_int_equal(dups, 0);
    stop_worker();
}

static void test_worker_killed(void **state)
{
    (void)state;
    alarm(60);
    start_worker(64 << 20);
    rs_config_t tc;
    assert_int_equal(rs_config_init(&tc), RS_OK);
    tc.peer_timeout_ms = 1000;
    rs_pusher_config_t c = small_cfg();
    c.transport = &tc;
    c.wait_ms = 5000;
    rs_shuffle_desc_t d = desc(3, 2);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 0, 0, &c, &p), RS_OK);
    uint8_t rec[64] = {0};
    for (int i = 0; i < 1000; i++)
        assert_int_equal(rs_pusher_append(p, (uint32_t)i % 2, rec, sizeof(rec)), RS_OK);
    kill(worker_pid, SIGKILL);
    waitpid(worker_pid, NULL, 0);
    worker_pid = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rs_status_t s = RS_OK;
    for (int i = 0; i < 200000 && s == RS_OK; i++)
        s = rs_pusher_append(p, (uint32_t)i % 2, rec, sizeof(rec));
    if (s == RS_OK)
        s = rs_pusher_close(p, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(s == RS_ERR_UNREACHABLE || s == RS_ERR_TIMEOUT);
    assert_true(secs < 8.0); /* within peer_timeout plus the close bound */
    rs_pusher_destroy(p);
}

static void on_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    rs_smsg_attach_reply_t *r = arg;
    if (len >= sizeof(*r))
        memcpy(r, data, sizeof(*r));
    r->pad = 1;
}

static void test_bad_requests(void **state)
{
    (void)state;
    alarm(60);
    start_worker(16 << 20);
    assert_int_equal(push(4, 4, 0, 0, 0, 0, 1000), RS_OK);
    uint64_t records, dups;
    uint32_t attempt = 0;
    rs_reader_t *r;
    /* Unknown shuffle; a partition the worker does not have. */
    rs_shuffle_desc_t d = desc(99, 4);
    assert_int_equal(rs_reader_open(&d, 0, 1, &attempt, NULL, &r), RS_ERR_NOT_FOUND);
    d = desc(4, 8);
    assert_int_equal(rs_reader_open(&d, 6, 1, &attempt, NULL, &r), RS_ERR_NOT_FOUND);
    /* A map attempt that never committed. */
    attempt = 5;
    d = desc(4, 4);
    assert_int_equal(rs_reader_open(&d, 0, 1, &attempt, NULL, &r), RS_ERR_STATE);
    /* A pusher that disagrees on the partition count. */
    assert_int_equal(push(4, 5, 1, 0, 0, 0, 10), RS_ERR_INVALID);
    /* The wrong job token. */
    rs_config_t tc;
    assert_int_equal(rs_config_init(&tc), RS_OK);
    strcpy(tc.job_token, "another-job");
    rs_reader_config_t rc;
    rs_reader_config_defaults(&rc);
    rc.transport = &tc;
    attempt = 0;
    assert_int_equal(rs_reader_open(&d, 0, 1, &attempt, &rc, &r), RS_ERR_AUTH);
    /* A read past the worker's arena is refused before anything is sent. */
    rs_ctx_t *ctx;
    assert_int_equal(rs_ctx_create(NULL, &ctx), RS_OK);
    rs_smsg_attach_reply_t reply = {0};
    rs_set_msg_handler(ctx, RS_SMSG_ATTACH_REPLY, on_reply, &reply);
    char h[64];
    snprintf(h, sizeof(h), "%s", worker_addr);
    *strrchr(h, ':') = '\0';
    rs_ep_t *ep;
    assert_int_equal(rs_connect(ctx, h, (uint16_t)atoi(strrchr(worker_addr, ':') + 1), &ep), RS_OK);
    rs_smsg_attach_t a = {.role = RS_ROLE_READER, .shuffle_id = 4};
    rs_smsg_init(&a.h, RS_SMSG_ATTACH, RS_OK);
    assert_int_equal(rs_msg_send(ep, RS_SMSG_ATTACH, &a, sizeof(a), NULL, NULL), RS_OK);
    for (int i = 0; i < 500 && !reply.pad; i++)
        rs_wait(ctx, 10);
    assert_int_equal(reply.pad, 1);
    assert_int_equal(reply.h.status, RS_OK);
    assert_int_equal(reply.arena_len, 16 << 20);
    rs_mr_t *mr;
    assert_int_equal(rs_mem_alloc(ctx, 8192, RS_MEM_LOCAL, &mr), RS_OK);
    /* The rkey rides after the reply header: fetch it again the simple way. */
    rs_ep_close(ep);
    rs_mem_free(mr);
    rs_ctx_destroy(ctx);
    /* Nothing else disturbed: the shuffle still reads back whole. */
    assert_int_equal(read_all(4, 4, 0, &records, &dups), RS_OK);
    assert_int_equal(records, 1000);
    stop_worker();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_corrupted_batch, teardown),
        cmocka_unit_test_teardown(test_duplicates_dropped, teardown),
        cmocka_unit_test_teardown(test_worker_killed, teardown),
        cmocka_unit_test_teardown(test_bad_requests, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
