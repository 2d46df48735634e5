/* Encoders and strict decoders of the broadcast wire formats (see proto.h). */
#include "broadcast/proto.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cursor.h"
#include "common/checksum.h"
#include "common/log.h"

/* ------------------------------------------------------------ addresses */

rs_status_t rs_bc_host_check(const void *host, size_t len)
{
    const uint8_t *h = host;
    if (len == 0 || len > RS_BCAST_HOST_MAX)
        return RS_ERR_BAD_LENGTH;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = h[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == ':' || c == '-' || c == '_' || c == '%' || c == '[' || c == ']';
        if (!ok)
            return RS_ERR_PROTOCOL;
    }
    return RS_OK;
}

int rs_bc_addr_equal(const rs_bc_addr_t *a, const rs_bc_addr_t *b)
{
    return a->kind == b->kind && a->port == b->port && a->bytes.len == b->bytes.len &&
           memcmp(a->bytes.p, b->bytes.p, a->bytes.len) == 0;
}

void rs_bc_addr_format(const rs_bc_addr_t *a, char *buf, size_t buflen)
{
    if (a->kind == RS_BCAST_ADDR_HOSTPORT)
        snprintf(buf, buflen, "%.*s:%u", (int)a->bytes.len, (const char *)a->bytes.p, a->port);
    else
        snprintf(buf, buflen, "address blob of %u bytes", a->bytes.len);
}

static size_t addr_wire_len(const rs_bc_addr_t *a)
{
    return 1 + 2 + (a->kind == RS_BCAST_ADDR_HOSTPORT ? 2u : 0u) + a->bytes.len;
}

static void w_addr(rs_wbuf_t *w, const rs_bc_addr_t *a)
{
    rs_w_u8(w, a->kind);
    if (a->kind == RS_BCAST_ADDR_HOSTPORT) {
        rs_w_u16(w, 2u + a->bytes.len);
        rs_w_u16(w, a->port);
    } else {
        rs_w_u16(w, a->bytes.len);
    }
    rs_w_bytes(w, a->bytes.p, a->bytes.len);
}

static rs_status_t r_addr(rs_rbuf_t *r, rs_bc_addr_t *a)
{
    uint8_t kind = rs_r_u8(r);
    uint16_t len = rs_r_u16(r);
    const uint8_t *p = rs_r_take(r, len);
    if (p == NULL)
        return RS_ERR_TRUNCATED;
    a->kind = kind;
    if (kind == RS_BCAST_ADDR_HOSTPORT) {
        if (len < 3)
            return RS_ERR_BAD_LENGTH;
        a->port = (uint16_t)rs_get_le(p, 2);
        a->bytes.p = p + 2;
        a->bytes.len = len - 2u;
        if (a->port == 0)
            return RS_ERR_PROTOCOL;
        return rs_bc_host_check(a->bytes.p, a->bytes.len);
    }
    if (kind == RS_BCAST_ADDR_BLOB) {
        if (len == 0 || len > RS_ADDR_BLOB_MAX)
            return RS_ERR_BAD_LENGTH;
        a->port = 0;
        a->bytes.p = p;
        a->bytes.len = len;
        return RS_OK;
    }
    return RS_ERR_PROTOCOL;
}

/* A key blob: u16 length, 1..RS_RKEY_BLOB_MAX bytes. */
static rs_status_t r_rkey(rs_rbuf_t *r, rs_bc_view_t *v)
{
    uint16_t len = rs_r_u16(r);
    const uint8_t *p = rs_r_take(r, len);
    if (p == NULL)
        return RS_ERR_TRUNCATED;
    if (len == 0 || len > RS_RKEY_BLOB_MAX)
        return RS_ERR_BAD_LENGTH;
    v->p = p;
    v->len = len;
    return RS_OK;
}

/* A bitmap of nblocks bits: the unused high bits of the last byte must be 0. */
static rs_status_t r_bitmap(rs_rbuf_t *r, uint32_t nblocks, rs_bc_view_t *v)
{
    size_t n = rs_bc_map_bytes(nblocks);
    const uint8_t *p = rs_r_take(r, n);
    if (p == NULL)
        return RS_ERR_TRUNCATED;
    if (nblocks % 8 != 0 && (p[n - 1] >> (nblocks % 8)) != 0)
        return RS_ERR_PROTOCOL;
    v->p = p;
    v->len = (uint32_t)n;
    return RS_OK;
}

/* ----------------------------------------------------------- descriptor */

uint32_t rs_bc_nblocks(uint64_t size, uint32_t block_size)
{
    uint64_t n = (size + block_size - 1) / block_size;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* size, block_size and nblocks agree and are within the protocol's limits. */
static rs_status_t check_geometry(uint64_t size, uint32_t block_size, uint32_t nblocks)
{
    if (block_size < RS_BCAST_BLOCK_MIN || block_size > RS_BCAST_BLOCK_MAX)
        return RS_ERR_BAD_LENGTH;
    if (size > (uint64_t)RS_BCAST_BLOCKS_MAX * block_size || nblocks > RS_BCAST_BLOCKS_MAX)
        return RS_ERR_BAD_LENGTH;
    if (rs_bc_nblocks(size, block_size) != nblocks)
        return RS_ERR_BAD_LENGTH;
    return RS_OK;
}

#define RS_BDESC_FIXED 40u

size_t rs_bc_desc_len(const rs_bc_desc_t *d)
{
    return RS_BDESC_FIXED + addr_wire_len(&d->src) + 8;
}

rs_status_t rs_bc_desc_encode(const rs_bc_desc_t *d, void *buf, size_t buflen, size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, buflen);
    rs_w_u32(&w, RS_BDESC_MAGIC);
    rs_w_u8(&w, RS_BCAST_VERSION);
    rs_w_u8(&w, d->flags);
    rs_w_u16(&w, 0);
    rs_w_u64(&w, d->node_id);
    rs_w_u64(&w, d->seq);
    rs_w_u64(&w, d->size);
    rs_w_u32(&w, d->block_size);
    rs_w_u32(&w, d->nblocks);
    w_addr(&w, &d->src);
    if (w.overflow)
        return RS_ERR_NO_SPACE;
    rs_w_u64(&w, rs_checksum64(buf, w.off));
    if (w.overflow)
        return RS_ERR_NO_SPACE;
    *len_p = w.off;
    return RS_OK;
}

rs_status_t rs_bc_desc_decode(const void *buf, size_t len, rs_bc_desc_t *out)
{
    rs_rbuf_t r;
    rs_bc_desc_t d;
    rs_status_t st;

    if (buf == NULL || len < RS_BDESC_FIXED + 8)
        return RS_ERR_TRUNCATED;
    rs_rbuf_init(&r, buf, len - 8);
    if (rs_r_u32(&r) != RS_BDESC_MAGIC)
        return RS_ERR_BAD_MAGIC;
    if (rs_r_u8(&r) != RS_BCAST_VERSION)
        return RS_ERR_BAD_VERSION;
    if (rs_get_le((const uint8_t *)buf + len - 8, 8) != rs_checksum64(buf, len - 8))
        return RS_ERR_CHECKSUM;
    memset(&d, 0, sizeof(d));
    d.flags = rs_r_u8(&r);
    uint16_t reserved = rs_r_u16(&r);
    d.node_id = rs_r_u64(&r);
    d.seq = rs_r_u64(&r);
    d.size = rs_r_u64(&r);
    d.block_size = rs_r_u32(&r);
    d.nblocks = rs_r_u32(&r);
    if ((st = r_addr(&r, &d.src)) != RS_OK)
        return st;
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    if (reserved != 0 || (d.flags & ~(uint32_t)RS_BDESC_F_INLINE) != 0 || d.seq == 0)
        return RS_ERR_PROTOCOL;
    if ((st = check_geometry(d.size, d.block_size, d.nblocks)) != RS_OK)
        return st;
    if ((d.flags & RS_BDESC_F_INLINE) ? d.size > RS_BCAST_INLINE_CAP : d.size == 0)
        return RS_ERR_BAD_LENGTH;
    *out = d;
    return RS_OK;
}

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
        n += addr_wire_len(&q->holder_addr) + 2 + q->holder_rkey.len;
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
        w_addr(&w, &q->holder_addr);
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
        if ((st = r_rkey(&r, &q.reply_rkey)) != RS_OK)
            return st;
        if (q.reply_cap < RS_BREPLY_MIN_LEN)
            return RS_ERR_BAD_LENGTH;
    }
    if (q.flags & RS_BREQ_F_HOLDER) {
        if ((st = r_addr(&r, &q.holder_addr)) != RS_OK)
            return st;
        if ((st = r_rkey(&r, &q.holder_rkey)) != RS_OK)
            return st;
    }
    if (q.flags & RS_BREQ_F_BITMAP) {
        if ((st = r_bitmap(&r, q.nblocks, &q.bitmap)) != RS_OK)
            return st;
    }
    if (q.flags & RS_BREQ_F_CLAIMS) {
        if ((st = r_bitmap(&r, q.nblocks, &q.claims)) != RS_OK)
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

/* ---------------------------------------------------------------- reply */

size_t rs_bc_reply_meta_len(uint32_t n_sums)
{
    return RS_BREPLY_MIN_LEN + 8u * (size_t)n_sums;
}

size_t rs_bc_holder_wire_len(const rs_bc_holder_wire_t *h, uint32_t nblocks)
{
    return 4 + 1 + addr_wire_len(&h->addr) + 2 + h->rkey.len +
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

/* Writes the holder count placeholder once, after the active list. */
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
    w_addr(&w, &h->addr);
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
    if ((st = r_addr(r, &h->addr)) != RS_OK)
        return st;
    if ((st = r_rkey(r, &h->rkey)) != RS_OK)
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
    if (!(h->flags & RS_BHOLDER_F_COMPLETE) && (st = r_bitmap(r, nblocks, &h->bitmap)) != RS_OK)
        return st;
    if ((h->flags & RS_BHOLDER_F_CLAIMS) && (st = r_bitmap(r, nblocks, &h->claims)) != RS_OK)
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
    if ((st = check_geometry(x.size, x.block_size, x.nblocks)) != RS_OK)
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

rs_bc_active_t rs_bc_active_at(const uint8_t *pairs, uint32_t i)
{
    const uint8_t *q = pairs + 8 * (size_t)i;
    return (rs_bc_active_t){rs_get_le32(q), rs_get_le32(q + 4)};
}

rs_bc_active_t rs_bc_reply_active(const rs_bc_reply_t *r, uint32_t i)
{
    return rs_bc_active_at(r->tickets.p, i);
}

/* ---------------------------------------------------------------- news */

rs_status_t rs_bc_news_encode(uint64_t node_id, uint64_t seq, uint32_t rversion,
                              const rs_bc_active_t *active, uint32_t n, void *buf, size_t buflen,
                              size_t *len_p)
{
    rs_wbuf_t w;
    if (buflen < RS_BNEWS_FIXED)
        return RS_ERR_NO_SPACE;
    /* As many tickets as fit: readers beyond them are rare and only cost extra source reads. */
    size_t fit = (buflen - RS_BNEWS_FIXED) / 8;
    if (n > fit)
        n = (uint32_t)fit;
    if (n > RS_BCAST_ACTIVE_MAX)
        n = RS_BCAST_ACTIVE_MAX;
    rs_wbuf_init(&w, buf, buflen);
    rs_w_u32(&w, RS_BNEWS_MAGIC);
    rs_w_u8(&w, RS_BCAST_VERSION);
    rs_w_zero(&w, 3);
    rs_w_u64(&w, node_id);
    rs_w_u64(&w, seq);
    rs_w_u32(&w, rversion);
    rs_w_u32(&w, n);
    for (uint32_t i = 0; i < n; i++) {
        rs_w_u32(&w, active[i].ticket);
        rs_w_u32(&w, active[i].start);
    }
    if (w.overflow)
        return RS_ERR_NO_SPACE;
    *len_p = w.off;
    return RS_OK;
}

rs_status_t rs_bc_news_decode(const void *buf, size_t len, rs_bc_news_t *out)
{
    rs_rbuf_t r;
    rs_bc_news_t n;
    if (buf == NULL || len < RS_BNEWS_FIXED)
        return RS_ERR_TRUNCATED;
    rs_rbuf_init(&r, buf, len);
    if (rs_r_u32(&r) != RS_BNEWS_MAGIC)
        return RS_ERR_BAD_MAGIC;
    if (rs_r_u8(&r) != RS_BCAST_VERSION)
        return RS_ERR_BAD_VERSION;
    if (rs_r_u8(&r) != 0 || rs_r_u16(&r) != 0)
        return RS_ERR_PROTOCOL;
    n.node_id = rs_r_u64(&r);
    n.seq = rs_r_u64(&r);
    n.rversion = rs_r_u32(&r);
    n.n_active = rs_r_u32(&r);
    if (n.n_active > RS_BCAST_ACTIVE_MAX)
        return RS_ERR_BAD_LENGTH;
    if ((size_t)n.n_active * 8 != rs_r_left(&r))
        return rs_r_left(&r) < (size_t)n.n_active * 8 ? RS_ERR_TRUNCATED : RS_ERR_BAD_LENGTH;
    n.tickets.p = rs_r_take(&r, 8 * (size_t)n.n_active);
    n.tickets.len = 8 * n.n_active;
    *out = n;
    return RS_OK;
}

rs_bc_active_t rs_bc_news_active(const rs_bc_news_t *n, uint32_t i)
{
    return rs_bc_active_at(n->tickets.p, i);
}

/* ------------------------------------------------------------- destroy */

void rs_bc_destroy_encode(uint64_t node_id, uint64_t seq, uint8_t out[RS_BDESTROY_LEN])
{
    rs_put_le(out, RS_BDESTR_MAGIC, 4);
    out[4] = RS_BCAST_VERSION;
    memset(out + 5, 0, 3);
    rs_put_le(out + 8, node_id, 8);
    rs_put_le(out + 16, seq, 8);
}

rs_status_t rs_bc_destroy_decode(const void *buf, size_t len, uint64_t *node_id, uint64_t *seq)
{
    const uint8_t *p = buf;
    if (buf == NULL || len < RS_BDESTROY_LEN)
        return RS_ERR_TRUNCATED;
    if (len != RS_BDESTROY_LEN)
        return RS_ERR_BAD_LENGTH;
    if (rs_get_le(p, 4) != RS_BDESTR_MAGIC)
        return RS_ERR_BAD_MAGIC;
    if (p[4] != RS_BCAST_VERSION)
        return RS_ERR_BAD_VERSION;
    if (p[5] != 0 || p[6] != 0 || p[7] != 0)
        return RS_ERR_PROTOCOL;
    *node_id = rs_get_le(p + 8, 8);
    *seq = rs_get_le(p + 16, 8);
    return RS_OK;
}
