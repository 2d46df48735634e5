/*
 * A session's messages to a worker, batched (reader/ahead.c, closes.c),
 * over the loopback backend: a session that opens partitions in order, or
 * every other one, asks for each partition once, and tops its read-ahead
 * window up in bursts (once half of it was opened) rather than one request
 * per open, so a worker wakes once for many; its READ_CLOSEs are held back
 * (at most RS_READ_CLOSE_BATCH), sent once the oldest is due, and all by
 * session close. Every record is read exactly once either way.
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

#include "reader/internal.h"
#include "shuffle/proto.h"

#define MUST_MS 20000
#define PARTS   200
/* Past RS_READ_CLOSE_HOLD_MS on a coarse clock (ticks of up to 10 ms). */
#define HELD_DUE_MS 30

static uint64_t sent(unsigned type)
{
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    return c.sent[type];
}

static uint64_t opens_sent(void)
{
    return sent(RS_SMSG_READ_OPEN);
}

/* One map of 4 records per partition pushed to one worker; a session on it. */
static rs_reader_session_t *pushed(lb_shuffle_t *s, uint32_t id)
{
    memset(s, 0, sizeof(*s));
    lb_workers_start(s, 1, NULL);
    lb_shuffle_desc(s, id, PARTS, 1, 1, 4 * PARTS);
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, MUST_MS);
    assert_int_equal(lb_push_map(s, 0, 0, &pc), RS_OK);
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, MUST_MS);
    uint32_t zero = 0;
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&s->desc, 1, &zero, &rc, &sess), RS_OK);
    rs_lb_reset();
    lb_seen_clear(s);
    return sess;
}

static void stop(lb_shuffle_t *s)
{
    lb_workers_stop(s);
    lb_shuffle_free(s);
}

static void done(lb_shuffle_t *s, rs_reader_session_t *sess)
{
    rs_reader_session_close(sess);
    stop(s);
}

/*
 * Reads the partitions first, first + step, ... of a pushed shuffle in
 * one session; counts the READ_OPENs and the opens that sent any.
 */
static void read_at_step(uint32_t id, uint32_t first, uint32_t step)
{
    lb_shuffle_t s;
    rs_reader_session_t *sess = pushed(&s, id);
    uint32_t opens = 0, sending = 0;
    for (uint32_t p = first; p < PARTS; p += step) {
        uint64_t before = opens_sent();
        lb_read_part_ok(&s, sess, p, NULL);
        opens++;
        sending += opens_sent() != before;
    }
    uint64_t asked = opens_sent();
    /* Each partition asked once (read ahead or by its open), none for nothing. */
    if (asked != opens)
        fail_msg("%u opens at step %u sent %llu READ_OPENs", opens, step,
                 (unsigned long long)asked);
    /*
     * The first opens find no pattern and ask for their own; then a burst
     * per half window. One request per open would make every open send.
     */
    uint32_t bursts = 2 + opens / (RS_READ_AHEAD / 2 - 1) + 1;
    if (sending > bursts)
        fail_msg("%u of %u opens at step %u sent READ_OPENs, not at most %u", sending, opens, step,
                 bursts);
    /* every record of the partitions read, once */
    for (uint32_t i = 0; i < s.n_records; i++)
        assert_int_equal(s.seen[i], i % PARTS % step == first ? 1 : 0);
    done(&s, sess);
}

static void test_ahead_in_order(void **state)
{
    (void)state;
    read_at_step(61, 0, 1);
}

static void test_ahead_every_other(void **state)
{
    (void)state;
    read_at_step(62, 1, 2);
}

/*
 * Closes held back: never more than a batch of snapshots closed and not
 * said so; those held when the session pauses go at its next call once
 * due (an open that sends nothing else); every one said by session close.
 */
#define PAUSE_AT 41 /* an open the read-ahead's window asks nothing at (checked) */
static void test_closes_held(void **state)
{
    (void)state;
    lb_shuffle_t s;
    rs_reader_session_t *sess = pushed(&s, 63);
    uint32_t none_held = 0;
    for (uint32_t p = 0; p < PAUSE_AT; p++) {
        lb_read_part_ok(&s, sess, p, NULL);
        uint64_t held = (p + 1) - sent(RS_SMSG_READ_CLOSE);
        if (held > RS_READ_CLOSE_BATCH)
            fail_msg("after %u partitions %llu closes held, over %u", p + 1,
                     (unsigned long long)held, RS_READ_CLOSE_BATCH);
        none_held += held == 0;
    }
    /* The close just made is held, unless it filled a batch (sent one by one: never held). */
    if (none_held > PAUSE_AT / RS_READ_CLOSE_BATCH)
        fail_msg("%u of %u closes went out at once", none_held, PAUSE_AT);
    lb_sleep_ms(HELD_DUE_MS);
    uint64_t opens = opens_sent();
    rs_reader_t *r;
    assert_int_equal(rs_reader_open_in(sess, PAUSE_AT, &r), RS_OK);
    if (opens_sent() != opens)
        fail_msg("the open of partition %u asked ahead: pick another", PAUSE_AT);
    assert_int_equal(sent(RS_SMSG_READ_CLOSE), PAUSE_AT); /* due, and sent by the open */
    rs_reader_close(r);
    for (uint32_t p = PAUSE_AT; p < PARTS; p++)
        lb_read_part_ok(&s, sess, p, NULL);
    assert_true(lb_all_seen(&s));
    rs_reader_session_close(sess);
    assert_int_equal(sent(RS_SMSG_READ_CLOSE), PARTS + 1); /* each snapshot closed once */
    assert_int_equal(opens_sent(), PARTS + 1);
    stop(&s);
}

int main(void)
{
    lb_env_defaults();
    lb_alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ahead_in_order),
        cmocka_unit_test(test_ahead_every_other),
        cmocka_unit_test(test_closes_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
