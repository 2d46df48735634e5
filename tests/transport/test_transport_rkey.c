/*
 * Remote keys and ranges: truncated, corrupted and foreign blobs are
 * refused; out-of-range and badly placed operations are refused before
 * anything is posted (no callback, nothing outstanding).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/transport.h>
#include "common/checksum.h"
#include "transport/rkey_blob.h"
#include "tt_util.h"

#define REGION (64u << 10)

typedef struct fixture {
    tt_pair_t p;
    rs_mr_t *smr, *ro_mr, *cmr;
    unsigned char blob[RS_RKEY_BLOB_MAX];
    size_t blob_len;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    tt_pair_open(&f->p, NULL, NULL);
    assert_int_equal(rs_mem_alloc(f->p.srv, REGION, RS_MEM_REMOTE_ALL, &f->smr), RS_OK);
    assert_int_equal(rs_mem_alloc(f->p.srv, REGION, RS_MEM_REMOTE_READ, &f->ro_mr), RS_OK);
    assert_int_equal(rs_mem_alloc(f->p.cli, REGION, RS_MEM_LOCAL, &f->cmr), RS_OK);
    memset(rs_mr_addr(f->smr), 0, REGION);
    assert_int_equal(rs_mr_pack_rkey(f->smr, f->blob, sizeof(f->blob), &f->blob_len), RS_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    tt_pair_close(&f->p);
    free(f);
    return 0;
}

static void test_truncated(void **state)
{
    fixture_t *f = *state;
    rs_rkey_t *rkey = NULL;
    for (size_t len = 0; len < f->blob_len; len++)
        assert_int_equal(rs_rkey_unpack(f->p.cep, f->blob, len, &rkey), RS_ERR_BAD_RKEY);
    /* Trailing garbage is refused too. */
    unsigned char longer[RS_RKEY_BLOB_MAX + 1];
    memcpy(longer, f->blob, f->blob_len);
    longer[f->blob_len] = 0;
    assert_int_equal(rs_rkey_unpack(f->p.cep, longer, f->blob_len + 1, &rkey), RS_ERR_BAD_RKEY);
    assert_null(rkey);
}

static void test_corrupted(void **state)
{
    fixture_t *f = *state;
    rs_rkey_t *rkey = NULL;
    unsigned char bad[RS_RKEY_BLOB_MAX];
    for (size_t i = 0; i < f->blob_len; i++) {
        for (unsigned bit = 0; bit < 8; bit += 3) {
            memcpy(bad, f->blob, f->blob_len);
            bad[i] ^= (unsigned char)(1u << bit);
            assert_int_equal(rs_rkey_unpack(f->p.cep, bad, f->blob_len, &rkey), RS_ERR_BAD_RKEY);
        }
    }
    assert_null(rkey);
    /* The untouched blob still works. */
    assert_int_equal(rs_rkey_unpack(f->p.cep, f->blob, f->blob_len, &rkey), RS_OK);
    assert_int_equal(rs_rkey_len(rkey), REGION);
    rs_rkey_destroy(rkey);
}

/* Re-seals a blob whose header was edited (what a foreign writer would send). */
static void reseal(unsigned char *blob, size_t len)
{
    rs_rkey_hdr_t h;
    memcpy(&h, blob, sizeof(h));
    h.checksum = 0;
    h.checksum =
        rs_checksum64_seeded(blob + sizeof(h), len - sizeof(h), rs_checksum64(&h, sizeof(h)));
    memcpy(blob, &h, sizeof(h));
}

static void test_foreign(void **state)
{
    fixture_t *f = *state;
    rs_rkey_t *rkey = NULL;
    unsigned char bad[RS_RKEY_BLOB_MAX];
    rs_rkey_hdr_t h;

    /* A well-formed blob of the verbs backend is refused by UCX. */
    memcpy(bad, f->blob, f->blob_len);
    memcpy(&h, bad, sizeof(h));
    assert_int_equal(h.backend, RS_RKEY_BACKEND_UCX);
    h.backend = RS_RKEY_BACKEND_VERBS;
    memcpy(bad, &h, sizeof(h));
    reseal(bad, f->blob_len);
    assert_int_equal(rs_rkey_unpack(f->p.cep, bad, f->blob_len, &rkey), RS_ERR_BAD_RKEY);

    /* Another version, or a region that wraps around the address space. */
    memcpy(bad, f->blob, f->blob_len);
    h.backend = RS_RKEY_BACKEND_UCX;
    h.version = RS_RKEY_VERSION + 1;
    memcpy(bad, &h, sizeof(h));
    reseal(bad, f->blob_len);
    assert_int_equal(rs_rkey_unpack(f->p.cep, bad, f->blob_len, &rkey), RS_ERR_BAD_RKEY);
    memcpy(&h, f->blob, sizeof(h));
    h.base = UINT64_MAX - 10;
    memcpy(bad, &h, sizeof(h));
    reseal(bad, f->blob_len);
    assert_int_equal(rs_rkey_unpack(f->p.cep, bad, f->blob_len, &rkey), RS_ERR_BAD_RKEY);
    assert_null(rkey);
}

static void test_ranges(void **state)
{
    fixture_t *f = *state;
    rs_ep_t *ep = f->p.cep;
    rs_rkey_t *rkey = tt_rkey_for(ep, f->smr);
    unsigned char *buf = rs_mr_addr(f->cmr);
    tt_done_t d = {0};
    uint64_t old = 7;

    assert_int_equal(rs_put(ep, buf, 1, f->cmr, rkey, REGION, tt_done_cb, &d), RS_ERR_OUT_OF_RANGE);
    assert_int_equal(rs_put(ep, buf, 2, f->cmr, rkey, REGION - 1, tt_done_cb, &d),
                     RS_ERR_OUT_OF_RANGE);
    assert_int_equal(rs_put(ep, buf, 16, f->cmr, rkey, UINT64_MAX - 8, tt_done_cb, &d),
                     RS_ERR_OUT_OF_RANGE);
    assert_int_equal(rs_put_notify(ep, buf, 16, f->cmr, rkey, REGION, 1, tt_done_cb, &d),
                     RS_ERR_OUT_OF_RANGE);
    assert_int_equal(rs_get(ep, buf, REGION, f->cmr, rkey, 1, tt_done_cb, &d), RS_ERR_OUT_OF_RANGE);
    assert_int_equal(rs_fetch_add(ep, rkey, REGION, 1, &old, tt_done_cb, &d), RS_ERR_OUT_OF_RANGE);
    assert_int_equal(rs_fetch_add(ep, rkey, 4, 1, &old, tt_done_cb, &d), RS_ERR_INVALID);
    /* Local buffer outside its region. */
    assert_int_equal(rs_put(ep, buf - 1, 8, f->cmr, rkey, 0, tt_done_cb, &d), RS_ERR_OUT_OF_RANGE);
    assert_int_equal(rs_put(ep, buf + REGION - 4, 8, f->cmr, rkey, 0, tt_done_cb, &d),
                     RS_ERR_OUT_OF_RANGE);
    assert_int_equal(rs_get(ep, buf + REGION, 1, f->cmr, rkey, 0, tt_done_cb, &d),
                     RS_ERR_OUT_OF_RANGE);
    /* A region of another context is no local region of ours. */
    assert_int_equal(rs_put(ep, rs_mr_addr(f->smr), 8, f->smr, rkey, 0, tt_done_cb, &d),
                     RS_ERR_INVALID);

    /* Edges that are inside are accepted. */
    tt_done_t ok = {0};
    assert_int_equal(rs_put(ep, buf + REGION - 8, 8, f->cmr, rkey, REGION - 8, tt_done_cb, &ok),
                     RS_OK);
    assert_int_equal(rs_fetch_add(ep, rkey, REGION - 8, 1, &old, tt_done_cb, &ok), RS_OK);
    assert_int_equal(tt_wait_calls(f->p.cli, f->p.srv, &ok, 2, 5000), 2);
    assert_int_equal(ok.status, RS_OK);

    /* Nothing refused was posted: no callback, nothing outstanding. */
    for (int i = 0; i < 20; i++) {
        rs_progress(f->p.cli);
        rs_progress(f->p.srv);
    }
    assert_int_equal(d.calls, 0);
    assert_int_equal(rs_ep_outstanding(ep), 0);
    assert_int_equal(old, 0); /* the accepted fetch-add saw the zeroed word */
    rs_rkey_destroy(rkey);
}

/*
 * A key kept past its region (a stale broadcast descriptor does that): a get
 * fails with an error, it does not fault the process. The tcp run carries it
 * as a message: the target then refuses the unknown range.
 */
static void test_stale_get(void **state)
{
    fixture_t *f = *state;
    rs_ep_t *ep = f->p.cep;
    rs_mr_t *gone;
    assert_int_equal(rs_mem_alloc(f->p.srv, REGION, RS_MEM_REMOTE_READ, &gone), RS_OK);
    rs_rkey_t *rkey = tt_rkey_for(ep, gone);
    rs_mem_free(gone);
    tt_done_t d = {0};
    rs_status_t st = rs_get(ep, rs_mr_addr(f->cmr), 4096, f->cmr, rkey, 0, tt_done_cb, &d);
    if (st == RS_OK) {
        assert_int_equal(tt_wait_calls(f->p.cli, f->p.srv, &d, 1, 5000), 1);
        assert_true(d.status != RS_OK);
    } else {
        assert_true(st < 0);
    }
    rs_rkey_destroy(rkey);
}

static void test_access_rights(void **state)
{
    fixture_t *f = *state;
    rs_rkey_t *rkey = tt_rkey_for(f->p.cep, f->ro_mr);
    unsigned char *buf = rs_mr_addr(f->cmr);
    uint64_t old;
    tt_done_t d = {0};
    assert_int_equal(rs_put(f->p.cep, buf, 8, f->cmr, rkey, 0, tt_done_cb, &d), RS_ERR_INVALID);
    assert_int_equal(rs_fetch_add(f->p.cep, rkey, 0, 1, &old, tt_done_cb, &d), RS_ERR_INVALID);
    assert_int_equal(rs_get(f->p.cep, buf, 8, f->cmr, rkey, 0, tt_done_cb, &d), RS_OK);
    assert_true(tt_progress_until(f->p.cli, f->p.srv, &d.calls, 5000));
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.status, RS_OK);
    rs_rkey_destroy(rkey);
}

int main(void)
{
    tt_alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_access_rights, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
