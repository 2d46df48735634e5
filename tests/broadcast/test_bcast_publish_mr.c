/*
 * rs_bcast_publish_mr: an object in the caller's registered memory is served
 * from that memory (no copy), its errors, and an inline-sized one. One
 * process: the node reads its own objects, as a driver running tasks does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <rshuffle/broadcast.h>

#include "bt_agent.h"

#define BLOCK (64u << 10)

static rs_bcast_node_t *node_new(void)
{
    rs_bcast_config_t bc;
    rs_bcast_node_t *node;
    assert_int_equal(rs_bcast_config_init(&bc), RS_OK);
    bc.block_size = BLOCK;
    bc.inline_max = 4096;
    bc.timeout_ms = 10000;
    assert_int_equal(rs_bcast_node_create(NULL, &bc, &node), RS_OK);
    return node;
}

static void fill(uint8_t *p, size_t len, uint8_t seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(seed + i * 131u + (i >> 9));
}

/* Gets the object bc describes; returns the status, checks the bytes on success. */
static rs_status_t get_check(rs_bcast_node_t *node, rs_bcast_t *bc, const uint8_t *want, size_t len,
                             rs_bcast_stats_t *stats)
{
    uint8_t desc[RS_BCAST_DESC_MAX];
    size_t desc_len;
    rs_bcast_ref_t *ref;
    assert_int_equal(rs_bcast_descriptor(bc, desc, sizeof(desc), &desc_len), RS_OK);
    rs_status_t st = rs_bcast_get(node, desc, desc_len, &ref);
    if (st != RS_OK)
        return st;
    assert_int_equal(rs_bcast_ref_len(ref), len);
    assert_memory_equal(rs_bcast_ref_data(ref), want, len);
    rs_bcast_ref_stats(ref, stats);
    rs_bcast_release(ref);
    return RS_OK;
}

static void test_publish_mr(void **state)
{
    (void)state;
    rs_bcast_node_t *node = node_new();
    rs_ctx_t *ctx = rs_bcast_node_context(node);
    rs_mr_t *mr;
    rs_bcast_t *bc;
    rs_bcast_stats_t s;
    const size_t len = 3 * BLOCK + 5;
    uint8_t copy[3 * BLOCK + 5];

    assert_non_null(ctx);
    assert_int_equal(rs_mem_alloc(ctx, len + 100, RS_MEM_REMOTE_READ, &mr), RS_OK);
    uint8_t *p = rs_mr_addr(mr);
    fill(p, len, 7);
    memcpy(copy, p, len);

    /* Errors: nothing published. */
    assert_int_equal(rs_bcast_publish_mr(NULL, mr, len, &bc), RS_ERR_INVALID);
    assert_int_equal(rs_bcast_publish_mr(node, NULL, len, &bc), RS_ERR_INVALID);
    assert_int_equal(rs_bcast_publish_mr(node, mr, len, NULL), RS_ERR_INVALID);
    assert_int_equal(rs_bcast_publish_mr(node, mr, len + 101, &bc), RS_ERR_INVALID);

    /* Served as published: every block read once, the bytes identical. */
    assert_int_equal(rs_bcast_publish_mr(node, mr, len, &bc), RS_OK);
    assert_int_equal(get_check(node, bc, copy, len, &s), RS_OK);
    assert_int_equal(s.round_trips, 1);
    assert_int_equal(s.reads, 4);
    rs_bcast_destroy(bc);

    /*
     * No copy: the reader reads the caller's memory itself, so bytes changed
     * after publishing (which the caller must not do) fail their checksums.
     */
    assert_int_equal(rs_bcast_publish_mr(node, mr, len, &bc), RS_OK);
    p[BLOCK + 17] ^= 0x40;
    assert_int_equal(get_check(node, bc, copy, len, &s), RS_ERR_CHECKSUM);
    rs_bcast_destroy(bc);

    /* Inline-sized: copied into the reply, so the caller's bytes may change at once. */
    fill(p, 100, 3);
    memcpy(copy, p, 100);
    assert_int_equal(rs_bcast_publish_mr(node, mr, 100, &bc), RS_OK);
    memset(p, 0, 100);
    assert_int_equal(get_check(node, bc, copy, 100, &s), RS_OK);
    assert_int_equal(s.reads, 0);
    rs_bcast_destroy(bc);

    /* After destroy the node no longer touches mr: the caller frees it. */
    rs_mem_free(mr);
    rs_bcast_node_destroy(node);
}

int main(void)
{
    bt_alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_publish_mr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
