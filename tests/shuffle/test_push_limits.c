/*
 * The pusher at its limits, against a real rshuffled child: records of
 * megabytes with every codec, the record size limit, 100,000 partitions of
 * tiny records (and the reader's read-ahead that makes reading them cheap),
 * a hung (SIGSTOPped) worker, and stats after a failed close.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdio.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>

#include "rshuffled_child.h"

static pid_t worker_pid;
static char worker_addr[160];
static const char *addrs[1];

static void start_worker(const char *mem)
{
    const char *const args[] = {"--mem", mem, NULL};
    worker_pid = rsd_start(args, NULL, worker_addr, sizeof(worker_addr));
    addrs[0] = worker_addr;
}

static int teardown(void **state)
{
    (void)state;
    if (worker_pid > 0)
        kill(worker_pid, SIGCONT);
    rsd_kill(&worker_pid);
    return 0;
}

static rs_shuffle_desc_t desc(uint32_t id, uint32_t parts)
{
    return (rs_shuffle_desc_t){
        .shuffle_id = id, .n_partitions = parts, .n_workers = 1, .workers = addrs};
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Byte k of record i: cheap to make and to check, different per record. */
static uint8_t big_byte(uint32_t i, size_t k)
{
    uint64_t x = (k >> 6) * 0x9e3779b97f4a7c15ull + i;
    return (uint8_t)((x >> 29) ^ k ^ i);
}

static void big_record(uint32_t i, uint8_t *rec, size_t len)
{
    for (size_t k = 0; k < len; k++)
        rec[k] = big_byte(i, k);
    memcpy(rec, &i, sizeof(i));
}

/*
 * n records of len bytes, record i into partition i % parts, pushed with
 * codec through 64 KiB buffers, then read back and checked byte by byte.
 */
static void big_round_trip(uint32_t id, rs_codec_t codec, uint32_t parts, uint32_t n, size_t len)
{
    rs_shuffle_desc_t d = desc(id, parts);
    rs_pusher_config_t c;
    rs_pusher_config_defaults(&c);
    c.codec = codec;
    c.buf_len = 64 << 10;
    c.wait_ms = 20000;
    rs_pusher_t *p;
    uint8_t *rec = malloc(len), *want = malloc(len);
    assert_non_null(rec);
    assert_non_null(want);
    assert_int_equal(rs_pusher_open(&d, 0, 0, &c, &p), RS_OK);
    for (uint32_t i = 0; i < n; i++) {
        big_record(i, rec, len);
        assert_int_equal(rs_pusher_append(p, i % parts, rec, (uint32_t)len), RS_OK);
    }
    rs_pusher_stats_t st;
    assert_int_equal(rs_pusher_close(p, &st), RS_OK);
    assert_int_equal(st.records, n);
    rs_pusher_destroy(p);

    uint32_t attempt = 0;
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&d, 1, &attempt, NULL, &sess), RS_OK);
    uint32_t seen = 0;
    for (uint32_t part = 0; part < parts; part++) {
        rs_reader_t *r;
        assert_int_equal(rs_reader_open_in(sess, part, &r), RS_OK);
        const void *rv;
        uint32_t rl;
        rs_status_t s;
        while ((s = rs_reader_next(r, &rv, &rl)) == RS_OK && rv != NULL) {
            uint32_t i;
            assert_int_equal(rl, len);
            memcpy(&i, rv, sizeof(i));
            assert_true(i < n && i % parts == part);
            big_record(i, want, len);
            assert_memory_equal(rv, want, len);
            seen++;
        }
        assert_int_equal(s, RS_OK);
        rs_reader_close(r);
    }
    assert_int_equal(seen, n);
    rs_reader_session_close(sess);
    free(rec);
    free(want);
}

/*
 * 8 MiB records in 4 partitions (and 12 MiB in one) with lz4 and snappy:
 * the compressed output used to need slab room that the writer's own
 * partition buffers held, and the pusher deadlocked until wait_ms.
 */
static void test_large_records(void **state)
{
    (void)state;
    alarm(240);
    start_worker("256M");
    static const rs_codec_t codecs[] = {RS_CODEC_LZ4, RS_CODEC_SNAPPY, RS_CODEC_NONE};
    for (uint32_t k = 0; k < 3; k++) {
        double t0 = now_s();
        big_round_trip(10 + 2 * k, codecs[k], 4, 8, 8u << 20);
        big_round_trip(11 + 2 * k, codecs[k], 1, 3, 12u << 20);
        printf("# large records, %s: %.2f s\n", rs_codec_name(codecs[k]), now_s() - t0);
    }
    /* The largest record a pusher takes, compressed: it round-trips too. */
    big_round_trip(20, RS_CODEC_LZ4, 1, 2, RS_PUSH_RECORD_MAX);
}

/* One byte past the limit is refused by append itself, before anything is pushed. */
static void test_record_limit(void **state)
{
    (void)state;
    alarm(60);
    start_worker("64M");
    rs_shuffle_desc_t d = desc(30, 2);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 0, 0, NULL, &p), RS_OK);
    uint8_t *rec = calloc(1, (size_t)RS_PUSH_RECORD_MAX + 1);
    assert_non_null(rec);
    assert_int_equal(rs_pusher_append(p, 0, rec, RS_PUSH_RECORD_MAX + 1), RS_ERR_INVALID);
    assert_int_equal(rs_pusher_append(p, 1, rec, 10), RS_OK); /* the pusher goes on */
    rs_pusher_stats_t st;
    assert_int_equal(rs_pusher_close(p, &st), RS_OK);
    assert_int_equal(st.records, 1);
    rs_pusher_destroy(p);
    free(rec);
    /* A record whose buffer cannot fit the pool is refused up front as well. */
    rs_pusher_config_t c;
    rs_pusher_config_defaults(&c);
    c.buf_len = 64 << 10;
    c.pool_bytes = 1 << 20;
    assert_int_equal(rs_pusher_open(&d, 1, 0, &c, &p), RS_OK);
    rec = calloc(1, 1 << 20);
    assert_non_null(rec);
    assert_int_equal(rs_pusher_append(p, 0, rec, 1 << 20), RS_ERR_INVALID);
    assert_int_equal(rs_pusher_close(p, NULL), RS_OK);
    rs_pusher_destroy(p);
    free(rec);
}

/* ------------------------------------------------------ many partitions */

enum { MANY_P = 100000, MANY_RECORDS = 300000, MANY_MAPS = 2 };

static uint32_t many_part(uint32_t map, uint32_t i)
{
    uint64_t x = ((uint64_t)map << 32 | i) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (uint32_t)((x ^ (x >> 32)) % MANY_P);
}

/* Record i of a map: 0 or 1 byte. */
static uint32_t many_len(uint32_t map, uint32_t i)
{
    return (i + map) & 1;
}

static uint8_t many_byte(uint32_t map, uint32_t i)
{
    return (uint8_t)(i * 31u + map * 7u + 1u);
}

typedef struct many_map {
    uint32_t map;
    rs_status_t status;
    rs_pusher_stats_t stats;
} many_map_t;

static void *many_push(void *arg)
{
    many_map_t *m = arg;
    rs_shuffle_desc_t d = desc(40, MANY_P);
    rs_pusher_t *p;
    m->status = rs_pusher_open(&d, m->map, 0, NULL, &p);
    if (m->status != RS_OK)
        return NULL;
    for (uint32_t i = m->map; i < MANY_RECORDS && m->status == RS_OK; i += MANY_MAPS) {
        uint8_t b = many_byte(m->map, i);
        m->status = rs_pusher_append(p, many_part(m->map, i), &b, many_len(m->map, i));
    }
    rs_status_t s = rs_pusher_close(p, &m->stats);
    if (m->status == RS_OK)
        m->status = s;
    rs_pusher_destroy(p);
    return NULL;
}

/*
 * 100,000 partitions of 0-1 byte records, two mappers at once, one worker:
 * everything reads back (per partition: record count, byte sum). Prints the
 * time; the bar (docs/shuffle.md) is judged from that line.
 */
static void test_many_partitions(void **state)
{
    (void)state;
    alarm(110);
    start_worker("256M");
    uint32_t *count = calloc(MANY_P, sizeof(*count));
    uint64_t *sum = calloc(MANY_P, sizeof(*sum));
    assert_non_null(count);
    assert_non_null(sum);
    for (uint32_t i = 0; i < MANY_RECORDS; i++) {
        uint32_t map = i % MANY_MAPS, part = many_part(map, i);
        count[part]++;
        sum[part] += many_len(map, i) ? many_byte(map, i) + 1u : 0u;
    }
    double t0 = now_s();
    many_map_t maps[MANY_MAPS];
    pthread_t th[MANY_MAPS];
    for (uint32_t m = 0; m < MANY_MAPS; m++) {
        maps[m] = (many_map_t){.map = m};
        assert_int_equal(pthread_create(&th[m], NULL, many_push, &maps[m]), 0);
    }
    for (uint32_t m = 0; m < MANY_MAPS; m++) {
        assert_int_equal(pthread_join(th[m], NULL), 0);
        assert_int_equal(maps[m].status, RS_OK);
    }
    double t1 = now_s();
    rs_shuffle_desc_t d = desc(40, MANY_P);
    uint32_t attempts[MANY_MAPS] = {0};
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&d, MANY_MAPS, attempts, NULL, &sess), RS_OK);
    uint64_t total = 0;
    for (uint32_t part = 0; part < MANY_P; part++) {
        rs_reader_t *r;
        assert_int_equal(rs_reader_open_in(sess, part, &r), RS_OK);
        const void *rv;
        uint32_t rl;
        rs_status_t s;
        uint32_t n = 0;
        uint64_t bytes = 0;
        while ((s = rs_reader_next(r, &rv, &rl)) == RS_OK && rv != NULL) {
            assert_true(rl <= 1);
            bytes += rl ? *(const uint8_t *)rv + 1u : 0u;
            n++;
        }
        assert_int_equal(s, RS_OK);
        assert_int_equal(n, count[part]);
        assert_int_equal(bytes, sum[part]);
        total += n;
        rs_reader_close(r);
    }
    rs_reader_session_close(sess);
    double t2 = now_s();
    assert_int_equal(total, MANY_RECORDS);
    printf("# %u partitions, %u records, %u mappers: push %.2f s (batches %llu+%llu, grant "
           "requests %llu+%llu), read %.2f s, total %.2f s\n",
           MANY_P, MANY_RECORDS, MANY_MAPS, t1 - t0, (unsigned long long)maps[0].stats.batches,
           (unsigned long long)maps[1].stats.batches,
           (unsigned long long)maps[0].stats.grant_requests,
           (unsigned long long)maps[1].stats.grant_requests, t2 - t1, t2 - t0);
    free(count);
    free(sum);
}

/* ------------------------------------------------------------- read-ahead */

static rs_status_t count_partition(rs_reader_session_t *sess, uint32_t part, uint64_t *n)
{
    rs_reader_t *r;
    rs_status_t s = rs_reader_open_in(sess, part, &r);
    if (s != RS_OK)
        return s;
    const void *rv;
    uint32_t rl;
    *n = 0;
    while ((s = rs_reader_next(r, &rv, &rl)) == RS_OK && rv != NULL)
        (*n)++;
    rs_reader_close(r);
    return s;
}

/*
 * A session opening partitions in order asks for the next ones ahead; a
 * snapshot taken ahead before a map committed is asked again at its open
 * instead of failing it, and snapshots never opened are released.
 */
static void test_read_ahead_stale(void **state)
{
    (void)state;
    alarm(60);
    start_worker("64M");
    enum { P = 8, N = 800 };
    rs_shuffle_desc_t d = desc(70, P);
    rs_pusher_t *p0, *p1;
    uint8_t rec[32] = {0};
    assert_int_equal(rs_pusher_open(&d, 0, 0, NULL, &p0), RS_OK);
    assert_int_equal(rs_pusher_open(&d, 1, 0, NULL, &p1), RS_OK);
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(rs_pusher_append(p0, i % P, rec, sizeof(rec)), RS_OK);
        assert_int_equal(rs_pusher_append(p1, i % P, rec, sizeof(rec)), RS_OK);
    }
    assert_int_equal(rs_pusher_close(p0, NULL), RS_OK);
    uint32_t attempts[2] = {0, 0};
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&d, 2, attempts, NULL, &sess), RS_OK);
    uint64_t n;
    /* Map 1 has not committed: in-order opens fail, and ask ahead for 3..7. */
    for (uint32_t part = 0; part < 3; part++)
        assert_int_equal(count_partition(sess, part, &n), RS_ERR_STATE);
    assert_int_equal(rs_pusher_close(p1, NULL), RS_OK);
    rs_pusher_destroy(p0);
    rs_pusher_destroy(p1);
    for (uint32_t part = 3; part < P; part++) {
        assert_int_equal(count_partition(sess, part, &n), RS_OK);
        assert_int_equal(n, 2 * N / P);
    }
    assert_int_equal(count_partition(sess, 0, &n), RS_OK);
    assert_int_equal(n, 2 * N / P);
    rs_reader_session_close(sess);
    /* In order again, then closed early: what was asked ahead is released, the worker unharmed. */
    assert_int_equal(rs_reader_session_open(&d, 2, attempts, NULL, &sess), RS_OK);
    for (uint32_t part = 0; part < 3; part++)
        assert_int_equal(count_partition(sess, part, &n), RS_OK);
    rs_reader_session_close(sess);
    rs_shuffle_desc_t dd = desc(70, P);
    assert_int_equal(rs_shuffle_drop(&dd, NULL), RS_OK);
}

/* ------------------------------------------------------------ hung worker */

/*
 * A worker stopped (SIGSTOP) and never continued: its connection stays up,
 * so only the pusher's own bound on an unanswered worker can end the wait.
 * It must be the peer timeout, not wait_ms (30 s here).
 */
static void test_hung_worker(void **state)
{
    (void)state;
    alarm(90);
    start_worker("64M");
    rs_config_t tc;
    assert_int_equal(rs_config_init(&tc), RS_OK);
    tc.peer_timeout_ms = 2000;
    rs_pusher_config_t c;
    rs_pusher_config_defaults(&c);
    c.transport = &tc;
    c.buf_len = 16 << 10;
    c.pool_bytes = 1 << 20;
    c.wait_ms = 30000;
    rs_shuffle_desc_t d = desc(50, 4);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 0, 0, &c, &p), RS_OK);
    uint8_t rec[100] = {0};
    for (int i = 0; i < 1000; i++)
        assert_int_equal(rs_pusher_append(p, (uint32_t)i % 4, rec, sizeof(rec)), RS_OK);
    assert_int_equal(kill(worker_pid, SIGSTOP), 0);
    double t0 = now_s();
    rs_status_t s = RS_OK;
    for (int i = 0; i < 1000000 && s == RS_OK; i++)
        s = rs_pusher_append(p, (uint32_t)i % 4, rec, sizeof(rec));
    rs_status_t cs = rs_pusher_close(p, NULL);
    double secs = now_s() - t0;
    printf("# hung worker: append %s, close %s after %.2f s\n", rs_strerror(s), rs_strerror(cs),
           secs);
    assert_true(cs == RS_ERR_TIMEOUT || cs == RS_ERR_UNREACHABLE);
    assert_true(secs < 2.0 + 3.0); /* the peer timeout plus a small bound */
    rs_pusher_destroy(p);
}

/* --------------------------------------------------- stats after a failure */

/* A close that fails still reports what was appended and pushed. */
static void test_stats_after_failed_close(void **state)
{
    (void)state;
    alarm(60);
    start_worker("64M");
    rs_config_t tc;
    assert_int_equal(rs_config_init(&tc), RS_OK);
    tc.peer_timeout_ms = 1000;
    rs_pusher_config_t c;
    rs_pusher_config_defaults(&c);
    c.transport = &tc;
    c.buf_len = 16 << 10;
    c.pool_bytes = 1 << 20;
    c.wait_ms = 5000;
    rs_shuffle_desc_t d = desc(60, 2);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 0, 0, &c, &p), RS_OK);
    uint8_t rec[100] = {0};
    uint64_t appended = 0;
    for (int i = 0; i < 2000; i++, appended++)
        assert_int_equal(rs_pusher_append(p, (uint32_t)i % 2, rec, sizeof(rec)), RS_OK);
    /* Some batches reach the worker before it dies. */
    rs_status_t s = RS_OK;
    for (int i = 0; i < 2000 && s == RS_OK; i++) {
        s = rs_pusher_append(p, (uint32_t)i % 2, rec, sizeof(rec));
        appended += s == RS_OK;
    }
    usleep(200000);
    kill(worker_pid, SIGKILL);
    waitpid(worker_pid, NULL, 0);
    worker_pid = 0;
    rs_pusher_stats_t st;
    memset(&st, 0, sizeof(st));
    assert_int_not_equal(rs_pusher_close(p, &st), RS_OK);
    assert_int_equal(st.records, appended);
    assert_true(st.batches > 0);
    assert_true(st.raw_bytes > 0 && st.bytes > 0);
    assert_true(st.grant_requests > 0);
    rs_pusher_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stats_after_failed_close, teardown),
        cmocka_unit_test_teardown(test_record_limit, teardown),
        cmocka_unit_test_teardown(test_hung_worker, teardown),
        cmocka_unit_test_teardown(test_large_records, teardown),
        cmocka_unit_test_teardown(test_read_ahead_stale, teardown),
        cmocka_unit_test_teardown(test_many_partitions, teardown),
    };
    const char *only = getenv("RS_TEST_ONLY"); /* e.g. test_many_partitions, for measuring */
    if (only != NULL)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
