/*
 * The pieces the broadcast wire codecs share (see proto.h): transport
 * addresses and their wire form, key blobs and block bitmaps, block
 * geometry, and the (block, ticket) pairs of replies and news.
 */
#include "broadcast/proto_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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

size_t rs_bc_addr_wire_len(const rs_bc_addr_t *a)
{
    return 1 + 2 + (a->kind == RS_BCAST_ADDR_HOSTPORT ? 2u : 0u) + a->bytes.len;
}

void rs_bc_w_addr(rs_wbuf_t *w, const rs_bc_addr_t *a)
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

rs_status_t rs_bc_r_addr(rs_rbuf_t *r, rs_bc_addr_t *a)
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
rs_status_t rs_bc_r_rkey(rs_rbuf_t *r, rs_bc_view_t *v)
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
rs_status_t rs_bc_r_bitmap(rs_rbuf_t *r, uint32_t nblocks, rs_bc_view_t *v)
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

uint32_t rs_bc_nblocks(uint64_t size, uint32_t block_size)
{
    uint64_t n = (size + block_size - 1) / block_size;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* size, block_size and nblocks agree and are within the protocol's limits. */
rs_status_t rs_bc_check_geometry(uint64_t size, uint32_t block_size, uint32_t nblocks)
{
    if (block_size < RS_BCAST_BLOCK_MIN || block_size > RS_BCAST_BLOCK_MAX)
        return RS_ERR_BAD_LENGTH;
    if (size > (uint64_t)RS_BCAST_BLOCKS_MAX * block_size || nblocks > RS_BCAST_BLOCKS_MAX)
        return RS_ERR_BAD_LENGTH;
    if (rs_bc_nblocks(size, block_size) != nblocks)
        return RS_ERR_BAD_LENGTH;
    return RS_OK;
}

rs_bc_active_t rs_bc_active_at(const uint8_t *pairs, uint32_t i)
{
    const uint8_t *q = pairs + 8 * (size_t)i;
    return (rs_bc_active_t){rs_get_le32(q), rs_get_le32(q + 4)};
}
