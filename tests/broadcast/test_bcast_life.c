/*
 * Destroy and failure: a destroyed object gives RS_ERR_DESTROYED (never
 * stale bytes) to readers that still hold its descriptor, references held
 * across the destroy stay valid until released, and a get whose source is
 * gone with no holder left fails with a clear error in bounded time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "bt_agent.h"

static void test_destroyed(void **state)
{
    (void)state;
    bt_agent_t src, holder, late;
    uint8_t big[RS_BCAST_DESC_MAX], small[RS_BCAST_DESC_MAX], one[RS_BCAST_DESC_MAX];
    size_t big_len, small_len, one_len;
    bt_result_t r;
    const uint64_t size = 3 * BT_BLOCK + 5;

    bt_spawn(&src, NULL, RS_BCAST_TORRENT);
    bt_spawn(&holder, NULL, RS_BCAST_TORRENT);
    bt_spawn(&late, NULL, RS_BCAST_TORRENT);
    bt_publish(&src, size, 21, big, &big_len);
    bt_publish(&src, 100, 22, small, &small_len);
    bt_publish(&src, BT_BLOCK / 2, 23, one, &one_len); /* one block: read directly */

    /* The holder fetches both and keeps its references across the destroy. */
    bt_get_start(&holder, big, big_len);
    bt_get_wait(&holder, &r);
    assert_int_equal(r.status, RS_OK);
    bt_get_start(&holder, small, small_len);
    bt_get_wait(&holder, &r);
    assert_int_equal(r.status, RS_OK);
    bt_wait_announces(&src, 0, 1);

    bt_destroy(&src, 0);
    bt_destroy(&src, 1);
    bt_destroy(&src, 2);
    usleep(300 * 1000); /* the destroy notices arrive */

    /* A direct read of a destroyed one-block object fails its checksum: then the source says so. */
    bt_get_start(&late, one, one_len);
    bt_get_wait(&late, &r);
    assert_int_equal(r.status, RS_ERR_DESTROYED);

    /* A reader that never had them: the source answers RS_ERR_DESTROYED. */
    bt_get_start(&late, big, big_len);
    bt_get_wait(&late, &r);
    assert_int_equal(r.status, RS_ERR_DESTROYED);
    bt_get_start(&late, small, small_len);
    bt_get_wait(&late, &r);
    assert_int_equal(r.status, RS_ERR_DESTROYED);

    /* The holder's references still read the right bytes until released... */
    bt_rehash(&holder, &r);
    assert_true(r.hash == bt_expected_hash(100, 22));
    /* ...but a new get of a destroyed object fails, from its copy or the source alike, */
    bt_get_start(&holder, big, big_len);
    bt_get_wait(&holder, &r);
    assert_int_equal(r.status, RS_ERR_DESTROYED);
    /* inline objects included (their readers hear of the destroy too). */
    bt_get_start(&holder, small, small_len);
    bt_get_wait(&holder, &r);
    assert_int_equal(r.status, RS_ERR_DESTROYED);
    bt_release(&holder);
    bt_get_start(&holder, big, big_len);
    bt_get_wait(&holder, &r);
    assert_int_equal(r.status, RS_ERR_DESTROYED);
    bt_get_start(&holder, small, small_len);
    bt_get_wait(&holder, &r);
    assert_int_equal(r.status, RS_ERR_DESTROYED);

    /* The holder dropped its copy (and the source its memory) after the grace. */
    rs_bcast_stats_t s;
    bt_stats(&holder, -1, &s);
    assert_int_equal(s.gets, 2);

    bt_quit(&late);
    bt_quit(&holder);
    bt_quit(&src);
}

static void test_source_gone(void **state)
{
    (void)state;
    bt_agent_t src, rd;
    uint8_t desc[RS_BCAST_DESC_MAX], desc2[RS_BCAST_DESC_MAX];
    size_t desc_len, desc2_len;
    bt_result_t r;

    bt_spawn(&src, NULL, RS_BCAST_TORRENT);
    bt_spawn(&rd, NULL, RS_BCAST_TORRENT);
    bt_publish(&src, 5 * BT_BLOCK, 31, desc, &desc_len);
    bt_publish(&src, 10, 32, desc2, &desc2_len);
    bt_kill(&src);

    /* Nobody else holds it: a clear error, well within the get timeout. */
    bt_get_start(&rd, desc, desc_len);
    bt_get_wait(&rd, &r);
    assert_true(r.status == RS_ERR_REFUSED || r.status == RS_ERR_UNREACHABLE ||
                r.status == RS_ERR_TIMEOUT);
    assert_true(r.ms < 10000);
    bt_get_start(&rd, desc2, desc2_len);
    bt_get_wait(&rd, &r);
    assert_true(r.status == RS_ERR_REFUSED || r.status == RS_ERR_UNREACHABLE ||
                r.status == RS_ERR_TIMEOUT);
    assert_true(r.ms < 10000);
    bt_quit(&rd);
}

#ifdef RS_FAULT_INJECTION
/*
 * The source dies while a (slow) reader is half-way through a fetch and no
 * other holder exists: a clear error, well within the get timeout.
 */
static void test_source_dies_mid_fetch(void **state)
{
    (void)state;
    bt_agent_t src, rd, peek;
    uint8_t desc[RS_BCAST_DESC_MAX];
    size_t desc_len;
    bt_result_t r;
    rs_bcast_stats_t s;
    const uint64_t size = 16 * BT_BLOCK; /* 16 reads, 2 at a time, 20 ms each: >= 160 ms */

    bt_spawn(&src, NULL, RS_BCAST_TORRENT);
    bt_spawn(&rd, "slow", RS_BCAST_SOURCE);
    bt_spawn(&peek, NULL, RS_BCAST_TORRENT);
    bt_publish(&src, size, 41, desc, &desc_len);
    bt_get_start(&rd, desc, desc_len);
    /* Kill once the manifest went out (the fetch is under way), long before it can end. */
    for (int i = 0; i < 500; i++) {
        bt_stats(&src, 0, &s);
        if (s.requests_served >= 1)
            break;
        usleep(1000);
    }
    assert_int_equal(s.requests_served, 1);
    usleep(40 * 1000);
    bt_kill(&src);
    bt_get_wait(&rd, &r);
    printf("# source killed mid-fetch: %s after %llu ms\n", rs_strerror(r.status),
           (unsigned long long)r.ms);
    assert_true(r.status == RS_ERR_UNREACHABLE || r.status == RS_ERR_TIMEOUT);
    assert_true(r.ms < 10000);
    bt_quit(&peek);
    bt_quit(&rd);
}
#endif

/* The source's own process reads its objects like any reader (a driver running tasks). */
static void test_self_get(void **state)
{
    (void)state;
    bt_agent_t src;
    uint8_t desc[RS_BCAST_DESC_MAX];
    size_t desc_len;
    bt_result_t r;
    static const uint64_t sizes[] = {10, 4 * BT_BLOCK + 3};

    bt_spawn(&src, NULL, RS_BCAST_TORRENT);
    for (int i = 0; i < 2; i++) {
        bt_publish(&src, sizes[i], 50 + (uint64_t)i, desc, &desc_len);
        bt_get_start(&src, desc, desc_len);
        bt_get_wait(&src, &r);
        assert_int_equal(r.status, RS_OK);
        assert_true(r.hash == bt_expected_hash(sizes[i], 50 + (uint64_t)i));
    }
    bt_release(&src);
    bt_destroy(&src, 1);
    bt_get_start(&src, desc, desc_len);
    bt_get_wait(&src, &r);
    assert_int_equal(r.status, RS_ERR_DESTROYED);
    bt_quit(&src);
}

int main(void)
{
    bt_alarm(60);
    /*
     * Destroy and a dead source revoke only what descriptors do not carry:
     * no object is embedded here (every agent inherits this), on every
     * fabric, the Soft-RoCE guest's run included.
     */
    setenv("RSHUFFLE_BCAST_EMBED_MAX", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_destroyed),
        cmocka_unit_test(test_source_gone),
#ifdef RS_FAULT_INJECTION /* the slow reader comes from the library's hooks */
        cmocka_unit_test(test_source_dies_mid_fetch),
#endif
        cmocka_unit_test(test_self_get),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
