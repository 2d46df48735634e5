/*
 * The push engine through the transport seam: pushers and in-process
 * workers over the loopback backend (tests/loopback), one process. Grants
 * asked and answered, commit counts, replies the fabric loses (bounded
 * waits), failover to a replica when a worker dies (R = 2), and an attempt
 * destroyed before its close, which commits nothing. Every record is read
 * back and checked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/loopback/lb_util.h"

#include "pusher/internal.h"
#include "shuffle/proto.h"

#define WAIT_MS 4000

static void sum_workers(const lb_shuffle_t *s, rs_worker_stats_t *sum)
{
    memset(sum, 0, sizeof(*sum));
    for (uint32_t k = 0; k < LB_MAX_WORKERS && s->worker[k] != NULL; k++) {
        rs_worker_stats_t w;
        rs_worker_stats(s->worker[k], &w);
        sum->batches += w.batches;
        sum->bytes += w.bytes;
        sum->refused += w.refused;
        sum->commits += w.commits;
        sum->stray_retires += w.stray_retires;
    }
}

/* The worker stats settle within ~1 ms of a commit: wait for the commits to show. */
static void wait_commits(const lb_shuffle_t *s, uint64_t want, rs_worker_stats_t *sum)
{
    assert_true(LB_UNTIL((sum_workers(s, sum), sum->commits >= want), 2000));
}

static void read_check(lb_shuffle_t *s, const uint32_t *attempts)
{
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, WAIT_MS);
    rs_status_t st;
    lb_seen_clear(s);
    int line = lb_read_all(s, &rc, attempts, &st);
    if (line != 0)
        fail_msg("read: check at line %d failed (%s)", line, rs_strerror(st));
    assert_true(lb_all_seen(s));
}

/* Grants asked and answered, one commit per worker, every batch committed once. */
static void test_grants_and_commit(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 2, NULL);
    lb_shuffle_desc(&s, 1, 4, 1, 1, 3000);
    rs_lb_reset();

    rs_pusher_config_t pc;
    lb_pusher_config(&pc, WAIT_MS);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&s.desc, 0, 0, &pc, &p), RS_OK);
    uint8_t rec[TREC_MAX];
    for (uint32_t i = 0; i < s.n_records; i++)
        assert_int_equal(rs_pusher_append(p, i % 4, rec, trec_make(0, i, rec)), RS_OK);
    rs_pusher_stats_t ps;
    assert_int_equal(rs_pusher_close(p, &ps), RS_OK);
    rs_pusher_destroy(p);

    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_true(ps.grant_requests > 0);
    assert_true(ps.batches > 0);
    assert_int_equal(ps.workers_lost, 0);
    /* Every request the engine counts went out, and every one was answered. */
    assert_int_equal(c.sent[RS_SMSG_GRANT_REQ], ps.grant_requests);
    assert_int_equal(c.delivered[RS_SMSG_GRANT], c.delivered[RS_SMSG_GRANT_REQ]);
    /* One commit per worker, one reply each; nothing refused. */
    assert_int_equal(c.sent[RS_SMSG_COMMIT], 2);
    assert_int_equal(c.delivered[RS_SMSG_COMMIT_REPLY], 2);
    assert_int_equal(c.sent[RS_SMSG_NACK], 0);
    /* One notified put per batch that went alone, one per merged write. */
    assert_true(ps.merged_batches <= ps.batches);
    assert_int_equal(c.notifies, ps.batches - ps.merged_batches + ps.merged_writes);

    rs_worker_stats_t w;
    wait_commits(&s, 2, &w);
    assert_int_equal(w.commits, 2);
    assert_int_equal(w.batches, ps.batches);
    assert_int_equal(w.bytes, ps.bytes);
    assert_int_equal(w.refused, 0);
    assert_int_equal(w.stray_retires, 0);

    read_check(&s, NULL);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

/*
 * Dropped replies: a lost GRANT, a lost COMMIT_REPLY. The pusher's waits
 * are bounded: close returns within wait_ms (plus the transport's
 * timeouts), never hangs.
 */
static rs_status_t push_timed(lb_shuffle_t *s, uint32_t map, uint32_t attempt, uint64_t *ms)
{
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, 1500);
    uint64_t t0 = lb_now_ms();
    rs_status_t st = lb_push_map(s, map, attempt, &pc);
    *ms = lb_now_ms() - t0;
    return st;
}

static void test_dropped_grant(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, NULL);
    lb_shuffle_desc(&s, 2, 2, 1, 2, 500);
    rs_lb_reset();
    rs_lb_drop(RS_SMSG_GRANT, 1);
    uint64_t ms;
    rs_status_t st = push_timed(&s, 0, 0, &ms);
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_int_equal(c.dropped[RS_SMSG_GRANT], 1);
    /* The engine owes no retry of a request: the worker is silent for the peer timeout. */
    assert_int_equal(st, RS_ERR_TIMEOUT);
    assert_true(ms >= 900 && ms < 6000);
    rs_lb_reset();
    /* The next attempt of the same map goes through and is read back alone. */
    assert_int_equal(push_timed(&s, 0, 1, &ms), RS_OK);
    assert_int_equal(push_timed(&s, 1, 0, &ms), RS_OK);
    uint32_t attempts[2] = {1, 0};
    read_check(&s, attempts);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

static void *release_later(void *arg)
{
    lb_sleep_ms(300);
    rs_lb_release((unsigned)(uintptr_t)arg);
    return NULL;
}

/* Grants delayed 300 ms (below the peer timeout): the push waits for them and succeeds. */
static void test_delayed_grant(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, NULL);
    lb_shuffle_desc(&s, 7, 2, 1, 1, 1000);
    rs_lb_reset();
    rs_lb_hold(RS_SMSG_GRANT);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, (void *)(uintptr_t)RS_SMSG_GRANT), 0);
    uint64_t ms;
    assert_int_equal(push_timed(&s, 0, 0, &ms), RS_OK);
    pthread_join(t, NULL);
    assert_true(ms >= 250);
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_true(c.delivered[RS_SMSG_GRANT] > 0);
    assert_int_equal(c.dropped[RS_SMSG_GRANT], 0);
    read_check(&s, NULL);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

static void test_dropped_commit_reply(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, NULL);
    lb_shuffle_desc(&s, 3, 2, 1, 1, 500);
    rs_lb_reset();
    rs_lb_drop(RS_SMSG_COMMIT_REPLY, 1);
    uint64_t ms;
    rs_status_t st = push_timed(&s, 0, 0, &ms);
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_int_equal(c.dropped[RS_SMSG_COMMIT_REPLY], 1);
    assert_int_equal(st, RS_ERR_TIMEOUT);
    assert_true(ms >= 900 && ms < 6000);
    /* The worker did commit: its records are there for a reader. */
    rs_worker_stats_t w;
    wait_commits(&s, 1, &w);
    read_check(&s, NULL);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

/* R = 2: a worker killed during the push; close succeeds on the survivors, reads verify. */
static void test_failover_replica(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 3, NULL);
    lb_shuffle_desc(&s, 4, 6, 2, 1, 4000);
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, WAIT_MS);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&s.desc, 0, 0, &pc, &p), RS_OK);
    uint8_t rec[TREC_MAX];
    for (uint32_t i = 0; i < s.n_records; i++) {
        if (i == s.n_records / 2)
            assert_int_equal(rs_lb_kill(lb_worker_ctx(&s, 1)), RS_OK);
        assert_int_equal(rs_pusher_append(p, i % 6, rec, trec_make(0, i, rec)), RS_OK);
    }
    rs_pusher_stats_t ps;
    assert_int_equal(rs_pusher_close(p, &ps), RS_OK);
    rs_pusher_destroy(p);
    assert_int_equal(ps.workers_lost, 1);
    read_check(&s, NULL);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

/* An attempt destroyed before its close commits nothing; the next attempt is read alone. */
static void test_abort_commits_nothing(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 2, NULL);
    lb_shuffle_desc(&s, 5, 4, 1, 1, 2000);
    rs_lb_reset();
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, WAIT_MS);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&s.desc, 0, 0, &pc, &p), RS_OK);
    uint8_t rec[TREC_MAX];
    for (uint32_t i = 0; i < s.n_records; i++)
        assert_int_equal(rs_pusher_append(p, i % 4, rec, trec_make(0, i, rec)), RS_OK);
    rs_pusher_destroy(p);
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_int_equal(c.sent[RS_SMSG_COMMIT], 0);
    rs_worker_stats_t w;
    sum_workers(&s, &w);
    assert_int_equal(w.commits, 0);

    /* Attempt 1 of the same map: the reader takes it and nothing of attempt 0. */
    assert_int_equal(lb_push_map(&s, 0, 1, &pc), RS_OK);
    wait_commits(&s, 2, &w);
    assert_int_equal(w.commits, 2);
    uint32_t attempts[1] = {1};
    read_check(&s, attempts);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

/* Map m: records 0..recs-1, record i to partition i % P, through a pusher of pc; its batches. */
static uint64_t push_counted(lb_shuffle_t *s, uint32_t m, const rs_pusher_config_t *pc,
                             uint32_t recs)
{
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&s->desc, m, 0, pc, &p), RS_OK);
    uint8_t rec[TREC_MAX];
    rs_status_t st = RS_OK;
    for (uint32_t i = 0; i < recs && st == RS_OK; i++)
        st = rs_pusher_append(p, i % s->desc.n_partitions, rec, trec_make(m, i, rec));
    rs_pusher_stats_t ps;
    if (st == RS_OK)
        st = rs_pusher_close(p, &ps);
    rs_pusher_destroy(p);
    assert_int_equal(st, RS_OK);
    return ps.batches;
}

/*
 * Shuffle id of parts partitions, two maps of recs records each through
 * pushers of a 256 KiB buffer and a 32 MiB pool: map 0 with the defaults,
 * map 1 with change applied. Every record is read back; the maps' batches
 * go to batches[0] and [1].
 */
static void push_two_ways(uint32_t id, uint32_t parts, uint32_t recs,
                          void (*change)(rs_pusher_config_t *), uint64_t batches[2])
{
    rs_worker_config_t wc;
    lb_worker_config(&wc, 128 << 20, NULL);
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, &wc);
    lb_shuffle_desc(&s, id, parts, 1, 2, recs);
    for (uint32_t m = 0; m < 2; m++) {
        rs_pusher_config_t pc;
        lb_pusher_config(&pc, WAIT_MS);
        pc.buf_len = 256 << 10;
        pc.pool_bytes = 32 << 20;
        pc.max_inflight = 4 << 20;
        if (m == 1)
            change(&pc);
        batches[m] = push_counted(&s, m, &pc, recs);
    }
    read_check(&s, NULL);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

static void pool_fixed(rs_pusher_config_t *pc)
{
    pc->pool_max = pc->pool_bytes;
}

/*
 * With many partitions the pool doubles until each partition's buffer
 * holds 16 KiB (rs_pusher_config_t.pool_max): 20,000 partitions on a
 * 32 MiB pool grow it to 128 MiB, and about 900 bytes a partition go as
 * one batch each; with the growth off (pool_max = pool_bytes) the buffers
 * are 768 bytes and each partition takes two.
 */
static void test_pool_grows_with_partitions(void **state)
{
    (void)state;
    enum { PARTS = 20000 };
    uint64_t batches[2];
    push_two_ways(9, PARTS, PARTS * 12, pool_fixed, batches);
    if (batches[0] > PARTS + PARTS / 10 || batches[1] < PARTS + PARTS / 2)
        fail_msg("batches: %llu with the pool grown, %llu without (%u partitions)",
                 (unsigned long long)batches[0], (unsigned long long)batches[1], PARTS);
}

static void hot_off(rs_pusher_config_t *pc)
{
    pc->hot_bytes = 0;
}

/*
 * All partitions' buffers together stay within hot_bytes, not below
 * 16 KiB each: 200 partitions of about 128 KiB each go in buffers of at
 * most 16 KiB with the default 3 MiB (4, 8, then 16 KiB: nine or ten
 * batches a partition), and of up to the pool's share (80 KiB) with the
 * bound off (four).
 */
static void test_buffers_within_hot_bytes(void **state)
{
    (void)state;
    enum { PARTS = 200 };
    uint64_t batches[2];
    push_two_ways(10, PARTS, PARTS * 1700, hot_off, batches);
    if (batches[0] < 9 * PARTS || batches[1] > 5 * PARTS)
        fail_msg("batches: %llu within 3 MiB of buffers, %llu with the bound off (%u partitions)",
                 (unsigned long long)batches[0], (unsigned long long)batches[1], PARTS);
}

#ifdef RS_FAULT_INJECTION
/*
 * A batch numbered past what a worker takes is refused (NACK): close
 * reports the reason. With every NACK lost on the way, the worker's commit
 * check still catches it: the batch never arrived, the commit times out
 * after the worker's commit_wait_ms, and close returns within its bound.
 */
static rs_status_t push_faulty(lb_shuffle_t *s, uint32_t attempt, uint64_t *ms)
{
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, 3000);
    rs_pusher_t *p;
    uint64_t t0 = lb_now_ms();
    rs_status_t st = rs_pusher_open(&s->desc, 0, attempt, &pc, &p);
    assert_int_equal(st, RS_OK);
    rs_push_fault(p, RS_FAULT_HUGE_SEQ, 4);
    uint8_t rec[TREC_MAX];
    for (uint32_t i = 0; i < s->n_records && st == RS_OK; i++)
        st = rs_pusher_append(p, i % 2, rec, trec_make(0, i, rec));
    if (st == RS_OK)
        st = rs_pusher_close(p, NULL);
    rs_pusher_destroy(p);
    *ms = lb_now_ms() - t0;
    return st;
}

static size_t nack_empty(void *arg, unsigned char *data, size_t len)
{
    (void)arg;
    (void)data;
    (void)len;
    return 0;
}

static void test_nack_and_dropped_nack(void **state)
{
    (void)state;
    rs_worker_config_t wc;
    lb_worker_config(&wc, 8 << 20, NULL);
    wc.commit_wait_ms = 500;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, &wc);
    lb_shuffle_desc(&s, 6, 2, 1, 1, 2000);
    rs_lb_reset();
    uint64_t ms;
    assert_int_equal(push_faulty(&s, 0, &ms), RS_ERR_PROTOCOL);
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_true(c.delivered[RS_SMSG_NACK] > 0);
    rs_worker_stats_t w;
    sum_workers(&s, &w);
    assert_int_equal(w.commits, 0);

    rs_lb_reset();
    rs_lb_drop(RS_SMSG_NACK, 1000);
    assert_int_equal(push_faulty(&s, 1, &ms), RS_ERR_TIMEOUT);
    rs_lb_counts(&c);
    assert_true(c.dropped[RS_SMSG_NACK] > 0);
    assert_int_equal(c.delivered[RS_SMSG_NACK], 0);
    assert_true(ms >= 450 && ms < 4000);
    sum_workers(&s, &w);
    assert_int_equal(w.commits, 0);

    /* An unreadable NACK fails the pusher at once (it used to be ignored). */
    rs_lb_reset();
    rs_lb_mangle(RS_SMSG_NACK, 1000, nack_empty, NULL);
    assert_int_equal(push_faulty(&s, 3, &ms), RS_ERR_TRUNCATED);
    rs_lb_counts(&c);
    assert_true(c.mangled[RS_SMSG_NACK] > 0);
    assert_true(ms < 450); /* not the commit's wait */
    sum_workers(&s, &w);
    assert_int_equal(w.commits, 0);
    rs_lb_reset();

    /* A clean attempt commits and is read back alone. */
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, WAIT_MS);
    assert_int_equal(lb_push_map(&s, 0, 2, &pc), RS_OK);
    uint32_t attempts[1] = {2};
    read_check(&s, attempts);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}
#endif

int main(void)
{
    lb_env_defaults();
    lb_alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grants_and_commit),
        cmocka_unit_test(test_dropped_grant),
        cmocka_unit_test(test_pool_grows_with_partitions),
        cmocka_unit_test(test_buffers_within_hot_bytes),
        cmocka_unit_test(test_dropped_commit_reply),
        cmocka_unit_test(test_failover_replica),
        cmocka_unit_test(test_abort_commits_nothing),
        cmocka_unit_test(test_delayed_grant),
#ifdef RS_FAULT_INJECTION
        cmocka_unit_test(test_nack_and_dropped_nack),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
