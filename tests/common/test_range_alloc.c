/*
 * common/range_alloc: random get/put sequences against a reference model
 * (one flag per alignment unit, first fit by a linear scan), coalescing,
 * alignment, exhaustion, and a fragmented region of 20,000 free ranges
 * (the tree stays shallow, the lowest fit is still the one taken).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/range_alloc.h"

/* ---------------------------------------------------------------- model */

typedef struct model {
    uint8_t *busy; /* one flag per unit */
    uint64_t units;
} model_t;

/* First fit: the start of the lowest maximal free run of at least k units. */
static int model_get(model_t *m, uint64_t k, uint64_t *at)
{
    for (uint64_t i = 0; i < m->units;) {
        if (m->busy[i]) {
            i++;
            continue;
        }
        uint64_t j = i;
        while (j < m->units && !m->busy[j])
            j++;
        if (j - i >= k) {
            memset(m->busy + i, 1, k);
            *at = i;
            return 1;
        }
        i = j;
    }
    return 0;
}

/* Free runs and the longest of them. */
static void model_runs(const model_t *m, size_t *n_p, uint64_t *longest_p)
{
    size_t n = 0;
    uint64_t longest = 0, run = 0;
    for (uint64_t i = 0; i <= m->units; i++) {
        if (i < m->units && !m->busy[i]) {
            run++;
            continue;
        }
        if (run > 0)
            n++;
        if (run > longest)
            longest = run;
        run = 0;
    }
    *n_p = n;
    *longest_p = longest;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

typedef struct held {
    uint64_t off, len; /* len as asked, not rounded */
} held_t;

/* ops random gets and puts on a region of units * align bytes, checked step by step. */
static void run_random(uint64_t seed, uint64_t units, uint64_t align, uint64_t max_units, int ops)
{
    rs_range_alloc_t ra;
    assert_int_equal(rs_range_alloc_init(&ra, units * align, align), RS_OK);
    model_t m = {.busy = calloc(units, 1), .units = units};
    held_t *held = calloc(units, sizeof(*held));
    assert_non_null(m.busy);
    assert_non_null(held);
    size_t n_held = 0;
    uint64_t used = 0, s = seed;
    for (int op = 0; op < ops; op++) {
        /* Phases that lean to gets, then to puts: the region fills and empties. */
        int get_bias = (op / 500) % 2 == 0 ? 70 : 35;
        if (n_held == 0 || (int)(rnd(&s) % 100) < get_bias) {
            uint64_t len = 1 + rnd(&s) % (max_units * align); /* rounded up by the allocator */
            uint64_t k = (len + align - 1) / align, want, off = UINT64_MAX;
            int fits = model_get(&m, k, &want);
            rs_status_t st = rs_range_get(&ra, len, &off);
            if (!fits) {
                assert_int_equal(st, RS_ERR_NO_SPACE);
                assert_true(off == UINT64_MAX); /* left alone */
            } else {
                assert_int_equal(st, RS_OK);
                assert_true(off == want * align); /* the same lowest fit */
                held[n_held++] = (held_t){off, len};
                used += k * align;
            }
        } else {
            size_t i = rnd(&s) % n_held;
            held_t h = held[i];
            held[i] = held[--n_held];
            rs_range_put(&ra, h.off, h.len);
            uint64_t k = (h.len + align - 1) / align;
            memset(m.busy + h.off / align, 0, k);
            used -= k * align;
        }
        size_t n;
        uint64_t longest;
        model_runs(&m, &n, &longest);
        assert_true(ra.used == used);
        assert_true(ra.n_free == n);
        assert_true(rs_range_largest(&ra) == longest * align);
        if (op % 64 == 0)
            rs_range_check(&ra);
    }
    while (n_held > 0) {
        n_held--;
        rs_range_put(&ra, held[n_held].off, held[n_held].len);
    }
    rs_range_check(&ra);
    assert_true(ra.used == 0 && ra.n_free == 1 && rs_range_largest(&ra) == units * align);
    free(held);
    free(m.busy);
    rs_range_alloc_cleanup(&ra);
}

static void test_random_against_model(void **state)
{
    (void)state;
    run_random(1, 64, 64, 8, 20000);       /* small: often exhausted */
    run_random(2, 1024, 64, 16, 20000);    /* many holes */
    run_random(3, 4096, 8, 64, 10000);     /* mixed sizes */
    run_random(4, 300, 1, 20, 20000);      /* unit alignment */
    run_random(5, 1 << 14, 4096, 4, 8000); /* tens of free ranges growing the node array */
}

/* ----------------------------------------------------------- coalescing */

static void test_coalescing(void **state)
{
    (void)state;
    rs_range_alloc_t ra;
    assert_int_equal(rs_range_alloc_init(&ra, 1024, 64), RS_OK);
    uint64_t o[8];
    for (int i = 0; i < 8; i++) {
        assert_int_equal(rs_range_get(&ra, 128, &o[i]), RS_OK);
        assert_true(o[i] == (uint64_t)i * 128);
    }
    assert_true(ra.n_free == 0 && rs_range_largest(&ra) == 0);
    rs_range_put(&ra, o[1], 128); /* alone */
    rs_range_put(&ra, o[5], 128); /* alone */
    assert_true(ra.n_free == 2 && rs_range_largest(&ra) == 128);
    rs_range_put(&ra, o[2], 128); /* joins the one below */
    assert_true(ra.n_free == 2 && rs_range_largest(&ra) == 256);
    rs_range_put(&ra, o[4], 128); /* joins the one above */
    assert_true(ra.n_free == 2 && rs_range_largest(&ra) == 256);
    rs_range_put(&ra, o[3], 128); /* bridges both */
    assert_true(ra.n_free == 1 && rs_range_largest(&ra) == 640);
    rs_range_check(&ra);
    uint64_t off;
    assert_int_equal(rs_range_get(&ra, 640, &off), RS_OK);
    assert_true(off == 128);
    rs_range_put(&ra, off, 640);
    rs_range_put(&ra, o[0], 128);
    rs_range_put(&ra, o[7], 128);
    rs_range_put(&ra, o[6], 128);
    assert_true(ra.n_free == 1 && rs_range_largest(&ra) == 1024 && ra.used == 0);
    rs_range_check(&ra);
    rs_range_alloc_cleanup(&ra);
}

/* ------------------------------------------------------------ alignment */

static void test_alignment(void **state)
{
    (void)state;
    rs_range_alloc_t ra;
    assert_int_equal(rs_range_alloc_init(&ra, 1024, 0), RS_ERR_INVALID);
    assert_int_equal(rs_range_alloc_init(&ra, 1024, 48), RS_ERR_INVALID);
    assert_int_equal(rs_range_alloc_init(&ra, 1000, 64), RS_OK);
    assert_true(ra.size == 960); /* the unaligned tail is never handed out */
    uint64_t off = 7, a, b;
    assert_int_equal(rs_range_get(&ra, 0, &off), RS_ERR_INVALID);
    assert_true(off == 7);
    assert_true(rs_range_round(&ra, 1) == 64 && rs_range_round(&ra, 64) == 64);
    assert_int_equal(rs_range_get(&ra, 1, &a), RS_OK);
    assert_int_equal(rs_range_get(&ra, 65, &b), RS_OK);
    assert_true(a == 0 && b == 64 && ra.used == 192);
    rs_range_put(&ra, a, 1); /* the same len as asked: rounded the same */
    assert_int_equal(rs_range_get(&ra, 64, &a), RS_OK);
    assert_true(a == 0);
    assert_int_equal(rs_range_get(&ra, 960 - 192 + 1, &off), RS_ERR_NO_SPACE);
    assert_int_equal(rs_range_get(&ra, 960 - 192, &off), RS_OK);
    assert_true(off == 192 && ra.used == 960 && ra.n_free == 0);
    rs_range_check(&ra);
    rs_range_alloc_cleanup(&ra);

    assert_int_equal(rs_range_alloc_init(&ra, 32, 64), RS_OK); /* less than one unit */
    assert_true(ra.size == 0 && rs_range_largest(&ra) == 0);
    assert_int_equal(rs_range_get(&ra, 1, &off), RS_ERR_NO_SPACE);
    rs_range_check(&ra);
    rs_range_alloc_cleanup(&ra);
}

/* ----------------------------------------------------------- exhaustion */

static void test_exhaustion(void **state)
{
    (void)state;
    rs_range_alloc_t ra;
    assert_int_equal(rs_range_alloc_init(&ra, 64 * 64, 64), RS_OK);
    uint64_t o[64], off = 12345;
    for (int i = 0; i < 64; i++)
        assert_int_equal(rs_range_get(&ra, 64, &o[i]), RS_OK);
    assert_int_equal(rs_range_get(&ra, 64, &off), RS_ERR_NO_SPACE);
    assert_true(off == 12345);
    assert_true(rs_range_largest(&ra) == 0 && ra.n_free == 0 && ra.used == 64 * 64);
    rs_range_check(&ra);
    /* Back in a scattered order: every second first, then the rest. */
    for (int i = 0; i < 64; i += 2)
        rs_range_put(&ra, o[i], 64);
    assert_true(ra.n_free == 32 && rs_range_largest(&ra) == 64);
    assert_int_equal(rs_range_get(&ra, 128, &off), RS_ERR_NO_SPACE);
    rs_range_check(&ra);
    for (int i = 63; i > 0; i -= 2)
        rs_range_put(&ra, o[i], 64);
    assert_true(ra.n_free == 1 && rs_range_largest(&ra) == 64 * 64 && ra.used == 0);
    rs_range_check(&ra);
    rs_range_alloc_cleanup(&ra);
}

/* ------------------------------------------------------------- fragments */

#define FRAGS 20000

static void test_fragmented(void **state)
{
    (void)state;
    rs_range_alloc_t ra;
    uint64_t total = 2 * FRAGS * 64 + (1 << 20);
    assert_int_equal(rs_range_alloc_init(&ra, total, 64), RS_OK);
    uint64_t *o = calloc(2 * FRAGS, sizeof(*o));
    assert_non_null(o);
    for (int i = 0; i < 2 * FRAGS; i++) {
        assert_int_equal(rs_range_get(&ra, 64, &o[i]), RS_OK);
        assert_true(o[i] == (uint64_t)i * 64);
    }
    for (int i = 0; i < 2 * FRAGS; i += 2)
        rs_range_put(&ra, o[i], 64);
    assert_true(ra.n_free == FRAGS + 1);
    /* A treap of n nodes is about 3 log2(n) deep at worst in practice: 45 here. */
    unsigned h = rs_range_check(&ra);
    assert_true(h >= 15 && h <= 80);
    /* Too long for every hole: the tail; one unit: the lowest hole. */
    uint64_t off;
    assert_int_equal(rs_range_get(&ra, 128, &off), RS_OK);
    assert_true(off == 2 * FRAGS * 64);
    rs_range_put(&ra, off, 128);
    assert_int_equal(rs_range_get(&ra, 64, &off), RS_OK);
    assert_true(off == 0);
    rs_range_put(&ra, off, 64);
    for (int i = 1; i < 2 * FRAGS; i += 2)
        rs_range_put(&ra, o[i], 64);
    assert_true(ra.n_free == 1 && ra.used == 0 && rs_range_largest(&ra) == total);
    rs_range_check(&ra);
    free(o);
    rs_range_alloc_cleanup(&ra);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_against_model),
        cmocka_unit_test(test_coalescing),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_exhaustion),
        cmocka_unit_test(test_fragmented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
