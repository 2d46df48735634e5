/*
 * rshuffled looked into and drained: rs_worker_query (and rshuffle_info
 * --worker) report a held shuffle's committed maps and bytes as pushed;
 * SIGTERM drains (new maps refused, reads go on) and it exits 0 once every
 * shuffle is dropped or --drain-timeout passed; with R = 2 the readers of a
 * drained worker fail over and read every record.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/worker.h>

#include "rshuffled_child.h"

#define PARTS   8u
#define REC_LEN 100u

static pid_t pids[2];

static int teardown(void **state)
{
    (void)state;
    rsd_kill(&pids[0]);
    rsd_kill(&pids[1]);
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Record id: the id in its first 8 bytes, then bytes (uint8_t)id; partition id % PARTS. */
static void rec_make(uint64_t id, uint8_t *rec)
{
    memset(rec, (int)(id & 0xff), REC_LEN);
    memcpy(rec, &id, 8);
}

/* Map m pushes n records (ids m*n ..); adds its frame bytes and batches. */
static void push_map(const rs_shuffle_desc_t *d, uint32_t m, uint64_t n, uint64_t *bytes,
                     uint64_t *batches)
{
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(d, m, 0, NULL, &p), RS_OK);
    uint8_t rec[REC_LEN];
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id = (uint64_t)m * n + i;
        rec_make(id, rec);
        assert_int_equal(rs_pusher_append(p, (uint32_t)(id % PARTS), rec, REC_LEN), RS_OK);
    }
    rs_pusher_stats_t ps;
    assert_int_equal(rs_pusher_close(p, &ps), RS_OK);
    rs_pusher_destroy(p);
    *bytes += ps.bytes;
    *batches += ps.batches;
}

/* Reads partition part in sess, checks each record and marks it in seen; returns the count. */
static uint64_t read_part(rs_reader_session_t *sess, uint32_t part, uint8_t *seen, uint64_t total)
{
    rs_reader_t *rd;
    assert_int_equal(rs_reader_open_in(sess, part, &rd), RS_OK);
    const void *rec;
    uint32_t len;
    uint64_t n = 0;
    rs_status_t s;
    uint8_t want[REC_LEN];
    while ((s = rs_reader_next(rd, &rec, &len)) == RS_OK && rec != NULL) {
        uint64_t id;
        assert_int_equal(len, REC_LEN);
        memcpy(&id, rec, 8);
        assert_true(id < total && id % PARTS == part);
        rec_make(id, want);
        assert_memory_equal(rec, want, REC_LEN);
        assert_int_equal(seen[id], 0);
        seen[id] = 1;
        n++;
    }
    assert_int_equal(s, RS_OK);
    rs_reader_close(rd);
    return n;
}

/* Waits (bounded by limit_s) for *pid to exit: its exit status, or -1 if it did not. */
static int wait_exit(pid_t *pid, double limit_s, double *took_s)
{
    double t0 = now_s();
    int st;
    while (now_s() - t0 < limit_s) {
        if (waitpid(*pid, &st, WNOHANG) == *pid) {
            *pid = 0;
            *took_s = now_s() - t0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10000);
    }
    return -1;
}

static void test_query_and_drop_drains(void **state)
{
    (void)state;
    alarm(120);
    char addr[256];
    static const char *const args[] = {"--mem", "64M", "--log", "error", NULL};
    pids[0] = rsd_start(args, NULL, addr, sizeof(addr));
    const char *workers[1] = {addr};
    rs_shuffle_desc_t d = {
        .shuffle_id = 5, .n_partitions = PARTS, .n_workers = 1, .workers = workers};
    uint64_t bytes = 0, batches = 0;
    for (uint32_t m = 0; m < 3; m++)
        push_map(&d, m, 5000, &bytes, &batches);

    rs_worker_info_t *in = NULL;
    assert_int_equal(rs_worker_query(addr, NULL, &in), RS_OK);
    assert_int_equal(in->n_shuffles, 1);
    assert_int_equal(in->shuffles[0].shuffle_id, 5);
    assert_int_equal(in->shuffles[0].n_partitions, PARTS);
    assert_int_equal(in->shuffles[0].maps_committed, 3);
    assert_int_equal(in->shuffles[0].bytes, bytes);
    assert_int_equal(in->shuffles[0].batches, batches);
    assert_int_equal(in->stats.commits, 3);
    assert_int_equal(in->stats.bytes, bytes);
    assert_int_equal(in->stats.stray_retires, 0);
    assert_true(in->arena_len >= 64u << 20 && in->stats.arena_peak > 0);
    assert_int_equal(in->draining, 0);
    assert_int_equal(in->truncated, 0);
    assert_true(in->n_conns >= 1); /* this query's own connection at least */
    fprintf(stderr,
            "rs_worker_query: shuffle 5 holds %u maps, %llu batches, %llu bytes; pushed "
            "3 maps, %llu batches, %llu bytes\n",
            in->shuffles[0].maps_committed, (unsigned long long)in->shuffles[0].batches,
            (unsigned long long)in->shuffles[0].bytes, (unsigned long long)batches,
            (unsigned long long)bytes);
    rs_worker_info_free(in);

    /* The tool says the same. */
    char cmd[512], out[8192], want[128];
    snprintf(cmd, sizeof(cmd), "%s --worker %s --json", RSHUFFLE_INFO_PATH, addr);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    assert_int_equal(pclose(f), 0);
    snprintf(want, sizeof(want), "\"maps_committed\": 3, \"batches\": %llu, \"bytes\": %llu",
             (unsigned long long)batches, (unsigned long long)bytes);
    if (strstr(out, want) == NULL)
        fail_msg("no '%s' in:\n%s", want, out);

    /* Another token: refused. */
    rs_config_t cfg;
    assert_int_equal(rs_config_init(&cfg), RS_OK);
    snprintf(cfg.job_token, sizeof(cfg.job_token), "not-the-token");
    in = NULL;
    assert_int_equal(rs_worker_query(addr, &cfg, &in), RS_ERR_AUTH);
    assert_null(in);

    /* SIGTERM: draining, new maps refused; the drop ends the drain, exit 0 at once. */
    assert_int_equal(kill(pids[0], SIGTERM), 0);
    int drained = 0;
    for (int i = 0; i < 200 && !drained; i++) {
        assert_int_equal(rs_worker_query(addr, NULL, &in), RS_OK);
        drained = in->draining;
        rs_worker_info_free(in);
        if (!drained)
            usleep(10000);
    }
    assert_true(drained);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 3, 0, NULL, &p), RS_ERR_STATE);
    assert_int_equal(rs_shuffle_drop(&d, NULL), RS_OK);
    double took = 0;
    assert_int_equal(wait_exit(&pids[0], 10.0, &took), 0);
    fprintf(stderr, "drained worker: exit 0 %.2f s after the drop\n", took);
}

/* rshuffle_info --worker --drain: a drain request, as SIGTERM; the drop ends it, exit 0. */
static void test_drain_request(void **state)
{
    (void)state;
    alarm(60);
    char addr[256];
    static const char *const args[] = {"--mem", "32M", "--log", "error", NULL};
    pids[0] = rsd_start(args, NULL, addr, sizeof(addr));
    const char *workers[1] = {addr};
    rs_shuffle_desc_t d = {
        .shuffle_id = 8, .n_partitions = PARTS, .n_workers = 1, .workers = workers};
    uint64_t bytes = 0, batches = 0;
    push_map(&d, 0, 2000, &bytes, &batches);
    char cmd[512], out[4096];
    snprintf(cmd, sizeof(cmd), "%s --worker %s --drain", RSHUFFLE_INFO_PATH, addr);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    assert_int_equal(pclose(f), 0);
    if (strstr(out, "(draining)") == NULL)
        fail_msg("not draining:\n%s", out);
    int st;
    usleep(300000);
    assert_int_equal(waitpid(pids[0], &st, WNOHANG), 0); /* it holds the shuffle */
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 1, 0, NULL, &p), RS_ERR_STATE);
    assert_int_equal(rs_shuffle_drop(&d, NULL), RS_OK);
    double took = 0;
    assert_int_equal(wait_exit(&pids[0], 10.0, &took), 0);
}

/* R = 2: worker 0 SIGTERMed mid-read, drains 3 s, exits 0; its readers fail over. */
static void test_drain_readers_fail_over(void **state)
{
    (void)state;
    alarm(150);
    char addrs[2][256];
    static const char *const args[] = {"--mem",           "64M", "--log", "error",
                                       "--drain-timeout", "3",   NULL};
    for (int i = 0; i < 2; i++)
        pids[i] = rsd_start(args, NULL, addrs[i], sizeof(addrs[i]));
    const char *workers[2] = {addrs[0], addrs[1]};
    rs_shuffle_desc_t d = {
        .shuffle_id = 6, .n_partitions = PARTS, .n_workers = 2, .workers = workers, .replicas = 2};
    const uint64_t per_map = 40000, total = 2 * per_map;
    uint64_t bytes = 0, batches = 0;
    for (uint32_t m = 0; m < 2; m++)
        push_map(&d, m, per_map, &bytes, &batches);

    uint8_t *seen = calloc(total, 1);
    assert_non_null(seen);
    uint32_t attempts[2] = {0, 0};
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&d, 2, attempts, NULL, &sess), RS_OK);
    uint64_t got = 0;
    for (uint32_t part = 0; part < 3; part++)
        got += read_part(sess, part, seen, total);
    double t0 = now_s();
    assert_int_equal(kill(pids[0], SIGTERM), 0);
    for (uint32_t part = 3; part < 5; part++) /* during the drain: still served */
        got += read_part(sess, part, seen, total);
    double took = 0;
    int st = wait_exit(&pids[0], 3.0 + 20.0, &took);
    took = now_s() - t0;
    fprintf(stderr, "worker 0: exit %d %.2f s after SIGTERM (drain timeout 3 s)\n", st, took);
    assert_int_equal(st, 0);
    assert_true(took >= 2.9);                     /* it held a shuffle: the whole drain timeout */
    for (uint32_t part = 5; part < PARTS; part++) /* worker 0 gone: its replica answers */
        got += read_part(sess, part, seen, total);
    rs_reader_session_close(sess);
    assert_int_equal(got, total);
    free(seen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_query_and_drop_drains, teardown),
        cmocka_unit_test_teardown(test_drain_request, teardown),
        cmocka_unit_test_teardown(test_drain_readers_fail_over, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
