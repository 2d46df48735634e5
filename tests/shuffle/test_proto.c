/*
 * The shuffle's wire messages (shuffle/proto.h): every message round-trips
 * through its encoder and decoder byte for byte; every proper prefix and
 * every extended copy is refused; a flipped bit is either refused or decodes
 * to a message that re-encodes to exactly the flipped bytes (nothing is
 * silently ignored), and flips in the version, type and reserved fields are
 * always refused; and each decoder's range checks refuse what they name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/byteorder.h"
#include "shuffle/proto.h"

#define SNAP_TYPE 0u /* the snapshot in this file's tables (it has no message type) */
#define MSG_MAX   4096u

typedef struct sample {
    unsigned type;
    uint8_t bytes[MSG_MAX];
    size_t len;
    /* byte ranges that flips must always be refused in: [from, to) */
    struct {
        size_t from, to;
    } strict[6];
    int n_strict;
} sample_t;

static const uint8_t rkey_bytes[40] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
static const rs_grant_want_t wants[3] = {
    {.partition = 3, .flags = RS_GRANT_BULK, .want = 4096, .retire_slot = RS_SLOT_NONE},
    {.partition = 9, .flags = 0, .want = 0, .retire_slot = 17, .retire_used = 1234},
    {.partition = 1,
     .flags = RS_GRANT_AHEAD | RS_GRANT_BULK,
     .want = 1 << 20,
     .retire_slot = 2,
     .retire_used = 64},
};
static const rs_grant_t grants[3] = {
    {.partition = 3, .status = RS_OK, .slot = 5, .off = 1 << 20, .len = 8192},
    {.partition = 9, .status = RS_OK},
    {.partition = 1, .status = RS_ERR_BACKPRESSURE},
};
static const rs_commit_entry_t commits[3] = {
    {.partition = 0, .batches = 1, .bytes = 100, .checksum = 0x1122334455667788ull},
    {.partition = 7, .batches = 30, .bytes = 1 << 20, .checksum = 5},
    {.partition = 1000, .batches = 2, .bytes = 64, .checksum = UINT64_MAX},
};
static const rs_snap_commit_t snap_commits[2] = {
    {.map_id = 0, .attempt = 1, .batches = 3, .bytes = 300, .checksum = 9},
    {.map_id = 4, .attempt = 0, .batches = 0, .flags = RS_SNAP_C_HOLDER},
};
static const rs_snap_entry_t snap_entries[3] = {
    {.loc = 4096, .len = 200, .map_id = 0, .attempt = 1, .seq = 0},
    {.loc = 1 << 30, .len = 64, .flags = RS_SNAP_SPILLED, .map_id = 0, .attempt = 1, .seq = 1},
    {.loc = 0, .len = 100000, .map_id = 4, .attempt = 0, .seq = RS_SEQ_MAX - 1},
};

/* An INFO_REPLY with ns shuffles and nc connections (a pusher, then readers). */
static size_t build_info_reply(uint8_t *buf, size_t cap, uint32_t ns, uint32_t nc)
{
    for (uint32_t i = 0; i < ns; i++) {
        rs_info_shuffle_t e = {.shuffle_id = 7 + i,
                               .n_partitions = 16,
                               .maps = 3,
                               .replicas = 2,
                               .flags = i & 1 ? RS_INFO_SH_DROPPED : 0,
                               .open_snaps = i,
                               .bytes = 1 << 20,
                               .batches = 40,
                               .spilled_bytes = 4096};
        assert_int_equal(rs_sproto_info_shuffle_put(buf, cap, i, &e), RS_OK);
    }
    for (uint32_t i = 0; i < nc; i++) {
        rs_info_conn_t e = {.role = i == 0 ? RS_ROLE_PUSHER : RS_ROLE_READER,
                            .shuffle_id = 7,
                            .map_id = i == 0 ? 2 : RS_INFO_NONE,
                            .attempt = i == 0 ? 1 : 0,
                            .snaps = i,
                            .open_grants = 3,
                            .batches = 12};
        assert_int_equal(rs_sproto_info_conn_put(buf, cap, ns, i, &e), RS_OK);
    }
    rs_smsg_info_reply_t m = {.status = RS_OK,
                              .c = {.batches = 40, .bytes = 1 << 20, .arena_len = 1 << 28},
                              .n_shuffles = ns,
                              .n_conns = nc,
                              .flags = RS_INFO_DRAINING};
    size_t len = 0;
    assert_int_equal(rs_sproto_info_reply_encode(&m, buf, cap, &len), RS_OK);
    assert_int_equal(len, rs_sproto_info_reply_len(ns, nc));
    return len;
}

static void strict(sample_t *s, size_t from, size_t to)
{
    s->strict[s->n_strict].from = from;
    s->strict[s->n_strict].to = to;
    s->n_strict++;
}

/* A sample with the header's version and type strict. */
static sample_t *sample_new(unsigned type)
{
    sample_t *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->type = type;
    strict(s, 0, 4); /* version and type, or the snapshot's magic */
    return s;
}

static size_t build_grant_req(uint8_t *buf, size_t cap, uint32_t n)
{
    size_t len;
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(rs_sproto_grant_want_put(buf, cap, i, &wants[i]), RS_OK);
    rs_smsg_grant_req_t m = {.status = RS_OK, .req_id = 77, .n = n};
    assert_int_equal(rs_sproto_grant_req_encode(&m, buf, cap, &len), RS_OK);
    return len;
}

/* A request of two merged grants (protocol 5): a new one, and a retire with the next. */
static size_t build_merged_req(uint8_t *buf, size_t cap)
{
    const rs_grant_want_t mw[2] = {
        {.partition = RS_MERGED_PART,
         .flags = RS_GRANT_MERGED,
         .want = 256 << 10,
         .retire_slot = RS_SLOT_NONE},
        {.partition = RS_MERGED_PART,
         .flags = RS_GRANT_MERGED,
         .want = 4096,
         .retire_slot = 12,
         .retire_used = 640},
    };
    size_t len;
    for (uint32_t i = 0; i < 2; i++)
        assert_int_equal(rs_sproto_grant_want_put(buf, cap, i, &mw[i]), RS_OK);
    rs_smsg_grant_req_t m = {.status = RS_OK, .req_id = 78, .n = 2};
    assert_int_equal(rs_sproto_grant_req_encode(&m, buf, cap, &len), RS_OK);
    return len;
}

static size_t build_grant(uint8_t *buf, size_t cap, uint32_t n, rs_status_t st)
{
    size_t len;
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(rs_sproto_grant_put(buf, cap, i, &grants[i]), RS_OK);
    rs_smsg_grant_t m = {.status = st, .req_id = 78, .n = n, .retry_ms = n ? 25 : 0};
    assert_int_equal(rs_sproto_grant_encode(&m, buf, cap, &len), RS_OK);
    return len;
}

static size_t build_commit(uint8_t *buf, size_t cap, uint32_t n, uint32_t last)
{
    size_t len;
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(rs_sproto_commit_put(buf, cap, i, &commits[i]), RS_OK);
    rs_smsg_commit_t m = {.status = RS_OK, .n = n, .last = last, .total_batches = last ? 33 : 0};
    assert_int_equal(rs_sproto_commit_encode(&m, buf, cap, &len), RS_OK);
    return len;
}

static size_t build_snap(uint8_t *buf, size_t cap, uint32_t nc, uint32_t ne)
{
    size_t len;
    for (uint32_t i = 0; i < nc; i++)
        assert_int_equal(rs_sproto_snap_commit_put(buf, cap, i, &snap_commits[i]), RS_OK);
    for (uint32_t i = 0; i < ne; i++)
        assert_int_equal(rs_sproto_snap_entry_put(buf, cap, nc, i, &snap_entries[i]), RS_OK);
    rs_snap_hdr_t h = {.n_commits = nc, .n_entries = ne, .partition = 6};
    assert_int_equal(rs_sproto_snap_encode(&h, buf, cap, &len), RS_OK);
    return len;
}

/* One valid encoding of every message (and of the refusal forms), with its strict bytes. */
static int make_samples(sample_t **out)
{
    int n = 0;
    sample_t *s;
    size_t len = 0;
#define ADD(type) (s = out[n++] = sample_new(type))

    ADD(RS_SMSG_ATTACH);
    rs_smsg_attach_t at = {.status = RS_OK,
                           .role = RS_ROLE_PUSHER,
                           .shuffle_id = 5,
                           .n_partitions = 16,
                           .map_id = 3,
                           .attempt = 1,
                           .replicas = 2,
                           .generation = 0x0123456789abcdefull};
    assert_int_equal(rs_sproto_attach_encode(&at, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 4, 12);  /* status (request), role */
    strict(s, 29, 32); /* replicas' high bytes (at most 3) */
    ADD(RS_SMSG_ATTACH);
    rs_smsg_attach_t ar = {
        .status = RS_OK, .role = RS_ROLE_READER, .shuffle_id = 5, .generation = 9};
    assert_int_equal(rs_sproto_attach_encode(&ar, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 4, 12);
    strict(s, 16, 28); /* a reader's counts */
    strict(s, 29, 32);

    ADD(RS_SMSG_ATTACH_REPLY);
    rs_smsg_attach_reply_t arr = {
        .status = RS_OK, .arena_len = 1 << 24, .rkey = rkey_bytes, .rkey_len = sizeof(rkey_bytes)};
    assert_int_equal(rs_sproto_attach_reply_encode(&arr, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 16, 20); /* key length */
    strict(s, 21, 24); /* replicas' high bytes */
    ADD(RS_SMSG_ATTACH_REPLY);
    arr.status = RS_ERR_NOT_FOUND;
    assert_int_equal(rs_sproto_attach_reply_encode(&arr, s->bytes, MSG_MAX, &s->len), RS_OK);
    assert_int_equal(s->len, RS_SPROTO_HDR_LEN);

    ADD(RS_SMSG_GRANT_REQ);
    s->len = build_grant_req(s->bytes, MSG_MAX, 3);
    strict(s, 4, 8);
    strict(s, 12, 16); /* n */
    strict(s, 16 + 20, 16 + 24);
    strict(s, 16 + 32 + 20, 16 + 32 + 24);

    ADD(RS_SMSG_GRANT_REQ);
    s->len = build_merged_req(s->bytes, MSG_MAX);
    strict(s, 4, 8);
    strict(s, 12, 16);               /* n */
    strict(s, 16, 16 + 8);           /* a merged entry's partition and flags */
    strict(s, 16 + 32, 16 + 32 + 8); /* ... the second's */
    strict(s, 16 + 32 + 20, 16 + 32 + 24);

    ADD(RS_SMSG_GRANT);
    s->len = build_grant(s->bytes, MSG_MAX, 3, RS_OK);
    strict(s, 12, 16);
    strict(s, 20, 24);
    strict(s, 24 + 12, 24 + 16);
    strict(s, 24 + 32 + 8, 24 + 32 + 24); /* a retire's grant: no slot or offset */
    ADD(RS_SMSG_GRANT);
    s->len = build_grant(s->bytes, MSG_MAX, 0, RS_ERR_MSG_SIZE);
    strict(s, 12, 16);
    strict(s, 20, 24);

    ADD(RS_SMSG_NACK);
    rs_smsg_nack_t nk = {.status = RS_ERR_CHECKSUM, .partition = 2, .imm = 0x12345, .seq = 99};
    assert_int_equal(rs_sproto_nack_encode(&nk, s->bytes, MSG_MAX, &s->len), RS_OK);

    ADD(RS_SMSG_COMMIT);
    s->len = build_commit(s->bytes, MSG_MAX, 3, 1);
    strict(s, 4, 12); /* status, n */
    ADD(RS_SMSG_COMMIT);
    s->len = build_commit(s->bytes, MSG_MAX, 2, 0);
    strict(s, 4, 12);  /* status, n */
    strict(s, 16, 24); /* the total is 0 before the last chunk */
    ADD(RS_SMSG_COMMIT);
    s->len = build_commit(s->bytes, MSG_MAX, 0, 1);

    ADD(RS_SMSG_READ_OPEN);
    rs_smsg_read_open_t ro = {.status = RS_OK, .shuffle_id = 1, .partition = 2, .tag = 3};
    assert_int_equal(rs_sproto_read_open_encode(&ro, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 4, 8); /* status; n_partitions (20..24) is any value, checked by the worker */

    ADD(RS_SMSG_READ_REPLY);
    rs_smsg_read_reply_t rr = {
        .status = RS_OK, .snap_id = 4, .tag = 5, .index_off = 1 << 20, .index_len = 4096};
    assert_int_equal(rs_sproto_read_reply_encode(&rr, s->bytes, MSG_MAX, &s->len), RS_OK);
    ADD(RS_SMSG_READ_REPLY);
    uint8_t snap[512];
    rr.index_off = RS_SPROTO_INLINE;
    rr.index_len = build_snap(snap, sizeof(snap), 2, 3);
    rr.index = snap;
    assert_int_equal(rs_sproto_read_reply_encode(&rr, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 24, 32); /* the inline length */
    ADD(RS_SMSG_READ_REPLY);
    rs_smsg_read_reply_t rf = {.status = RS_ERR_BACKPRESSURE, .tag = 6};
    assert_int_equal(rs_sproto_read_reply_encode(&rf, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 8, 12);
    strict(s, 16, 32);

    ADD(RS_SMSG_SPILL_LOAD);
    rs_smsg_spill_load_t sl = {.status = RS_OK, .snap_id = 1, .first = 10, .n = 4, .tag = 8};
    assert_int_equal(rs_sproto_spill_load_encode(&sl, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 4, 8);

    ADD(RS_SMSG_SPILL_REPLY);
    rs_smsg_spill_reply_t sr = {.status = RS_OK, .n = 3, .tag = 8, .off = 1 << 21, .len = 300};
    assert_int_equal(rs_sproto_spill_reply_encode(&sr, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 16, 24); /* retry_ms (only with backpressure), reserved */
    ADD(RS_SMSG_SPILL_REPLY);
    rs_smsg_spill_reply_t sb = {.status = RS_ERR_BACKPRESSURE, .tag = 8, .retry_ms = 50};
    assert_int_equal(rs_sproto_spill_reply_encode(&sb, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 8, 12);
    strict(s, 20, 40);

    ADD(RS_SMSG_READ_CLOSE);
    rs_smsg_read_close_t rc = {.status = RS_OK, .snap_id = 12};
    assert_int_equal(rs_sproto_read_close_encode(&rc, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 4, 8);
    strict(s, 12, 16);

    ADD(RS_SMSG_DROP);
    rs_smsg_drop_t dr = {.status = RS_OK, .shuffle_id = 12};
    assert_int_equal(rs_sproto_drop_encode(&dr, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 4, 8);
    strict(s, 12, 16);

    ADD(RS_SMSG_INFO);
    rs_smsg_info_t iq = {.status = RS_OK, .flags = RS_INFO_REQ_DRAIN};
    assert_int_equal(rs_sproto_info_encode(&iq, s->bytes, MSG_MAX, &s->len), RS_OK);
    strict(s, 9, 16); /* flags past RS_INFO_REQ_DRAIN (bit 0), reserved */
    ADD(RS_SMSG_INFO_REPLY);
    s->len = build_info_reply(s->bytes, MSG_MAX, 2, 2);
    strict(s, 4, 8);     /* the status */
    strict(s, 96, 104);  /* the counts */
    strict(s, 108, 112); /* reserved */
    ADD(RS_SMSG_INFO_REPLY);
    s->len = build_info_reply(s->bytes, MSG_MAX, 0, 0);
    ADD(RS_SMSG_INFO_REPLY);
    rs_smsg_info_reply_t ir = {.status = RS_ERR_AUTH};
    assert_int_equal(rs_sproto_info_reply_encode(&ir, s->bytes, MSG_MAX, &s->len), RS_OK);

    static const unsigned hdr_only[] = {RS_SMSG_COMMIT_REPLY, RS_SMSG_DROP_REPLY, RS_SMSG_RECLAIM};
    for (size_t i = 0; i < 3; i++) {
        ADD(hdr_only[i]);
        rs_status_t st = hdr_only[i] == RS_SMSG_RECLAIM ? RS_OK : RS_ERR_STATE;
        assert_int_equal(rs_sproto_status_encode(hdr_only[i], st, s->bytes, MSG_MAX, &s->len),
                         RS_OK);
    }

    ADD(SNAP_TYPE);
    s->len = build_snap(s->bytes, MSG_MAX, 2, 3);
    strict(s, 4, 12);            /* the counts */
    strict(s, 16 + 13, 16 + 16); /* commit 0's flags past RS_SNAP_C_HOLDER (bit 0) */
    ADD(SNAP_TYPE);
    s->len = build_snap(s->bytes, MSG_MAX, 0, 0);
    (void)len;
#undef ADD
    return n;
}

/* Decodes buf as type and encodes what came out again; returns the decoder's status. */
static rs_status_t redo(unsigned type, const uint8_t *buf, size_t len, uint8_t *out,
                        size_t *out_len)
{
    rs_status_t st;
    if (type == SNAP_TYPE) {
        rs_snap_hdr_t h;
        if ((st = rs_sproto_snap_decode(buf, len, &h)) != RS_OK)
            return st;
        for (uint32_t i = 0; i < h.n_commits; i++) {
            rs_snap_commit_t c = rs_sproto_snap_commit_get(&h, i);
            assert_int_equal(rs_sproto_snap_commit_put(out, MSG_MAX, i, &c), RS_OK);
        }
        for (uint32_t i = 0; i < h.n_entries; i++) {
            rs_snap_entry_t e = rs_sproto_snap_entry_get(&h, i);
            assert_int_equal(rs_sproto_snap_entry_put(out, MSG_MAX, h.n_commits, i, &e), RS_OK);
        }
        assert_int_equal(rs_sproto_snap_encode(&h, out, MSG_MAX, out_len), RS_OK);
        return RS_OK;
    }
    rs_smsg_t m;
    if ((st = rs_sproto_decode(buf, len, type, &m)) != RS_OK)
        return st;
    assert_int_equal(m.type, type);
    switch (type) {
        case RS_SMSG_ATTACH:
            st = rs_sproto_attach_encode(&m.u.attach, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_ATTACH_REPLY:
            st = rs_sproto_attach_reply_encode(&m.u.attach_reply, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_GRANT_REQ:
            for (uint32_t i = 0; i < m.u.grant_req.n; i++) {
                rs_grant_want_t w = rs_sproto_grant_want_get(&m.u.grant_req, i);
                assert_int_equal(rs_sproto_grant_want_put(out, MSG_MAX, i, &w), RS_OK);
            }
            st = rs_sproto_grant_req_encode(&m.u.grant_req, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_GRANT:
            for (uint32_t i = 0; i < m.u.grant.n; i++) {
                rs_grant_t g = rs_sproto_grant_get(&m.u.grant, i);
                assert_int_equal(rs_sproto_grant_put(out, MSG_MAX, i, &g), RS_OK);
            }
            st = rs_sproto_grant_encode(&m.u.grant, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_NACK:
            st = rs_sproto_nack_encode(&m.u.nack, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_COMMIT:
            for (uint32_t i = 0; i < m.u.commit.n; i++) {
                rs_commit_entry_t e = rs_sproto_commit_get(&m.u.commit, i);
                assert_int_equal(rs_sproto_commit_put(out, MSG_MAX, i, &e), RS_OK);
            }
            st = rs_sproto_commit_encode(&m.u.commit, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_READ_OPEN:
            st = rs_sproto_read_open_encode(&m.u.read_open, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_READ_REPLY:
            st = rs_sproto_read_reply_encode(&m.u.read_reply, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_SPILL_LOAD:
            st = rs_sproto_spill_load_encode(&m.u.spill_load, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_SPILL_REPLY:
            st = rs_sproto_spill_reply_encode(&m.u.spill_reply, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_READ_CLOSE:
            st = rs_sproto_read_close_encode(&m.u.read_close, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_DROP:
            st = rs_sproto_drop_encode(&m.u.drop, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_INFO:
            st = rs_sproto_info_encode(&m.u.info, out, MSG_MAX, out_len);
            break;
        case RS_SMSG_INFO_REPLY:
            for (uint32_t i = 0; i < m.u.info_reply.n_shuffles; i++) {
                rs_info_shuffle_t e = rs_sproto_info_shuffle_get(&m.u.info_reply, i);
                assert_int_equal(rs_sproto_info_shuffle_put(out, MSG_MAX, i, &e), RS_OK);
            }
            for (uint32_t i = 0; i < m.u.info_reply.n_conns; i++) {
                rs_info_conn_t e = rs_sproto_info_conn_get(&m.u.info_reply, i);
                assert_int_equal(
                    rs_sproto_info_conn_put(out, MSG_MAX, m.u.info_reply.n_shuffles, i, &e), RS_OK);
            }
            st = rs_sproto_info_reply_encode(&m.u.info_reply, out, MSG_MAX, out_len);
            break;
        default:
            st = rs_sproto_status_encode(type, m.status, out, MSG_MAX, out_len);
            break;
    }
    assert_int_equal(st, RS_OK);
    return RS_OK;
}

static int is_decode_error(rs_status_t st)
{
    return st == RS_ERR_TRUNCATED || st == RS_ERR_BAD_VERSION || st == RS_ERR_BAD_LENGTH ||
           st == RS_ERR_PROTOCOL || st == RS_ERR_BAD_MAGIC;
}

static void free_samples(sample_t **s, int n)
{
    for (int i = 0; i < n; i++)
        free(s[i]);
}

static void test_round_trip(void **state)
{
    (void)state;
    sample_t *s[64];
    int n = make_samples(s);
    uint8_t out[MSG_MAX];
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        assert_int_equal(redo(s[i]->type, s[i]->bytes, s[i]->len, out, &len), RS_OK);
        assert_int_equal(len, s[i]->len);
        assert_memory_equal(out, s[i]->bytes, len);
    }
    free_samples(s, n);
}

/* The decoded fields, not only the bytes: little-endian at the documented offsets. */
static void test_fields(void **state)
{
    (void)state;
    uint8_t buf[MSG_MAX];
    size_t len = build_grant_req(buf, sizeof(buf), 3);
    assert_int_equal(len, 16 + 3 * 32);
    assert_int_equal(rs_get_le(buf, 2), RS_SPROTO_VERSION);
    assert_int_equal(rs_get_le(buf + 2, 2), RS_SMSG_GRANT_REQ);
    assert_int_equal(rs_get_le32(buf + 8), 77);
    assert_int_equal(rs_get_le64(buf + 16 + 32 + 8), 0);   /* entry 1's want */
    assert_int_equal(rs_get_le32(buf + 16 + 32 + 16), 17); /* ... its retire slot */
    assert_int_equal(rs_get_le64(buf + 16 + 64 + 24), 64); /* entry 2's retire_used */
    rs_smsg_grant_req_t m;
    assert_int_equal(rs_sproto_grant_req_decode(buf, len, &m), RS_OK);
    assert_int_equal(m.req_id, 77);
    assert_int_equal(m.n, 3);
    for (uint32_t i = 0; i < 3; i++) {
        rs_grant_want_t w = rs_sproto_grant_want_get(&m, i);
        assert_int_equal(w.partition, wants[i].partition);
        assert_int_equal(w.flags, wants[i].flags);
        assert_int_equal(w.want, wants[i].want);
        assert_int_equal(w.retire_slot, wants[i].retire_slot);
        assert_int_equal(w.retire_used, wants[i].retire_used);
    }
    /* A reply's status is signed on the wire. */
    rs_smsg_nack_t nk = {.status = RS_ERR_CHECKSUM, .partition = 2, .imm = 7, .seq = 99}, back;
    assert_int_equal(rs_sproto_nack_encode(&nk, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(len, RS_SPROTO_NACK_LEN);
    assert_int_equal((int32_t)rs_get_le32(buf + 4), RS_ERR_CHECKSUM);
    assert_int_equal(rs_sproto_nack_decode(buf, len, &back), RS_OK);
    assert_int_equal(back.status, RS_ERR_CHECKSUM);
    assert_int_equal(back.seq, 99);
    /* The inline snapshot view points into the reply. */
    uint8_t snap[512];
    rs_smsg_read_reply_t rr = {.status = RS_OK,
                               .snap_id = 4,
                               .tag = 5,
                               .index_off = RS_SPROTO_INLINE,
                               .index_len = build_snap(snap, sizeof(snap), 2, 3),
                               .index = snap},
                         rb;
    assert_int_equal(rs_sproto_read_reply_encode(&rr, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(rs_sproto_read_reply_decode(buf, len, &rb), RS_OK);
    assert_ptr_equal(rb.index, buf + RS_SPROTO_READ_REPLY_LEN);
    rs_snap_hdr_t h;
    assert_int_equal(rs_sproto_snap_decode(rb.index, rb.index_len, &h), RS_OK);
    assert_int_equal(h.partition, 6);
    rs_snap_entry_t e = rs_sproto_snap_entry_get(&h, 2);
    assert_int_equal(e.seq, RS_SEQ_MAX - 1);
    assert_int_equal(e.len, 100000);
    assert_int_equal(rs_sproto_snap_commit_get(&h, 0).checksum, 9);
}

static void test_truncated_and_extended(void **state)
{
    (void)state;
    sample_t *s[64];
    int n = make_samples(s);
    uint8_t out[MSG_MAX];
    for (int i = 0; i < n; i++) {
        for (size_t cut = 0; cut < s[i]->len; cut++) {
            uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan sees any read past it */
            memcpy(copy, s[i]->bytes, cut);
            size_t len;
            rs_status_t st = redo(s[i]->type, copy, cut, out, &len);
            if (st == RS_OK)
                fail_msg("sample %d (type %u): a %zu-byte prefix of %zu decoded", i, s[i]->type,
                         cut, s[i]->len);
            assert_true(is_decode_error(st));
            free(copy);
        }
        uint8_t longer[MSG_MAX + 1];
        memcpy(longer, s[i]->bytes, s[i]->len);
        longer[s[i]->len] = 0;
        size_t len;
        assert_true(is_decode_error(redo(s[i]->type, longer, s[i]->len + 1, out, &len)));
    }
    free_samples(s, n);
}

static int in_strict(const sample_t *s, size_t byte)
{
    for (int k = 0; k < s->n_strict; k++)
        if (byte >= s->strict[k].from && byte < s->strict[k].to)
            return 1;
    return 0;
}

static void test_bit_flips(void **state)
{
    (void)state;
    sample_t *s[64];
    int n = make_samples(s);
    uint8_t buf[MSG_MAX], out[MSG_MAX];
    for (int i = 0; i < n; i++) {
        int refused = 0;
        for (size_t bit = 0; bit < s[i]->len * 8; bit++) {
            memcpy(buf, s[i]->bytes, s[i]->len);
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            size_t len = 0;
            rs_status_t st = redo(s[i]->type, buf, s[i]->len, out, &len);
            if (st != RS_OK) {
                assert_true(is_decode_error(st));
                refused++;
                continue;
            }
            if (in_strict(s[i], bit / 8))
                fail_msg("sample %d (type %u): a flip of bit %zu was accepted", i, s[i]->type, bit);
            /* Accepted: the decoder kept every bit (the flip shows in the re-encoding). */
            assert_int_equal(len, s[i]->len);
            assert_memory_equal(out, buf, len);
        }
        assert_true(refused > 0);
    }
    free_samples(s, n);
}

/* A message with one u32 at off replaced by v, decoded as type. */
static rs_status_t patched(unsigned type, const uint8_t *src, size_t len, size_t off, uint32_t v)
{
    uint8_t buf[MSG_MAX], out[MSG_MAX];
    size_t n;
    memcpy(buf, src, len);
    rs_put_le32(buf + off, v);
    return redo(type, buf, len, out, &n);
}

static void test_ranges(void **state)
{
    (void)state;
    uint8_t b[MSG_MAX];
    size_t len;
    /* Header: unknown status, a request carrying an error, another type. */
    len = build_commit(b, sizeof(b), 1, 1);
    assert_int_equal(patched(RS_SMSG_COMMIT, b, len, 4, (uint32_t)RS_ERR_IO), RS_ERR_PROTOCOL);
    assert_int_equal(redo(RS_SMSG_GRANT_REQ, b, len, b + 1024, &(size_t){0}), RS_ERR_PROTOCOL);
    rs_status_t st;
    assert_int_equal(rs_sproto_status_encode(RS_SMSG_DROP_REPLY, RS_ERR_STATE, b, 64, &len), RS_OK);
    assert_int_equal(rs_sproto_status_decode(b, len, RS_SMSG_DROP_REPLY, &st), RS_OK);
    assert_int_equal(st, RS_ERR_STATE);
    assert_int_equal(patched(RS_SMSG_DROP_REPLY, b, len, 4, (uint32_t)-15), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_DROP_REPLY, b, len, 4, 1), RS_ERR_PROTOCOL);
    assert_int_equal(rs_sproto_status_decode(b, len, RS_SMSG_GRANT, &st), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_DROP_REPLY, b, len, 0, (RS_SMSG_DROP_REPLY << 16) | 2),
                     RS_ERR_BAD_VERSION);
    assert_int_equal(rs_sproto_decode(b, len, RS_SMSG_LAST + 1, &(rs_smsg_t){0}), RS_ERR_PROTOCOL);
    assert_int_equal(rs_sproto_status_encode(RS_SMSG_RECLAIM, RS_ERR_BUSY, b, 64, &len), RS_OK);
    assert_int_equal(rs_sproto_status_decode(b, len, RS_SMSG_RECLAIM, &st), RS_ERR_PROTOCOL);

    /* INFO: flags; INFO_REPLY: unknown flags, a role, a reader with a map, no partitions. */
    rs_smsg_info_t iq = {.status = RS_OK};
    assert_int_equal(rs_sproto_info_encode(&iq, b, sizeof(b), &len), RS_OK);
    assert_int_equal(patched(RS_SMSG_INFO, b, len, 8, 2), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_INFO, b, len, 8, RS_INFO_REQ_DRAIN), RS_OK);
    len = build_info_reply(b, sizeof(b), 1, 2);
    assert_int_equal(patched(RS_SMSG_INFO_REPLY, b, len, 104, 4), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_INFO_REPLY, b, len, 112 + 4, 0), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_INFO_REPLY, b, len, 112 + 12, 4), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_INFO_REPLY, b, len, 112 + 16, 2), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_INFO_REPLY, b, len, 160, 3), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_INFO_REPLY, b, len, 192 + 8, 5), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_INFO_REPLY, b, len, 96, 2), RS_ERR_BAD_LENGTH);

    /* ATTACH: role, a pusher without partitions. */
    rs_smsg_attach_t at = {.role = RS_ROLE_PUSHER, .shuffle_id = 1, .n_partitions = 1};
    assert_int_equal(rs_sproto_attach_encode(&at, b, sizeof(b), &len), RS_OK);
    assert_int_equal(patched(RS_SMSG_ATTACH, b, len, 8, 3), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_ATTACH, b, len, 16, 0), RS_ERR_PROTOCOL);
    /* ... and a replication factor above 3, in ATTACH and in ATTACH_REPLY */
    assert_int_equal(patched(RS_SMSG_ATTACH, b, len, 28, 3), RS_OK);
    assert_int_equal(patched(RS_SMSG_ATTACH, b, len, 28, 4), RS_ERR_PROTOCOL);
    /* ... and the generation round-trips whole (64 bits, any value). */
    at.generation = 0xfedcba9876543210ull;
    assert_int_equal(rs_sproto_attach_encode(&at, b, sizeof(b), &len), RS_OK);
    assert_int_equal(len, RS_SPROTO_ATTACH_LEN);
    rs_smsg_attach_t at_back;
    assert_int_equal(rs_sproto_attach_decode(b, len, &at_back), RS_OK);
    assert_true(at_back.generation == 0xfedcba9876543210ull);
    assert_int_equal(rs_sproto_attach_decode(b, len - 1, &at_back), RS_ERR_TRUNCATED);
    /* ATTACH_REPLY: a key of 0 or too many bytes. */
    rs_smsg_attach_reply_t ar = {.arena_len = 1, .rkey = rkey_bytes, .rkey_len = 0};
    assert_int_equal(rs_sproto_attach_reply_encode(&ar, b, sizeof(b), &len), RS_OK);
    assert_int_equal(rs_sproto_attach_reply_decode(b, len, &ar), RS_ERR_BAD_LENGTH);
    ar = (rs_smsg_attach_reply_t){.arena_len = 1, .rkey = rkey_bytes, .rkey_len = 4, .replicas = 3};
    assert_int_equal(rs_sproto_attach_reply_encode(&ar, b, sizeof(b), &len), RS_OK);
    assert_int_equal(rs_sproto_attach_reply_decode(b, len, &ar), RS_OK);
    assert_int_equal(ar.replicas, 3);
    assert_int_equal(patched(RS_SMSG_ATTACH_REPLY, b, len, 20, 4), RS_ERR_PROTOCOL);

    /* GRANT_REQ entries: flags, a slot past the table, retire_used without a slot, a no-op, odd
     * want. */
    len = build_grant_req(b, sizeof(b), 1);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16 + 4, 4), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16 + 16, RS_GRANT_SLOTS), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16 + 16, RS_GRANT_SLOTS - 1), RS_OK);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16 + 24, 1), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16 + 8, 0), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16 + 8, 100), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 12, 0), RS_ERR_BAD_LENGTH);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 12, UINT32_MAX), RS_ERR_BAD_LENGTH);
    len = build_grant_req(b, sizeof(b), 0);
    assert_int_equal(redo(RS_SMSG_GRANT_REQ, b, len, b + 1024, &(size_t){0}), RS_ERR_PROTOCOL);
    /* Merged entries: RS_MERGED_PART exactly with RS_GRANT_MERGED, never with BULK or AHEAD. */
    len = build_merged_req(b, sizeof(b));
    rs_smsg_grant_req_t mq;
    assert_int_equal(rs_sproto_grant_req_decode(b, len, &mq), RS_OK);
    assert_int_equal(rs_sproto_grant_want_get(&mq, 1).retire_slot, 12);
    assert_int_equal(rs_sproto_grant_want_get(&mq, 0).flags, RS_GRANT_MERGED);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16, 3), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16 + 4, 0), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16 + 4, RS_GRANT_MERGED | RS_GRANT_BULK),
                     RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16 + 4, RS_GRANT_MERGED | RS_GRANT_AHEAD),
                     RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16 + 4, 8), RS_ERR_PROTOCOL);
    len = build_grant_req(b, sizeof(b), 1);
    assert_int_equal(patched(RS_SMSG_GRANT_REQ, b, len, 16, RS_MERGED_PART), RS_ERR_PROTOCOL);

    /* GRANT entries: unknown status, a slot past the table, a grant past RS_GRANT_MAX, misaligned.
     */
    len = build_grant(b, sizeof(b), 1, RS_OK);
    assert_int_equal(patched(RS_SMSG_GRANT, b, len, 24 + 4, (uint32_t)-16), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT, b, len, 24 + 8, RS_GRANT_SLOTS), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT, b, len, 24 + 24, (uint32_t)RS_GRANT_MAX + 64),
                     RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT, b, len, 24 + 24, (uint32_t)RS_GRANT_MAX), RS_OK);
    assert_int_equal(patched(RS_SMSG_GRANT, b, len, 24 + 16, 32), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_GRANT, b, len, 4, (uint32_t)RS_ERR_BUSY), RS_ERR_PROTOCOL);

    /* NACK: never RS_OK; seq below RS_SEQ_MAX. */
    rs_smsg_nack_t nk = {.status = RS_ERR_PROTOCOL};
    assert_int_equal(rs_sproto_nack_encode(&nk, b, sizeof(b), &len), RS_OK);
    assert_int_equal(patched(RS_SMSG_NACK, b, len, 4, 0), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_NACK, b, len, 20, 1), RS_ERR_PROTOCOL);

    /*
     * COMMIT: last is 0 or 1; entries ascending; an entry of 0 batches (a
     * holder sent nothing) has 0 bytes and checksum.
     */
    len = build_commit(b, sizeof(b), 3, 1);
    assert_int_equal(patched(RS_SMSG_COMMIT, b, len, 12, 2), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_COMMIT, b, len, 24 + 24, 0), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_COMMIT, b, len, 24 + 4, 0), RS_ERR_PROTOCOL);
    {
        rs_commit_entry_t none = {.partition = 2};
        rs_smsg_commit_t m = {.status = RS_OK, .n = 1, .last = 1, .total_batches = 0}, back;
        assert_int_equal(rs_sproto_commit_put(b, sizeof(b), 0, &none), RS_OK);
        assert_int_equal(rs_sproto_commit_encode(&m, b, sizeof(b), &len), RS_OK);
        assert_int_equal(rs_sproto_commit_decode(b, len, &back), RS_OK);
        assert_int_equal(rs_sproto_commit_get(&back, 0).batches, 0);
        assert_int_equal(patched(RS_SMSG_COMMIT, b, len, 24 + 8, 64), RS_ERR_PROTOCOL);
        assert_int_equal(patched(RS_SMSG_COMMIT, b, len, 24 + 16, 1), RS_ERR_PROTOCOL);
    }
    len = build_commit(b, sizeof(b), 0, 1);
    assert_int_equal(patched(RS_SMSG_COMMIT, b, len, 12, 0), RS_ERR_PROTOCOL);

    /* SPILL_LOAD of nothing; SPILL_REPLY staging nothing, or misaligned. */
    rs_smsg_spill_load_t sl = {.n = 1};
    assert_int_equal(rs_sproto_spill_load_encode(&sl, b, sizeof(b), &len), RS_OK);
    assert_int_equal(patched(RS_SMSG_SPILL_LOAD, b, len, 16, 0), RS_ERR_PROTOCOL);
    rs_smsg_spill_reply_t sr = {.n = 1, .off = 64, .len = 64};
    assert_int_equal(rs_sproto_spill_reply_encode(&sr, b, sizeof(b), &len), RS_OK);
    assert_int_equal(patched(RS_SMSG_SPILL_REPLY, b, len, 8, 0), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_SPILL_REPLY, b, len, 24, 65), RS_ERR_PROTOCOL);

    /* READ_REPLY: an inline length that disagrees with the bytes; a refusal with a snapshot. */
    rs_smsg_read_reply_t rr = {.index_off = 64, .index_len = 64};
    assert_int_equal(rs_sproto_read_reply_encode(&rr, b, sizeof(b), &len), RS_OK);
    assert_int_equal(patched(RS_SMSG_READ_REPLY, b, len, 24, 8), RS_ERR_PROTOCOL);
    assert_int_equal(patched(RS_SMSG_READ_REPLY, b, len, 4, (uint32_t)RS_ERR_NOT_FOUND),
                     RS_ERR_PROTOCOL);

    /* Snapshot: magic, commit and entry flags, seq, a zero-length frame, counts of nothing. */
    len = build_snap(b, sizeof(b), 2, 1);
    assert_int_equal(patched(SNAP_TYPE, b, len, 16 + 12, 2), RS_ERR_PROTOCOL);
    assert_int_equal(patched(SNAP_TYPE, b, len, 16 + 32 + 16, 8), RS_ERR_PROTOCOL);
    len = build_snap(b, sizeof(b), 1, 1);
    assert_int_equal(patched(SNAP_TYPE, b, len, 0, 0x534e4150), RS_ERR_BAD_MAGIC);
    size_t e0 = 16 + 32;
    assert_int_equal(patched(SNAP_TYPE, b, len, e0 + 12, 2), RS_ERR_PROTOCOL);
    assert_int_equal(patched(SNAP_TYPE, b, len, e0 + 28, 1), RS_ERR_PROTOCOL);
    assert_int_equal(patched(SNAP_TYPE, b, len, e0 + 8, 0), RS_ERR_PROTOCOL);
    assert_int_equal(patched(SNAP_TYPE, b, len, 8, 1000), RS_ERR_BAD_LENGTH);
}

/* Encoders refuse a buffer too small, and list puts refuse entries past it. */
static void test_no_space(void **state)
{
    (void)state;
    uint8_t b[MSG_MAX];
    size_t len = 0;
    rs_smsg_attach_t at = {.role = RS_ROLE_READER};
    assert_int_equal(rs_sproto_attach_encode(&at, b, RS_SPROTO_ATTACH_LEN - 1, &len),
                     RS_ERR_NO_SPACE);
    assert_int_equal(len, 0);
    assert_int_equal(rs_sproto_grant_req_max(16 + 3 * 32 + 31), 3);
    assert_int_equal(rs_sproto_grant_req_max(15), 0);
    assert_int_equal(rs_sproto_grant_want_put(b, 16 + 3 * 32, 3, &wants[0]), RS_ERR_NO_SPACE);
    assert_int_equal(rs_sproto_grant_want_put(b, 16 + 3 * 32, 2, &wants[0]), RS_OK);
    rs_smsg_grant_req_t m = {.n = 4};
    assert_int_equal(rs_sproto_grant_req_encode(&m, b, 16 + 3 * 32, &len), RS_ERR_NO_SPACE);
    assert_int_equal(rs_sproto_commit_max(RS_SPROTO_COMMIT_LEN + 24), 1);
    assert_int_equal(rs_sproto_grant_max(RS_SPROTO_GRANT_LEN - 1), 0);
    rs_smsg_read_reply_t rr = {.index_off = RS_SPROTO_INLINE, .index_len = 100, .index = b};
    assert_int_equal(rs_sproto_read_reply_encode(&rr, b + 1024, 100, &len), RS_ERR_NO_SPACE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_truncated_and_extended),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_no_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
