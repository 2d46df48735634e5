/*
 * The worker's protocol state machine through the transport seam: an
 * in-process worker over the loopback backend (tests/loopback), driven by a
 * hand-made pusher (lb_wclient.h) message by message. Grant accounting and
 * extents, refusal of bad batches (NACK), commit matching and mismatches,
 * spill to a file in a temporary directory when memory is short, and drop.
 * What the worker accepts is read back with the real reader and checked.
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

#include "tests/loopback/lb_util.h"
#include "tests/loopback/lb_wclient.h"

#define PARTS     4
#define PER_PART  60 /* records of each partition */
#define PER_BATCH 20

static void worker_stats_settled(rs_worker_t *w, rs_worker_stats_t *st, uint64_t commits)
{
    assert_true(LB_UNTIL((rs_worker_stats(w, st), st->commits >= commits), 2000));
}

/* Records of batch j of partition p: i = p + PARTS * (j * PER_BATCH + k). */
static size_t batch_payload(uint32_t map, uint32_t p, uint32_t j, uint8_t *out)
{
    size_t len = 0;
    uint8_t rec[TREC_MAX];
    for (uint32_t k = 0; k < PER_BATCH; k++) {
        uint32_t i = p + PARTS * (j * PER_BATCH + k);
        len += rs_record_put(out + len, rec, trec_make(map, i, rec));
    }
    return len;
}

/* Grants: alignment, bounds, one extent per partition carved in order, refusals. */
static void test_grant_accounting(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, NULL);
    lbw_client_t c;
    lbw_open(&c, s.port[0]);
    assert_int_equal(lbw_attach(&c, 10, PARTS, 0, 0), RS_OK);
    assert_int_equal(c.arena_len, 8 << 20);

    rs_grant_want_t w0 = {.partition = 0, .want = 4096, .retire_slot = RS_SLOT_NONE};
    rs_grant_t g[4];
    assert_int_equal(lbw_grant(&c, &w0, 1, &g[0]), RS_OK);
    assert_int_equal(lbw_grant(&c, &w0, 1, &g[1]), RS_OK);
    rs_grant_want_t w1 = {.partition = 1, .want = 4096, .retire_slot = RS_SLOT_NONE};
    assert_int_equal(lbw_grant(&c, &w1, 1, &g[2]), RS_OK);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(g[k].status, RS_OK);
        assert_true(g[k].len >= 4096 && g[k].len % RS_SPROTO_ALIGN == 0);
        assert_true(g[k].off % RS_SPROTO_ALIGN == 0 && g[k].off + g[k].len <= c.arena_len);
        assert_true(g[k].slot < RS_GRANT_SLOTS);
    }
    assert_int_not_equal(g[0].slot, g[1].slot);
    assert_int_not_equal(g[1].slot, g[2].slot);
    /* Partition 0's grants are carved in order from its first extent (extent_min bytes). */
    assert_int_equal(g[1].off, g[0].off + g[0].len);
    assert_true(g[1].off + g[1].len <= g[0].off + (16 << 10));
    /* Partition 1 has an extent of its own, outside partition 0's. */
    assert_true(g[2].off >= g[0].off + (16 << 10) || g[2].off + g[2].len <= g[0].off);
    /* A partition past the shuffle's: refused in its entry. */
    rs_grant_want_t bad = {.partition = PARTS, .want = 4096, .retire_slot = RS_SLOT_NONE};
    assert_int_equal(lbw_grant(&c, &bad, 1, &g[3]), RS_OK);
    assert_int_equal(g[3].status, RS_ERR_NOT_FOUND);
    assert_int_equal(g[3].len, 0);

    rs_worker_stats_t st;
    /* Two extents of extent_min are in use, whatever was granted from them (the stats
     * are published about every millisecond: wait for them to show both). */
    assert_true(
        LB_UNTIL((rs_worker_stats(s.worker[0], &st), st.arena_used == 2 * (16 << 10)), 2000));
    lbw_close(&c);
    lb_workers_stop(&s);
}

/* Asks one grant of want bytes for partition p with flags; returns the entry. */
static rs_grant_t grant1(lbw_client_t *c, uint32_t p, uint64_t want, uint32_t flags)
{
    rs_grant_want_t w = {.partition = p, .flags = flags, .want = want, .retire_slot = RS_SLOT_NONE};
    rs_grant_t g;
    assert_int_equal(lbw_grant(c, &w, 1, &g), RS_OK);
    return g;
}

/*
 * Extents double per partition (extent_min, 2x, 4x, ...); bulk grants add
 * up to four more batches while memory is plentiful; a grant asked ahead is
 * refused once it is not (here: a quarter of the arena granted and not yet
 * written), a needed one is not.
 */
static void test_grant_flags_and_extents(void **state)
{
    (void)state;
    rs_worker_config_t wc;
    lb_worker_config(&wc, 1 << 20, NULL);
    wc.high_water_pct = 50;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, &wc);
    lbw_client_t c;
    lbw_open(&c, s.port[0]);
    assert_int_equal(lbw_attach(&c, 16, PARTS, 0, 0), RS_OK);

    /* Partition 0: four grants of 16 KiB take extents of 16, 32 and 64 KiB. */
    rs_grant_t g[4];
    for (int k = 0; k < 4; k++) {
        g[k] = grant1(&c, 0, 16 << 10, 0);
        assert_int_equal(g[k].status, RS_OK);
        assert_int_equal(g[k].len, 16 << 10);
    }
    assert_int_equal(g[2].off, g[1].off + g[1].len); /* the 32 KiB extent holds two */
    rs_worker_stats_t st;
    assert_true(
        LB_UNTIL((rs_worker_stats(s.worker[0], &st), st.arena_used == (16 + 32 + 64) << 10), 2000));

    /* Partition 1, bulk: 4 KiB asked, 4 KiB + min(grant_bulk, 4 x 4 KiB) granted. */
    rs_grant_t b = grant1(&c, 1, 4096, RS_GRANT_BULK);
    assert_int_equal(b.status, RS_OK);
    assert_int_equal(b.len, 5 * 4096);

    /* Ahead while memory is plentiful: granted. */
    rs_grant_t a = grant1(&c, 1, 4096, RS_GRANT_AHEAD);
    assert_int_equal(a.status, RS_OK);
    assert_int_equal(a.len, 4096);
    /* 400 KiB more granted and never written: over a quarter of the arena is open room. */
    for (uint32_t p = 2; p < PARTS; p++) {
        rs_grant_t f = grant1(&c, p, 200 << 10, 0);
        assert_int_equal(f.status, RS_OK);
    }
    a = grant1(&c, 1, 4096, RS_GRANT_AHEAD);
    assert_int_equal(a.status, RS_ERR_BUSY);
    assert_int_equal(a.len, 0);
    /* Bulk room is not given either; what is asked still is. */
    rs_grant_t n = grant1(&c, 1, 8192, RS_GRANT_BULK);
    assert_int_equal(n.status, RS_OK);
    assert_int_equal(n.len, 8192);
    lbw_close(&c);
    lb_workers_stop(&s);
}

/* Pushes every batch of map into its own grant; fills e[PARTS] with what was sent. */
static void push_all(lbw_client_t *c, uint32_t map, rs_commit_entry_t *e, uint64_t *total)
{
    static uint8_t payload[PER_BATCH * (TREC_MAX + 4)];
    uint64_t seq = 0;
    *total = 0;
    for (uint32_t p = 0; p < PARTS; p++) {
        e[p] = (rs_commit_entry_t){.partition = p};
        for (uint32_t j = 0; j < PER_PART / PER_BATCH; j++) {
            size_t len = batch_payload(map, p, j, payload);
            uint64_t cs;
            size_t at;
            size_t flen = lbw_frame(c, p, seq++, payload, len, &cs, &at);
            rs_grant_want_t w = {
                .partition = p, .want = rs_sproto_round(flen), .retire_slot = RS_SLOT_NONE};
            rs_grant_t g;
            assert_int_equal(lbw_grant(c, &w, 1, &g), RS_OK);
            assert_int_equal(g.status, RS_OK);
            assert_int_equal(lbw_put_batch(c, at, flen, &g, 0), RS_OK);
            /* Retire it: this is all the grant gets. */
            rs_grant_want_t r = {
                .partition = p, .retire_slot = g.slot, .retire_used = rs_sproto_round(flen)};
            rs_grant_t rg;
            assert_int_equal(lbw_grant(c, &r, 1, &rg), RS_OK);
            assert_int_equal(rg.status, RS_OK);
            assert_int_equal(rg.len, 0);
            e[p].batches++;
            e[p].bytes += flen;
            e[p].checksum += cs;
            (*total)++;
        }
    }
}

static void read_back(lb_shuffle_t *s, uint32_t n_maps, const uint32_t *attempts)
{
    lb_shuffle_desc(s, s->desc.shuffle_id, PARTS, 1, n_maps, PARTS * PER_PART);
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, 4000);
    rs_status_t st;
    int line = lb_read_all(s, &rc, attempts, &st);
    if (line != 0)
        fail_msg("read: check at line %d failed (%s)", line, rs_strerror(st));
    assert_true(lb_all_seen(s));
}

/* Batches that arrive and a commit that matches them: committed, read back, counted. */
static void test_commit_match(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, NULL);
    s.desc.shuffle_id = 11;
    lbw_client_t c;
    lbw_open(&c, s.port[0]);
    assert_int_equal(lbw_attach(&c, 11, PARTS, 0, 0), RS_OK);
    rs_commit_entry_t e[PARTS];
    uint64_t total;
    push_all(&c, 0, e, &total);
    assert_int_equal(lbw_commit(&c, e, PARTS, total, 2000), RS_OK);
    rs_worker_stats_t st;
    worker_stats_settled(s.worker[0], &st, 1);
    assert_int_equal(st.commits, 1);
    assert_int_equal(st.batches, total);
    assert_int_equal(st.refused, 0);
    assert_int_equal(st.stray_retires, 0);
    uint64_t bytes = 0;
    for (int p = 0; p < PARTS; p++)
        bytes += e[p].bytes;
    assert_int_equal(st.bytes, bytes);
    /* The same attempt again: refused at attach (committed already). */
    lbw_client_t c2;
    lbw_open(&c2, s.port[0]);
    assert_int_equal(lbw_attach(&c2, 11, PARTS, 0, 0), RS_ERR_EXISTS);
    lbw_close(&c2);
    lbw_close(&c);
    read_back(&s, 1, NULL);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

/* Bad batches are refused with a NACK naming why; the good ones still commit. */
static void test_bad_frame_nack(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, NULL);
    lbw_client_t c;
    lbw_open(&c, s.port[0]);
    assert_int_equal(lbw_attach(&c, 12, PARTS, 0, 0), RS_OK);
    uint8_t payload[64] = {0};
    rs_grant_want_t w = {.partition = 1, .want = 4096, .retire_slot = RS_SLOT_NONE};
    rs_grant_t g;
    assert_int_equal(lbw_grant(&c, &w, 1, &g), RS_OK);

    /* A frame of another map: RS_ERR_PROTOCOL, for the grant's partition. */
    c.map_id = 7;
    uint64_t cs;
    size_t at;
    size_t flen = lbw_frame(&c, 1, 0, payload, sizeof(payload), &cs, &at);
    c.map_id = 0;
    unsigned before = c.got[RS_SMSG_NACK];
    assert_int_equal(lbw_put_batch(&c, at, flen, &g, 0), RS_OK);
    assert_true(lbw_wait(&c, RS_SMSG_NACK, before, 2000));
    rs_smsg_nack_t n = lbw_last_nack(&c);
    assert_int_equal(n.status, RS_ERR_PROTOCOL);
    assert_int_equal(n.partition, 1);
    assert_int_equal(n.imm, rs_imm_make(g.slot, 0));

    /* Garbage where a frame should be: not an rshuffle frame. */
    uint8_t *base = rs_mr_addr(c.mr);
    at = c.buf_used;
    memset(base + at, 0x5a, 128);
    c.buf_used += 128;
    before = c.got[RS_SMSG_NACK];
    assert_int_equal(lbw_put_batch(&c, at, 128, &g, 128), RS_OK);
    assert_true(lbw_wait(&c, RS_SMSG_NACK, before, 2000));
    n = lbw_last_nack(&c);
    assert_int_equal(n.status, RS_ERR_BAD_MAGIC);

    /* A notification of a slot never granted: out of range, no partition. */
    rs_grant_t fake = {.slot = g.slot + 100, .off = g.off, .len = g.len};
    before = c.got[RS_SMSG_NACK];
    assert_int_equal(lbw_put_batch(&c, at, 64, &fake, 0), RS_OK);
    assert_true(lbw_wait(&c, RS_SMSG_NACK, before, 2000));
    n = lbw_last_nack(&c);
    assert_int_equal(n.status, RS_ERR_OUT_OF_RANGE);
    assert_int_equal(n.partition, UINT32_MAX);

    rs_worker_stats_t st;
    assert_true(LB_UNTIL((rs_worker_stats(s.worker[0], &st), st.refused >= 3), 2000));
    assert_int_equal(st.refused, 3);
    assert_int_equal(st.batches, 0);

    /* A commit of nothing still matches what arrived (refused batches do not count). */
    assert_int_equal(lbw_commit(&c, NULL, 0, 0, 2000), RS_OK);
    lbw_close(&c);
    lb_workers_stop(&s);
}

/* Commits that do not match what arrived are refused, and nothing of them is readable. */
static void test_commit_mismatch(void **state)
{
    (void)state;
    rs_worker_config_t wc;
    lb_worker_config(&wc, 8 << 20, NULL);
    wc.commit_wait_ms = 300;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, &wc);
    s.desc.shuffle_id = 13;
    rs_commit_entry_t e[PARTS];
    uint64_t total;

    /* Map 0: a wrong checksum. */
    lbw_client_t c;
    lbw_open(&c, s.port[0]);
    assert_int_equal(lbw_attach(&c, 13, PARTS, 0, 0), RS_OK);
    push_all(&c, 0, e, &total);
    e[2].checksum ^= 1;
    assert_int_equal(lbw_commit(&c, e, PARTS, total, 2000), RS_ERR_CHECKSUM);
    lbw_close(&c);

    /* Map 1: more batches announced than sent: the worker waits commit_wait_ms. */
    lbw_open(&c, s.port[0]);
    assert_int_equal(lbw_attach(&c, 13, PARTS, 1, 0), RS_OK);
    push_all(&c, 1, e, &total);
    uint64_t t0 = lb_now_ms();
    assert_int_equal(lbw_commit(&c, e, PARTS, total + 1, 3000), RS_ERR_TIMEOUT);
    uint64_t waited = lb_now_ms() - t0;
    assert_true(waited >= 250 && waited < 2500);
    lbw_close(&c);

    /* Map 2: fewer batches announced than arrived. */
    lbw_open(&c, s.port[0]);
    assert_int_equal(lbw_attach(&c, 13, PARTS, 2, 0), RS_OK);
    push_all(&c, 2, e, &total);
    assert_int_equal(lbw_commit(&c, e, PARTS, total - 1, 2000), RS_ERR_PROTOCOL);
    lbw_close(&c);

    /* Map 3: a partition's count wrong, totals right. */
    lbw_open(&c, s.port[0]);
    assert_int_equal(lbw_attach(&c, 13, PARTS, 3, 0), RS_OK);
    push_all(&c, 3, e, &total);
    e[0].batches--;
    e[1].batches++;
    assert_int_equal(lbw_commit(&c, e, PARTS, total, 2000), RS_ERR_CHECKSUM);
    e[0].batches++;
    e[1].batches--;
    /* Corrected: the same connection commits now. */
    assert_int_equal(lbw_commit(&c, e, PARTS, total, 2000), RS_OK);
    lbw_close(&c);

    rs_worker_stats_t st;
    worker_stats_settled(s.worker[0], &st, 1);
    assert_int_equal(st.commits, 1);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

/* Memory short: the worker spills to a file in its spill directory; reads stage it back. */
static void test_spill(void **state)
{
    (void)state;
    char dir[] = "/tmp/rs-lb-spill-XXXXXX";
    assert_non_null(mkdtemp(dir));
    rs_worker_config_t wc;
    lb_worker_config(&wc, 1 << 20, dir);
    wc.high_water_pct = 50;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 1, &wc);
    lb_shuffle_desc(&s, 14, 4, 1, 4, 8000); /* 4 maps x ~570 KB: well over the 1 MiB arena */
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, 8000);
    for (uint32_t m = 0; m < 4; m++)
        assert_int_equal(lb_push_map(&s, m, 0, &pc), RS_OK);
    rs_worker_stats_t st;
    worker_stats_settled(s.worker[0], &st, 4);
    assert_true(st.spilled_bytes > 0);
    assert_int_equal(st.spill_failures, 0);
    assert_true(st.arena_peak <= 1 << 20);

    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, 8000);
    rs_reader_session_t *sess;
    uint32_t attempts[4] = {0};
    assert_int_equal(rs_reader_session_open(&s.desc, 4, attempts, &rc, &sess), RS_OK);
    uint64_t loads = 0;
    for (uint32_t p = 0; p < 4; p++) {
        rs_reader_stats_t rst;
        lb_read_part_ok(&s, sess, p, &rst);
        loads += rst.spill_loads;
    }
    rs_reader_session_close(sess);
    assert_true(lb_all_seen(&s));
    assert_true(loads > 0);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
    /* The spill file is unlinked at once: the directory is empty again. */
    assert_int_equal(rmdir(dir), 0);
}

/* Drop frees the shuffle; a second drop and a later read find nothing. */
static void test_drop(void **state)
{
    (void)state;
    lb_shuffle_t s = {0};
    lb_workers_start(&s, 2, NULL);
    lb_shuffle_desc(&s, 15, 4, 1, 1, 1000);
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, 4000);
    assert_int_equal(lb_push_map(&s, 0, 0, &pc), RS_OK);
    rs_worker_stats_t st;
    assert_true(LB_UNTIL((rs_worker_stats(s.worker[0], &st), st.shuffles == 1), 2000));
    assert_true(st.arena_used > 0);
    assert_int_equal(rs_shuffle_drop(&s.desc, NULL), RS_OK);
    for (int k = 0; k < 2; k++) {
        assert_true(LB_UNTIL((rs_worker_stats(s.worker[k], &st), st.shuffles == 0), 2000));
        assert_int_equal(st.arena_used, 0);
    }
    assert_int_equal(rs_shuffle_drop(&s.desc, NULL), RS_ERR_NOT_FOUND);
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, 2000);
    rs_status_t rs;
    assert_int_not_equal(lb_read_all(&s, &rc, NULL, &rs), 0);
    assert_int_equal(rs, RS_ERR_NOT_FOUND);
    lb_workers_stop(&s);
    lb_shuffle_free(&s);
}

int main(void)
{
    lb_env_defaults();
    lb_alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grant_accounting),
        cmocka_unit_test(test_grant_flags_and_extents),
        cmocka_unit_test(test_commit_match),
        cmocka_unit_test(test_bad_frame_nack),
        cmocka_unit_test(test_commit_mismatch),
        cmocka_unit_test(test_spill),
        cmocka_unit_test(test_drop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
