/*
 * The process-level client (include/rshuffle/client.h) with real worker
 * processes (rshuffled children): many tasks of one client on several
 * threads, with speculative and aborted attempts, every record read once;
 * tasks of changing sizes on one lane (grants asked at open from the last
 * task) and of changing shapes (partitions, workers, replicas);
 * lanes warmed before any task (rs_pusher_warm_in, rs_reader_warm_in);
 * a worker killed while tasks of several threads push (R = 2); a client
 * destroyed while tasks are open; and a worker lost while a pusher's open
 * waits for another (it used to crash). The transport comes from the
 * environment (ctest runs it over shared memory and over TCP).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/client.h>
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>

#include "rshuffled_child.h"

#define NW      3
#define PARTS   8
#define REC     128
#define THREADS 4

static pid_t pids[NW];
static char addr_buf[NW][160];
static const char *addrs[NW];
static rs_config_t tcfg; /* short timeouts: a lost worker is noticed in about a second */

static void start_workers(uint32_t n)
{
    const char *const args[] = {"--mem", "64M", NULL};
    for (uint32_t i = 0; i < n; i++) {
        pids[i] = rsd_start(args, NULL, addr_buf[i], sizeof(addr_buf[i]));
        addrs[i] = addr_buf[i];
    }
}

static int teardown(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < NW; i++) {
        if (pids[i] > 0)
            kill(pids[i], SIGCONT); /* a stopped one dies too */
        rsd_kill(&pids[i]);
    }
    return 0;
}

static int tcp_only(void)
{
    const char *tls = getenv("UCX_TLS");
    return tls != NULL && strstr(tls, "posix") == NULL && strstr(tls, "sysv") == NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static rs_shuffle_desc_t desc(uint32_t id, uint32_t n_workers, uint32_t replicas)
{
    return (rs_shuffle_desc_t){.shuffle_id = id,
                               .n_partitions = PARTS,
                               .n_workers = n_workers,
                               .workers = addrs,
                               .replicas = replicas};
}

static rs_pusher_config_t push_cfg(void)
{
    rs_pusher_config_t c;
    rs_pusher_config_defaults(&c);
    c.buf_len = 16 << 10;
    c.pool_bytes = 1 << 20;
    c.wait_ms = 20000;
    c.transport = &tcfg;
    return c;
}

static rs_reader_config_t read_cfg(void)
{
    rs_reader_config_t c;
    rs_reader_config_defaults(&c);
    c.wait_ms = 20000;
    c.transport = &tcfg;
    return c;
}

/* Record i of map m, attempt a: (m, i, a) first, then bytes derived from m and i only. */
static void make_rec(uint32_t m, uint32_t i, uint32_t a, uint8_t *rec)
{
    uint32_t x = m * 2654435761u ^ i;
    for (size_t k = 12; k < REC; k++) {
        x = x * 1103515245u + 12345u;
        rec[k] = (uint8_t)(x >> 16);
    }
    memcpy(rec, &m, 4);
    memcpy(rec + 4, &i, 4);
    memcpy(rec + 8, &a, 4);
}

/* One attempt of map m: n records, record i to partition i % partitions; closed or abandoned. */
static rs_status_t push_attempt(rs_client_t *cl, const rs_shuffle_desc_t *d, uint32_t m, uint32_t a,
                                uint32_t n, int commit)
{
    rs_pusher_config_t c = push_cfg();
    rs_pusher_t *p;
    rs_status_t s = rs_pusher_open_in(cl, d, m, a, &c, &p);
    if (s != RS_OK)
        return s;
    uint8_t rec[REC];
    for (uint32_t i = 0; i < n && s == RS_OK; i++) {
        make_rec(m, i, a, rec);
        s = rs_pusher_append(p, i % d->n_partitions, rec, REC);
    }
    if (s == RS_OK && commit)
        s = rs_pusher_close(p, NULL);
    rs_pusher_destroy(p); /* not closed: an abandoned attempt, never committed */
    return s;
}

/*
 * Reads partition part of d (maps 0..n_maps-1 whose winners are attempts[]),
 * checking every record and marking it in seen (n_maps * n), never twice.
 */
static rs_status_t read_part(rs_client_t *cl, const rs_shuffle_desc_t *d, uint32_t part,
                             uint32_t n_maps, const uint32_t *attempts, uint32_t n, uint8_t *seen,
                             uint64_t *records)
{
    rs_reader_config_t c = read_cfg();
    rs_reader_session_t *sess;
    rs_status_t s = rs_reader_session_open_in(cl, d, n_maps, attempts, &c, &sess);
    if (s != RS_OK)
        return s;
    rs_reader_t *r;
    if ((s = rs_reader_open_in(sess, part, &r)) != RS_OK) {
        rs_reader_session_close(sess);
        return s;
    }
    const void *rec;
    uint32_t len;
    uint8_t want[REC];
    while ((s = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL) {
        uint32_t m, i, a;
        if (len != REC)
            return RS_ERR_PROTOCOL;
        memcpy(&m, rec, 4);
        memcpy(&i, (const uint8_t *)rec + 4, 4);
        memcpy(&a, (const uint8_t *)rec + 8, 4);
        if (m >= n_maps || i >= n || i % d->n_partitions != part || a != attempts[m])
            return RS_ERR_PROTOCOL; /* a loser's or an abandoned attempt's record */
        make_rec(m, i, a, want);
        if (memcmp(rec, want, REC) != 0 || seen[(size_t)m * n + i] != 0)
            return RS_ERR_CHECKSUM;
        seen[(size_t)m * n + i] = 1;
        (*records)++;
    }
    rs_reader_close(r);
    rs_reader_session_close(sess);
    return s;
}

/* ------------------------------------------------- many tasks, many threads */

#define MAPS 24
#define RECS 400

typedef struct job {
    rs_client_t *cl;
    rs_shuffle_desc_t d;
    uint32_t t;
    uint32_t *attempts; /* winners, written by the map side */
    uint8_t *seen;
    uint64_t records;
    rs_status_t s;
    atomic_uint *pushed; /* maps committed (all threads) */
} job_t;

/*
 * Maps t, t + THREADS, ...: a map m % 3 == 0 first abandons attempt 0
 * halfway (never committed) and commits attempt 1; m % 3 == 1 commits
 * attempts 0 and 1 (speculative: the readers take 1); the others commit
 * attempt 0.
 */
static void *map_job(void *arg)
{
    job_t *j = arg;
    for (uint32_t m = j->t; m < MAPS && j->s == RS_OK; m += THREADS) {
        if (m % 3 == 0) {
            j->s = push_attempt(j->cl, &j->d, m, 0, RECS / 2, 0);
            if (j->s == RS_OK)
                j->s = push_attempt(j->cl, &j->d, m, 1, RECS, 1);
            j->attempts[m] = 1;
        } else if (m % 3 == 1) {
            j->s = push_attempt(j->cl, &j->d, m, 0, RECS, 1);
            if (j->s == RS_OK)
                j->s = push_attempt(j->cl, &j->d, m, 1, RECS, 1);
            j->attempts[m] = 1;
        } else {
            j->s = push_attempt(j->cl, &j->d, m, 0, RECS, 1);
            j->attempts[m] = 0;
        }
        if (j->pushed != NULL)
            atomic_fetch_add(j->pushed, 1);
    }
    return NULL;
}

static void *reduce_job(void *arg)
{
    job_t *j = arg;
    for (uint32_t part = j->t; part < PARTS && j->s == RS_OK; part += THREADS)
        j->s = read_part(j->cl, &j->d, part, MAPS, j->attempts, RECS, j->seen, &j->records);
    return NULL;
}

/* Runs every map on THREADS threads, then every partition on THREADS threads; all read once. */
static void run_jobs(rs_client_t *cl, const rs_shuffle_desc_t *d, void (*during)(atomic_uint *))
{
    uint32_t attempts[MAPS];
    uint8_t *seen = calloc((size_t)MAPS * RECS, 1);
    assert_non_null(seen);
    atomic_uint pushed = 0;
    job_t jobs[THREADS];
    pthread_t th[THREADS];
    for (uint32_t t = 0; t < THREADS; t++) {
        jobs[t] = (job_t){
            .cl = cl, .d = *d, .t = t, .attempts = attempts, .seen = seen, .pushed = &pushed};
        assert_int_equal(pthread_create(&th[t], NULL, map_job, &jobs[t]), 0);
    }
    if (during != NULL)
        during(&pushed);
    for (uint32_t t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (uint32_t t = 0; t < THREADS; t++)
        assert_int_equal(jobs[t].s, RS_OK);
    for (uint32_t t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, reduce_job, &jobs[t]), 0);
    uint64_t records = 0;
    for (uint32_t t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(jobs[t].s, RS_OK);
        records += jobs[t].records;
    }
    assert_int_equal(records, (uint64_t)MAPS * RECS); /* each once (read_part: never twice) */
    free(seen);
}

static void test_many_tasks_threads(void **state)
{
    (void)state;
    alarm(120);
    start_workers(NW);
    rs_client_t *cl;
    assert_int_equal(rs_client_create(NULL, &cl), RS_OK);
    rs_shuffle_desc_t d = desc(1, NW, 1);
    run_jobs(cl, &d, NULL);
    rs_client_stats_t st;
    rs_client_stats(cl, &st);
    /* 40 map attempts and 8 reduce tasks; lanes: at most one per thread and kind. */
    printf("lanes made %llu, reused %llu\n", (unsigned long long)st.lanes_made,
           (unsigned long long)st.lanes_reused);
    assert_true(st.lanes_made <= 2 * THREADS);
    assert_true(st.lanes_reused >= 40);
    assert_int_equal(st.lanes_busy, 0);
    /* A second shuffle on the same client and connections. */
    d = desc(2, NW, 1);
    run_jobs(cl, &d, NULL);
    rs_client_destroy(cl);
}

/* ------------------------------------------------------------- warm lanes */

/* A loopback port nobody listens at now (bound, then closed again). */
static int unused_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* This process's resident set, bytes (/proc/self/statm). */
static uint64_t rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * rs_pusher_warm_in / rs_reader_warm_in: THREADS lanes of each kind made
 * before any task, read buffers (and pools, checked with larger ones at the
 * end) resident; then every task of the many-threads run is served by them
 * (no lane made after the warm-up), every record read once. Warming
 * connects: a worker nobody listens at fails it. Bad arguments are refused.
 */
static void test_warm_lanes(void **state)
{
    (void)state;
    alarm(120);
    start_workers(NW);
    rs_client_t *cl;
    assert_int_equal(rs_client_create(NULL, &cl), RS_OK);
    rs_shuffle_desc_t d = desc(3, NW, 1);
    rs_pusher_config_t pc = push_cfg();
    rs_reader_config_t rc = read_cfg();

    assert_int_equal(rs_pusher_warm_in(cl, &d, &pc, 0), RS_ERR_INVALID);
    assert_int_equal(rs_pusher_warm_in(cl, &d, &pc, RS_PUSH_WARM_MAX + 1), RS_ERR_INVALID);
    rs_shuffle_desc_t none = d;
    none.n_workers = 0;
    assert_int_equal(rs_pusher_warm_in(cl, &none, &pc, 1), RS_ERR_INVALID);
    assert_int_equal(rs_reader_warm_in(cl, &d, &rc, 0), RS_ERR_INVALID);
    assert_int_equal(rs_reader_warm_in(cl, &d, &rc, RS_READ_WARM_MAX + 1), RS_ERR_INVALID);

    assert_int_equal(rs_pusher_warm_in(cl, &d, &pc, THREADS), RS_OK);
    uint64_t before = rss_bytes();
    assert_int_equal(rs_reader_warm_in(cl, &d, &rc, THREADS), RS_OK);
    uint64_t grown = rss_bytes() - before, want = (uint64_t)THREADS * rc.read_max;
    /* Each lane's read buffer resident before any task (lazily made, it would not be). */
    printf("reader warm: resident set grew by %llu bytes (read buffers: %llu)\n",
           (unsigned long long)grown, (unsigned long long)want);
    assert_true(grown >= want - want / 10);
    rs_client_stats_t st;
    rs_client_stats(cl, &st);
    assert_int_equal(st.lanes_made, 2 * THREADS);
    assert_int_equal(st.lanes_idle, 2 * THREADS);
    assert_int_equal(st.lanes_busy, 0);
    /* Warming again takes the idle lanes: nothing new is made. */
    assert_int_equal(rs_pusher_warm_in(cl, &d, &pc, THREADS), RS_OK);
    rs_client_stats(cl, &st);
    assert_int_equal(st.lanes_made, 2 * THREADS);

    run_jobs(cl, &d, NULL);
    rs_client_stats(cl, &st);
    printf("after the tasks: lanes made %llu, reused %llu\n", (unsigned long long)st.lanes_made,
           (unsigned long long)st.lanes_reused);
    assert_int_equal(st.lanes_made, 2 * THREADS); /* every task found a warm lane */
    assert_true(st.lanes_reused >= 40 + PARTS);

    /* Pools resident at the warm-up: two lanes of 32 MiB (not those of the tasks above). */
    rs_pusher_config_t big = pc;
    big.pool_bytes = 32 << 20;
    before = rss_bytes();
    assert_int_equal(rs_pusher_warm_in(cl, &d, &big, 2), RS_OK);
    grown = rss_bytes() - before, want = 2 * (uint64_t)big.pool_bytes;
    printf("pusher warm: resident set grew by %llu bytes (pools: %llu)\n",
           (unsigned long long)grown, (unsigned long long)want);
    assert_true(grown >= want - want / 10);

    /* A worker nobody listens at: the warm-up connects, so it fails and says so. */
    char dead[64];
    snprintf(dead, sizeof(dead), "127.0.0.1:%d", unused_port());
    const char *dead_addrs[] = {dead};
    rs_shuffle_desc_t gone = {.shuffle_id = 4,
                              .n_partitions = PARTS,
                              .n_workers = 1,
                              .workers = dead_addrs,
                              .replicas = 1};
    assert_int_not_equal(rs_pusher_warm_in(cl, &gone, &pc, 1), RS_OK);
    rs_client_destroy(cl);
}

/* ------------------------------------- grants asked at open, from the last task */

#define HMAPS 7
#define HMAX  1600

/*
 * Tasks of one shuffle on one lane, one after another, of changing sizes:
 * the lane's hint (what the last task sent per partition) sizes the next
 * task's buffers and the grants its open asks for. A task far bigger than
 * the last outgrows them, a tiny or empty one leaves them unused; every
 * record is still read once. A task like the one before asks no space it
 * does not write.
 */
static void test_hinted_tasks(void **state)
{
    (void)state;
    alarm(120);
    start_workers(NW);
    rs_client_t *cl;
    assert_int_equal(rs_client_create(NULL, &cl), RS_OK);
    rs_shuffle_desc_t d = desc(3, NW, 1);
    static const uint32_t n_recs[HMAPS] = {400, 400, HMAX, 10, 0, 400, 400};
    uint64_t total = 0;
    for (uint32_t m = 0; m < HMAPS; m++) {
        rs_pusher_config_t c = push_cfg();
        rs_pusher_t *p;
        assert_int_equal(rs_pusher_open_in(cl, &d, m, 0, &c, &p), RS_OK);
        uint8_t rec[REC];
        for (uint32_t i = 0; i < n_recs[m]; i++) {
            make_rec(m, i, 0, rec);
            assert_int_equal(rs_pusher_append(p, i % PARTS, rec, REC), RS_OK);
        }
        rs_pusher_stats_t ps;
        assert_int_equal(rs_pusher_close(p, &ps), RS_OK);
        rs_pusher_destroy(p);
        printf("map %u: %u records, %llu grant requests, %llu batches, %llu merged writes, "
               "%llu backpressure, %llu reclaimed\n",
               m, n_recs[m], (unsigned long long)ps.grant_requests, (unsigned long long)ps.batches,
               (unsigned long long)ps.merged_writes, (unsigned long long)ps.backpressure,
               (unsigned long long)ps.reclaimed);
        /*
         * Like the task before: no request beyond one per write that needed
         * space (the merged writes and the batches sent alone; how many
         * merged writes a worker gets depends on the timing of close).
         */
        if (m == 1 || m == HMAPS - 1) {
            uint64_t writes = ps.merged_writes + (ps.batches - ps.merged_batches);
            assert_true(ps.grant_requests >= 1 && ps.grant_requests <= writes);
            assert_true(ps.merged_writes >= 1);
        }
        total += n_recs[m];
    }
    uint32_t attempts[HMAPS] = {0};
    uint8_t *seen = calloc((size_t)HMAPS * HMAX, 1);
    assert_non_null(seen);
    uint64_t records = 0;
    for (uint32_t part = 0; part < PARTS; part++)
        assert_int_equal(read_part(cl, &d, part, HMAPS, attempts, HMAX, seen, &records), RS_OK);
    assert_int_equal(records, total);
    free(seen);
    rs_client_destroy(cl);
}

/* ------------------------------------------- tasks of changing shapes */

#define SHAPES 5
#define SMAPS  3

/*
 * One thread, so one push lane serves every task: shuffles of 16 and 32
 * partitions, three or two workers, one or two replicas, in turn. A lane
 * keeps its last task's per-partition arrays for the next, which zeroes
 * the part its shape uses; state left over from a larger shape (a grant,
 * a count, a queued partition) would lose or repeat records here. Every
 * record is read once, per shuffle.
 */
static void test_tasks_change_shape(void **state)
{
    (void)state;
    alarm(120);
    start_workers(NW);
    rs_client_t *cl;
    assert_int_equal(rs_client_create(NULL, &cl), RS_OK);
    static const struct {
        uint32_t parts, workers, replicas;
    } shape[SHAPES] = {{16, NW, 1}, {32, NW, 2}, {16, 2, 1}, {32, NW, 1}, {16, NW, 2}};
    for (uint32_t k = 0; k < SHAPES; k++) {
        rs_shuffle_desc_t d = desc(20 + k, shape[k].workers, shape[k].replicas);
        d.n_partitions = shape[k].parts;
        for (uint32_t m = 0; m < SMAPS; m++)
            assert_int_equal(push_attempt(cl, &d, m, 0, 2 * d.n_partitions + 7, 1), RS_OK);
        uint32_t attempts[SMAPS] = {0};
        uint32_t n = 2 * d.n_partitions + 7;
        uint8_t *seen = calloc((size_t)SMAPS * n, 1);
        assert_non_null(seen);
        uint64_t records = 0;
        for (uint32_t part = 0; part < d.n_partitions; part++)
            assert_int_equal(read_part(cl, &d, part, SMAPS, attempts, n, seen, &records), RS_OK);
        assert_int_equal(records, (uint64_t)SMAPS * n);
        free(seen);
    }
    rs_client_stats_t st;
    rs_client_stats(cl, &st);
    printf("shapes: lanes made %llu, reused %llu\n", (unsigned long long)st.lanes_made,
           (unsigned long long)st.lanes_reused);
    assert_true(st.lanes_made <= 2); /* one push lane, one read lane: the arrays went round */
    rs_client_destroy(cl);
}

/* -------------------------------------------- a worker killed, R = 2 */

static void kill_worker0_midway(atomic_uint *pushed)
{
    double t0 = now_s();
    while (atomic_load(pushed) < MAPS / 3 && now_s() - t0 < 60)
        usleep(1000);
    kill(pids[0], SIGKILL);
    waitpid(pids[0], NULL, 0);
    pids[0] = 0;
}

/*
 * Over shared memory a worker killed mid-send can block a lane's receive
 * queue (docs/shuffle.md, "A killed process and shared memory"), which the
 * lane renews only between tasks: the task that saw it may fail, so the
 * kill lands mid-push over TCP here (test_client_kill.c runs it over
 * shared memory and bounds those failures).
 */
static void test_kill_while_threads_push(void **state)
{
    (void)state;
    if (!tcp_only())
        skip();
    alarm(120);
    start_workers(NW);
    rs_client_t *cl;
    assert_int_equal(rs_client_create(NULL, &cl), RS_OK);
    rs_shuffle_desc_t d = desc(3, NW, 2);
    run_jobs(cl, &d, kill_worker0_midway);
    rs_client_destroy(cl);
}

/* ------------------------------------------- the client destroyed */

static void test_client_destroyed_under_tasks(void **state)
{
    (void)state;
    alarm(60);
    start_workers(2);
    rs_client_t *cl;
    assert_int_equal(rs_client_create(NULL, &cl), RS_OK);
    rs_shuffle_desc_t d = desc(4, 2, 1);
    /* Map 0 committed; map 1 open with records appended when the client goes. */
    assert_int_equal(push_attempt(cl, &d, 0, 0, RECS, 1), RS_OK);
    rs_pusher_config_t c = push_cfg();
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open_in(cl, &d, 1, 0, &c, &p), RS_OK);
    uint8_t rec[REC];
    make_rec(1, 0, 0, rec);
    assert_int_equal(rs_pusher_append(p, 0, rec, REC), RS_OK);
    uint32_t attempts[2] = {0, 0};
    rs_reader_config_t rc = read_cfg();
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open_in(cl, &d, 1, attempts, &rc, &sess), RS_OK);
    rs_client_destroy(cl);
    assert_int_equal(rs_pusher_append(p, 0, rec, REC), RS_ERR_CANCELED);
    assert_int_equal(rs_pusher_close(p, NULL), RS_ERR_CANCELED);
    rs_pusher_destroy(p);
    rs_reader_t *r;
    assert_int_equal(rs_reader_open_in(sess, 0, &r), RS_ERR_CANCELED);
    rs_reader_session_close(sess);
    /* Nothing of map 1 was committed: a new client reads map 0 whole, and map 1 is missing. */
    assert_int_equal(rs_client_create(NULL, &cl), RS_OK);
    uint8_t *seen = calloc((size_t)2 * RECS, 1);
    assert_non_null(seen);
    uint64_t records = 0;
    for (uint32_t part = 0; part < PARTS; part++)
        assert_int_equal(read_part(cl, &d, part, 1, attempts, RECS, seen, &records), RS_OK);
    assert_int_equal(records, RECS);
    assert_int_equal(read_part(cl, &d, 0, 2, attempts, RECS, seen, &records), RS_ERR_STATE);
    rs_client_destroy(cl);
    free(seen);
}

/* --------------------------------- a worker lost while open waits (issue 24) */

/* SIGSTOPs pid and waits until it is stopped (the signal lands asynchronously). */
static void stop_worker(pid_t pid)
{
    kill(pid, SIGSTOP);
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    double t0 = now_s();
    for (;;) {
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *end = strrchr(buf, ')'); /* "pid (comm) S ..." */
        if (end != NULL && end[1] == ' ' && (end[2] == 'T' || end[2] == 't'))
            return;
        assert_true(now_s() - t0 < 10.0);
        usleep(1000);
    }
}

static void *kill_later(void *arg)
{
    (void)arg;
    usleep(1000 * 1000);
    kill(pids[0], SIGKILL);
    return NULL;
}

/*
 * R = 1, 2 workers: worker 1 SIGSTOPped, so the open waits on it; worker 0
 * SIGKILLed 1 s in. The open ends with a clear status, never a crash: cold
 * (a new client: the open waits on worker 1's connect) and warm (the
 * connections exist: the open waits on worker 1's attach answer).
 */
static void open_while_lost(int warm)
{
    start_workers(2);
    rs_client_t *cl;
    assert_int_equal(rs_client_create(NULL, &cl), RS_OK);
    rs_shuffle_desc_t d = desc(5, 2, 1);
    if (warm)
        assert_int_equal(push_attempt(cl, &d, 0, 0, 10, 1), RS_OK);
    stop_worker(pids[1]);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, kill_later, NULL), 0);
    rs_pusher_config_t c = push_cfg();
    rs_pusher_t *p = NULL;
    double t0 = now_s();
    rs_status_t s = rs_pusher_open_in(cl, &d, 1, 0, &c, &p);
    double took = now_s() - t0;
    pthread_join(th, NULL);
    printf("open with worker 1 stopped and worker 0 killed (%s): %s after %.2f s\n",
           warm ? "warm" : "cold", rs_strerror(s), took);
    assert_int_not_equal(s, RS_OK);
    assert_null(p);
    assert_true(s == RS_ERR_UNREACHABLE || s == RS_ERR_TIMEOUT || s == RS_ERR_TRANSPORT ||
                s == RS_ERR_CANCELED);
    assert_true(took < 30.0);
    waitpid(pids[0], NULL, 0);
    pids[0] = 0;
    rs_client_destroy(cl);
}

static void test_open_worker_lost_cold(void **state)
{
    (void)state;
    alarm(60);
    open_while_lost(0);
}

static void test_open_worker_lost_warm(void **state)
{
    (void)state;
    alarm(60);
    open_while_lost(1);
}

int main(void)
{
    rs_config_defaults(&tcfg);
    tcfg.peer_timeout_ms = 1000;
    tcfg.connect_timeout_ms = 3000;
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_many_tasks_threads, teardown),
        cmocka_unit_test_teardown(test_hinted_tasks, teardown),
        cmocka_unit_test_teardown(test_tasks_change_shape, teardown),
        cmocka_unit_test_teardown(test_warm_lanes, teardown),
        cmocka_unit_test_teardown(test_kill_while_threads_push, teardown),
        cmocka_unit_test_teardown(test_client_destroyed_under_tasks, teardown),
        cmocka_unit_test_teardown(test_open_worker_lost_cold, teardown),
        cmocka_unit_test_teardown(test_open_worker_lost_warm, teardown),
    };
    const char *only = getenv("RS_TEST_ONLY");
    if (only != NULL)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
