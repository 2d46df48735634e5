/*
 * The direct read of a one-block object, over the loopback backend: a read
 * still in flight when its getter gives up keeps its remote key and its
 * region until it completes, and a getter that joined the fetch waits for
 * it before it asks for the object again (reads held by the backend).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/broadcast.h>

#include "tests/loopback/lb_util.h"

#define OBJ_LEN    (1u << 20) /* above inline_max, one block: read directly */
#define TIMEOUT_MS 2000       /* a get's; B has half of it left when A gives up */

typedef struct get_arg {
    rs_bcast_node_t *node;
    const void *desc;
    size_t desc_len;
    rs_bcast_ref_t *ref;
    rs_status_t status;
} get_arg_t;

static void *get_main(void *arg)
{
    get_arg_t *g = arg;
    g->status = rs_bcast_get(g->node, g->desc, g->desc_len, &g->ref);
    return NULL;
}

static void test_direct_read_outlives_getter(void **state)
{
    (void)state;
    rs_bcast_config_t sc, gc;
    rs_bcast_config_defaults(&sc);
    gc = sc;
    gc.cache_bytes = 0; /* a key nobody uses is destroyed at once */
    gc.timeout_ms = TIMEOUT_MS;
    rs_bcast_node_t *src = NULL, *getter = NULL;
    assert_int_equal(rs_bcast_node_create(NULL, &sc, &src), RS_OK);
    assert_int_equal(rs_bcast_node_create(NULL, &gc, &getter), RS_OK);

    uint8_t *data = malloc(OBJ_LEN);
    assert_non_null(data);
    for (size_t i = 0; i < OBJ_LEN; i++)
        data[i] = (uint8_t)(i * 131 + 7);
    rs_bcast_t *bc = NULL;
    assert_int_equal(rs_bcast_publish(src, data, OBJ_LEN, &bc), RS_OK);
    uint8_t desc[RS_BCAST_DESC_MAX];
    size_t desc_len = 0;
    assert_int_equal(rs_bcast_descriptor(bc, desc, sizeof(desc), &desc_len), RS_OK);

    /*
     * A reads directly (held); B joins A's fetch a second later. A gives up
     * at its deadline with the read in flight; B, with a second left, must
     * not ask for the object again until that read is done.
     */
    rs_lb_counts_t c;
    rs_lb_reset();
    rs_lb_hold_gets();
    get_arg_t a = {.node = getter, .desc = desc, .desc_len = desc_len};
    get_arg_t b = a;
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, get_main, &a), 0);
    lb_sleep_ms(TIMEOUT_MS / 2);
    assert_int_equal(pthread_create(&tb, NULL, get_main, &b), 0);
    assert_int_equal(pthread_join(ta, NULL), 0);
    assert_int_equal(a.status, RS_ERR_TIMEOUT);
    assert_null(a.ref);
    lb_sleep_ms(50);
    rs_lb_counts(&c);
    assert_int_equal(c.gets, 0); /* the read is still queued... */
    if (c.stale_rkeys != 0)      /* ... and its key must outlive it */
        fail_msg("the getter released the key of a read in flight (%llu stale)",
                 (unsigned long long)c.stale_rkeys);
    rs_bcast_stats_t st;
    rs_bcast_node_stats(getter, &st);
    assert_int_equal(st.round_trips, 0); /* B waits for the read, asks nothing yet */

    rs_lb_release_gets();
    assert_int_equal(pthread_join(tb, NULL), 0);
    assert_int_equal(b.status, RS_OK);
    assert_int_equal(rs_bcast_ref_len(b.ref), OBJ_LEN);
    assert_memory_equal(rs_bcast_ref_data(b.ref), data, OBJ_LEN);
    rs_lb_counts(&c);
    assert_true(c.gets >= 2); /* A's read, then B's */
    assert_int_equal(c.stale_rkeys, 0);
    rs_bcast_release(b.ref);

    rs_bcast_destroy(bc);
    rs_bcast_node_destroy(getter);
    rs_bcast_node_destroy(src);
    free(data);
}

int main(void)
{
    /* A read held this long would cost its endpoint; the getter gives up long before. */
    setenv("RSHUFFLE_PEER_TIMEOUT_MS", "30000", 1);
    lb_env_defaults();
    lb_alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_read_outlives_getter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
