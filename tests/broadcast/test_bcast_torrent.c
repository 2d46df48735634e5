/*
 * Torrent behaviour with real reader processes: readers serve each other
 * (the source serves fewer block reads than blocks x readers), threads of
 * one process share per-block fetches, and corrupt or killed holders do not
 * stop readers from getting correct bytes.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "bt_agent.h"

#define NBLOCKS 12

static void expect_ok(const bt_result_t *r, uint64_t size, uint64_t hash)
{
    assert_int_equal(r->status, RS_OK);
    assert_int_equal(r->len, size);
    assert_true(r->hash == hash);
}

/* 8 reader processes at once: holders serve most blocks, the counters say so. */
static void test_eight_readers(void **state)
{
    (void)state;
    enum { N = 8 };
    const uint64_t size = (uint64_t)NBLOCKS * BT_BLOCK;
    const uint64_t hash = bt_expected_hash(size, 7);
    bt_agent_t src, rd[N];
    uint8_t desc[RS_BCAST_DESC_MAX];
    size_t desc_len;

    bt_spawn(&src, NULL, RS_BCAST_TORRENT);
    for (int i = 0; i < N; i++)
        bt_spawn(&rd[i], NULL, RS_BCAST_TORRENT);
    bt_publish(&src, size, 7, desc, &desc_len);
    for (int i = 0; i < N; i++)
        bt_get_start(&rd[i], desc, desc_len);

    uint64_t source_reads = 0, holder_reads = 0;
    for (int i = 0; i < N; i++) {
        bt_result_t r;
        bt_get_wait(&rd[i], &r);
        expect_ok(&r, size, hash);
        assert_int_equal(r.stats.reads,
                         NBLOCKS + r.stats.read_failures + r.stats.checksum_failures);
        source_reads += r.stats.source_reads;
        holder_reads += r.stats.holder_reads;
    }
    printf("# %d readers x %d blocks: source served %llu block reads, holders %llu\n", N, NBLOCKS,
           (unsigned long long)source_reads, (unsigned long long)holder_reads);
    assert_true(source_reads < (uint64_t)NBLOCKS * N);
    assert_true(holder_reads > 0);

    /* The source's own count, from the readers' final announcements, agrees. */
    rs_bcast_stats_t s;
    bt_wait_announces(&src, 0, N);
    bt_stats(&src, 0, &s);
    assert_int_equal(s.requests_served, N);
    assert_int_equal(s.reported_source_reads, source_reads);
    assert_int_equal(s.reported_holder_reads, holder_reads);

    for (int i = 0; i < N; i++)
        bt_quit(&rd[i]);
    bt_quit(&src);
}

/* 8 threads of one process get the same object: every block is read once. */
static void test_threads_share_blocks(void **state)
{
    (void)state;
    const uint64_t size = (uint64_t)NBLOCKS * BT_BLOCK + 1000;
    const uint64_t hash = bt_expected_hash(size, 8);
    bt_agent_t src, rd;
    uint8_t desc[RS_BCAST_DESC_MAX];
    size_t desc_len;
    bt_result_t r;

    bt_spawn(&src, NULL, RS_BCAST_TORRENT);
    bt_spawn(&rd, NULL, RS_BCAST_TORRENT);
    bt_publish(&src, size, 8, desc, &desc_len);
    bt_threads_start(&rd, 8, desc, desc_len);
    bt_get_wait(&rd, &r);
    expect_ok(&r, size, hash);
    assert_int_equal(r.nthreads, 8);
    assert_int_equal(r.stats.gets, 8);
    assert_int_equal(r.stats.joins, 7);
    assert_int_equal(r.stats.reads, NBLOCKS + 1); /* each block once */
    assert_int_equal(r.stats.checksum_failures + r.stats.read_failures, 0);

    rs_bcast_stats_t s;
    bt_stats(&src, 0, &s);
    assert_int_equal(s.requests_served, 1); /* one manifest for the whole process */

    /* An inline object too: one round trip for all eight. */
    bt_publish(&src, 2000, 9, desc, &desc_len);
    bt_threads_start(&rd, 8, desc, desc_len);
    bt_get_wait(&rd, &r);
    expect_ok(&r, 2000, bt_expected_hash(2000, 9));
    assert_int_equal(r.nthreads, 8);
    assert_int_equal(r.stats.round_trips, 1);
    assert_int_equal(r.stats.reads, 0);

    /* An embedded one: none. */
    bt_publish(&src, 1000, 10, desc, &desc_len);
    bt_threads_start(&rd, 8, desc, desc_len);
    bt_get_wait(&rd, &r);
    expect_ok(&r, 1000, bt_expected_hash(1000, 10));
    assert_int_equal(r.stats.round_trips, 0);
    assert_int_equal(r.stats.reads, 0);

    bt_quit(&rd);
    bt_quit(&src);
}

#ifdef RS_FAULT_INJECTION
/* A holder whose copy is corrupt: readers detect it and fetch elsewhere. */
static void test_corrupt_holder(void **state)
{
    (void)state;
    const uint64_t size = (uint64_t)NBLOCKS * BT_BLOCK;
    const uint64_t hash = bt_expected_hash(size, 10);
    bt_agent_t src, bad, rd[2];
    uint8_t desc[RS_BCAST_DESC_MAX];
    size_t desc_len;
    bt_result_t r;

    bt_spawn(&src, NULL, RS_BCAST_TORRENT);
    bt_spawn(&bad, "corrupt", RS_BCAST_TORRENT);
    for (int i = 0; i < 2; i++)
        bt_spawn(&rd[i], NULL, RS_BCAST_TORRENT);
    bt_publish(&src, size, 10, desc, &desc_len);

    /* The faulty node fetches first and announces a complete (corrupted) copy. */
    bt_get_start(&bad, desc, desc_len);
    bt_get_wait(&bad, &r);
    assert_int_equal(r.status, RS_OK);
    bt_wait_announces(&src, 0, 1);

    uint64_t failures = 0;
    for (int i = 0; i < 2; i++) {
        bt_get_start(&rd[i], desc, desc_len);
        bt_get_wait(&rd[i], &r);
        expect_ok(&r, size, hash);
        failures += r.stats.checksum_failures;
    }
    /* Holders are preferred to the source, so the corrupt copy was tried and caught. */
    assert_true(failures >= 1);

    for (int i = 0; i < 2; i++)
        bt_quit(&rd[i]);
    bt_quit(&bad);
    bt_quit(&src);
}
#endif

#ifdef RS_FAULT_INJECTION
/* A holder killed while readers fetch: they finish from the source or other holders. */
static void test_killed_holder(void **state)
{
    (void)state;
    const uint64_t size = (uint64_t)NBLOCKS * BT_BLOCK;
    const uint64_t hash = bt_expected_hash(size, 11);
    bt_agent_t src, victim, rd[3];
    uint8_t desc[RS_BCAST_DESC_MAX];
    size_t desc_len;
    bt_result_t r;

    bt_spawn(&src, NULL, RS_BCAST_TORRENT);
    bt_spawn(&victim, NULL, RS_BCAST_TORRENT);
    for (int i = 0; i < 3; i++) /* slow readers: the victim dies while they read from it */
        bt_spawn(&rd[i], i < 2 ? "slow" : NULL, RS_BCAST_TORRENT);
    bt_publish(&src, size, 11, desc, &desc_len);
    bt_get_start(&victim, desc, desc_len);
    bt_get_wait(&victim, &r);
    expect_ok(&r, size, hash);
    bt_wait_announces(&src, 0, 1);

    /* Readers start with the victim listed as a complete holder; it dies under them. */
    bt_get_start(&rd[0], desc, desc_len);
    bt_get_start(&rd[1], desc, desc_len);
    usleep(60 * 1000);
    bt_kill(&victim);
    bt_get_start(&rd[2], desc, desc_len); /* this one surely meets a dead holder */
    uint64_t failures = 0, from_holders = 0;
    for (int i = 0; i < 3; i++) {
        bt_get_wait(&rd[i], &r);
        expect_ok(&r, size, hash);
        failures += r.stats.read_failures;
        from_holders += r.stats.holder_reads;
    }
    printf("# killed holder: %llu failed reads, %llu holder reads\n", (unsigned long long)failures,
           (unsigned long long)from_holders);
    assert_true(from_holders > 0); /* the victim (or another reader) did serve blocks */
    for (int i = 0; i < 3; i++)
        bt_quit(&rd[i]);
    bt_quit(&src);
}
#endif

/* Reads in flight to one peer never exceed reads_per_ep. */
static void test_read_cap(void **state)
{
    (void)state;
    const uint64_t size = (uint64_t)NBLOCKS * BT_BLOCK;
    bt_agent_t src, one, three;
    uint8_t desc[RS_BCAST_DESC_MAX];
    size_t desc_len;
    bt_result_t r;
    rs_bcast_stats_t s;

    bt_spawn(&src, NULL, RS_BCAST_TORRENT);
    bt_spawn_env(&one, NULL, RS_BCAST_SOURCE, "RSHUFFLE_BCAST_READS_PER_EP=1");
    bt_spawn_env(&three, NULL, RS_BCAST_SOURCE, "RSHUFFLE_BCAST_READS_PER_EP=3");
    bt_publish(&src, size, 12, desc, &desc_len);
    bt_get_start(&one, desc, desc_len);
    bt_get_wait(&one, &r);
    expect_ok(&r, size, bt_expected_hash(size, 12));
    bt_stats(&one, -1, &s);
    assert_int_equal(s.peer_reads_max, 1);
    assert_int_equal(s.reads, NBLOCKS);
    bt_get_start(&three, desc, desc_len);
    bt_get_wait(&three, &r);
    expect_ok(&r, size, bt_expected_hash(size, 12));
    bt_stats(&three, -1, &s);
    assert_int_equal(s.peer_reads_max, 3); /* the cap, reached: the first round posts 3 */
    bt_quit(&three);
    bt_quit(&one);
    bt_quit(&src);
}

int main(void)
{
    bt_alarm(80);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eight_readers),  cmocka_unit_test(test_threads_share_blocks),
#ifdef RS_FAULT_INJECTION /* corrupt and slow nodes come from the library's hooks */
        cmocka_unit_test(test_corrupt_holder), cmocka_unit_test(test_killed_holder),
#endif
        cmocka_unit_test(test_read_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
