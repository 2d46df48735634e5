/* Encoders and strict decoders of the news and destroy messages (see proto.h). */
#include "broadcast/proto_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/checksum.h"
#include "common/log.h"

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
