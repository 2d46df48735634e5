/*
 * The worker's storage without a transport: grants, settling, spill,
 * snapshots and staging. Deterministic versions of the races the
 * multi-process tests can only hit by chance: a spill forced while a reader
 * holds a snapshot, a snapshot opened when the arena is full, staging with
 * the data area full of pinned batches, grants under memory pressure, and
 * the hole a grant retired between others leaves, and merged writes'
 * frames kept where they landed or copied out of the staging reserve.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/range_alloc.h"
#include "worker/internal.h"

#define ARENA (256u << 10)

typedef struct fixture {
    rs_wk_store_t st;
    uint8_t *arena;
    wshuffle_t *sh;
    uint64_t seq;
} fixture_t;

static void fx_init(fixture_t *fx, uint32_t parts, uint32_t high_water_pct)
{
    rs_worker_config_t cfg;
    rs_worker_config_defaults(&cfg);
    cfg.extent_min = 4096;
    cfg.extent_max = 16384;
    cfg.grant_bulk = 4096;
    cfg.high_water_pct = high_water_pct;
    memset(fx, 0, sizeof(*fx));
    fx->arena = aligned_alloc(64, ARENA);
    assert_non_null(fx->arena);
    assert_int_equal(rs_wk_store_init(&fx->st, &cfg, fx->arena, ARENA), RS_OK);
    assert_int_equal(rs_wk_store_attach(&fx->st, 9, parts, &fx->sh), RS_OK);
}

static void fx_fini(fixture_t *fx)
{
    rs_wk_store_cleanup(&fx->st);
    free(fx->arena);
}

/* A byte pattern that names the batch: a wrong or stale range shows at once. */
static uint8_t pattern(uint64_t seq, uint32_t i)
{
    return (uint8_t)(seq * 31 + i * 7 + 1);
}

/* Fills one grant of partition p with 1 KiB batches, as a pusher would, and retires it. */
static rs_status_t fill_grant(fixture_t *fx, uint32_t p, uint32_t flags, uint32_t *batches)
{
    wgrant_t *g;
    rs_status_t s = rs_wk_store_grant(&fx->st, fx->sh, p, 1024, flags, &g);
    if (s != RS_OK)
        return s;
    for (uint64_t off = 0; off + 1024 <= g->len; off += 1024) {
        uint64_t seq = fx->seq++;
        for (uint32_t i = 0; i < 1024; i++)
            fx->arena[g->off + off + i] = pattern(seq, i);
        rs_snap_entry_t e = {.loc = g->off + off, .len = 1024, .seq = seq};
        assert_int_equal(rs_wk_store_add_entry(&fx->st, g, &e), RS_OK);
        rs_wk_store_settle(&fx->st, g, 1024);
        (*batches)++;
    }
    rs_wk_store_retire(&fx->st, g, g->len);
    assert_true(g->released);
    rs_wk_store_grant_free(&fx->st, g);
    return RS_OK;
}

static void check_bytes(const uint8_t *at, uint64_t seq)
{
    for (uint32_t i = 0; i < 1024; i++)
        if (at[i] != pattern(seq, i))
            fail_msg("batch %llu: byte %u is %u, expected %u", (unsigned long long)seq, i, at[i],
                     pattern(seq, i));
}

/* Where a snapshot's index is built when it goes inline (a reply's room). */
static uint8_t inline_buf[1 << 20];

/* The index built for snap decodes to its partition, commits and exactly its entries. */
static void check_index(const uint8_t *index, size_t len, const wsnap_t *snap)
{
    rs_snap_hdr_t h;
    assert_int_equal(rs_sproto_snap_decode(index, len, &h), RS_OK);
    assert_int_equal(h.n_entries, snap->n_entries);
    assert_int_equal(h.n_commits, 0); /* nothing committed in these tests */
    for (uint32_t i = 0; i < h.n_entries; i++) {
        rs_snap_entry_t e = rs_sproto_snap_entry_get(&h, i);
        assert_int_equal(e.loc, snap->entries[i].loc);
        assert_int_equal(e.len, snap->entries[i].len);
        assert_int_equal(e.flags, snap->entries[i].flags);
        assert_int_equal(e.seq, snap->entries[i].seq);
    }
}

/* Every in-memory entry of the snapshot still holds its batch at its arena offset. */
static void check_snapshot(fixture_t *fx, const wsnap_t *snap)
{
    for (uint32_t i = 0; i < snap->n_entries; i++)
        if (!(snap->entries[i].flags & RS_SNAP_SPILLED))
            check_bytes(fx->arena + snap->entries[i].loc, snap->entries[i].seq);
}

/* Stages every spilled entry of the snapshot (in as many loads as it takes) and checks them. */
static uint32_t stage_all(fixture_t *fx, wsnap_t *snap)
{
    uint32_t checked = 0;
    for (uint32_t i = 0; i < snap->n_entries;) {
        if (!(snap->entries[i].flags & RS_SNAP_SPILLED)) {
            i++;
            continue;
        }
        uint32_t n = 0;
        while (i + n < snap->n_entries && (snap->entries[i + n].flags & RS_SNAP_SPILLED) && n < 64)
            n++;
        uint32_t staged = 0;
        assert_int_equal(rs_wk_store_stage(&fx->st, snap, i, n, &staged), RS_OK);
        assert_true(staged >= 1 && staged <= n);
        for (uint32_t k = 0; k < staged; k++)
            check_bytes(fx->arena + snap->stage.off + (uint64_t)k * 1024, snap->entries[i + k].seq);
        checked += staged;
        i += staged;
    }
    return checked;
}

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
    fixture_t fx;
    fx_init(&fx, 2, 50);
    wshuffle_t *other;
    assert_int_equal(rs_wk_store_attach(&fx.st, 9, 3, &other), RS_ERR_INVALID);
    uint32_t n = 0;
    for (int round = 0; round < 80; round++) {
        assert_int_equal(fill_grant(&fx, 0, RS_GRANT_BULK, &n), RS_OK);
        rs_wk_store_spill(&fx.st, 0);
        assert_true(fx.st.ra.used <= fx.st.data_len);
    }
    /* Over the high-water mark, settled extents went to the spill file. */
    assert_true(fx.st.stats.spilled_bytes > 0);
    assert_true(fx.st.ra.used <= fx.st.high_water + fx.st.cfg.extent_max);
    wsnap_t *snap;
    size_t index_len;
    assert_int_equal(
        rs_wk_store_snap_open(&fx.st, fx.sh, 0, inline_buf, sizeof(inline_buf), &snap, &index_len),
        RS_OK);
    check_index(inline_buf, index_len, snap);
    assert_int_equal(snap->n_entries, n);
    assert_int_equal(snap->index.len, 0); /* small enough to go inline */
    check_snapshot(&fx, snap);
    assert_int_equal(stage_all(&fx, snap) * 1024ull, fx.st.stats.spilled_bytes);
    /* Past the snapshot, or a range with batches still in memory: refused. */
    uint32_t staged;
    assert_int_equal(rs_wk_store_stage(&fx.st, snap, snap->n_entries, 1, &staged),
                     RS_ERR_OUT_OF_RANGE);
    assert_int_equal(rs_wk_store_stage(&fx.st, snap, snap->n_entries - 1, 1, &staged),
                     RS_ERR_OUT_OF_RANGE);
    rs_wk_store_snap_close(&fx.st, snap);
    assert_int_equal(fx.st.open_room, 0);
    fx_fini(&fx);
}

/* A spill forced while a reader holds a snapshot leaves the snapshot's batches in place. */
static void test_spill_while_snapshot_open(void **state)
{
    (void)state;
    fixture_t fx;
    fx_init(&fx, 2, 90);
    uint32_t n0 = 0, n1 = 0;
    for (int i = 0; i < 20; i++) {
        assert_int_equal(fill_grant(&fx, 0, 0, &n0), RS_OK);
        assert_int_equal(fill_grant(&fx, 1, 0, &n1), RS_OK);
    }
    assert_int_equal(fx.st.stats.spilled_bytes, 0);
    wsnap_t *snap;
    size_t index_len;
    assert_int_equal(
        rs_wk_store_snap_open(&fx.st, fx.sh, 0, inline_buf, sizeof(inline_buf), &snap, &index_len),
        RS_OK);
    check_index(inline_buf, index_len, snap);
    assert_true(snap->n_pinned > 0);
    /* Everything spillable goes: partition 1 only. */
    rs_wk_store_spill(&fx.st, fx.st.data_len);
    assert_int_equal(fx.st.stats.spilled_bytes, (uint64_t)n1 * 1024);
    check_snapshot(&fx, snap);
    /* New allocations (other partitions' grants) never land on the pinned batches. */
    uint32_t more = 0;
    while (more * 1024ull < 2 * fx.st.data_len) {
        assert_int_equal(fill_grant(&fx, 1, 0, &more), RS_OK);
        rs_wk_store_spill(&fx.st, 0);
    }
    check_snapshot(&fx, snap);
    rs_wk_store_snap_close(&fx.st, snap);
    /* Closed: now partition 0 can go too. */
    rs_wk_store_spill(&fx.st, fx.st.data_len);
    assert_int_equal(fx.st.stats.spilled_bytes, (uint64_t)(n0 + n1 + more) * 1024);
    fx_fini(&fx);
}

/*
 * A snapshot index too big to go inline, opened when the arena is full:
 * making room for it spills other batches, never the ones it lists.
 */
static void test_snapshot_open_when_full(void **state)
{
    (void)state;
    fixture_t fx;
    fx_init(&fx, 2, 100);
    uint32_t n0 = 0, n1 = 0;
    while (fx.st.ra.used + 2 * fx.st.cfg.extent_max < fx.st.data_len) {
        assert_int_equal(fill_grant(&fx, 0, 0, &n0), RS_OK);
        assert_int_equal(fill_grant(&fx, 1, 0, &n1), RS_OK);
    }
    for (uint32_t p = 0; p < 2; p++) { /* current extents filled up: no tails to trim */
        extent_t *e;
        while ((e = fx.sh->parts[p].cur) != NULL && e->fill < e->len)
            assert_int_equal(fill_grant(&fx, p, 0, p == 0 ? &n0 : &n1), RS_OK);
    }
    assert_int_equal(fx.st.stats.spilled_bytes, 0);
    /* The staging reserve is taken too (other readers), so the index needs the data area. */
    uint64_t rsv_off, rsv_len = fx.st.rsv.size;
    assert_int_equal(rs_range_get(&fx.st.rsv, rsv_len, &rsv_off), RS_OK);
    uint64_t hold_off; /* and what little is left of the data area */
    while (rs_range_get(&fx.st.ra, 64, &hold_off) == RS_OK)
        ;
    wsnap_t *snap;
    size_t index_len;
    assert_int_equal(rs_wk_store_snap_open(&fx.st, fx.sh, 0, inline_buf, 0, &snap, &index_len),
                     RS_OK);
    assert_int_equal(snap->index.reserve, 0);
    assert_true(snap->index.len >= index_len);
    assert_int_equal(snap->index_bytes, index_len);
    check_index(fx.arena + snap->index.off, index_len, snap);
    /* Room was made by spilling partition 1 only. */
    assert_true(fx.st.stats.spilled_bytes > 0);
    for (uint32_t i = 0; i < snap->n_entries; i++)
        assert_false(snap->entries[i].flags & RS_SNAP_SPILLED);
    assert_int_equal(snap->n_entries, n0);
    check_snapshot(&fx, snap);
    rs_wk_store_snap_close(&fx.st, snap);
    fx_fini(&fx);
}

/* Staging works even when the data area is full of batches a snapshot pins. */
static void test_stage_when_pinned_full(void **state)
{
    (void)state;
    fixture_t fx;
    fx_init(&fx, 1, 30);
    uint32_t n = 0;
    for (int i = 0; i < 400; i++) {
        if (fill_grant(&fx, 0, 0, &n) != RS_OK)
            break;
        rs_wk_store_spill(&fx.st, 0);
    }
    uint64_t spilled = fx.st.stats.spilled_bytes;
    assert_true(spilled > 0);
    wsnap_t *snap;
    size_t index_len;
    assert_int_equal(
        rs_wk_store_snap_open(&fx.st, fx.sh, 0, inline_buf, sizeof(inline_buf), &snap, &index_len),
        RS_OK);
    check_index(inline_buf, index_len, snap);
    /* Fill the data area to the last byte with batches of a second snapshot-pinned shuffle. */
    wshuffle_t *sh2;
    assert_int_equal(rs_wk_store_attach(&fx.st, 10, 1, &sh2), RS_OK);
    wshuffle_t *keep = fx.sh;
    fx.sh = sh2;
    uint32_t n2 = 0;
    while (fx.st.ra.used + 2 * fx.st.cfg.extent_max < fx.st.data_len)
        assert_int_equal(fill_grant(&fx, 0, 0, &n2), RS_OK);
    uint64_t hold_off;
    while (rs_range_get(&fx.st.ra, 64, &hold_off) == RS_OK)
        ;
    wsnap_t *snap2;
    assert_int_equal(
        rs_wk_store_snap_open(&fx.st, sh2, 0, inline_buf, sizeof(inline_buf), &snap2, &index_len),
        RS_OK);
    check_index(inline_buf, index_len, snap2);
    fx.sh = keep;
    assert_int_equal(rs_range_largest(&fx.st.ra), 0);
    assert_int_equal(stage_all(&fx, snap) * 1024ull, spilled);
    assert_int_equal(fx.st.stats.spilled_bytes, spilled); /* nothing else had to move */
    check_snapshot(&fx, snap);
    check_snapshot(&fx, snap2);
    rs_wk_store_snap_close(&fx.st, snap2);
    rs_wk_store_snap_close(&fx.st, snap);
    fx_fini(&fx);
}

/* Under pressure: no bulk room, no grants ahead; idle grants retired free the arena. */
static void test_grants_under_pressure(void **state)
{
    (void)state;
    fixture_t fx;
    fx_init(&fx, 64, 75);
    wgrant_t *g[512];
    int held = 0;
    /* Pushers take grants they do not write into (idle room), one per partition, then more. */
    for (int i = 0; i < 512; i++) {
        int past_mark = fx.st.ra.used + 1024 + fx.st.cfg.grant_bulk > fx.st.high_water;
        rs_status_t s =
            rs_wk_store_grant(&fx.st, fx.sh, (uint32_t)i % 63, 1024, RS_GRANT_BULK, &g[held]);
        if (s != RS_OK) {
            assert_int_equal(s, RS_ERR_BACKPRESSURE);
            break;
        }
        if (past_mark)
            assert_int_equal(g[held]->len, 1024); /* exactly what waits */
        held++;
        if (fx.st.ra.used > fx.st.high_water) {
            wgrant_t *x;
            assert_int_equal(rs_wk_store_grant(&fx.st, fx.sh, 63, 1024, RS_GRANT_AHEAD, &x),
                             RS_ERR_BUSY);
        }
    }
    assert_true(held > 63 && held < 512);
    /* Full of idle grants: a batch that waits gets backpressure... */
    uint32_t n = 0;
    assert_int_equal(fill_grant(&fx, 63, 0, &n), RS_ERR_BACKPRESSURE);
    assert_int_equal(fx.st.stats.spilled_bytes, 0);
    /* ...until they are retired unused (what RECLAIM asks pushers to do). */
    for (int i = 0; i < held; i++) {
        rs_wk_store_retire(&fx.st, g[i], 0);
        assert_true(g[i]->released);
        rs_wk_store_grant_free(&fx.st, g[i]);
    }
    assert_int_equal(fill_grant(&fx, 63, 0, &n), RS_OK);
    assert_int_equal(fx.st.open_room, 0); /* every granted byte arrived or was given back */
    fx_fini(&fx);
}

/*
 * Extents hold whole batches of the size asked for: a tail shorter than a
 * batch would be a hole no batch of the partition takes (docs/shuffle.md,
 * "An arena of 1.25x its data").
 */
static void test_extents_whole_batches(void **state)
{
    (void)state;
    fixture_t fx;
    fx_init(&fx, 1, 90);
    const uint64_t want = 3008; /* 47 x 64 bytes: no alignment rounds it */
    for (int i = 0; i < 40; i++) {
        wgrant_t *g;
        assert_int_equal(rs_wk_store_grant(&fx.st, fx.sh, 0, want, 0, &g), RS_OK);
        assert_int_equal(g->len, want);
        rs_snap_entry_t e = {.loc = g->off, .len = want, .seq = fx.seq++};
        assert_int_equal(rs_wk_store_add_entry(&fx.st, g, &e), RS_OK);
        rs_wk_store_settle(&fx.st, g, want);
        rs_wk_store_retire(&fx.st, g, want);
        rs_wk_store_grant_free(&fx.st, g);
    }
    int n = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &fx.sh->parts[0].extents)
    {
        extent_t *x = RS_CONTAINER_OF(pos, extent_t, link);
        assert_int_equal(x->len % want, 0);
        n++;
    }
    assert_true(n > 1); /* doubled extents, each a whole number of batches */
    fx_fini(&fx);
}

/*
 * The high-water mark bounds the bytes held, not room granted that nothing
 * arrived in: idle grants past the mark spill nothing; data past it does.
 */
static void test_idle_room_not_spilled(void **state)
{
    (void)state;
    fixture_t fx;
    fx_init(&fx, 2, 50);
    uint32_t n = 0;
    while (rs_wk_store_held(&fx.st) + 2048 < fx.st.high_water)
        assert_int_equal(fill_grant(&fx, 0, 0, &n), RS_OK);
    wgrant_t *g[64];
    int idle = 0;
    while (fx.st.ra.used <= fx.st.high_water + 4096 && idle < 64)
        assert_int_equal(rs_wk_store_grant(&fx.st, fx.sh, 1, 1024, 0, &g[idle++]), RS_OK);
    assert_true(fx.st.ra.used > fx.st.high_water);
    assert_true(rs_wk_store_held(&fx.st) <= fx.st.high_water);
    rs_wk_store_spill(&fx.st, 0);
    assert_int_equal(fx.st.stats.spilled_bytes, 0);
    for (int i = 0; i < idle; i++) {
        rs_wk_store_retire(&fx.st, g[i], 0);
        rs_wk_store_grant_free(&fx.st, g[i]);
    }
    assert_int_equal(fx.st.open_room, 0);
    /* The same bytes as data: held past the mark, so settled extents go. */
    while (rs_wk_store_held(&fx.st) <= fx.st.high_water + 4096)
        assert_int_equal(fill_grant(&fx, 0, 0, &n), RS_OK);
    rs_wk_store_spill(&fx.st, 0);
    assert_true(fx.st.stats.spilled_bytes > 0);
    assert_true(rs_wk_store_held(&fx.st) <= fx.st.high_water);
    fx_fini(&fx);
}

/*
 * Tasks of two lanes interleave their grants in one extent: the first one
 * retired with room unused leaves a hole, which goes back to the data area
 * at once (anything may be carved there), and the extent's spill and free
 * later give back only the rest.
 */
static void test_interleaved_grant_hole(void **state)
{
    (void)state;
    fixture_t fx;
    fx_init(&fx, 1, 75);
    wgrant_t *a, *b;
    assert_int_equal(rs_wk_store_grant(&fx.st, fx.sh, 0, 2048, 0, &a), RS_OK);
    assert_int_equal(rs_wk_store_grant(&fx.st, fx.sh, 0, 2048, 0, &b), RS_OK);
    assert_ptr_equal(a->ext, b->ext);
    assert_int_equal(b->off, a->off + 2048);
    uint64_t used = fx.st.ra.used;
    /* a: one 512-byte batch of its 2 KiB, retired while b still receives. */
    memset(fx.arena + a->off, 0x5a, 512);
    rs_snap_entry_t ea = {.loc = a->off, .len = 512, .seq = fx.seq++};
    assert_int_equal(rs_wk_store_add_entry(&fx.st, a, &ea), RS_OK);
    rs_wk_store_settle(&fx.st, a, 512);
    rs_wk_store_retire(&fx.st, a, 512);
    assert_true(a->released);
    assert_int_equal(fx.st.ra.used, used - 1536);
    assert_int_equal(a->ext->n_holes, 1);
    rs_range_check(&fx.st.ra);
    /* The hole is the lowest free range that fits 1.5 KiB: it is carved again. */
    uint64_t off;
    assert_int_equal(rs_wk_arena_get(&fx.st, 1536, &off), RS_OK);
    assert_int_equal(off, a->off + 512);
    rs_wk_arena_put(&fx.st, off, 1536);
    /* b filled and retired; both freed: the extent is settled, nothing waits. */
    memset(fx.arena + b->off, 0xa5, 2048);
    rs_snap_entry_t eb = {.loc = b->off, .len = 2048, .seq = fx.seq++};
    assert_int_equal(rs_wk_store_add_entry(&fx.st, b, &eb), RS_OK);
    rs_wk_store_settle(&fx.st, b, 2048);
    rs_wk_store_retire(&fx.st, b, 2048);
    assert_true(b->released);
    rs_wk_store_grant_free(&fx.st, a);
    rs_wk_store_grant_free(&fx.st, b);
    /* Spilling the extent gives back its range less the hole: the data area is whole again. */
    rs_wk_store_spill(&fx.st, fx.st.data_len);
    assert_int_equal(fx.st.stats.spilled_bytes, 512 + 2048);
    assert_int_equal(fx.st.ra.used, 0);
    assert_int_equal(rs_range_largest(&fx.st.ra), fx.st.data_len);
    rs_range_check(&fx.st.ra);
    assert_int_equal(fx.st.open_room, 0);
    fx_fini(&fx);
}

/*
 * A spill directory that takes no file: each incident counted (and
 * logged), a full data area then answered RS_ERR_IO (waiting would not
 * help) instead of backpressure, and spilling resumes once the directory
 * takes files again, the next failure being a new incident.
 */
static void test_spill_failure(void **state)
{
    (void)state;
    fixture_t fx;
    fx_init(&fx, 1, 50);
    char dir[] = "/tmp/rs-store-spill-XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(fx.st.cfg.spill_dir, sizeof(fx.st.cfg.spill_dir), "%s", dir);
    assert_int_equal(rmdir(dir), 0); /* mkstemp now fails: ENOENT */
    uint32_t n = 0;
    rs_status_t s = RS_OK;
    for (int round = 0; round < 1000 && s == RS_OK; round++)
        s = fill_grant(&fx, 0, 0, &n);
    assert_int_equal(s, RS_ERR_IO);
    assert_true(fx.st.stats.spill_failures >= 1);
    assert_int_equal(fx.st.spill_errno, ENOENT);
    assert_int_equal(fx.st.stats.spilled_bytes, 0);
    /* Within the back-off no new attempt is made. */
    uint64_t failures = fx.st.stats.spill_failures;
    rs_wk_store_spill(&fx.st, 1024);
    assert_int_equal(fx.st.stats.spill_failures, failures);
    /* The directory back: after the back-off the spill works and room comes back. */
    assert_int_equal(mkdir(dir, 0700), 0);
    usleep(150 * 1000);
    assert_int_equal(fill_grant(&fx, 0, 0, &n), RS_OK);
    assert_true(fx.st.stats.spilled_bytes > 0);
    assert_int_equal(fx.st.spill_errno, 0);
    assert_int_equal(fx.st.spill_log_ns, 0); /* the next failure is said at once */
    fx_fini(&fx);
    assert_int_equal(rmdir(dir), 0);
}

/*
 * A merged write of 1 KiB frames for partitions 0..parts-1 in turn, placed
 * as the worker places them, settled and retired. Returns its extent.
 */
static extent_t *fill_merged(fixture_t *fx, uint32_t parts, uint32_t frames)
{
    wgrant_t *g;
    assert_int_equal(rs_wk_store_grant_merged(&fx->st, fx->sh, (uint64_t)frames * 1024, &g), RS_OK);
    extent_t *ext = g->ext;
    for (uint32_t i = 0; i < frames; i++) {
        uint64_t seq = fx->seq++;
        uint64_t at = g->off + (uint64_t)i * 1024;
        for (uint32_t k = 0; k < 1024; k++)
            fx->arena[at + k] = pattern(seq, k);
        rs_snap_entry_t e = {.loc = at, .len = 1024, .seq = seq};
        assert_int_equal(rs_wk_store_place_merged(&fx->st, fx->sh, g, i % parts, &e), RS_OK);
        rs_wk_store_settle(&fx->st, g, 1024);
    }
    rs_wk_store_retire(&fx->st, g, g->len);
    assert_true(g->released);
    rs_wk_store_grant_free(&fx->st, g);
    return ext;
}

/*
 * Merged frames in the data area stay where they landed, shared by their
 * partitions: a snapshot of one partition pins every merged extent it
 * reads from, spill leaves them while pinned and writes them (every
 * partition's frames) once not, and the data area is whole again.
 */
static void test_merged_in_place_spill(void **state)
{
    (void)state;
    fixture_t fx;
    fx_init(&fx, 4, 90);
    extent_t *a = fill_merged(&fx, 4, 8), *b = fill_merged(&fx, 4, 8);
    assert_false(a->reserve);
    assert_false(b->reserve);
    assert_int_equal(fx.st.stats.merged_in_place, 16);
    for (uint32_t p = 0; p < 4; p++)
        assert_int_equal(fx.sh->parts[p].merged_entries, 4);
    wsnap_t *snap;
    size_t index_len;
    assert_int_equal(
        rs_wk_store_snap_open(&fx.st, fx.sh, 1, inline_buf, sizeof(inline_buf), &snap, &index_len),
        RS_OK);
    assert_int_equal(snap->n_pinned, 2); /* each merged extent once, for its two frames */
    assert_int_equal(a->pins, 1);
    assert_int_equal(b->pins, 1);
    check_snapshot(&fx, snap);
    rs_wk_store_spill(&fx.st, fx.st.data_len);
    assert_int_equal(fx.st.stats.spilled_bytes, 0); /* pinned by partition 1's reader */
    rs_wk_store_snap_close(&fx.st, snap);
    rs_wk_store_spill(&fx.st, fx.st.data_len);
    assert_int_equal(fx.st.stats.spilled_bytes, 16 * 1024);
    assert_true(rs_list_empty(&fx.sh->merged.extents));
    assert_int_equal(fx.st.ra.used, 0);
    rs_range_check(&fx.st.ra);
    for (uint32_t p = 0; p < 4; p++) {
        assert_int_equal(fx.sh->parts[p].merged_entries, 0);
        assert_int_equal(rs_wk_store_snap_open(&fx.st, fx.sh, p, inline_buf, sizeof(inline_buf),
                                               &snap, &index_len),
                         RS_OK);
        assert_int_equal(snap->n_entries, 4);
        assert_int_equal(stage_all(&fx, snap), 4); /* every frame read back from the file */
        rs_wk_store_snap_close(&fx.st, snap);
    }
    fx_fini(&fx);
}

/*
 * A merged write that only the staging reserve could take: its frames are
 * copied into their partitions' extents when room came back, so the
 * reserve drains as soon as the write settled.
 */
static void test_merged_reserve_copied(void **state)
{
    (void)state;
    fixture_t fx;
    fx_init(&fx, 2, 90);
    uint64_t all;
    assert_int_equal(rs_wk_arena_get(&fx.st, fx.st.data_len, &all), RS_OK);
    wgrant_t *g;
    assert_int_equal(rs_wk_store_grant_merged(&fx.st, fx.sh, 4 * 1024, &g), RS_OK);
    assert_true(g->ext->reserve);
    rs_wk_arena_put(&fx.st, all, fx.st.data_len);
    for (uint32_t i = 0; i < 4; i++) {
        uint64_t seq = fx.seq++, at = g->off + (uint64_t)i * 1024;
        for (uint32_t k = 0; k < 1024; k++)
            fx.arena[at + k] = pattern(seq, k);
        rs_snap_entry_t e = {.loc = at, .len = 1024, .seq = seq};
        assert_int_equal(rs_wk_store_place_merged(&fx.st, fx.sh, g, i % 2, &e), RS_OK);
        assert_true(e.loc < fx.st.data_len); /* moved into the data area */
        rs_wk_store_settle(&fx.st, g, 1024);
    }
    rs_wk_store_retire(&fx.st, g, g->len);
    rs_wk_store_grant_free(&fx.st, g);
    assert_int_equal(fx.st.stats.merged_in_place, 0);
    assert_true(rs_list_empty(&fx.sh->merged.extents));
    assert_int_equal(fx.st.rsv.used, 0);
    for (uint32_t p = 0; p < 2; p++) {
        wsnap_t *snap;
        size_t index_len;
        assert_int_equal(rs_wk_store_snap_open(&fx.st, fx.sh, p, inline_buf, sizeof(inline_buf),
                                               &snap, &index_len),
                         RS_OK);
        assert_int_equal(snap->n_entries, 2);
        check_snapshot(&fx, snap);
        rs_wk_store_snap_close(&fx.st, snap);
    }
    fx_fini(&fx);
}

int main(void)
{
    alarm(60); /* a hung test is a failed test */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_alloc),
        cmocka_unit_test(test_grants_spill_stage),
        cmocka_unit_test(test_spill_while_snapshot_open),
        cmocka_unit_test(test_snapshot_open_when_full),
        cmocka_unit_test(test_stage_when_pinned_full),
        cmocka_unit_test(test_grants_under_pressure),
        cmocka_unit_test(test_idle_room_not_spilled),
        cmocka_unit_test(test_extents_whole_batches),
        cmocka_unit_test(test_spill_failure),
        cmocka_unit_test(test_interleaved_grant_hole),
        cmocka_unit_test(test_merged_in_place_spill),
        cmocka_unit_test(test_merged_reserve_copied),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
