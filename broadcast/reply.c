/*
 * The broadcast reply: an encoder filled in steps (sums, active tickets,
 * holders, then the data) and a strict decoder with its accessors (see
 * proto.h).
 */
#include "broadcast/proto_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/checksum.h"
#include "common/log.h"

/* ---------------------------------------------------------------- reply */

size_t rs_bc_reply_meta_len(uint32_t n_sums)
{
    return RS_BREPLY_MIN_LEN + 8u * (size_t)n_sums;
}

size_t rs_bc_holder_wire_len(const rs_bc_holder_wire_t *h, uint32_t nblocks)
{
    return 4 + 1 + rs_bc_addr_wire_len(&h->addr) + 2 + h->rkey.len +
           ((h->flags & RS_BHOLDER_F_COMPLETE) ? 0 : rs_bc_map_bytes(nblocks)) +
           ((h->flags & RS_BHOLDER_F_CLAIMS) ? rs_bc_map_bytes(nblocks) : 0);
}

void rs_bc_reply_begin(rs_bc_reply_enc_t *e, void *buf, size_t cap, const rs_bc_reply_t *hdr)
{
    rs_wbuf_t w;
    memset(e, 0, sizeof(*e));
    e->p = buf;
    e->cap = cap;
    e->nblocks = hdr->nblocks;
    rs_wbuf_init(&w, buf, cap);
    rs_w_u32(&w, RS_BREPLY_MAGIC);
    rs_w_u8(&w, RS_BCAST_VERSION);
    rs_w_u8(&w, hdr->kind);
    rs_w_u16(&w, (uint16_t)hdr->status);
    rs_w_u32(&w, 0); /* meta_len: finish */
    rs_w_u32(&w, hdr->flags);
    rs_w_u64(&w, hdr->node_id);
    rs_w_u64(&w, hdr->seq);
    rs_w_u64(&w, hdr->size);
    rs_w_u32(&w, hdr->block_size);
    rs_w_u32(&w, hdr->nblocks);
    rs_w_u32(&w, hdr->ticket);
    rs_w_u32(&w, hdr->active);
    rs_w_u64(&w, hdr->perm_seed);
    rs_w_u32(&w, 0); /* n_sums: put_sums */
    rs_w_u32(&w, hdr->version);
    rs_w_u32(&w, hdr->rversion);
    rs_w_u32(&w, hdr->start);
    e->off = w.off;
    e->failed = w.overflow;
}

/* Writes the active list's count (empty unless put_active ran) once, after the sums. */
static void reply_open_active(rs_bc_reply_enc_t *e)
{
    if (e->n_active_off != 0 || e->failed)
        return;
    if (e->cap - e->off < 4) {
        e->failed = 1;
        return;
    }
    e->n_active_off = e->off;
    rs_put_le(e->p + e->off, 0, 4);
    e->off += 4;
}

/* Reserves the holder count once, after the active list (filled in when the list ends). */
static void reply_open_holders(rs_bc_reply_enc_t *e)
{
    reply_open_active(e);
    if (e->n_holders_off != 0 || e->failed)
        return;
    if (e->cap - e->off < 4) {
        e->failed = 1;
        return;
    }
    e->n_holders_off = e->off;
    e->off += 4;
}

void rs_bc_reply_put_sums(rs_bc_reply_enc_t *e, const uint64_t *sums, uint32_t n)
{
    if (e->failed || e->n_active_off != 0 || (size_t)n * 8 > e->cap - e->off) {
        e->failed = 1;
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        rs_put_le(e->p + e->off + 8 * (size_t)i, sums[i], 8);
    e->off += 8 * (size_t)n;
    rs_put_le(e->p + 64, n, 4);
}

void rs_bc_reply_put_active(rs_bc_reply_enc_t *e, const rs_bc_active_t *active, uint32_t n)
{
    if (n > RS_BCAST_ACTIVE_MAX)
        n = RS_BCAST_ACTIVE_MAX;
    reply_open_active(e);
    if (e->failed || e->n_holders_off != 0 || (size_t)n * 8 > e->cap - e->off) {
        e->failed = 1;
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        rs_put_le(e->p + e->off + 8 * (size_t)i, active[i].ticket, 4);
        rs_put_le(e->p + e->off + 8 * (size_t)i + 4, active[i].start, 4);
    }
    e->off += 8 * (size_t)n;
    rs_put_le(e->p + e->n_active_off, n, 4);
}

rs_status_t rs_bc_reply_add_holder(rs_bc_reply_enc_t *e, const rs_bc_holder_wire_t *h)
{
    reply_open_holders(e);
    if (e->failed)
        return RS_ERR_NO_SPACE;
    size_t need = rs_bc_holder_wire_len(h, e->nblocks);
    if (need + 8 > e->cap - e->off) /* keep room for the trailer */
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, e->p + e->off, need);
    rs_w_u32(&w, h->id);
    rs_w_u8(&w, h->flags);
    rs_bc_w_addr(&w, &h->addr);
    rs_w_u16(&w, h->rkey.len);
    rs_w_bytes(&w, h->rkey.p, h->rkey.len);
    if (!(h->flags & RS_BHOLDER_F_COMPLETE))
        rs_w_bytes(&w, h->bitmap.p, rs_bc_map_bytes(e->nblocks));
    if (h->flags & RS_BHOLDER_F_CLAIMS)
        rs_w_bytes(&w, h->claims.p, rs_bc_map_bytes(e->nblocks));
    e->off += w.off;
    e->n_holders++;
    return RS_OK;
}

rs_status_t rs_bc_reply_finish(rs_bc_reply_enc_t *e, const void *data, uint64_t size, size_t *len_p)
{
    reply_open_holders(e);
    if (e->failed || e->cap - e->off < 8)
        return RS_ERR_NO_SPACE;
    uint32_t flags = (uint32_t)rs_get_le(e->p + 12, 4);
    size_t meta_len = e->off + 8;
    rs_put_le(e->p + e->n_holders_off, e->n_holders, 4);
    rs_put_le(e->p + 8, meta_len, 4);
    rs_put_le(e->p + e->off, rs_checksum64(e->p, e->off), 8);
    size_t total = meta_len;
    if (flags & RS_BREPLY_F_INLINE) {
        size_t doff = rs_bc_reply_data_off(meta_len);
        if (doff > e->cap || size > e->cap - doff)
            return RS_ERR_NO_SPACE;
        memset(e->p + meta_len, 0, doff - meta_len);
        if (data != NULL && size > 0)
            memcpy(e->p + doff, data, size);
        total = doff + size;
    }
    *len_p = total;
    return RS_OK;
}

/* Parses one holder; the caller checks the position against the end. */
static rs_status_t r_holder(rs_rbuf_t *r, uint32_t nblocks, rs_bc_holder_wire_t *h)
{
    rs_status_t st;
    h->id = rs_r_u32(r);
    h->flags = rs_r_u8(r);
    if ((st = rs_bc_r_addr(r, &h->addr)) != RS_OK)
        return st;
    if ((st = rs_bc_r_rkey(r, &h->rkey)) != RS_OK)
        return st;
    if (h->flags & ~(uint32_t)RS_BHOLDER_F_ALL)
        return RS_ERR_PROTOCOL;
    if ((h->flags & RS_BHOLDER_F_SOURCE) && !(h->flags & RS_BHOLDER_F_COMPLETE))
        return RS_ERR_PROTOCOL;
    if ((h->flags & RS_BHOLDER_F_COMPLETE) && (h->flags & RS_BHOLDER_F_CLAIMS))
        return RS_ERR_PROTOCOL; /* a complete copy reads nothing more */
    h->bitmap.p = NULL;
    h->bitmap.len = 0;
    h->claims.p = NULL;
    h->claims.len = 0;
    if (!(h->flags & RS_BHOLDER_F_COMPLETE) &&
        (st = rs_bc_r_bitmap(r, nblocks, &h->bitmap)) != RS_OK)
        return st;
    if ((h->flags & RS_BHOLDER_F_CLAIMS) && (st = rs_bc_r_bitmap(r, nblocks, &h->claims)) != RS_OK)
        return st;
    return r->truncated ? RS_ERR_TRUNCATED : RS_OK;
}

rs_status_t rs_bc_reply_decode(const void *buf, size_t cap, rs_bc_reply_t *out)
{
    const uint8_t *p = buf;
    rs_bc_reply_t x;
    rs_rbuf_t r;
    rs_status_t st;

    if (buf == NULL || cap < RS_BREPLY_MIN_LEN)
        return RS_ERR_TRUNCATED;
    rs_rbuf_init(&r, buf, cap);
    if (rs_r_u32(&r) != RS_BREPLY_MAGIC)
        return RS_ERR_BAD_MAGIC;
    if (rs_r_u8(&r) != RS_BCAST_VERSION)
        return RS_ERR_BAD_VERSION;
    memset(&x, 0, sizeof(x));
    x.kind = rs_r_u8(&r);
    x.status = (int16_t)rs_r_u16(&r);
    x.meta_len = rs_r_u32(&r);
    if (x.meta_len < RS_BREPLY_MIN_LEN || x.meta_len > cap)
        return RS_ERR_BAD_LENGTH;
    if (rs_get_le(p + x.meta_len - 8, 8) != rs_checksum64(p, x.meta_len - 8))
        return RS_ERR_CHECKSUM;
    rs_rbuf_init(&r, buf, x.meta_len - 8);
    r.off = 12;
    x.flags = rs_r_u32(&r);
    x.node_id = rs_r_u64(&r);
    x.seq = rs_r_u64(&r);
    x.size = rs_r_u64(&r);
    x.block_size = rs_r_u32(&r);
    x.nblocks = rs_r_u32(&r);
    x.ticket = rs_r_u32(&r);
    x.active = rs_r_u32(&r);
    x.perm_seed = rs_r_u64(&r);
    uint32_t n_sums = rs_r_u32(&r);
    x.version = rs_r_u32(&r);
    x.rversion = rs_r_u32(&r);
    x.start = rs_r_u32(&r);
    if (x.kind != RS_BREQ_GET && x.kind != RS_BREQ_UPDATE)
        return RS_ERR_PROTOCOL;
    if ((x.flags & ~(uint32_t)RS_BREPLY_F_ALL) != 0)
        return RS_ERR_PROTOCOL;
    if (x.status > 0 || x.status < -99)
        return RS_ERR_PROTOCOL;
    if (x.status != 0) {
        /* An error reply carries nothing but its status. */
        if (n_sums != 0 || x.flags != 0 || x.meta_len != RS_BREPLY_MIN_LEN || rs_r_u32(&r) != 0 ||
            rs_r_u32(&r) != 0)
            return RS_ERR_PROTOCOL;
        *out = x;
        return RS_OK;
    }
    if ((st = rs_bc_check_geometry(x.size, x.block_size, x.nblocks)) != RS_OK)
        return st;
    if (n_sums != ((x.flags & RS_BREPLY_F_SUMS) ? x.nblocks : 0))
        return RS_ERR_PROTOCOL;
    if (x.flags & RS_BREPLY_F_INLINE) {
        /* Inline data is verified against its checksum: the sums must come along. */
        if (!(x.flags & RS_BREPLY_F_SUMS) || x.size > RS_BCAST_INLINE_CAP)
            return RS_ERR_PROTOCOL;
    }
    const uint8_t *sums = rs_r_take(&r, 8 * (size_t)n_sums);
    x.n_active = rs_r_u32(&r);
    if (x.n_active > RS_BCAST_ACTIVE_MAX)
        return RS_ERR_BAD_LENGTH;
    const uint8_t *tickets = rs_r_take(&r, 8 * (size_t)x.n_active);
    x.n_holders = rs_r_u32(&r);
    if (r.truncated)
        return RS_ERR_TRUNCATED;
    x.sums.p = sums;
    x.sums.len = 8 * n_sums;
    x.tickets.p = tickets;
    x.tickets.len = 8 * x.n_active;
    /* Starts are positions in the block permutation. */
    uint32_t start_end = x.nblocks > 0 ? x.nblocks : 1;
    if (x.start >= start_end)
        return RS_ERR_PROTOCOL;
    for (uint32_t i = 0; i < x.n_active; i++)
        if (rs_get_le(tickets + 8 * (size_t)i + 4, 4) >= start_end)
            return RS_ERR_PROTOCOL;
    x.holders.p = p + r.off;
    for (uint32_t i = 0; i < x.n_holders; i++) {
        rs_bc_holder_wire_t h;
        if ((st = r_holder(&r, x.nblocks, &h)) != RS_OK)
            return st;
    }
    if (r.truncated)
        return RS_ERR_TRUNCATED;
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    x.holders.len = (uint32_t)(p + r.off - x.holders.p);
    if (x.flags & RS_BREPLY_F_INLINE) {
        size_t doff = rs_bc_reply_data_off(x.meta_len);
        if (doff > cap || x.size > cap - doff)
            return RS_ERR_BAD_LENGTH;
        x.data.p = p + doff;
        x.data.len = (uint32_t)x.size;
    }
    *out = x;
    return RS_OK;
}

int rs_bc_reply_next_holder(const rs_bc_reply_t *r, size_t *off, rs_bc_holder_wire_t *h)
{
    rs_rbuf_t rb;
    if (*off >= r->holders.len)
        return 0;
    rs_rbuf_init(&rb, r->holders.p, r->holders.len);
    rb.off = *off;
    if (r_holder(&rb, r->nblocks, h) != RS_OK) /* validated by decode: cannot happen */
        return 0;
    *off = rb.off;
    return 1;
}

uint64_t rs_bc_reply_sum(const rs_bc_reply_t *r, uint32_t i)
{
    return rs_get_le(r->sums.p + 8 * (size_t)i, 8);
}

rs_bc_active_t rs_bc_reply_active(const rs_bc_reply_t *r, uint32_t i)
{
    return rs_bc_active_at(r->tickets.p, i);
}
