/* The active-message headers (amhdr.h): packing, and strict decoding with the bounded cursor. */
#include "transport/ucx/amhdr.h"

#include "common/cursor.h"

_Static_assert(sizeof(rs_ucx_hdr_wire_t) == RS_UCX_HDR_LEN, "control header size");
_Static_assert(sizeof(rs_ucx_rma_wire_t) == RS_UCX_RMA_HDR_LEN, "one-sided header size");

/* The header length a kind travels with, 0 for an unknown kind. */
static size_t kind_len(unsigned kind)
{
    if (kind >= RS_UCX_CONN && kind <= RS_UCX_BYE)
        return RS_UCX_HDR_LEN;
    if (kind >= RS_UCX_PUT && kind <= RS_UCX_FLUSH_REP)
        return RS_UCX_RMA_HDR_LEN;
    return 0;
}

void rs_ucx_hdr_pack(const rs_ucx_hdr_t *h, rs_ucx_hdr_wire_t *w)
{
    rs_wbuf_t b;
    rs_wbuf_init(&b, w->b, sizeof(w->b));
    rs_w_u8(&b, h->kind);
    rs_w_u8(&b, 0);
    rs_w_u16(&b, 0);
    rs_w_u32(&b, h->dst_id);
    rs_w_u32(&b, h->src_id);
    rs_w_u32(&b, h->arg);
}

void rs_ucx_rma_hdr_pack(const rs_ucx_rma_hdr_t *h, rs_ucx_rma_wire_t *w)
{
    rs_wbuf_t b;
    rs_wbuf_init(&b, w->b, sizeof(w->b));
    rs_w_u8(&b, h->kind);
    rs_w_u8(&b, h->flags);
    rs_w_u16(&b, 0);
    rs_w_u32(&b, h->dst_id);
    rs_w_u32(&b, h->src_id);
    rs_w_u32(&b, h->op_id);
    rs_w_u64(&b, h->raddr);
    rs_w_u64(&b, h->value);
}

rs_status_t rs_ucx_am_hdr_decode(const void *buf, size_t len, rs_ucx_hdr_t *h, rs_ucx_rma_hdr_t *rh,
                                 int *rma_p)
{
    rs_rbuf_t r;
    rs_rbuf_init(&r, buf, len);
    unsigned kind = rs_r_u8(&r), flags = rs_r_u8(&r), zero = rs_r_u16(&r);
    uint32_t dst = rs_r_u32(&r), src = rs_r_u32(&r), arg = rs_r_u32(&r);
    size_t want = kind_len(kind);
    if (len == 0 || want == 0)
        return RS_ERR_PROTOCOL;
    if (len != want)
        return RS_ERR_BAD_LENGTH;
    if (zero != 0)
        return RS_ERR_PROTOCOL;
    if (want == RS_UCX_HDR_LEN) {
        if (flags != 0 || r.truncated || rs_r_left(&r) != 0)
            return RS_ERR_PROTOCOL;
        *h = (rs_ucx_hdr_t){.dst_id = dst, .src_id = src, .arg = arg, .kind = kind};
        *rma_p = 0;
        return RS_OK;
    }
    uint64_t raddr = rs_r_u64(&r), value = rs_r_u64(&r);
    if ((flags & ~(unsigned)(RS_UCX_F_NOTIFY | RS_UCX_F_REFUSED)) != 0 || r.truncated ||
        rs_r_left(&r) != 0)
        return RS_ERR_PROTOCOL;
    *rh = (rs_ucx_rma_hdr_t){.dst_id = dst,
                             .src_id = src,
                             .kind = (uint16_t)kind,
                             .flags = (uint16_t)flags,
                             .op_id = arg,
                             .raddr = raddr,
                             .value = value};
    *rma_p = 1;
    return RS_OK;
}
