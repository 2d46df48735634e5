/*
 * Small partitions read together (reader/coalesce.c), over the loopback
 * backend: a session reading small remote partitions in order, or every
 * other one, reads most of them with an earlier partition's vectored read
 * (far fewer reads than partitions), and every record exactly once; a
 * reader still holding its bytes in the shared buffer keeps them intact
 * while other partitions are read (the buffer is not read into again
 * until it is let go).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/loopback/lb_util.h"
#include "tests/records.h"

#include "reader/reader_int.h"

#define MUST_MS 20000
#define PARTS   200
#define MAPS    2 /* two frames per partition: one can be checked after the other */

static uint64_t gets(void)
{
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    return c.gets;
}

/* MAPS maps of 4 records per partition pushed to one worker; a session on it (remote reads). */
static rs_reader_session_t *pushed(lb_shuffle_t *s, uint32_t id)
{
    memset(s, 0, sizeof(*s));
    lb_workers_start(s, 1, NULL);
    lb_shuffle_desc(s, id, PARTS, 1, MAPS, 4 * PARTS);
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, MUST_MS);
    for (uint32_t m = 0; m < MAPS; m++)
        assert_int_equal(lb_push_map(s, m, 0, &pc), RS_OK);
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, MUST_MS);
    uint32_t zero[MAPS] = {0};
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&s->desc, MAPS, zero, &rc, &sess), RS_OK);
    rs_lb_reset();
    lb_seen_clear(s);
    return sess;
}

static void done(lb_shuffle_t *s, rs_reader_session_t *sess)
{
    rs_reader_session_close(sess);
    lb_workers_stop(s);
    lb_shuffle_free(s);
}

/*
 * Reads partitions first, first + step, ... in one session: every record
 * once, and fewer reads than a quarter of the partitions (one per
 * partition without coalescing; the first few find nothing read ahead).
 */
static void read_at_step(uint32_t id, uint32_t first, uint32_t step)
{
    lb_shuffle_t s;
    rs_reader_session_t *sess = pushed(&s, id);
    uint32_t parts = 0, alone = 0;
    for (uint32_t p = first; p < PARTS; p += step) {
        rs_reader_stats_t st;
        lb_read_part_ok(&s, sess, p, &st);
        parts++;
        alone += st.reads > 0;
    }
    if (gets() > parts / 4)
        fail_msg("%u partitions at step %u took %llu reads (%u read their own)", parts, step,
                 (unsigned long long)gets(), alone);
    for (uint32_t i = 0; i < MAPS * s.n_records; i++)
        assert_int_equal(s.seen[i], i % s.n_records % PARTS % step == first ? 1 : 0);
    done(&s, sess);
}

static void test_coalesce_in_order(void **state)
{
    (void)state;
    read_at_step(71, 0, 1);
}

static void test_coalesce_every_other(void **state)
{
    (void)state;
    read_at_step(72, 1, 2);
}

/* The next record of r (partition part) checked; 1 at its end. */
static int next_checked(lb_shuffle_t *s, rs_reader_t *r, uint32_t part)
{
    trec_grid_t g = {s->n_maps, s->n_records, s->desc.n_partitions, s->seen};
    const void *rec;
    uint32_t len;
    assert_int_equal(rs_reader_next(r, &rec, &len), RS_OK);
    if (rec == NULL)
        return 1;
    int line = trec_check(&g, part, rec, len);
    if (line != 0)
        fail_msg("partition %u: record check at line %d failed", part, line);
    return 0;
}

#define HOLD_AT   10 /* the partition whose reader holds its span meanwhile */
#define HOLD_UPTO 60 /* read while it does */

static void test_coalesce_held(void **state)
{
    (void)state;
    lb_shuffle_t s;
    rs_reader_session_t *sess = pushed(&s, 73);
    for (uint32_t p = 0; p < HOLD_AT; p++)
        lb_read_part_ok(&s, sess, p, NULL);
    rs_reader_t *held;
    assert_int_equal(rs_reader_open_in(sess, HOLD_AT, &held), RS_OK);
    assert_int_equal(next_checked(&s, held, HOLD_AT), 0);
    assert_true(held->co_held); /* its batches lie in the session's buffer */
    /* Later partitions: those read with it are taken, the rest read alone, nothing refills. */
    uint64_t before = gets();
    for (uint32_t p = HOLD_AT + 1; p < HOLD_UPTO; p++)
        lb_read_part_ok(&s, sess, p, NULL);
    /* Its other map's frame and records, still intact. */
    uint32_t n = 1;
    while (!next_checked(&s, held, HOLD_AT))
        n++;
    assert_int_equal(n, MAPS * 4);
    assert_true(gets() - before >= (HOLD_UPTO - HOLD_AT - 1) - RS_READ_AHEAD);
    rs_reader_close(held);
    assert_int_equal(sess->co.users, 0);
    /* Let go: read together again. */
    before = gets();
    for (uint32_t p = HOLD_UPTO; p < PARTS; p++)
        lb_read_part_ok(&s, sess, p, NULL);
    if (gets() - before > (PARTS - HOLD_UPTO) / 4)
        fail_msg("%u partitions after the hold took %llu reads", PARTS - HOLD_UPTO,
                 (unsigned long long)(gets() - before));
    assert_true(lb_all_seen(&s));
    done(&s, sess);
}

int main(void)
{
    lb_env_defaults();
    lb_alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coalesce_in_order),
        cmocka_unit_test(test_coalesce_every_other),
        cmocka_unit_test(test_coalesce_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
