/* The worker's storage without a transport: grants, settling, spill and staging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/range_alloc.h"
#include "worker/internal.h"

static void test_range_alloc(void **state)
{
    (void)state;
    rs_range_alloc_t ra;
    assert_int_equal(rs_range_alloc_init(&ra, 1024, 64), RS_OK);
    uint64_t a, b, c, d;
    assert_int_equal(rs_range_get(&ra, 100, &a), RS_OK); /* rounded to 128 */
    assert_int_equal(rs_range_get(&ra, 512, &b), RS_OK);
    assert_int_equal(rs_range_get(&ra, 384, &c), RS_OK);
    assert_int_equal(ra.used, 1024);
    assert_int_equal(rs_range_get(&ra, 64, &d), RS_ERR_NO_SPACE);
    rs_range_put(&ra, b, 512);
    rs_range_put(&ra, a, 100);
    assert_int_equal(rs_range_largest(&ra), 640); /* coalesced */
    rs_range_put(&ra, c, 384);
    assert_int_equal(rs_range_largest(&ra), 1024);
    assert_int_equal(ra.used, 0);
    rs_range_alloc_cleanup(&ra);
}

static void test_grants_spill_stage(void **state)
{
    (void)state;
    rs_worker_config_t cfg;
    rs_worker_config_defaults(&cfg);
    cfg.extent_min = 4096;
    cfg.extent_max = 16384;
    cfg.grant_bulk = 4096;
    cfg.high_water_pct = 50;
    uint64_t len = 64 << 10;
    uint8_t *arena = aligned_alloc(64, len);
    wstore_t st;
    assert_int_equal(wstore_init(&st, &cfg, arena, len), RS_OK);
    wshuffle_t *sh;
    assert_int_equal(wstore_attach(&st, 9, 2, &sh), RS_OK);
    assert_int_equal(wstore_attach(&st, 9, 3, &sh), RS_ERR_INVALID);
    /* Fill partition 0 with 1 KiB batches; each grant retires once written. */
    int n = 0;
    for (int round = 0; round < 40; round++) {
        wgrant_t *g;
        rs_status_t s = wstore_grant(&st, sh, 0, 1024, 1, &g);
        if (s != RS_OK) {
            assert_int_equal(s, RS_ERR_BACKPRESSURE);
            break;
        }
        for (uint64_t off = 0; off + 1024 <= g->len; off += 1024) {
            memset(arena + g->off + off, n, 1024);
            rs_snap_entry_t e = {.loc = g->off + off, .len = 1024, .seq = (uint64_t)n};
            assert_int_equal(wstore_add_entry(&st, g, &e), RS_OK);
            wstore_settle(&st, g, 1024);
            n++;
        }
        if (wstore_retire(&st, g, g->len))
            wstore_grant_free(&st, g);
        wstore_spill(&st, 0);
    }
    /* Over the high-water mark, settled extents went to the spill file. */
    assert_true(st.stats.spilled_bytes > 0);
    assert_true(n > 64);
    wsnap_t snap = {.sh = sh, .partition = 0};
    void *buf;
    size_t blen;
    assert_int_equal(wstore_snapshot(&st, sh, 0, &buf, &blen), RS_OK);
    rs_snap_hdr_t h;
    memcpy(&h, buf, sizeof(h));
    assert_int_equal(h.n_entries, (uint32_t)n);
    snap.entries = malloc(h.n_entries * sizeof(rs_snap_entry_t));
    memcpy(snap.entries, (uint8_t *)buf + sizeof(h), h.n_entries * sizeof(rs_snap_entry_t));
    snap.n_entries = h.n_entries;
    free(buf);
    sh->open_snaps++;
    /* Stage the first spilled batches and check their bytes came back. */
    assert_true(snap.entries[0].flags & RS_SNAP_SPILLED);
    assert_int_equal(wstore_stage(&st, &snap, 0, 4), RS_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(arena[snap.stage_off + (uint64_t)i * 1024], (uint8_t)snap.entries[i].seq);
    /* Past the snapshot: refused, nothing changed. */
    assert_int_equal(wstore_stage(&st, &snap, snap.n_entries, 1), RS_ERR_OUT_OF_RANGE);
    wstore_snap_close(&st, &snap);
    wstore_cleanup(&st);
    free(arena);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_alloc),
        cmocka_unit_test(test_grants_spill_stage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
