/* Seed inputs for fuzz_manifest: valid encodings of every broadcast wire format. */
#include <stdlib.h>
#include <string.h>

#include "broadcast/proto.h"
#include "fuzz_manifest.h"

static void emit_mode(void (*emit)(void *, const uint8_t *, size_t), void *user, uint8_t mode,
                      const uint8_t *p, size_t len)
{
    uint8_t *buf = malloc(len + 1);
    if (buf == NULL)
        return;
    buf[0] = mode;
    memcpy(buf + 1, p, len);
    emit(user, buf, len + 1);
    free(buf);
}

static void seed_descs(void (*emit)(void *, const uint8_t *, size_t), void *user)
{
    static const uint8_t blob[40] = {1, 2, 3, 4, 5};
    static const uint64_t sizes[] = {0, 1, 65536, 65537, 4u << 20, (10u << 20) + 5};
    uint8_t buf[RS_BCAST_DESC_MAX];
    size_t len;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        rs_bc_desc_t d;
        memset(&d, 0, sizeof(d));
        d.node_id = 0x1122334455667788ull + i;
        d.seq = 1 + i;
        d.size = sizes[i];
        d.block_size = 1u << 20;
        d.nblocks = rs_bc_nblocks(d.size, d.block_size);
        d.flags = d.size <= 65536 ? RS_BDESC_F_INLINE : 0;
        if (i % 2 == 0) {
            d.src.kind = RS_BCAST_ADDR_HOSTPORT;
            d.src.port = 4000;
            d.src.bytes.p = (const uint8_t *)"127.0.0.1";
            d.src.bytes.len = 9;
        } else {
            d.src.kind = RS_BCAST_ADDR_BLOB;
            d.src.bytes.p = blob;
            d.src.bytes.len = sizeof(blob);
        }
        if (rs_bc_desc_encode(&d, buf, sizeof(buf), &len) == RS_OK)
            emit_mode(emit, user, FUZZ_DESC, buf, len);
        /* The same with the object embedded, or with a one-block object's key and checksum. */
        static const uint8_t bytes[64] = {9, 8, 7};
        if (d.size > 0 && d.size <= sizeof(bytes)) {
            d.flags |= RS_BDESC_F_EMBED;
            d.embed = bytes;
        } else if (d.nblocks == 1 && !(d.flags & RS_BDESC_F_INLINE)) {
            d.flags |= RS_BDESC_F_DIRECT;
            d.rkey = (rs_bc_view_t){.p = blob, .len = sizeof(blob)};
            d.sum = 0x0123456789abcdefull;
        } else {
            continue;
        }
        if (rs_bc_desc_encode(&d, buf, sizeof(buf), &len) == RS_OK)
            emit_mode(emit, user, FUZZ_DESC, buf, len);
    }
}

static void seed_reqs(void (*emit)(void *, const uint8_t *, size_t), void *user)
{
    static const uint8_t rkey[24] = {9, 8, 7};
    static const uint8_t bitmap[2] = {0x5a, 0x03};
    uint8_t buf[512];
    size_t len;
    for (int kind = RS_BREQ_GET; kind <= RS_BREQ_ANNOUNCE; kind++) {
        for (int variant = 0; variant < 3; variant++) {
            rs_bc_req_t q;
            memset(&q, 0, sizeof(q));
            q.kind = (uint8_t)kind;
            q.req_id = 77;
            q.nblocks = 10;
            q.node_id = 5;
            q.seq = 6;
            q.known = 3;
            q.reply_off = 4096;
            q.reply_cap = 81920;
            q.reply_rkey.p = rkey;
            q.reply_rkey.len = sizeof(rkey);
            if (variant >= 1) {
                q.flags |= RS_BREQ_F_HOLDER;
                q.holder_addr.kind = RS_BCAST_ADDR_HOSTPORT;
                q.holder_addr.port = 5000;
                q.holder_addr.bytes.p = (const uint8_t *)"host-1.example";
                q.holder_addr.bytes.len = 14;
                q.holder_rkey.p = rkey;
                q.holder_rkey.len = 12;
            }
            if (variant == 2 && kind != RS_BREQ_GET) {
                q.flags |= kind == RS_BREQ_UPDATE ? RS_BREQ_F_WAIT : RS_BREQ_F_BITMAP;
                q.bitmap.p = bitmap;
                q.bitmap.len = sizeof(bitmap);
            }
            if (rs_bc_req_encode(&q, buf, sizeof(buf), &len) == RS_OK)
                emit_mode(emit, user, FUZZ_REQ, buf, len);
        }
    }
}

static void seed_replies(void (*emit)(void *, const uint8_t *, size_t), void *user)
{
    static const uint64_t sums[3] = {1, 2, 3};
    static const rs_bc_active_t tickets[3] = {{0, 0}, {4, 1}, {9, 2}};
    static const uint8_t rkey[20] = {3, 1, 4, 1, 5};
    static const uint8_t bitmap[1] = {0x05};
    static const uint8_t data[100] = {42};
    uint8_t buf[2048];
    size_t len;
    for (int variant = 0; variant < 4; variant++) {
        rs_bc_reply_t h;
        rs_bc_reply_enc_t e;
        memset(&h, 0, sizeof(h));
        h.kind = variant == 2 ? RS_BREQ_UPDATE : RS_BREQ_GET;
        h.node_id = 10;
        h.seq = 11;
        h.block_size = 4096;
        h.size = variant == 1 ? sizeof(data) : 3 * 4096 - 7;
        h.nblocks = rs_bc_nblocks(h.size, h.block_size);
        h.flags = variant == 2 ? 0 : RS_BREPLY_F_SUMS;
        h.flags |= variant == 1 ? RS_BREPLY_F_INLINE : 0;
        h.ticket = 4;
        h.version = 8;
        h.rversion = 2;
        if (variant == 3) {
            memset(&h, 0, sizeof(h));
            h.kind = RS_BREQ_GET;
            h.status = RS_ERR_DESTROYED;
        }
        rs_bc_reply_begin(&e, buf, sizeof(buf), &h);
        if (h.flags & RS_BREPLY_F_SUMS)
            rs_bc_reply_put_sums(&e, sums, h.nblocks);
        if (variant == 0 || variant == 2) {
            rs_bc_holder_wire_t w;
            memset(&w, 0, sizeof(w));
            rs_bc_reply_put_active(&e, tickets, 3);
            w.flags = RS_BHOLDER_F_SOURCE | RS_BHOLDER_F_COMPLETE;
            w.addr.kind = RS_BCAST_ADDR_HOSTPORT;
            w.addr.port = 7;
            w.addr.bytes.p = (const uint8_t *)"10.0.0.1";
            w.addr.bytes.len = 8;
            w.rkey.p = rkey;
            w.rkey.len = sizeof(rkey);
            rs_bc_reply_add_holder(&e, &w);
            w.id = 3;
            w.flags = 0;
            w.bitmap.p = bitmap;
            w.bitmap.len = 1;
            rs_bc_reply_add_holder(&e, &w);
        }
        if (rs_bc_reply_finish(&e, variant == 1 ? data : NULL, variant == 1 ? sizeof(data) : 0,
                               &len) == RS_OK) {
            emit_mode(emit, user, FUZZ_REPLY, buf, len);
            emit_mode(emit, user, FUZZ_REPLY_RESEALED, buf, len);
        }
    }
}

void manifest_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user)
{
    static const rs_bc_active_t tickets[4] = {{0, 0}, {1, 8}, {2, 4}, {7, 14}};
    uint8_t buf[256];
    size_t len;
    seed_descs(emit, user);
    seed_reqs(emit, user);
    seed_replies(emit, user);
    for (uint32_t n = 0; n <= 4; n += 4)
        if (rs_bc_news_encode(1, 2, 3, tickets, n, buf, sizeof(buf), &len) == RS_OK)
            emit_mode(emit, user, FUZZ_NEWS, buf, len);
    rs_bc_destroy_encode(1, 2, buf);
    emit_mode(emit, user, FUZZ_DESTROY, buf, RS_BDESTROY_LEN);
}
