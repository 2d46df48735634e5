/*
 * The reader through the transport seam: in-process workers over the
 * loopback backend (tests/loopback). Planning across workers (each
 * partition from the worker holding it, in place or by one-sided reads),
 * attempts (only the winning one delivered), de-duplication of a batch
 * that arrives twice (a retry, and replicas after a failover), and
 * failover when a worker dies mid-read. Every record is checked, once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/loopback/lb_util.h"

#include "pusher/internal.h"
#include "shuffle/proto.h"

#define WAIT_MS 4000

static void push_all(lb_shuffle_t *s, uint32_t attempt)
{
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, WAIT_MS);
    for (uint32_t m = 0; m < s->n_maps; m++)
        assert_int_equal(lb_push_map(s, m, attempt, &pc), RS_OK);
}

/* Reads every partition of a session; sums the stats; asserts every record once. */
static void read_sum(lb_shuffle_t *s, const rs_reader_config_t *rc, const uint32_t *attempts,
                     rs_reader_stats_t *sum)
{
    uint32_t zero[8] = {0};
    rs_reader_session_t *sess;
    assert_int_equal(
        rs_reader_session_open(&s->desc, s->n_maps, attempts ? attempts : zero, rc, &sess), RS_OK);
    memset(sum, 0, sizeof(*sum));
    lb_seen_clear(s);
    for (uint32_t p = 0; p < s->desc.n_partitions; p++) {
        rs_reader_stats_t r;
        lb_read_part_ok(s, sess, p, &r);
        trec_stats_add(sum, &r);
    }
    rs_reader_session_close(sess);
    assert_true(lb_all_seen(s));
    assert_int_equal(sum->records, (uint64_t)s->n_maps * s->n_records);
}

/* Each partition is asked of the worker holding it: one READ_OPEN each, through the transport or in
 * place. */
static void test_planning_across_workers(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 3, NULL);
    lb_shuffle_desc(&s, 20, 6, 1, 3, 1500);
    push_all(&s, 0);

    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, WAIT_MS);
    rs_lb_reset();
    rs_reader_stats_t sum;
    read_sum(&s, &rc, NULL, &sum);
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_int_equal(c.sent[RS_SMSG_READ_OPEN], 6);
    assert_int_equal(c.delivered[RS_SMSG_READ_REPLY], 6);
    assert_int_equal(c.sent[RS_SMSG_READ_CLOSE], 6);
    assert_true(sum.reads > 0);
    assert_int_equal(c.gets, sum.reads);
    assert_int_equal(sum.local_batches, 0);
    assert_int_equal(sum.duplicates, 0);
    /* The commits of all 3 maps reached every worker: every batch pushed is delivered. */
    uint64_t pushed = 0;
    for (int k = 0; k < 3; k++) {
        rs_worker_stats_t w;
        rs_worker_stats(s.worker[k], &w);
        pushed += w.batches;
    }
    assert_int_equal(sum.batches, pushed);

    /* Local reads: the same partitions in place, no one-sided read. */
    lb_reader_config(&rc, 1, WAIT_MS);
    rs_lb_reset();
    read_sum(&s, &rc, NULL, &sum);
    rs_lb_counts(&c);
    assert_int_equal(sum.reads, 0);
    assert_int_equal(c.gets, 0);
    assert_int_equal(sum.local_batches, sum.batches);
    assert_int_equal(sum.batches, pushed);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

/*
 * A session reading every other partition (as one reducer of two does) is
 * read ahead too: once two opens at one step were seen, the next opens'
 * snapshots are asked before those opens, each partition's once.
 */
static void test_read_ahead_at_a_step(void **state)
{
    (void)state;
    enum { P = 64, STEP = 2 };
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 2, NULL);
    lb_shuffle_desc(&s, 24, P, 1, 2, 2000);
    push_all(&s, 0);
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, WAIT_MS);
    uint32_t zero[2] = {0};
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&s.desc, s.n_maps, zero, &rc, &sess), RS_OK);
    rs_lb_reset();
    lb_seen_clear(&s);
    uint64_t records = 0;
    for (uint32_t p = 0; p < P; p += STEP) {
        rs_reader_stats_t r;
        lb_read_part_ok(&s, sess, p, &r);
        records += r.records;
        rs_lb_counts_t c;
        rs_lb_counts(&c);
        /* Opens 0 and 2 make a first step, 4 the run: then 6, 8, ... P - 2 are asked at once. */
        if (p == 2 * STEP)
            assert_int_equal(c.sent[RS_SMSG_READ_OPEN], P / STEP);
    }
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_int_equal(c.sent[RS_SMSG_READ_OPEN],
                     P / STEP); /* none asked twice, none of the others */
    rs_reader_session_close(sess);
    assert_true(records > 0);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

/* Two committed attempts of every map: only the winning one's records come out. */
static void test_winning_attempt(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 2, NULL);
    lb_shuffle_desc(&s, 21, 4, 1, 2, 1000);
    push_all(&s, 0);
    push_all(&s, 1);
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, WAIT_MS);
    uint32_t attempts[2] = {1, 0};
    rs_reader_stats_t sum;
    read_sum(&s, &rc, attempts, &sum);
    assert_true(sum.other_attempts > 0);
    assert_int_equal(sum.duplicates, 0);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

#ifdef RS_FAULT_INJECTION
/* A pusher that sends batches twice (as a retry would): the reader delivers each once. */
static void test_dedup_retry(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 2, NULL);
    lb_shuffle_desc(&s, 22, 4, 2, 1, 3000);
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, WAIT_MS);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&s.desc, 0, 0, &pc, &p), RS_OK);
    rs_push_fault(p, RS_FAULT_DUPLICATE, 3);
    uint8_t rec[TREC_MAX];
    for (uint32_t i = 0; i < s.n_records; i++)
        assert_int_equal(rs_pusher_append(p, i % 4, rec, trec_make(0, i, rec)), RS_OK);
    assert_int_equal(rs_pusher_close(p, NULL), RS_OK);
    rs_pusher_destroy(p);
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, WAIT_MS);
    rs_reader_stats_t sum;
    read_sum(&s, &rc, NULL, &sum);
    assert_true(sum.duplicates > 0);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}
#endif

/*
 * R = 2, a worker killed while a reader is in the middle of one of its
 * partitions: the reader carries on from the other replica, drops the
 * batches it already delivered (same map, attempt and seq) and misses none.
 */
static void test_failover_mid_read(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 3, NULL);
    lb_shuffle_desc(&s, 23, 3, 2, 2, 12000);
    push_all(&s, 0);

    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, WAIT_MS);
    rc.read_ranges = 1; /* the partition (~300 KB, in several extents) takes several reads */
    uint32_t attempts[2] = {0, 0};
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&s.desc, 2, attempts, &rc, &sess), RS_OK);
    uint32_t part = 1, primary;
    assert_int_equal(rs_shuffle_replica(&s.desc, part, 0, &primary), RS_OK);

    rs_reader_t *r;
    assert_int_equal(rs_reader_open_in(sess, part, &r), RS_OK);
    const void *rec;
    uint32_t len;
    uint8_t want[TREC_MAX];
    uint64_t n = 0;
    rs_status_t st;
    int killed = 0;
    while ((st = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL) {
        uint32_t m, i;
        assert_true(len >= 8);
        memcpy(&m, rec, 4);
        memcpy(&i, (const uint8_t *)rec + 4, 4);
        assert_true(m < 2 && i < s.n_records && i % 3 == part);
        assert_int_equal(trec_make(m, i, want), len);
        assert_memory_equal(rec, want, len);
        assert_int_equal(s.seen[(size_t)m * s.n_records + i]++, 0);
        if (++n == 1000) {
            assert_int_equal(rs_lb_kill(lb_worker_ctx(&s, primary)), RS_OK);
            killed = 1;
        }
    }
    assert_int_equal(st, RS_OK);
    assert_true(killed);
    rs_reader_stats_t rst;
    rs_reader_stats(r, &rst);
    rs_reader_close(r);
    rs_reader_session_close(sess);
    assert_int_equal(n, 2u * s.n_records / 3);
    assert_int_equal(rst.failovers, 1);
    /* What the dead replica had delivered is not delivered again by the other one. */
    assert_true(rst.batches > 0);
    for (uint32_t m = 0; m < 2; m++)
        for (uint32_t i = part; i < s.n_records; i += 3)
            assert_int_equal(s.seen[(size_t)m * s.n_records + i], 1);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

/* R = 2, a partition's first replica dead before the session opens: read from the next. */
static void test_primary_dead_before_open(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 3, NULL);
    lb_shuffle_desc(&s, 24, 6, 2, 2, 1200);
    push_all(&s, 0);
    assert_int_equal(rs_lb_kill(lb_worker_ctx(&s, 0)), RS_OK);
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, WAIT_MS);
    rs_lb_reset();
    rs_reader_stats_t sum;
    read_sum(&s, &rc, NULL, &sum);
    /* Nothing was read from the dead worker; no failover mid-read was needed. */
    assert_int_equal(sum.failovers, 0);
    assert_int_equal(sum.duplicates, 0);
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    assert_int_equal(c.delivered[RS_SMSG_READ_REPLY], 6);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

int main(void)
{
    lb_env_defaults();
    lb_alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planning_across_workers),
        cmocka_unit_test(test_read_ahead_at_a_step),
        cmocka_unit_test(test_winning_attempt),
#ifdef RS_FAULT_INJECTION
        cmocka_unit_test(test_dedup_retry),
#endif
        cmocka_unit_test(test_failover_mid_read),
        cmocka_unit_test(test_primary_dead_before_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
