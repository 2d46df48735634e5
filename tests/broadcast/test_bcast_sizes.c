/*
 * Objects of every interesting size reach every reader byte for byte, and
 * the inline / one-block costs hold: at most the threshold is one round trip
 * and no read; one block is one round trip and one read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "bt_agent.h"

static void get_and_check(bt_agent_t *reader, const uint8_t *desc, size_t desc_len, uint64_t size,
                          uint64_t seed, bt_result_t *r)
{
    bt_get_start(reader, desc, desc_len);
    bt_get_wait(reader, r);
    assert_int_equal(r->status, RS_OK);
    assert_int_equal(r->len, size);
    assert_true(r->hash == bt_expected_hash(size, seed));
}

static void test_sizes(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {
        0,
        1,
        BT_EMBED,
        BT_EMBED + 1,
        BT_INLINE - 1,
        BT_INLINE,
        BT_INLINE + 1,
        BT_BLOCK,
        BT_BLOCK * 10 + BT_BLOCK / 2,
    };
    bt_agent_t src, r1, r2;
    bt_spawn(&src, NULL, RS_BCAST_TORRENT);
    bt_spawn(&r1, NULL, RS_BCAST_TORRENT);
    bt_spawn(&r2, NULL, RS_BCAST_SOURCE);

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint8_t desc[RS_BCAST_DESC_MAX];
        size_t desc_len;
        bt_result_t a, b;
        uint64_t size = sizes[i], seed = 1000 + i;
        bt_publish(&src, size, seed, desc, &desc_len);
        get_and_check(&r1, desc, desc_len, size, seed, &a);
        get_and_check(&r2, desc, desc_len, size, seed, &b);
        uint64_t nblocks = (size + BT_BLOCK - 1) / BT_BLOCK;
        if (size > 0 && size <= BT_EMBED) {
            /* Embedded: the descriptor carries the bytes; no message at all. */
            assert_int_equal(a.stats.round_trips, 0);
            assert_int_equal(a.stats.reads, 0);
            assert_int_equal(a.stats.inline_gets, 1);
            assert_int_equal(b.stats.round_trips, 0);
            assert_int_equal(b.stats.reads, 0);
        } else if (size <= BT_INLINE) {
            /* Inline: the manifest request's reply carries the bytes. */
            assert_int_equal(a.stats.round_trips, 1);
            assert_int_equal(a.stats.reads, 0);
            assert_int_equal(a.stats.inline_gets, 1);
            assert_int_equal(b.stats.round_trips, 1);
            assert_int_equal(b.stats.reads, 0);
        } else if (nblocks == 1) {
            assert_int_equal(a.stats.round_trips, 1);
            assert_int_equal(a.stats.reads, 1);
            assert_int_equal(b.stats.round_trips, 1);
            assert_int_equal(b.stats.reads, 1);
        } else {
            assert_int_equal(a.stats.reads, nblocks);
            assert_int_equal(b.stats.reads, nblocks);
            assert_int_equal(b.stats.source_reads, nblocks);
        }
        assert_int_equal(a.stats.checksum_failures + b.stats.checksum_failures, 0);
        bt_release(&r1);
        bt_release(&r2);
        bt_destroy(&src, (uint32_t)i);
    }
    bt_quit(&r2);
    bt_quit(&r1);
    bt_quit(&src);
}

int main(void)
{
    bt_alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
