/* The broadcast descriptor's encoder and strict decoder (see proto.h). */
#include "broadcast/proto_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/checksum.h"
#include "common/log.h"

#define RS_BDESC_FIXED 40u

size_t rs_bc_desc_len(const rs_bc_desc_t *d)
{
    size_t embed = (d->flags & RS_BDESC_F_EMBED) ? (size_t)d->size : 0;
    return RS_BDESC_FIXED + rs_bc_addr_wire_len(&d->src) + embed + 8;
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
    rs_bc_w_addr(&w, &d->src);
    if (d->flags & RS_BDESC_F_EMBED)
        rs_w_bytes(&w, d->embed, (size_t)d->size);
    if (w.overflow)
        return RS_ERR_NO_SPACE;
    /* Covers an embedded object too: its one checksum, made once, checked by each reader. */
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
    if ((st = rs_bc_r_addr(&r, &d.src)) != RS_OK)
        return st;
    const uint32_t known = RS_BDESC_F_INLINE | RS_BDESC_F_EMBED;
    if (reserved != 0 || (d.flags & ~known) != 0 || d.seq == 0 ||
        ((d.flags & RS_BDESC_F_EMBED) && !(d.flags & RS_BDESC_F_INLINE)))
        return RS_ERR_PROTOCOL;
    if (d.flags & RS_BDESC_F_EMBED) {
        if (d.size == 0 || d.size > RS_BCAST_EMBED_CAP || rs_r_left(&r) != d.size)
            return RS_ERR_BAD_LENGTH;
        d.embed = rs_r_take(&r, (size_t)d.size);
    }
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    if ((st = rs_bc_check_geometry(d.size, d.block_size, d.nblocks)) != RS_OK)
        return st;
    if ((d.flags & RS_BDESC_F_INLINE) ? d.size > RS_BCAST_INLINE_CAP : d.size == 0)
        return RS_ERR_BAD_LENGTH;
    *out = d;
    return RS_OK;
}
