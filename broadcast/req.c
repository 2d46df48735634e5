/* The broadcast request's encoder and strict decoder (see proto.h). */
#include "broadcast/proto_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/checksum.h"
#include "common/log.h"

/* -------------------------------------------------------------- request */

#define RS_BREQ_FIXED 44u

static int req_has_reply(uint8_t kind)
{
    return kind == RS_BREQ_GET || kind == RS_BREQ_UPDATE;
}

size_t rs_bc_req_len(const rs_bc_req_t *q)
{
    size_t n = RS_BREQ_FIXED;
    if (req_has_reply(q->kind))
        n += 8 + 4 + 2 + q->reply_rkey.len;
    if (q->flags & RS_BREQ_F_HOLDER)
        n += rs_bc_addr_wire_len(&q->holder_addr) + 2 + q->holder_rkey.len;
    if (q->flags & RS_BREQ_F_BITMAP)
        n += rs_bc_map_bytes(q->nblocks);
    if (q->flags & RS_BREQ_F_CLAIMS)
        n += rs_bc_map_bytes(q->nblocks);
    return n;
}

rs_status_t rs_bc_req_encode(const rs_bc_req_t *q, void *buf, size_t buflen, size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, buflen);
    rs_w_u32(&w, RS_BREQ_MAGIC);
    rs_w_u8(&w, RS_BCAST_VERSION);
    rs_w_u8(&w, q->kind);
    rs_w_u16(&w, q->flags);
    rs_w_u32(&w, q->req_id);
    rs_w_u32(&w, q->nblocks);
    rs_w_u64(&w, q->node_id);
    rs_w_u64(&w, q->seq);
    rs_w_u32(&w, q->source_reads);
    rs_w_u32(&w, q->holder_reads);
    rs_w_u32(&w, q->known);
    if (req_has_reply(q->kind)) {
        rs_w_u64(&w, q->reply_off);
        rs_w_u32(&w, q->reply_cap);
        rs_w_u16(&w, q->reply_rkey.len);
        rs_w_bytes(&w, q->reply_rkey.p, q->reply_rkey.len);
    }
    if (q->flags & RS_BREQ_F_HOLDER) {
        rs_bc_w_addr(&w, &q->holder_addr);
        rs_w_u16(&w, q->holder_rkey.len);
        rs_w_bytes(&w, q->holder_rkey.p, q->holder_rkey.len);
    }
    if (q->flags & RS_BREQ_F_BITMAP)
        rs_w_bytes(&w, q->bitmap.p, rs_bc_map_bytes(q->nblocks));
    if (q->flags & RS_BREQ_F_CLAIMS)
        rs_w_bytes(&w, q->claims.p, rs_bc_map_bytes(q->nblocks));
    if (w.overflow)
        return RS_ERR_MSG_SIZE;
    *len_p = w.off;
    return RS_OK;
}

rs_status_t rs_bc_req_decode(const void *buf, size_t len, rs_bc_req_t *out)
{
    rs_rbuf_t r;
    rs_bc_req_t q;
    rs_status_t st;

    if (buf == NULL || len < RS_BREQ_FIXED)
        return RS_ERR_TRUNCATED;
    rs_rbuf_init(&r, buf, len);
    if (rs_r_u32(&r) != RS_BREQ_MAGIC)
        return RS_ERR_BAD_MAGIC;
    if (rs_r_u8(&r) != RS_BCAST_VERSION)
        return RS_ERR_BAD_VERSION;
    memset(&q, 0, sizeof(q));
    q.kind = rs_r_u8(&r);
    q.flags = rs_r_u16(&r);
    q.req_id = rs_r_u32(&r);
    q.nblocks = rs_r_u32(&r);
    q.node_id = rs_r_u64(&r);
    q.seq = rs_r_u64(&r);
    q.source_reads = rs_r_u32(&r);
    q.holder_reads = rs_r_u32(&r);
    q.known = rs_r_u32(&r);
    if (q.kind < RS_BREQ_GET || q.kind > RS_BREQ_ANNOUNCE || (q.flags & ~RS_BREQ_F_ALL) != 0)
        return RS_ERR_PROTOCOL;
    if (q.nblocks > RS_BCAST_BLOCKS_MAX)
        return RS_ERR_BAD_LENGTH;
    if (req_has_reply(q.kind)) {
        q.reply_off = rs_r_u64(&r);
        q.reply_cap = rs_r_u32(&r);
        if ((st = rs_bc_r_rkey(&r, &q.reply_rkey)) != RS_OK)
            return st;
        if (q.reply_cap < RS_BREPLY_MIN_LEN)
            return RS_ERR_BAD_LENGTH;
    }
    if (q.flags & RS_BREQ_F_HOLDER) {
        if ((st = rs_bc_r_addr(&r, &q.holder_addr)) != RS_OK)
            return st;
        if ((st = rs_bc_r_rkey(&r, &q.holder_rkey)) != RS_OK)
            return st;
    }
    if (q.flags & RS_BREQ_F_BITMAP) {
        if ((st = rs_bc_r_bitmap(&r, q.nblocks, &q.bitmap)) != RS_OK)
            return st;
    }
    if (q.flags & RS_BREQ_F_CLAIMS) {
        if ((st = rs_bc_r_bitmap(&r, q.nblocks, &q.claims)) != RS_OK)
            return st;
    }
    if (r.truncated)
        return RS_ERR_TRUNCATED;
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    /* Announcing blocks means offering to serve them: the holder's key must come along. */
    if ((q.flags & (RS_BREQ_F_BITMAP | RS_BREQ_F_COMPLETE | RS_BREQ_F_CLAIMS)) &&
        !(q.flags & RS_BREQ_F_HOLDER))
        return RS_ERR_PROTOCOL;
    if ((q.flags & RS_BREQ_F_WAIT) && q.kind != RS_BREQ_UPDATE)
        return RS_ERR_PROTOCOL;
    *out = q;
    return RS_OK;
}
