/*
 * libFuzzer target for every broadcast decoder (descriptor, request, reply,
 * news, destroy notice: bytes from a peer or from a task). Besides memory
 * safety (ASan/UBSan) it checks the decoders' contract: only the documented
 * statuses, every accepted view lies inside the input, and what decodes
 * re-encodes to the same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "broadcast/proto.h"
#include "common/checksum.h"
#include "fuzz_check.h"
#include "fuzz_manifest.h"

static int is_decode_error(rs_status_t st)
{
    return st == RS_ERR_TRUNCATED || st == RS_ERR_BAD_MAGIC || st == RS_ERR_BAD_VERSION ||
           st == RS_ERR_BAD_LENGTH || st == RS_ERR_CHECKSUM || st == RS_ERR_PROTOCOL;
}

static void check_inside(const uint8_t *in, size_t len, const void *p, size_t n)
{
    if (n == 0)
        return;
    const uint8_t *q = p;
    CHECK(q >= in && q <= in + len && n <= (size_t)(in + len - q));
}

static void fuzz_desc(const uint8_t *in, size_t len)
{
    rs_bc_desc_t d;
    rs_status_t st = rs_bc_desc_decode(in, len, &d);
    CHECK(st == RS_OK || is_decode_error(st));
    if (st != RS_OK)
        return;
    check_inside(in, len, d.src.bytes.p, d.src.bytes.len);
    CHECK(d.nblocks == rs_bc_nblocks(d.size, d.block_size));
    uint8_t *out = malloc(len);
    size_t n = 0;
    CHECK(out != NULL && rs_bc_desc_encode(&d, out, len, &n) == RS_OK);
    CHECK(n == len && memcmp(out, in, len) == 0);
    free(out);
}

static void fuzz_req(const uint8_t *in, size_t len)
{
    rs_bc_req_t q;
    rs_status_t st = rs_bc_req_decode(in, len, &q);
    CHECK(st == RS_OK || is_decode_error(st));
    if (st != RS_OK)
        return;
    check_inside(in, len, q.reply_rkey.p, q.reply_rkey.len);
    check_inside(in, len, q.holder_addr.bytes.p, q.holder_addr.bytes.len);
    check_inside(in, len, q.holder_rkey.p, q.holder_rkey.len);
    check_inside(in, len, q.bitmap.p, q.bitmap.len);
    CHECK(rs_bc_req_len(&q) == len);
    uint8_t *out = malloc(len);
    size_t n = 0;
    CHECK(out != NULL && rs_bc_req_encode(&q, out, len, &n) == RS_OK);
    CHECK(n == len && memcmp(out, in, len) == 0);
    free(out);
}

static void fuzz_reply(const uint8_t *in, size_t len)
{
    rs_bc_reply_t r;
    rs_status_t st = rs_bc_reply_decode(in, len, &r);
    CHECK(st == RS_OK || is_decode_error(st));
    if (st != RS_OK)
        return;
    CHECK(r.meta_len <= len);
    if (r.status != 0)
        return;
    check_inside(in, len, r.sums.p, r.sums.len);
    check_inside(in, len, r.tickets.p, r.tickets.len);
    check_inside(in, len, r.holders.p, r.holders.len);
    check_inside(in, len, r.data.p, r.data.len);
    CHECK(r.sums.len == 0 || r.sums.len == 8ull * r.nblocks);
    CHECK(r.tickets.len == 8ull * r.n_active);
    for (uint32_t i = 0; i < r.nblocks && r.sums.len > 0; i++)
        (void)rs_bc_reply_sum(&r, i);
    for (uint32_t i = 0; i < r.n_active; i++)
        CHECK(rs_bc_reply_active(&r, i).start < (r.nblocks > 0 ? r.nblocks : 1));
    rs_bc_holder_wire_t h;
    size_t off = 0;
    uint32_t n = 0;
    while (rs_bc_reply_next_holder(&r, &off, &h)) {
        check_inside(in, len, h.addr.bytes.p, h.addr.bytes.len);
        check_inside(in, len, h.rkey.p, h.rkey.len);
        check_inside(in, len, h.bitmap.p, h.bitmap.len);
        CHECK((h.flags & RS_BHOLDER_F_COMPLETE) ? h.bitmap.len == 0
                                                : h.bitmap.len == (r.nblocks + 7) / 8);
        n++;
    }
    CHECK(n == r.n_holders && off == r.holders.len);
}

/* Recomputes the metadata checksum the meta_len field points at, when it lies inside. */
static void fuzz_reply_resealed(const uint8_t *in, size_t len)
{
    if (len < RS_BREPLY_MIN_LEN) {
        fuzz_reply(in, len);
        return;
    }
    uint8_t *copy = malloc(len);
    CHECK(copy != NULL);
    memcpy(copy, in, len);
    uint32_t meta = (uint32_t)copy[8] | (uint32_t)copy[9] << 8 | (uint32_t)copy[10] << 16 |
                    (uint32_t)copy[11] << 24;
    if (meta >= RS_BREPLY_MIN_LEN && meta <= len) {
        uint64_t sum = rs_checksum64(copy, meta - 8);
        for (int i = 0; i < 8; i++)
            copy[meta - 8 + i] = (uint8_t)(sum >> (8 * i));
    }
    fuzz_reply(copy, len);
    free(copy);
}

static void fuzz_news(const uint8_t *in, size_t len)
{
    rs_bc_news_t n;
    rs_status_t st = rs_bc_news_decode(in, len, &n);
    CHECK(st == RS_OK || is_decode_error(st));
    if (st != RS_OK)
        return;
    check_inside(in, len, n.tickets.p, n.tickets.len);
    rs_bc_active_t *t = malloc((n.n_active + 1u) * sizeof(*t));
    uint8_t *out = malloc(len);
    size_t olen = 0;
    CHECK(t != NULL && out != NULL);
    for (uint32_t i = 0; i < n.n_active; i++)
        t[i] = rs_bc_news_active(&n, i);
    CHECK(rs_bc_news_encode(n.node_id, n.seq, n.rversion, t, n.n_active, out, len, &olen) == RS_OK);
    CHECK(olen == len && memcmp(out, in, len) == 0);
    free(out);
    free(t);
}

static void fuzz_destroy(const uint8_t *in, size_t len)
{
    uint64_t node_id, seq;
    rs_status_t st = rs_bc_destroy_decode(in, len, &node_id, &seq);
    CHECK(st == RS_OK || is_decode_error(st));
    if (st == RS_OK) {
        uint8_t out[RS_BDESTROY_LEN];
        rs_bc_destroy_encode(node_id, seq, out);
        CHECK(len == RS_BDESTROY_LEN && memcmp(out, in, len) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    /* An exact-size copy: reads past the input's end are caught. */
    size_t len = size - 1;
    uint8_t *in = malloc(len ? len : 1);
    CHECK(in != NULL);
    memcpy(in, data + 1, len);
    switch (data[0] % FUZZ_MANIFEST_MODES) {
        case FUZZ_DESC:
            fuzz_desc(in, len);
            break;
        case FUZZ_REQ:
            fuzz_req(in, len);
            break;
        case FUZZ_REPLY:
            fuzz_reply(in, len);
            break;
        case FUZZ_REPLY_RESEALED:
            fuzz_reply_resealed(in, len);
            break;
        case FUZZ_NEWS:
            fuzz_news(in, len);
            break;
        case FUZZ_DESTROY:
            fuzz_destroy(in, len);
            break;
    }
    free(in);
    return 0;
}
