/*
 * Read-ahead's window (reader/ahead.c), over the loopback backend: a
 * session that opens partitions in order, or every other one, asks for
 * each partition once, and tops its window up in bursts (once half of it
 * was opened) rather than one request per open, so a worker wakes once for
 * many. Every record is read exactly once either way.
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

static uint64_t opens_sent(void)
{
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    return c.sent[RS_SMSG_READ_OPEN];
}

/*
 * Reads the partitions first, first + step, ... of a pushed shuffle in
 * one session; counts the READ_OPENs and the opens that sent any.
 */
static void read_at_step(uint32_t id, uint32_t first, uint32_t step)
{
    lb_shuffle_t s;
    memset(&s, 0, sizeof(s));
    lb_workers_start(&s, 1, NULL);
    lb_shuffle_desc(&s, id, PARTS, 1, 1, 4 * PARTS);
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, MUST_MS);
    assert_int_equal(lb_push_map(&s, 0, 0, &pc), RS_OK);
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, MUST_MS);
    uint32_t zero = 0;
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&s.desc, 1, &zero, &rc, &sess), RS_OK);
    rs_lb_reset();
    lb_seen_clear(&s);
    uint32_t opens = 0, sending = 0;
    for (uint32_t p = first; p < PARTS; p += step) {
        uint64_t before = opens_sent();
        lb_read_part_ok(&s, sess, p, NULL);
        opens++;
        sending += opens_sent() != before;
    }
    uint64_t sent = opens_sent();
    /* Each partition asked once (read ahead or by its open), none for nothing. */
    if (sent != opens)
        fail_msg("%u opens at step %u sent %llu READ_OPENs", opens, step, (unsigned long long)sent);
    /*
     * The first opens find no pattern and ask for their own; then a burst
     * per half window. One request per open would make every open send.
     */
    uint32_t bursts = 2 + opens / (RS_READ_AHEAD / 2 - 1) + 1;
    if (sending > bursts)
        fail_msg("%u of %u opens at step %u sent READ_OPENs, not at most %u", sending, opens, step,
                 bursts);
    rs_reader_session_close(sess);
    lb_workers_stop(&s);
    /* every record of the partitions read, once */
    for (uint32_t i = 0; i < s.n_records; i++)
        assert_int_equal(s.seen[i], i % PARTS % step == first ? 1 : 0);
    lb_shuffle_free(&s);
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

int main(void)
{
    lb_env_defaults();
    lb_alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ahead_in_order),
        cmocka_unit_test(test_ahead_every_other),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
