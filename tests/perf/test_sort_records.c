/*
 * perf/sort_records.h, what rs-sort and mpi-sort trust: the radix sort
 * agrees with qsort, the validation catches each kind of damage (order in
 * and across partitions, count, a flipped byte), zipf keys are skewed and
 * sampled splitters even them out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "perf/sort_records.h"

#define N 20000

static uint8_t *make(const sgen_t *g, uint64_t n, uint64_t *hash)
{
    uint8_t *r = malloc(n * REC_LEN);
    assert_non_null(r);
    *hash = 0;
    for (uint64_t i = 0; i < n; i++) {
        srec_make(g, i, r + i * REC_LEN);
        *hash += srec_hash(r + i * REC_LEN);
    }
    return r;
}

static void sort_both(const uint8_t *in, uint64_t n, uint8_t *a, uint8_t *b)
{
    sent_t *e = malloc(n * sizeof(*e)), *t = malloc(n * sizeof(*t));
    assert_non_null(e);
    assert_non_null(t);
    ssort_records(in, n, a, e, t, 0);
    ssort_records(in, n, b, e, t, 1);
    free(e);
    free(t);
}

static void test_radix_matches_qsort(void **state)
{
    (void)state;
    for (int z = 0; z < 2; z++) {
        sgen_t g;
        assert_int_equal(sgen_init(&g, 7, z ? 1.2 : 0), 0);
        uint64_t h;
        uint8_t *in = make(&g, N, &h), *a = malloc(N * REC_LEN), *b = malloc(N * REC_LEN);
        sort_both(in, N, a, b);
        /* stable radix vs unstable qsort: the keys agree, and both are valid */
        for (uint64_t i = 0; i < N; i++)
            assert_memory_equal(a + i * REC_LEN, b + i * REC_LEN, SREC_KEY);
        spsum_t ps;
        char msg[256];
        svalidate(a, N, &ps);
        assert_int_equal(sverdict(&ps, 1, N, h, msg, sizeof(msg)), 0);
        svalidate(b, N, &ps);
        assert_int_equal(sverdict(&ps, 1, N, h, msg, sizeof(msg)), 0);
        /* a record is a function of (seed, index) */
        uint8_t rec[REC_LEN];
        srec_make(&g, 123, rec);
        assert_memory_equal(rec, in + 123 * REC_LEN, REC_LEN);
        free(in), free(a), free(b);
        sgen_free(&g);
    }
}

/* Sorted output in P partitions by sampled splitters: sums per partition. */
static void partitioned(const sgen_t *g, uint8_t *in, uint64_t n, uint32_t parts, spsum_t *ps,
                        uint8_t **outs, uint64_t *counts)
{
    skey_t *samp = malloc(n * sizeof(*samp)), spl[64];
    uint64_t k = ssample(g, 0, n, samp, n / 10);
    ssplitters(samp, k, parts, spl);
    free(samp);
    for (uint32_t p = 0; p < parts; p++) {
        uint8_t *mine = malloc(n * REC_LEN);
        uint64_t m = 0;
        for (uint64_t i = 0; i < n; i++)
            if (spart(spl, parts, skey_get(in + i * REC_LEN)) == p)
                memcpy(mine + m++ * REC_LEN, in + i * REC_LEN, REC_LEN);
        outs[p] = malloc(m * REC_LEN + 1);
        uint8_t *b = malloc(m * REC_LEN + 1);
        sort_both(mine, m, outs[p], b);
        free(b);
        free(mine);
        svalidate(outs[p], m, &ps[p]);
        counts[p] = m;
    }
}

static void test_validation_catches(void **state)
{
    (void)state;
    sgen_t g;
    assert_int_equal(sgen_init(&g, 1, 0), 0);
    uint64_t h, counts[4];
    uint8_t *in = make(&g, N, &h), *outs[4];
    spsum_t ps[4], bad[4];
    char msg[256];
    partitioned(&g, in, N, 4, ps, outs, counts);
    assert_int_equal(sverdict(ps, 4, N, h, msg, sizeof(msg)), 0);
    assert_string_equal(msg, "valid");
    /* two neighbours swapped inside a partition */
    uint8_t tmp[REC_LEN];
    memcpy(tmp, outs[1], REC_LEN);
    memcpy(outs[1], outs[1] + REC_LEN, REC_LEN);
    memcpy(outs[1] + REC_LEN, tmp, REC_LEN);
    memcpy(bad, ps, sizeof(ps));
    svalidate(outs[1], counts[1], &bad[1]);
    assert_int_equal(sverdict(bad, 4, N, h, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "out of order"));
    /* partitions in the wrong order */
    memcpy(bad, ps, sizeof(ps));
    bad[1] = ps[2], bad[2] = ps[1];
    assert_int_equal(sverdict(bad, 4, N, h, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "below"));
    /* a record lost */
    memcpy(bad, ps, sizeof(ps));
    svalidate(outs[3], counts[3] - 1, &bad[3]);
    assert_int_equal(sverdict(bad, 4, N, h, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "records out"));
    /* one payload byte flipped: order and count hold, the checksum does not */
    memcpy(bad, ps, sizeof(ps));
    outs[2][5 * REC_LEN + 50] ^= 1;
    svalidate(outs[2], counts[2], &bad[2]);
    assert_int_equal(sverdict(bad, 4, N, h, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "checksum"));
    for (int p = 0; p < 4; p++)
        free(outs[p]);
    free(in);
    sgen_free(&g);
}

static void test_zipf_skew(void **state)
{
    (void)state;
    sgen_t g;
    assert_int_equal(sgen_init(&g, 3, 1.2), 0);
    uint64_t h, even[16] = {0}, sampled[16] = {0};
    uint8_t *in = make(&g, N, &h);
    skey_t fixed[15], spl[15], *samp = malloc(N * sizeof(*samp));
    for (int i = 0; i < 15; i++) /* fixed splitters: 16 equal ranges of the key space */
        fixed[i] = (skey_t){(uint64_t)(i + 1) << 60, 0};
    ssplitters(samp, ssample(&g, 0, N, samp, 2000), 16, spl);
    for (uint64_t i = 0; i < N; i++) {
        skey_t k = skey_get(in + i * REC_LEN);
        even[spart(fixed, 16, k)]++;
        sampled[spart(spl, 16, k)]++;
    }
    uint64_t max_even = 0, max_sampled = 0;
    for (int p = 0; p < 16; p++) {
        max_even = even[p] > max_even ? even[p] : max_even;
        max_sampled = sampled[p] > max_sampled ? sampled[p] : max_sampled;
    }
    printf("zipf:1.2, 16 partitions: largest %.2fx the mean with fixed splitters, %.2fx sampled\n",
           max_even * 16.0 / N, max_sampled * 16.0 / N);
    assert_true(max_even * 16.0 / N > 2.0);
    assert_true(max_sampled * 16.0 / N < 1.3);
    free(samp);
    free(in);
    sgen_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_radix_matches_qsort),
        cmocka_unit_test(test_validation_catches),
        cmocka_unit_test(test_zipf_skew),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
