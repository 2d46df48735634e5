/*
 * rs_ctx_caps: what a backend does, asked of the context instead of its
 * name. UCX renews its receive queue where connections share it
 * (RSHUFFLE_UCX_QUEUE=shared; by default a peer of this host gets a queue
 * of its own, nothing to renew) and opens TCP listeners of its own; its rs_mem_alloc takes shared
 * memory only with RSHUFFLE_UCX_MEM=shared, where a region then lands in /dev/shm. Verbs (where a
 * device is active) has none of these.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/transport.h>
#include "transport/internal.h"

static rs_ctx_t *ucx_ctx(void)
{
    rs_config_t cfg;
    rs_config_defaults(&cfg);
    cfg.transport = RS_TRANSPORT_UCX;
    rs_ctx_t *ctx = NULL;
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
    return ctx;
}

static void test_caps_null(void **state)
{
    (void)state;
    assert_int_equal(rs_ctx_caps(NULL), 0);
    assert_int_equal(rs_ctx_renew_due(NULL), 0);
}

static void test_caps_ucx(void **state)
{
    (void)state;
    unsetenv("RSHUFFLE_UCX_MEM");
    setenv("RSHUFFLE_UCX_QUEUE", "shared", 1);
    rs_ctx_t *ctx = ucx_ctx();
    unsetenv("RSHUFFLE_UCX_QUEUE");
    unsigned caps = rs_ctx_caps(ctx);
    assert_true(caps & RS_CAP_RENEW);
    assert_true(caps & RS_CAP_OWN_LISTENERS);
    assert_false(caps & RS_CAP_MEM_SHM); /* our own mapping: private or a memfd */
    /* Nothing connected: no renewal due, and one does what RS_CAP_RENEW says. */
    assert_int_equal(rs_ctx_renew_due(ctx), 0);
    unsigned char a[RS_ADDR_BLOB_MAX], b[RS_ADDR_BLOB_MAX];
    size_t alen, blen;
    assert_int_equal(rs_ctx_address(ctx, a, sizeof(a), &alen), RS_OK);
    assert_int_equal(rs_ctx_renew(ctx), RS_OK);
    assert_int_equal(rs_ctx_address(ctx, b, sizeof(b), &blen), RS_OK);
    assert_false(alen == blen && memcmp(a, b, alen) == 0); /* a new queue, a new address */
    rs_ctx_destroy(ctx);
}

/* The default: this host's peers get queues of their own, so there is nothing to renew. */
static void test_caps_ucx_local_queues(void **state)
{
    (void)state;
    unsetenv("RSHUFFLE_UCX_QUEUE");
    rs_ctx_t *ctx = ucx_ctx();
    assert_false(rs_ctx_caps(ctx) & RS_CAP_RENEW);
    assert_true(rs_ctx_caps(ctx) & RS_CAP_OWN_LISTENERS);
    assert_int_equal(rs_ctx_renew_due(ctx), 0);
    unsigned char a[RS_ADDR_BLOB_MAX], b[RS_ADDR_BLOB_MAX];
    size_t alen, blen;
    assert_int_equal(rs_ctx_address(ctx, a, sizeof(a), &alen), RS_OK);
    assert_int_equal(rs_ctx_renew(ctx), RS_OK); /* nothing to renew */
    assert_int_equal(rs_ctx_address(ctx, b, sizeof(b), &blen), RS_OK);
    assert_true(alen == blen && memcmp(a, b, alen) == 0);
    rs_ctx_destroy(ctx);
}

static void test_caps_ucx_shared_memory(void **state)
{
    (void)state;
    setenv("RSHUFFLE_UCX_MEM", "shared", 1);
    rs_ctx_t *ctx = ucx_ctx();
    unsetenv("RSHUFFLE_UCX_MEM");
    assert_true(rs_ctx_caps(ctx) & RS_CAP_MEM_SHM);
    rs_ctx_destroy(ctx);
}

static void test_caps_verbs(void **state)
{
    (void)state;
    rs_config_t cfg;
    rs_config_defaults(&cfg);
    cfg.transport = RS_TRANSPORT_VERBS;
    rs_ctx_t *ctx = NULL;
    if (!rs_tp_rdma_device_active() || rs_ctx_create(&cfg, &ctx) != RS_OK) {
        skip(); /* no RDMA device here: the guests' suite runs this */
        return;
    }
    assert_int_equal(rs_ctx_caps(ctx), 0);
    assert_int_equal(rs_ctx_renew_due(ctx), 0);
    assert_int_equal(rs_ctx_renew(ctx), RS_OK); /* nothing to renew */
    rs_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps_null),
        cmocka_unit_test(test_caps_ucx),
        cmocka_unit_test(test_caps_ucx_local_queues),
        cmocka_unit_test(test_caps_ucx_shared_memory),
        cmocka_unit_test(test_caps_verbs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
