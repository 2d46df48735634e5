/*
 * The remote-key blob: an envelope around the backend's packed key that
 * carries the region's base, length and access, the backend's id, and an
 * XXH3 checksum over all of it, so a truncated, corrupted or foreign blob is
 * refused (RS_ERR_BAD_RKEY) before the backend parses a byte of it. The
 * layout is in rkey_blob.h.
 */
#include "transport/internal.h"
#include "transport/rkey_blob.h"

#include "common/checksum.h"
#include "common/assert.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

static uint16_t backend_id(const rs_backend_ops_t *ops)
{
    if (ops == rs_tp_ucx_backend())
        return RS_RKEY_BACKEND_UCX;
    if (ops == rs_tp_verbs_backend())
        return RS_RKEY_BACKEND_VERBS;
    return 0xffff;
}

uint64_t rs_tp_rkey_blob_checksum(const rs_rkey_hdr_t *hdr, const void *be, size_t be_len)
{
    rs_rkey_hdr_t h = *hdr;
    h.checksum = 0;
    return rs_checksum64_seeded(be, be_len, rs_checksum64(&h, sizeof(h)));
}

rs_status_t rs_mr_pack_rkey(const rs_mr_t *mr, void *buf, size_t buflen, size_t *len_p)
{
    if (mr == NULL || buf == NULL || len_p == NULL)
        return RS_ERR_INVALID;
    if (buflen < sizeof(rs_rkey_hdr_t)) {
        rs_error("rs_mr_pack_rkey: a %zu-byte buffer is too small", buflen);
        return RS_ERR_NO_SPACE;
    }
    rs_ctx_t *ctx = mr->ctx;
    size_t room = buflen - sizeof(rs_rkey_hdr_t);
    if (room > RS_RKEY_BLOB_MAX - sizeof(rs_rkey_hdr_t))
        room = RS_RKEY_BLOB_MAX - sizeof(rs_rkey_hdr_t);
    unsigned char *be = (unsigned char *)buf + sizeof(rs_rkey_hdr_t);
    size_t be_len = 0;
    rs_tp_lock(ctx);
    rs_status_t st = ctx->be_ops->rkey_pack(mr, be, room, &be_len);
    rs_tp_unlock(ctx);
    if (st != RS_OK)
        return st;
    RS_ASSERT(be_len <= room); /* the backend wrote within the room it was given */

    rs_rkey_hdr_t hdr = {
        .magic = RS_RKEY_MAGIC,
        .version = RS_RKEY_VERSION,
        .backend = backend_id(ctx->be_ops),
        .access = mr->access,
        .be_len = (uint32_t)be_len,
        .base = (uint64_t)(uintptr_t)mr->addr,
        .len = mr->len,
        .checksum = 0,
    };
    hdr.checksum = rs_tp_rkey_blob_checksum(&hdr, be, be_len);
    memcpy(buf, &hdr, sizeof(hdr));
    *len_p = sizeof(hdr) + be_len;
    return RS_OK;
}

rs_status_t rs_tp_rkey_blob_parse(const void *blob, size_t len, uint16_t backend,
                                  rs_rkey_hdr_t *hdr_p)
{
    /* Peer bytes: refusals log at debug (a hostile peer must not flood the log). */
    rs_rkey_hdr_t hdr;
    if (len < sizeof(hdr)) {
        rs_debug("remote key blob truncated: %zu bytes", len);
        return RS_ERR_BAD_RKEY;
    }
    memcpy(&hdr, blob, sizeof(hdr));
    const unsigned char *be = (const unsigned char *)blob + sizeof(hdr);
    if (hdr.magic != RS_RKEY_MAGIC || hdr.version != RS_RKEY_VERSION) {
        rs_debug("remote key blob: bad magic or version");
        return RS_ERR_BAD_RKEY;
    }
    if (hdr.be_len != len - sizeof(hdr)) {
        rs_debug("remote key blob truncated or padded: %zu bytes for a %u-byte key", len,
                 hdr.be_len);
        return RS_ERR_BAD_RKEY;
    }
    if (hdr.checksum != rs_tp_rkey_blob_checksum(&hdr, be, hdr.be_len)) {
        rs_debug("remote key blob corrupted: checksum mismatch");
        return RS_ERR_BAD_RKEY;
    }
    if (hdr.backend != backend) {
        rs_debug("remote key blob from another backend (id %u, ours %u)", hdr.backend, backend);
        return RS_ERR_BAD_RKEY;
    }
    if (hdr.base + hdr.len < hdr.base || (hdr.access & ~(unsigned)RS_MEM_REMOTE_ALL)) {
        rs_debug("remote key blob describes an impossible region");
        return RS_ERR_BAD_RKEY;
    }
    *hdr_p = hdr;
    return RS_OK;
}

rs_status_t rs_rkey_unpack(rs_ep_t *ep, const void *blob, size_t len, rs_rkey_t **rkey_p)
{
    if (ep == NULL || blob == NULL || rkey_p == NULL)
        return RS_ERR_INVALID;
    rs_ctx_t *ctx = ep->ctx;
    rs_rkey_hdr_t hdr;
    rs_status_t st = rs_tp_rkey_blob_parse(blob, len, backend_id(ctx->be_ops), &hdr);
    if (st != RS_OK)
        return st;
    rs_rkey_t *rkey = calloc(1, sizeof(*rkey));
    if (rkey == NULL) {
        rs_error("out of memory allocating a remote key");
        return RS_ERR_NOMEM;
    }
    rkey->ep = ep;
    rkey->base = hdr.base;
    rkey->len = hdr.len;
    rkey->access = hdr.access;

    rs_tp_lock(ctx);
    st = rs_tp_ep_check_ready(ep);
    if (st == RS_OK) {
        st = ctx->be_ops->rkey_unpack(ep, rkey, (const unsigned char *)blob + sizeof(hdr),
                                      hdr.be_len);
        if (st != RS_OK && st != RS_ERR_NOMEM)
            st = RS_ERR_BAD_RKEY;
    }
    if (st == RS_OK)
        rs_list_add_tail(&ep->rkeys, &rkey->link);
    rs_tp_unlock(ctx);
    if (st != RS_OK) {
        free(rkey);
        return st;
    }
    *rkey_p = rkey;
    return RS_OK;
}

uint64_t rs_rkey_len(const rs_rkey_t *rkey)
{
    if (rkey == NULL)
        return 0;
    return rkey->len;
}

void rs_rkey_destroy(rs_rkey_t *rkey)
{
    if (rkey == NULL)
        return;
    rs_ctx_t *ctx = rkey->ep->ctx;
    rs_tp_lock(ctx);
    ctx->be_ops->rkey_release(rkey);
    rs_list_del(&rkey->link);
    rs_tp_unlock(ctx);
    free(rkey);
}
