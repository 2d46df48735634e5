/* Seed inputs for fuzz_sproto: valid encodings of every shuffle message and a snapshot. */
#include <string.h>

#include "fuzz_sproto.h"
#include "shuffle/proto.h"

#define SEED_MAX 2048

typedef void (*emit_fn)(void *, const uint8_t *, size_t);

/* seed[1..] holds len bytes of a message of type (or a snapshot). */
static void out(emit_fn emit, void *user, uint8_t *seed, unsigned mode, rs_status_t st, size_t len)
{
    if (st != RS_OK)
        return;
    seed[0] = (uint8_t)mode;
    emit(user, seed, len + 1);
}

static size_t snap(uint8_t *buf, size_t cap, uint32_t nc, uint32_t ne)
{
    size_t len = 0;
    for (uint32_t i = 0; i < nc; i++) {
        rs_snap_commit_t c = {
            .map_id = i, .attempt = 1, .batches = i, .bytes = 64 * i, .checksum = i};
        rs_sproto_snap_commit_put(buf, cap, i, &c);
    }
    for (uint32_t i = 0; i < ne; i++) {
        rs_snap_entry_t e = {.loc = 64 * i, .len = 64, .flags = i & 1, .map_id = i % 2, .seq = i};
        rs_sproto_snap_entry_put(buf, cap, nc, i, &e);
    }
    rs_snap_hdr_t h = {.n_commits = nc, .n_entries = ne, .partition = 3};
    rs_sproto_snap_encode(&h, buf, cap, &len);
    return len;
}

void sproto_corpus(emit_fn emit, void *user)
{
    static const uint8_t key[40] = {7, 7, 7};
    uint8_t seed[SEED_MAX], *b = seed + 1;
    size_t cap = SEED_MAX - 1, len = 0;
    rs_status_t st;
#define M(type) ((type)-RS_SMSG_FIRST)

    rs_smsg_attach_t at = {.role = RS_ROLE_PUSHER, .shuffle_id = 2, .n_partitions = 8, .map_id = 1};
    st = rs_sproto_attach_encode(&at, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_ATTACH), st, len);
    at.generation = 0x8000000000000001ull; /* a registration's identity, high bit set */
    st = rs_sproto_attach_encode(&at, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_ATTACH), st, len);
    rs_smsg_attach_t ar = {.role = RS_ROLE_READER, .shuffle_id = 2, .generation = 7};
    st = rs_sproto_attach_encode(&ar, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_ATTACH), st, len);
    rs_smsg_attach_reply_t rep = {.arena_len = 1 << 20, .rkey = key, .rkey_len = sizeof(key)};
    st = rs_sproto_attach_reply_encode(&rep, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_ATTACH_REPLY), st, len);
    rep.status = RS_ERR_NOT_FOUND;
    st = rs_sproto_attach_reply_encode(&rep, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_ATTACH_REPLY), st, len);

    rs_grant_want_t w[3] = {
        {.partition = 1, .flags = RS_GRANT_BULK, .want = 4096, .retire_slot = RS_SLOT_NONE},
        {.partition = 2, .retire_slot = 3, .retire_used = 640},
        {.partition = 5, .flags = RS_GRANT_AHEAD | RS_GRANT_BULK, .want = 64, .retire_slot = 1},
    };
    for (uint32_t i = 0; i < 3; i++)
        rs_sproto_grant_want_put(b, cap, i, &w[i]);
    rs_smsg_grant_req_t gq = {.req_id = 9, .n = 3};
    st = rs_sproto_grant_req_encode(&gq, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_GRANT_REQ), st, len);
    /* Protocol 5: a merged grant asked, and one retired with the next asked. */
    rs_grant_want_t mw[2] = {
        {.partition = RS_MERGED_PART,
         .flags = RS_GRANT_MERGED,
         .want = 1 << 18,
         .retire_slot = RS_SLOT_NONE},
        {.partition = RS_MERGED_PART,
         .flags = RS_GRANT_MERGED,
         .want = 4096,
         .retire_slot = 4,
         .retire_used = 1 << 18},
    };
    for (uint32_t i = 0; i < 2; i++)
        rs_sproto_grant_want_put(b, cap, i, &mw[i]);
    gq = (rs_smsg_grant_req_t){.req_id = 10, .n = 2};
    st = rs_sproto_grant_req_encode(&gq, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_GRANT_REQ), st, len);

    rs_grant_t g[3] = {
        {.partition = 1, .slot = 4, .off = 4096, .len = 8192},
        {.partition = 2},
        {.partition = 5, .status = RS_ERR_BACKPRESSURE},
    };
    for (uint32_t i = 0; i < 3; i++)
        rs_sproto_grant_put(b, cap, i, &g[i]);
    rs_smsg_grant_t gr = {.req_id = 9, .n = 3, .retry_ms = 20};
    st = rs_sproto_grant_encode(&gr, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_GRANT), st, len);
    rs_smsg_grant_t gf = {.status = RS_ERR_MSG_SIZE};
    st = rs_sproto_grant_encode(&gf, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_GRANT), st, len);

    rs_smsg_nack_t nk = {.status = RS_ERR_CHECKSUM, .partition = 3, .imm = 77, .seq = 5};
    st = rs_sproto_nack_encode(&nk, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_NACK), st, len);

    for (uint32_t i = 0; i < 3; i++) {
        rs_commit_entry_t e = {.partition = 2 * i, .batches = i + 1, .bytes = 100, .checksum = i};
        rs_sproto_commit_put(b, cap, i, &e);
    }
    rs_smsg_commit_t cm = {.n = 3, .last = 1, .total_batches = 6};
    st = rs_sproto_commit_encode(&cm, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_COMMIT), st, len);

    rs_smsg_read_open_t ro = {.shuffle_id = 2, .partition = 3, .tag = 4};
    st = rs_sproto_read_open_encode(&ro, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_READ_OPEN), st, len);
    uint8_t index[512];
    rs_smsg_read_reply_t rr = {.snap_id = 1,
                               .tag = 4,
                               .index_off = RS_SPROTO_INLINE,
                               .index_len = snap(index, sizeof(index), 2, 4),
                               .index = index};
    st = rs_sproto_read_reply_encode(&rr, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_READ_REPLY), st, len);
    rr.index_off = 4096;
    st = rs_sproto_read_reply_encode(&rr, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_READ_REPLY), st, len);

    rs_smsg_spill_load_t sl = {.snap_id = 1, .first = 2, .n = 3, .tag = 5};
    st = rs_sproto_spill_load_encode(&sl, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_SPILL_LOAD), st, len);
    rs_smsg_spill_reply_t sr = {.n = 3, .tag = 5, .off = 8192, .len = 192};
    st = rs_sproto_spill_reply_encode(&sr, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_SPILL_REPLY), st, len);
    rs_smsg_spill_reply_t sb = {.status = RS_ERR_BACKPRESSURE, .tag = 5, .retry_ms = 10};
    st = rs_sproto_spill_reply_encode(&sb, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_SPILL_REPLY), st, len);

    rs_smsg_read_close_t rc = {.snap_id = 1};
    st = rs_sproto_read_close_encode(&rc, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_READ_CLOSE), st, len);
    rs_smsg_drop_t dr = {.shuffle_id = 2};
    st = rs_sproto_drop_encode(&dr, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_DROP), st, len);
    st = rs_sproto_status_encode(RS_SMSG_COMMIT_REPLY, RS_ERR_STATE, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_COMMIT_REPLY), st, len);
    st = rs_sproto_status_encode(RS_SMSG_DROP_REPLY, RS_OK, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_DROP_REPLY), st, len);
    st = rs_sproto_status_encode(RS_SMSG_RECLAIM, RS_OK, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_RECLAIM), st, len);

    rs_smsg_info_t iq = {.status = RS_OK};
    st = rs_sproto_info_encode(&iq, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_INFO), st, len);
    iq.flags = RS_INFO_REQ_DRAIN;
    st = rs_sproto_info_encode(&iq, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_INFO), st, len);
    rs_info_shuffle_t ish = {
        .shuffle_id = 2, .n_partitions = 8, .maps = 2, .replicas = 1, .bytes = 640, .batches = 10};
    rs_info_conn_t icn = {.role = RS_ROLE_PUSHER, .shuffle_id = 2, .map_id = 1, .batches = 10};
    rs_info_conn_t icr = {
        .role = RS_ROLE_READER, .shuffle_id = 2, .map_id = RS_INFO_NONE, .snaps = 1};
    rs_sproto_info_shuffle_put(b, cap, 0, &ish);
    rs_sproto_info_conn_put(b, cap, 1, 0, &icn);
    rs_sproto_info_conn_put(b, cap, 1, 1, &icr);
    rs_smsg_info_reply_t irp = {.c = {.batches = 10, .bytes = 640, .arena_len = 1 << 20},
                                .n_shuffles = 1,
                                .n_conns = 2,
                                .flags = RS_INFO_DRAINING};
    st = rs_sproto_info_reply_encode(&irp, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_INFO_REPLY), st, len);
    irp.status = RS_ERR_PROTOCOL;
    st = rs_sproto_info_reply_encode(&irp, b, cap, &len);
    out(emit, user, seed, M(RS_SMSG_INFO_REPLY), st, len);

    len = snap(b, cap, 3, 5);
    out(emit, user, seed, FUZZ_SPROTO_SNAP, RS_OK, len);
#undef M
}
