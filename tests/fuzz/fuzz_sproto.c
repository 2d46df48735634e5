/*
 * libFuzzer target for every shuffle wire decoder (control messages and the
 * partition snapshot: bytes from a peer). Besides memory safety (ASan/UBSan)
 * it checks the decoders' contract: only the documented statuses, every
 * accepted view lies inside the input, and what decodes re-encodes to
 * exactly the input bytes (no field is silently dropped).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_sproto.h"
#include "shuffle/proto.h"

static int is_decode_error(rs_status_t st)
{
    return st == RS_ERR_TRUNCATED || st == RS_ERR_BAD_VERSION || st == RS_ERR_BAD_LENGTH ||
           st == RS_ERR_PROTOCOL || st == RS_ERR_BAD_MAGIC;
}

static void check_inside(const uint8_t *in, size_t len, const void *p, size_t n)
{
    if (n == 0)
        return;
    const uint8_t *q = p;
    CHECK(q >= in && q <= in + len && n <= (size_t)(in + len - q));
}

static void check_same(const uint8_t *in, size_t len, const uint8_t *out, size_t out_len)
{
    CHECK(out_len == len && memcmp(in, out, len) == 0);
}

static void fuzz_snap(const uint8_t *in, size_t len)
{
    rs_snap_hdr_t h;
    rs_status_t st = rs_sproto_snap_decode(in, len, &h);
    CHECK(st == RS_OK || is_decode_error(st));
    if (st != RS_OK)
        return;
    check_inside(in, len, h.commits, (size_t)h.n_commits * RS_SPROTO_SNAP_COMMIT_LEN);
    check_inside(in, len, h.entries, (size_t)h.n_entries * RS_SPROTO_SNAP_ENTRY_LEN);
    uint8_t *out = malloc(len);
    CHECK(out != NULL);
    size_t n = 0;
    for (uint32_t i = 0; i < h.n_commits; i++) {
        rs_snap_commit_t c = rs_sproto_snap_commit_get(&h, i);
        CHECK(rs_sproto_snap_commit_put(out, len, i, &c) == RS_OK);
    }
    for (uint32_t i = 0; i < h.n_entries; i++) {
        rs_snap_entry_t e = rs_sproto_snap_entry_get(&h, i);
        CHECK(e.len > 0 && e.seq < RS_SEQ_MAX && (e.flags & ~(uint32_t)RS_SNAP_SPILLED) == 0);
        CHECK(rs_sproto_snap_entry_put(out, len, h.n_commits, i, &e) == RS_OK);
    }
    CHECK(rs_sproto_snap_encode(&h, out, len, &n) == RS_OK);
    check_same(in, len, out, n);
    free(out);
}

/* Re-encodes a decoded message into out (len bytes: what it came from). */
static rs_status_t reencode(const rs_smsg_t *m, uint8_t *out, size_t cap, size_t *n)
{
    switch (m->type) {
        case RS_SMSG_ATTACH:
            return rs_sproto_attach_encode(&m->u.attach, out, cap, n);
        case RS_SMSG_ATTACH_REPLY:
            return rs_sproto_attach_reply_encode(&m->u.attach_reply, out, cap, n);
        case RS_SMSG_GRANT_REQ:
            for (uint32_t i = 0; i < m->u.grant_req.n; i++) {
                rs_grant_want_t w = rs_sproto_grant_want_get(&m->u.grant_req, i);
                CHECK(w.retire_slot == RS_SLOT_NONE || w.retire_slot < RS_GRANT_SLOTS);
                CHECK(rs_sproto_grant_want_put(out, cap, i, &w) == RS_OK);
            }
            return rs_sproto_grant_req_encode(&m->u.grant_req, out, cap, n);
        case RS_SMSG_GRANT:
            for (uint32_t i = 0; i < m->u.grant.n; i++) {
                rs_grant_t g = rs_sproto_grant_get(&m->u.grant, i);
                CHECK(g.len <= RS_GRANT_MAX && (g.len == 0 || g.slot < RS_GRANT_SLOTS));
                CHECK(rs_sproto_grant_put(out, cap, i, &g) == RS_OK);
            }
            return rs_sproto_grant_encode(&m->u.grant, out, cap, n);
        case RS_SMSG_NACK:
            return rs_sproto_nack_encode(&m->u.nack, out, cap, n);
        case RS_SMSG_COMMIT:
            for (uint32_t i = 0; i < m->u.commit.n; i++) {
                rs_commit_entry_t e = rs_sproto_commit_get(&m->u.commit, i);
                CHECK(rs_sproto_commit_put(out, cap, i, &e) == RS_OK);
            }
            return rs_sproto_commit_encode(&m->u.commit, out, cap, n);
        case RS_SMSG_READ_OPEN:
            return rs_sproto_read_open_encode(&m->u.read_open, out, cap, n);
        case RS_SMSG_READ_REPLY:
            return rs_sproto_read_reply_encode(&m->u.read_reply, out, cap, n);
        case RS_SMSG_SPILL_LOAD:
            return rs_sproto_spill_load_encode(&m->u.spill_load, out, cap, n);
        case RS_SMSG_SPILL_REPLY:
            return rs_sproto_spill_reply_encode(&m->u.spill_reply, out, cap, n);
        case RS_SMSG_READ_CLOSE:
            return rs_sproto_read_close_encode(&m->u.read_close, out, cap, n);
        case RS_SMSG_DROP:
            return rs_sproto_drop_encode(&m->u.drop, out, cap, n);
        case RS_SMSG_INFO:
            return rs_sproto_info_encode(&m->u.info, out, cap, n);
        case RS_SMSG_INFO_REPLY:
            for (uint32_t i = 0; i < m->u.info_reply.n_shuffles; i++) {
                rs_info_shuffle_t e = rs_sproto_info_shuffle_get(&m->u.info_reply, i);
                CHECK(e.n_partitions > 0 && (e.flags & ~(uint32_t)RS_INFO_SH_DROPPED) == 0);
                CHECK(rs_sproto_info_shuffle_put(out, cap, i, &e) == RS_OK);
            }
            for (uint32_t i = 0; i < m->u.info_reply.n_conns; i++) {
                rs_info_conn_t e = rs_sproto_info_conn_get(&m->u.info_reply, i);
                CHECK(e.role <= RS_ROLE_READER);
                CHECK(rs_sproto_info_conn_put(out, cap, m->u.info_reply.n_shuffles, i, &e) ==
                      RS_OK);
            }
            return rs_sproto_info_reply_encode(&m->u.info_reply, out, cap, n);
        default:
            return rs_sproto_status_encode(m->type, m->status, out, cap, n);
    }
}

static void fuzz_msg(unsigned type, const uint8_t *in, size_t len)
{
    rs_smsg_t m;
    rs_status_t st = rs_sproto_decode(in, len, type, &m);
    CHECK(st == RS_OK || (is_decode_error(st) && st != RS_ERR_BAD_MAGIC));
    if (st != RS_OK)
        return;
    CHECK(m.type == type && len >= RS_SPROTO_HDR_LEN);
    if (type == RS_SMSG_INFO_REPLY) {
        check_inside(in, len, m.u.info_reply.shuffles,
                     (size_t)m.u.info_reply.n_shuffles * RS_SPROTO_INFO_SHUFFLE_LEN);
        check_inside(in, len, m.u.info_reply.conns,
                     (size_t)m.u.info_reply.n_conns * RS_SPROTO_INFO_CONN_LEN);
    }
    if (type == RS_SMSG_ATTACH_REPLY)
        check_inside(in, len, m.u.attach_reply.rkey, m.u.attach_reply.rkey_len);
    if (type == RS_SMSG_READ_REPLY && m.u.read_reply.index_off == RS_SPROTO_INLINE) {
        check_inside(in, len, m.u.read_reply.index, (size_t)m.u.read_reply.index_len);
        fuzz_snap(m.u.read_reply.index, (size_t)m.u.read_reply.index_len);
    }
    uint8_t *out = malloc(len);
    CHECK(out != NULL);
    size_t n = 0;
    CHECK(reencode(&m, out, len, &n) == RS_OK);
    check_same(in, len, out, n);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0] % 32u;
    if (mode == FUZZ_SPROTO_SNAP)
        fuzz_snap(data + 1, size - 1);
    else if (mode <= RS_SMSG_LAST - RS_SMSG_FIRST)
        fuzz_msg(RS_SMSG_FIRST + mode, data + 1, size - 1);
    return 0;
}
