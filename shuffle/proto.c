/* Encoders and strict decoders of the shuffle's wire messages (see proto.h). */
#include "shuffle/proto.h"

#include <stdlib.h>
#include <string.h>
#include <rshuffle/shuffle.h>
#include <rshuffle/transport.h>

#include "common/cursor.h"

/* ----------------------------------------------------------------- header */

/* A status a peer may carry: RS_OK or one of rs_status_t's codes. */
static int status_known(int32_t v)
{
    return (v <= RS_OK && v >= RS_ERR_STATE) || (v <= RS_ERR_TRANSPORT && v >= RS_ERR_MSG_SIZE) ||
           (v <= RS_ERR_TRUNCATED && v >= RS_ERR_PROTOCOL) ||
           (v <= RS_ERR_BACKPRESSURE && v >= RS_ERR_DESTROYED);
}

static void w_hdr(rs_wbuf_t *w, unsigned type, rs_status_t status)
{
    rs_w_u16(w, RS_SPROTO_VERSION);
    rs_w_u16(w, type);
    rs_w_u32(w, (uint32_t)(int32_t)status);
}

/* The header of a message of type; requests must carry RS_OK. */
static rs_status_t r_hdr(rs_rbuf_t *r, unsigned type, int request, rs_status_t *status)
{
    uint16_t version = rs_r_u16(r);
    uint16_t t = rs_r_u16(r);
    int32_t st = (int32_t)rs_r_u32(r);
    if (r->truncated)
        return RS_ERR_TRUNCATED;
    if (version != RS_SPROTO_VERSION)
        return RS_ERR_BAD_VERSION;
    if (t != type || !status_known(st) || (request && st != RS_OK))
        return RS_ERR_PROTOCOL;
    *status = (rs_status_t)st;
    return RS_OK;
}

/* Starts decoding a message whose fixed part is fixed bytes. */
static rs_status_t r_begin(rs_rbuf_t *r, const void *buf, size_t len, size_t fixed, unsigned type,
                           int request, rs_status_t *status)
{
    if (buf == NULL)
        return RS_ERR_TRUNCATED;
    rs_rbuf_init(r, buf, len);
    rs_status_t s = r_hdr(r, type, request, status);
    if (s == RS_OK && len < fixed)
        s = RS_ERR_TRUNCATED;
    return s;
}

static rs_status_t w_end(const rs_wbuf_t *w, size_t *len_p)
{
    if (w->overflow)
        return RS_ERR_NO_SPACE;
    *len_p = w->off;
    return RS_OK;
}

/* ------------------------------------------------------- fixed messages */

rs_status_t rs_sproto_attach_encode(const rs_smsg_attach_t *m, void *buf, size_t cap, size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, RS_SMSG_ATTACH, m->status);
    rs_w_u32(&w, m->role);
    rs_w_u32(&w, m->shuffle_id);
    rs_w_u32(&w, m->n_partitions);
    rs_w_u32(&w, m->map_id);
    rs_w_u32(&w, m->attempt);
    rs_w_u32(&w, m->replicas);
    rs_w_u64(&w, m->generation);
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_attach_decode(const void *buf, size_t len, rs_smsg_attach_t *out)
{
    rs_rbuf_t r;
    rs_smsg_attach_t m;
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_ATTACH_LEN, RS_SMSG_ATTACH, 1, &m.status);
    if (s != RS_OK)
        return s;
    m.role = rs_r_u32(&r);
    m.shuffle_id = rs_r_u32(&r);
    m.n_partitions = rs_r_u32(&r);
    m.map_id = rs_r_u32(&r);
    m.attempt = rs_r_u32(&r);
    m.replicas = rs_r_u32(&r);
    m.generation = rs_r_u64(&r);
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    if (m.replicas > RS_SHUFFLE_REPLICAS_MAX)
        return RS_ERR_PROTOCOL;
    if (m.role == RS_ROLE_PUSHER
            ? m.n_partitions == 0
            : m.role != RS_ROLE_READER || (m.n_partitions | m.map_id | m.attempt) != 0)
        return RS_ERR_PROTOCOL;
    *out = m;
    return RS_OK;
}

rs_status_t rs_sproto_attach_reply_encode(const rs_smsg_attach_reply_t *m, void *buf, size_t cap,
                                          size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, RS_SMSG_ATTACH_REPLY, m->status);
    if (m->status == RS_OK) {
        rs_w_u64(&w, m->arena_len);
        rs_w_u32(&w, m->rkey_len);
        rs_w_u32(&w, m->replicas);
        rs_w_bytes(&w, m->rkey, m->rkey_len);
    }
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_attach_reply_decode(const void *buf, size_t len, rs_smsg_attach_reply_t *out)
{
    rs_rbuf_t r;
    rs_smsg_attach_reply_t m = {0};
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_HDR_LEN, RS_SMSG_ATTACH_REPLY, 0, &m.status);
    if (s != RS_OK)
        return s;
    if (m.status != RS_OK) {
        if (rs_r_left(&r) != 0)
            return RS_ERR_BAD_LENGTH;
        *out = m;
        return RS_OK;
    }
    if (len < RS_SPROTO_ATTACH_REPLY_LEN)
        return RS_ERR_TRUNCATED;
    m.arena_len = rs_r_u64(&r);
    m.rkey_len = rs_r_u32(&r);
    m.replicas = rs_r_u32(&r);
    if (m.rkey_len != rs_r_left(&r) || m.rkey_len == 0 || m.rkey_len > RS_RKEY_BLOB_MAX)
        return RS_ERR_BAD_LENGTH;
    m.rkey = rs_r_take(&r, m.rkey_len);
    if (m.replicas > RS_SHUFFLE_REPLICAS_MAX || m.arena_len == 0)
        return RS_ERR_PROTOCOL;
    *out = m;
    return RS_OK;
}

rs_status_t rs_sproto_nack_encode(const rs_smsg_nack_t *m, void *buf, size_t cap, size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, RS_SMSG_NACK, m->status);
    rs_w_u32(&w, m->partition);
    rs_w_u32(&w, m->imm);
    rs_w_u64(&w, m->seq);
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_nack_decode(const void *buf, size_t len, rs_smsg_nack_t *out)
{
    rs_rbuf_t r;
    rs_smsg_nack_t m;
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_NACK_LEN, RS_SMSG_NACK, 0, &m.status);
    if (s != RS_OK)
        return s;
    m.partition = rs_r_u32(&r);
    m.imm = rs_r_u32(&r);
    m.seq = rs_r_u64(&r);
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    if (m.status == RS_OK || m.seq >= RS_SEQ_MAX)
        return RS_ERR_PROTOCOL;
    *out = m;
    return RS_OK;
}

rs_status_t rs_sproto_read_open_encode(const rs_smsg_read_open_t *m, void *buf, size_t cap,
                                       size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, RS_SMSG_READ_OPEN, m->status);
    rs_w_u32(&w, m->shuffle_id);
    rs_w_u32(&w, m->partition);
    rs_w_u32(&w, m->tag);
    rs_w_u32(&w, m->n_partitions);
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_read_open_decode(const void *buf, size_t len, rs_smsg_read_open_t *out)
{
    rs_rbuf_t r;
    rs_smsg_read_open_t m;
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_READ_OPEN_LEN, RS_SMSG_READ_OPEN, 1, &m.status);
    if (s != RS_OK)
        return s;
    m.shuffle_id = rs_r_u32(&r);
    m.partition = rs_r_u32(&r);
    m.tag = rs_r_u32(&r);
    m.n_partitions = rs_r_u32(&r);
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    *out = m;
    return RS_OK;
}

rs_status_t rs_sproto_read_reply_encode(const rs_smsg_read_reply_t *m, void *buf, size_t cap,
                                        size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, RS_SMSG_READ_REPLY, m->status);
    rs_w_u32(&w, m->snap_id);
    rs_w_u32(&w, m->tag);
    rs_w_u64(&w, m->index_off);
    rs_w_u64(&w, m->index_len);
    if (m->index_off == RS_SPROTO_INLINE) {
        if (m->index_len > cap)
            return RS_ERR_NO_SPACE;
        rs_w_bytes(&w, m->index, (size_t)m->index_len); /* no copy when built in place */
    }
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_read_reply_decode(const void *buf, size_t len, rs_smsg_read_reply_t *out)
{
    rs_rbuf_t r;
    rs_smsg_read_reply_t m;
    rs_status_t s =
        r_begin(&r, buf, len, RS_SPROTO_READ_REPLY_LEN, RS_SMSG_READ_REPLY, 0, &m.status);
    if (s != RS_OK)
        return s;
    m.snap_id = rs_r_u32(&r);
    m.tag = rs_r_u32(&r);
    m.index_off = rs_r_u64(&r);
    m.index_len = rs_r_u64(&r);
    m.index = NULL;
    if (m.index_off == RS_SPROTO_INLINE) {
        if (m.index_len != rs_r_left(&r))
            return RS_ERR_BAD_LENGTH;
        m.index = rs_r_take(&r, (size_t)m.index_len);
    } else if (rs_r_left(&r) != 0) {
        return RS_ERR_BAD_LENGTH;
    }
    if (m.status != RS_OK
            ? (m.snap_id | m.index_off | m.index_len) != 0
            : m.index_len < RS_SPROTO_SNAP_HDR_LEN ||
                  (m.index_off != RS_SPROTO_INLINE && m.index_off + m.index_len < m.index_off))
        return RS_ERR_PROTOCOL;
    *out = m;
    return RS_OK;
}

rs_status_t rs_sproto_spill_load_encode(const rs_smsg_spill_load_t *m, void *buf, size_t cap,
                                        size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, RS_SMSG_SPILL_LOAD, m->status);
    rs_w_u32(&w, m->snap_id);
    rs_w_u32(&w, m->first);
    rs_w_u32(&w, m->n);
    rs_w_u32(&w, m->tag);
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_spill_load_decode(const void *buf, size_t len, rs_smsg_spill_load_t *out)
{
    rs_rbuf_t r;
    rs_smsg_spill_load_t m;
    rs_status_t s =
        r_begin(&r, buf, len, RS_SPROTO_SPILL_LOAD_LEN, RS_SMSG_SPILL_LOAD, 1, &m.status);
    if (s != RS_OK)
        return s;
    m.snap_id = rs_r_u32(&r);
    m.first = rs_r_u32(&r);
    m.n = rs_r_u32(&r);
    m.tag = rs_r_u32(&r);
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    if (m.n == 0 || m.first + (uint64_t)m.n > UINT32_MAX)
        return RS_ERR_PROTOCOL;
    *out = m;
    return RS_OK;
}

rs_status_t rs_sproto_spill_reply_encode(const rs_smsg_spill_reply_t *m, void *buf, size_t cap,
                                         size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, RS_SMSG_SPILL_REPLY, m->status);
    rs_w_u32(&w, m->n);
    rs_w_u32(&w, m->tag);
    rs_w_u32(&w, m->retry_ms);
    rs_w_u32(&w, 0);
    rs_w_u64(&w, m->off);
    rs_w_u64(&w, m->len);
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_spill_reply_decode(const void *buf, size_t len, rs_smsg_spill_reply_t *out)
{
    rs_rbuf_t r;
    rs_smsg_spill_reply_t m;
    rs_status_t s =
        r_begin(&r, buf, len, RS_SPROTO_SPILL_REPLY_LEN, RS_SMSG_SPILL_REPLY, 0, &m.status);
    if (s != RS_OK)
        return s;
    m.n = rs_r_u32(&r);
    m.tag = rs_r_u32(&r);
    m.retry_ms = rs_r_u32(&r);
    uint32_t reserved = rs_r_u32(&r);
    m.off = rs_r_u64(&r);
    m.len = rs_r_u64(&r);
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    if (reserved != 0 || (m.retry_ms != 0 && m.status != RS_ERR_BACKPRESSURE))
        return RS_ERR_PROTOCOL;
    if (m.status == RS_OK ? m.n == 0 || m.off % RS_SPROTO_ALIGN != 0 || m.off + m.len < m.off
                          : (m.n | m.off | m.len) != 0)
        return RS_ERR_PROTOCOL;
    *out = m;
    return RS_OK;
}

rs_status_t rs_sproto_read_close_encode(const rs_smsg_read_close_t *m, void *buf, size_t cap,
                                        size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, RS_SMSG_READ_CLOSE, m->status);
    rs_w_u32(&w, m->snap_id);
    rs_w_u32(&w, 0);
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_read_close_decode(const void *buf, size_t len, rs_smsg_read_close_t *out)
{
    rs_rbuf_t r;
    rs_smsg_read_close_t m;
    rs_status_t s =
        r_begin(&r, buf, len, RS_SPROTO_READ_CLOSE_LEN, RS_SMSG_READ_CLOSE, 1, &m.status);
    if (s != RS_OK)
        return s;
    m.snap_id = rs_r_u32(&r);
    uint32_t reserved = rs_r_u32(&r);
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    if (reserved != 0)
        return RS_ERR_PROTOCOL;
    *out = m;
    return RS_OK;
}

rs_status_t rs_sproto_drop_encode(const rs_smsg_drop_t *m, void *buf, size_t cap, size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, RS_SMSG_DROP, m->status);
    rs_w_u32(&w, m->shuffle_id);
    rs_w_u32(&w, 0);
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_drop_decode(const void *buf, size_t len, rs_smsg_drop_t *out)
{
    rs_rbuf_t r;
    rs_smsg_drop_t m;
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_DROP_LEN, RS_SMSG_DROP, 1, &m.status);
    if (s != RS_OK)
        return s;
    m.shuffle_id = rs_r_u32(&r);
    uint32_t reserved = rs_r_u32(&r);
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    if (reserved != 0)
        return RS_ERR_PROTOCOL;
    *out = m;
    return RS_OK;
}

static int header_only(unsigned type)
{
    return type == RS_SMSG_COMMIT_REPLY || type == RS_SMSG_DROP_REPLY || type == RS_SMSG_RECLAIM;
}

rs_status_t rs_sproto_status_encode(unsigned type, rs_status_t status, void *buf, size_t cap,
                                    size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, type, status);
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_status_decode(const void *buf, size_t len, unsigned type, rs_status_t *status)
{
    rs_rbuf_t r;
    rs_status_t st;
    if (!header_only(type))
        return RS_ERR_PROTOCOL;
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_HDR_LEN, type, type == RS_SMSG_RECLAIM, &st);
    if (s != RS_OK)
        return s;
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    *status = st;
    return RS_OK;
}

/* ---------------------------------------------------------- list messages */

/* The place of entry i of size item after a fixed part, or NULL past cap. */
static uint8_t *entry_at(void *buf, size_t cap, size_t fixed, uint64_t i, size_t item)
{
    if (buf == NULL || cap < fixed || i >= (cap - fixed) / item)
        return NULL;
    return (uint8_t *)buf + fixed + i * item;
}

static uint32_t entries_max(size_t cap, size_t fixed, size_t item)
{
    size_t n = cap < fixed ? 0 : (cap - fixed) / item;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* The n entries after the fixed part are exactly the bytes left. */
static rs_status_t r_entries(rs_rbuf_t *r, uint32_t n, size_t item, const uint8_t **p)
{
    if ((uint64_t)n * item != rs_r_left(r))
        return RS_ERR_BAD_LENGTH;
    *p = rs_r_take(r, (size_t)n * item);
    return RS_OK;
}

size_t rs_sproto_grant_req_len(uint32_t n)
{
    return RS_SPROTO_GRANT_REQ_LEN + (size_t)n * RS_SPROTO_GRANT_WANT_LEN;
}

uint32_t rs_sproto_grant_req_max(size_t cap)
{
    return entries_max(cap, RS_SPROTO_GRANT_REQ_LEN, RS_SPROTO_GRANT_WANT_LEN);
}

rs_status_t rs_sproto_grant_want_put(void *buf, size_t cap, uint32_t i, const rs_grant_want_t *e)
{
    uint8_t *p = entry_at(buf, cap, RS_SPROTO_GRANT_REQ_LEN, i, RS_SPROTO_GRANT_WANT_LEN);
    if (p == NULL)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, p, RS_SPROTO_GRANT_WANT_LEN);
    rs_w_u32(&w, e->partition);
    rs_w_u32(&w, e->flags);
    rs_w_u64(&w, e->want);
    rs_w_u32(&w, e->retire_slot);
    rs_w_u32(&w, 0);
    rs_w_u64(&w, e->retire_used);
    return RS_OK;
}

rs_status_t rs_sproto_grant_req_encode(const rs_smsg_grant_req_t *m, void *buf, size_t cap,
                                       size_t *len_p)
{
    if (rs_sproto_grant_req_len(m->n) > cap)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, RS_SPROTO_GRANT_REQ_LEN);
    w_hdr(&w, RS_SMSG_GRANT_REQ, m->status);
    rs_w_u32(&w, m->req_id);
    rs_w_u32(&w, m->n);
    *len_p = rs_sproto_grant_req_len(m->n);
    return RS_OK;
}

static rs_grant_want_t want_read(const uint8_t *p, uint32_t *reserved)
{
    rs_rbuf_t r;
    rs_grant_want_t e;
    rs_rbuf_init(&r, p, RS_SPROTO_GRANT_WANT_LEN);
    e.partition = rs_r_u32(&r);
    e.flags = rs_r_u32(&r);
    e.want = rs_r_u64(&r);
    e.retire_slot = rs_r_u32(&r);
    *reserved = rs_r_u32(&r);
    e.retire_used = rs_r_u64(&r);
    return e;
}

rs_grant_want_t rs_sproto_grant_want_get(const rs_smsg_grant_req_t *m, uint32_t i)
{
    uint32_t reserved;
    return want_read(m->entries + (size_t)i * RS_SPROTO_GRANT_WANT_LEN, &reserved);
}

rs_status_t rs_sproto_grant_req_decode(const void *buf, size_t len, rs_smsg_grant_req_t *out)
{
    rs_rbuf_t r;
    rs_smsg_grant_req_t m;
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_GRANT_REQ_LEN, RS_SMSG_GRANT_REQ, 1, &m.status);
    if (s != RS_OK)
        return s;
    m.req_id = rs_r_u32(&r);
    m.n = rs_r_u32(&r);
    if ((s = r_entries(&r, m.n, RS_SPROTO_GRANT_WANT_LEN, &m.entries)) != RS_OK)
        return s;
    if (m.n == 0)
        return RS_ERR_PROTOCOL;
    for (uint32_t i = 0; i < m.n; i++) {
        uint32_t reserved;
        rs_grant_want_t e = want_read(m.entries + (size_t)i * RS_SPROTO_GRANT_WANT_LEN, &reserved);
        int retire = e.retire_slot != RS_SLOT_NONE;
        if (reserved != 0 || (e.flags & ~(uint32_t)RS_GRANT_FLAGS_ALL) != 0 ||
            e.want % RS_SPROTO_ALIGN != 0 || (retire && e.retire_slot >= RS_GRANT_SLOTS) ||
            (!retire && e.retire_used != 0) || (!retire && e.want == 0))
            return RS_ERR_PROTOCOL;
        int merged = (e.flags & RS_GRANT_MERGED) != 0;
        if (merged != (e.partition == RS_MERGED_PART) ||
            (merged && (e.flags & (RS_GRANT_BULK | RS_GRANT_AHEAD)) != 0))
            return RS_ERR_PROTOCOL;
    }
    *out = m;
    return RS_OK;
}

size_t rs_sproto_grant_len(uint32_t n)
{
    return RS_SPROTO_GRANT_LEN + (size_t)n * RS_SPROTO_GRANT_ENTRY_LEN;
}

uint32_t rs_sproto_grant_max(size_t cap)
{
    return entries_max(cap, RS_SPROTO_GRANT_LEN, RS_SPROTO_GRANT_ENTRY_LEN);
}

rs_status_t rs_sproto_grant_put(void *buf, size_t cap, uint32_t i, const rs_grant_t *e)
{
    uint8_t *p = entry_at(buf, cap, RS_SPROTO_GRANT_LEN, i, RS_SPROTO_GRANT_ENTRY_LEN);
    if (p == NULL)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, p, RS_SPROTO_GRANT_ENTRY_LEN);
    rs_w_u32(&w, e->partition);
    rs_w_u32(&w, (uint32_t)(int32_t)e->status);
    rs_w_u32(&w, e->slot);
    rs_w_u32(&w, 0);
    rs_w_u64(&w, e->off);
    rs_w_u64(&w, e->len);
    return RS_OK;
}

rs_status_t rs_sproto_grant_encode(const rs_smsg_grant_t *m, void *buf, size_t cap, size_t *len_p)
{
    if (rs_sproto_grant_len(m->n) > cap)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, RS_SPROTO_GRANT_LEN);
    w_hdr(&w, RS_SMSG_GRANT, m->status);
    rs_w_u32(&w, m->req_id);
    rs_w_u32(&w, m->n);
    rs_w_u32(&w, m->retry_ms);
    rs_w_u32(&w, 0);
    *len_p = rs_sproto_grant_len(m->n);
    return RS_OK;
}

static rs_grant_t grant_read(const uint8_t *p, int32_t *status, uint32_t *reserved)
{
    rs_rbuf_t r;
    rs_grant_t e;
    rs_rbuf_init(&r, p, RS_SPROTO_GRANT_ENTRY_LEN);
    e.partition = rs_r_u32(&r);
    *status = (int32_t)rs_r_u32(&r);
    e.status = (rs_status_t)*status;
    e.slot = rs_r_u32(&r);
    *reserved = rs_r_u32(&r);
    e.off = rs_r_u64(&r);
    e.len = rs_r_u64(&r);
    return e;
}

rs_grant_t rs_sproto_grant_get(const rs_smsg_grant_t *m, uint32_t i)
{
    int32_t status;
    uint32_t reserved;
    return grant_read(m->entries + (size_t)i * RS_SPROTO_GRANT_ENTRY_LEN, &status, &reserved);
}

rs_status_t rs_sproto_grant_decode(const void *buf, size_t len, rs_smsg_grant_t *out)
{
    rs_rbuf_t r;
    rs_smsg_grant_t m;
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_GRANT_LEN, RS_SMSG_GRANT, 0, &m.status);
    if (s != RS_OK)
        return s;
    m.req_id = rs_r_u32(&r);
    m.n = rs_r_u32(&r);
    m.retry_ms = rs_r_u32(&r);
    uint32_t reserved = rs_r_u32(&r);
    if ((s = r_entries(&r, m.n, RS_SPROTO_GRANT_ENTRY_LEN, &m.entries)) != RS_OK)
        return s;
    if (reserved != 0 || (m.status != RS_OK && m.n != 0))
        return RS_ERR_PROTOCOL;
    for (uint32_t i = 0; i < m.n; i++) {
        int32_t st;
        rs_grant_t e =
            grant_read(m.entries + (size_t)i * RS_SPROTO_GRANT_ENTRY_LEN, &st, &reserved);
        if (reserved != 0 || !status_known(st))
            return RS_ERR_PROTOCOL;
        if (st != RS_OK || e.len == 0 ? (e.slot | e.off | e.len) != 0
                                      : e.slot >= RS_GRANT_SLOTS || e.len > RS_GRANT_MAX ||
                                            e.off % RS_SPROTO_ALIGN != 0 ||
                                            e.len % RS_SPROTO_ALIGN != 0 || e.off + e.len < e.off)
            return RS_ERR_PROTOCOL;
    }
    *out = m;
    return RS_OK;
}

size_t rs_sproto_commit_len(uint32_t n)
{
    return RS_SPROTO_COMMIT_LEN + (size_t)n * RS_SPROTO_COMMIT_ENTRY_LEN;
}

uint32_t rs_sproto_commit_max(size_t cap)
{
    return entries_max(cap, RS_SPROTO_COMMIT_LEN, RS_SPROTO_COMMIT_ENTRY_LEN);
}

rs_status_t rs_sproto_commit_put(void *buf, size_t cap, uint32_t i, const rs_commit_entry_t *e)
{
    uint8_t *p = entry_at(buf, cap, RS_SPROTO_COMMIT_LEN, i, RS_SPROTO_COMMIT_ENTRY_LEN);
    if (p == NULL)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, p, RS_SPROTO_COMMIT_ENTRY_LEN);
    rs_w_u32(&w, e->partition);
    rs_w_u32(&w, e->batches);
    rs_w_u64(&w, e->bytes);
    rs_w_u64(&w, e->checksum);
    return RS_OK;
}

rs_status_t rs_sproto_commit_encode(const rs_smsg_commit_t *m, void *buf, size_t cap, size_t *len_p)
{
    if (rs_sproto_commit_len(m->n) > cap)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, RS_SPROTO_COMMIT_LEN);
    w_hdr(&w, RS_SMSG_COMMIT, m->status);
    rs_w_u32(&w, m->n);
    rs_w_u32(&w, m->last);
    rs_w_u64(&w, m->total_batches);
    *len_p = rs_sproto_commit_len(m->n);
    return RS_OK;
}

rs_commit_entry_t rs_sproto_commit_get(const rs_smsg_commit_t *m, uint32_t i)
{
    rs_rbuf_t r;
    rs_commit_entry_t e;
    rs_rbuf_init(&r, m->entries + (size_t)i * RS_SPROTO_COMMIT_ENTRY_LEN,
                 RS_SPROTO_COMMIT_ENTRY_LEN);
    e.partition = rs_r_u32(&r);
    e.batches = rs_r_u32(&r);
    e.bytes = rs_r_u64(&r);
    e.checksum = rs_r_u64(&r);
    return e;
}

rs_status_t rs_sproto_commit_decode(const void *buf, size_t len, rs_smsg_commit_t *out)
{
    rs_rbuf_t r;
    rs_smsg_commit_t m;
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_COMMIT_LEN, RS_SMSG_COMMIT, 1, &m.status);
    if (s != RS_OK)
        return s;
    m.n = rs_r_u32(&r);
    m.last = rs_r_u32(&r);
    m.total_batches = rs_r_u64(&r);
    if ((s = r_entries(&r, m.n, RS_SPROTO_COMMIT_ENTRY_LEN, &m.entries)) != RS_OK)
        return s;
    if (m.last > 1 || (m.n == 0 && !m.last) || (!m.last && m.total_batches != 0))
        return RS_ERR_PROTOCOL;
    for (uint32_t i = 0; i < m.n; i++) {
        rs_commit_entry_t e = rs_sproto_commit_get(&m, i);
        if ((e.batches == 0 && (e.bytes != 0 || e.checksum != 0)) ||
            (i > 0 && e.partition <= rs_sproto_commit_get(&m, i - 1).partition))
            return RS_ERR_PROTOCOL;
    }
    *out = m;
    return RS_OK;
}

/* ----------------------------------------------------------------- snapshot */

size_t rs_sproto_snap_len(uint32_t n_commits, uint32_t n_entries)
{
    return RS_SPROTO_SNAP_HDR_LEN + (size_t)n_commits * RS_SPROTO_SNAP_COMMIT_LEN +
           (size_t)n_entries * RS_SPROTO_SNAP_ENTRY_LEN;
}

rs_status_t rs_sproto_snap_commit_put(void *buf, size_t cap, uint32_t i, const rs_snap_commit_t *c)
{
    uint8_t *p = entry_at(buf, cap, RS_SPROTO_SNAP_HDR_LEN, i, RS_SPROTO_SNAP_COMMIT_LEN);
    if (p == NULL)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, p, RS_SPROTO_SNAP_COMMIT_LEN);
    rs_w_u32(&w, c->map_id);
    rs_w_u32(&w, c->attempt);
    rs_w_u32(&w, c->batches);
    rs_w_u32(&w, c->flags);
    rs_w_u64(&w, c->bytes);
    rs_w_u64(&w, c->checksum);
    return RS_OK;
}

rs_status_t rs_sproto_snap_entry_put(void *buf, size_t cap, uint32_t n_commits, uint32_t i,
                                     const rs_snap_entry_t *e)
{
    size_t fixed = rs_sproto_snap_len(n_commits, 0);
    uint8_t *p = entry_at(buf, cap, fixed, i, RS_SPROTO_SNAP_ENTRY_LEN);
    if (p == NULL)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, p, RS_SPROTO_SNAP_ENTRY_LEN);
    rs_w_u64(&w, e->loc);
    rs_w_u32(&w, e->len);
    rs_w_u32(&w, e->flags);
    rs_w_u32(&w, e->map_id);
    rs_w_u32(&w, e->attempt);
    rs_w_u64(&w, e->seq);
    return RS_OK;
}

rs_status_t rs_sproto_snap_encode(const rs_snap_hdr_t *h, void *buf, size_t cap, size_t *len_p)
{
    size_t len = rs_sproto_snap_len(h->n_commits, h->n_entries);
    if (len > cap)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, RS_SPROTO_SNAP_HDR_LEN);
    rs_w_u32(&w, RS_SNAP_MAGIC);
    rs_w_u32(&w, h->n_commits);
    rs_w_u32(&w, h->n_entries);
    rs_w_u32(&w, h->partition);
    *len_p = len;
    return RS_OK;
}

static rs_snap_commit_t snap_commit_read(const uint8_t *p)
{
    rs_rbuf_t r;
    rs_snap_commit_t c;
    rs_rbuf_init(&r, p, RS_SPROTO_SNAP_COMMIT_LEN);
    c.map_id = rs_r_u32(&r);
    c.attempt = rs_r_u32(&r);
    c.batches = rs_r_u32(&r);
    c.flags = rs_r_u32(&r);
    c.bytes = rs_r_u64(&r);
    c.checksum = rs_r_u64(&r);
    return c;
}

rs_snap_commit_t rs_sproto_snap_commit_get(const rs_snap_hdr_t *h, uint32_t i)
{
    return snap_commit_read(h->commits + (size_t)i * RS_SPROTO_SNAP_COMMIT_LEN);
}

rs_snap_entry_t rs_sproto_snap_entry_get(const rs_snap_hdr_t *h, uint32_t i)
{
    rs_rbuf_t r;
    rs_snap_entry_t e;
    rs_rbuf_init(&r, h->entries + (size_t)i * RS_SPROTO_SNAP_ENTRY_LEN, RS_SPROTO_SNAP_ENTRY_LEN);
    e.loc = rs_r_u64(&r);
    e.len = rs_r_u32(&r);
    e.flags = rs_r_u32(&r);
    e.map_id = rs_r_u32(&r);
    e.attempt = rs_r_u32(&r);
    e.seq = rs_r_u64(&r);
    return e;
}

rs_status_t rs_sproto_snap_decode(const void *buf, size_t len, rs_snap_hdr_t *out)
{
    rs_rbuf_t r;
    rs_snap_hdr_t h;
    if (buf == NULL || len < RS_SPROTO_SNAP_HDR_LEN)
        return RS_ERR_TRUNCATED;
    rs_rbuf_init(&r, buf, len);
    if (rs_r_u32(&r) != RS_SNAP_MAGIC)
        return RS_ERR_BAD_MAGIC;
    h.n_commits = rs_r_u32(&r);
    h.n_entries = rs_r_u32(&r);
    h.partition = rs_r_u32(&r);
    if (rs_sproto_snap_len(h.n_commits, h.n_entries) != len)
        return RS_ERR_BAD_LENGTH;
    h.commits = rs_r_take(&r, (size_t)h.n_commits * RS_SPROTO_SNAP_COMMIT_LEN);
    h.entries = rs_r_take(&r, (size_t)h.n_entries * RS_SPROTO_SNAP_ENTRY_LEN);
    for (uint32_t i = 0; i < h.n_commits; i++) {
        rs_snap_commit_t c = snap_commit_read(h.commits + (size_t)i * RS_SPROTO_SNAP_COMMIT_LEN);
        if ((c.flags & ~(uint32_t)RS_SNAP_C_HOLDER) != 0 ||
            (c.batches == 0 && (c.bytes != 0 || c.checksum != 0)))
            return RS_ERR_PROTOCOL;
    }
    for (uint32_t i = 0; i < h.n_entries; i++) {
        rs_snap_entry_t e = rs_sproto_snap_entry_get(&h, i);
        if (e.len == 0 || (e.flags & ~(uint32_t)RS_SNAP_SPILLED) != 0 || e.seq >= RS_SEQ_MAX ||
            e.loc + e.len < e.loc)
            return RS_ERR_PROTOCOL;
    }
    *out = h;
    return RS_OK;
}

/* -------------------------------------------------------------------- info */

rs_status_t rs_sproto_info_encode(const rs_smsg_info_t *m, void *buf, size_t cap, size_t *len_p)
{
    rs_wbuf_t w;
    rs_wbuf_init(&w, buf, cap);
    w_hdr(&w, RS_SMSG_INFO, m->status);
    rs_w_u32(&w, m->flags);
    rs_w_u32(&w, 0);
    return w_end(&w, len_p);
}

rs_status_t rs_sproto_info_decode(const void *buf, size_t len, rs_smsg_info_t *out)
{
    rs_rbuf_t r;
    rs_smsg_info_t m;
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_INFO_LEN, RS_SMSG_INFO, 1, &m.status);
    if (s != RS_OK)
        return s;
    m.flags = rs_r_u32(&r);
    uint32_t reserved = rs_r_u32(&r);
    if (rs_r_left(&r) != 0)
        return RS_ERR_BAD_LENGTH;
    if ((m.flags & ~(uint32_t)RS_INFO_REQ_DRAIN) != 0 || reserved != 0)
        return RS_ERR_PROTOCOL;
    *out = m;
    return RS_OK;
}

size_t rs_sproto_info_reply_len(uint32_t n_shuffles, uint32_t n_conns)
{
    return RS_SPROTO_INFO_REPLY_LEN + (size_t)n_shuffles * RS_SPROTO_INFO_SHUFFLE_LEN +
           (size_t)n_conns * RS_SPROTO_INFO_CONN_LEN;
}

rs_status_t rs_sproto_info_shuffle_put(void *buf, size_t cap, uint32_t i,
                                       const rs_info_shuffle_t *e)
{
    uint8_t *p = entry_at(buf, cap, RS_SPROTO_INFO_REPLY_LEN, i, RS_SPROTO_INFO_SHUFFLE_LEN);
    if (p == NULL)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, p, RS_SPROTO_INFO_SHUFFLE_LEN);
    rs_w_u32(&w, e->shuffle_id);
    rs_w_u32(&w, e->n_partitions);
    rs_w_u32(&w, e->maps);
    rs_w_u32(&w, e->replicas);
    rs_w_u32(&w, e->flags);
    rs_w_u32(&w, e->open_snaps);
    rs_w_u64(&w, e->bytes);
    rs_w_u64(&w, e->batches);
    rs_w_u64(&w, e->spilled_bytes);
    return RS_OK;
}

rs_status_t rs_sproto_info_conn_put(void *buf, size_t cap, uint32_t n_shuffles, uint32_t i,
                                    const rs_info_conn_t *e)
{
    uint8_t *p =
        entry_at(buf, cap, rs_sproto_info_reply_len(n_shuffles, 0), i, RS_SPROTO_INFO_CONN_LEN);
    if (p == NULL)
        return RS_ERR_NO_SPACE;
    rs_wbuf_t w;
    rs_wbuf_init(&w, p, RS_SPROTO_INFO_CONN_LEN);
    rs_w_u32(&w, e->role);
    rs_w_u32(&w, e->shuffle_id);
    rs_w_u32(&w, e->map_id);
    rs_w_u32(&w, e->attempt);
    rs_w_u32(&w, e->snaps);
    rs_w_u32(&w, e->open_grants);
    rs_w_u64(&w, e->batches);
    return RS_OK;
}

rs_status_t rs_sproto_info_reply_encode(const rs_smsg_info_reply_t *m, void *buf, size_t cap,
                                        size_t *len_p)
{
    rs_wbuf_t w;
    if (m->status != RS_OK) {
        rs_wbuf_init(&w, buf, cap);
        w_hdr(&w, RS_SMSG_INFO_REPLY, m->status);
        return w_end(&w, len_p);
    }
    size_t len = rs_sproto_info_reply_len(m->n_shuffles, m->n_conns);
    if (buf == NULL || len > cap)
        return RS_ERR_NO_SPACE;
    rs_wbuf_init(&w, buf, RS_SPROTO_INFO_REPLY_LEN);
    w_hdr(&w, RS_SMSG_INFO_REPLY, m->status);
    const uint64_t *c = &m->c.batches;
    for (unsigned i = 0; i < sizeof(m->c) / sizeof(uint64_t); i++)
        rs_w_u64(&w, c[i]);
    rs_w_u32(&w, m->n_shuffles);
    rs_w_u32(&w, m->n_conns);
    rs_w_u32(&w, m->flags);
    rs_w_u32(&w, 0);
    *len_p = len;
    return RS_OK;
}

rs_info_shuffle_t rs_sproto_info_shuffle_get(const rs_smsg_info_reply_t *m, uint32_t i)
{
    rs_rbuf_t r;
    rs_info_shuffle_t e;
    rs_rbuf_init(&r, m->shuffles + (size_t)i * RS_SPROTO_INFO_SHUFFLE_LEN,
                 RS_SPROTO_INFO_SHUFFLE_LEN);
    e.shuffle_id = rs_r_u32(&r);
    e.n_partitions = rs_r_u32(&r);
    e.maps = rs_r_u32(&r);
    e.replicas = rs_r_u32(&r);
    e.flags = rs_r_u32(&r);
    e.open_snaps = rs_r_u32(&r);
    e.bytes = rs_r_u64(&r);
    e.batches = rs_r_u64(&r);
    e.spilled_bytes = rs_r_u64(&r);
    return e;
}

rs_info_conn_t rs_sproto_info_conn_get(const rs_smsg_info_reply_t *m, uint32_t i)
{
    rs_rbuf_t r;
    rs_info_conn_t e;
    rs_rbuf_init(&r, m->conns + (size_t)i * RS_SPROTO_INFO_CONN_LEN, RS_SPROTO_INFO_CONN_LEN);
    e.role = rs_r_u32(&r);
    e.shuffle_id = rs_r_u32(&r);
    e.map_id = rs_r_u32(&r);
    e.attempt = rs_r_u32(&r);
    e.snaps = rs_r_u32(&r);
    e.open_grants = rs_r_u32(&r);
    e.batches = rs_r_u64(&r);
    return e;
}

rs_status_t rs_sproto_info_reply_decode(const void *buf, size_t len, rs_smsg_info_reply_t *out)
{
    rs_rbuf_t r;
    rs_smsg_info_reply_t m;
    memset(&m, 0, sizeof(m));
    rs_status_t s = r_begin(&r, buf, len, RS_SPROTO_HDR_LEN, RS_SMSG_INFO_REPLY, 0, &m.status);
    if (s != RS_OK)
        return s;
    if (m.status != RS_OK) {
        if (rs_r_left(&r) != 0)
            return RS_ERR_BAD_LENGTH;
        *out = m;
        return RS_OK;
    }
    if (len < RS_SPROTO_INFO_REPLY_LEN)
        return RS_ERR_TRUNCATED;
    uint64_t *c = &m.c.batches;
    for (unsigned i = 0; i < sizeof(m.c) / sizeof(uint64_t); i++)
        c[i] = rs_r_u64(&r);
    m.n_shuffles = rs_r_u32(&r);
    m.n_conns = rs_r_u32(&r);
    m.flags = rs_r_u32(&r);
    uint32_t reserved = rs_r_u32(&r);
    if (rs_sproto_info_reply_len(m.n_shuffles, m.n_conns) != len)
        return RS_ERR_BAD_LENGTH;
    if ((m.flags & ~(uint32_t)RS_INFO_FLAGS_ALL) != 0 || reserved != 0)
        return RS_ERR_PROTOCOL;
    m.shuffles = rs_r_take(&r, (size_t)m.n_shuffles * RS_SPROTO_INFO_SHUFFLE_LEN);
    m.conns = rs_r_take(&r, (size_t)m.n_conns * RS_SPROTO_INFO_CONN_LEN);
    for (uint32_t i = 0; i < m.n_shuffles; i++) {
        rs_info_shuffle_t e = rs_sproto_info_shuffle_get(&m, i);
        if (e.n_partitions == 0 || e.replicas > RS_SHUFFLE_REPLICAS_MAX ||
            (e.flags & ~(uint32_t)RS_INFO_SH_DROPPED) != 0)
            return RS_ERR_PROTOCOL;
    }
    for (uint32_t i = 0; i < m.n_conns; i++) {
        rs_info_conn_t e = rs_sproto_info_conn_get(&m, i);
        if (e.role > RS_ROLE_READER ||
            (e.role != RS_ROLE_PUSHER && (e.map_id != RS_INFO_NONE || e.attempt != 0)))
            return RS_ERR_PROTOCOL;
    }
    *out = m;
    return RS_OK;
}

/* ---------------------------------------------------------------- any type */

rs_status_t rs_sproto_decode(const void *buf, size_t len, unsigned type, rs_smsg_t *out)
{
    rs_smsg_t m;
    rs_status_t s;
    memset(&m, 0, sizeof(m));
    m.type = type;
    switch (type) {
        case RS_SMSG_ATTACH:
            s = rs_sproto_attach_decode(buf, len, &m.u.attach);
            m.status = m.u.attach.status;
            break;
        case RS_SMSG_ATTACH_REPLY:
            s = rs_sproto_attach_reply_decode(buf, len, &m.u.attach_reply);
            m.status = m.u.attach_reply.status;
            break;
        case RS_SMSG_GRANT_REQ:
            s = rs_sproto_grant_req_decode(buf, len, &m.u.grant_req);
            m.status = m.u.grant_req.status;
            break;
        case RS_SMSG_GRANT:
            s = rs_sproto_grant_decode(buf, len, &m.u.grant);
            m.status = m.u.grant.status;
            break;
        case RS_SMSG_NACK:
            s = rs_sproto_nack_decode(buf, len, &m.u.nack);
            m.status = m.u.nack.status;
            break;
        case RS_SMSG_COMMIT:
            s = rs_sproto_commit_decode(buf, len, &m.u.commit);
            m.status = m.u.commit.status;
            break;
        case RS_SMSG_READ_OPEN:
            s = rs_sproto_read_open_decode(buf, len, &m.u.read_open);
            m.status = m.u.read_open.status;
            break;
        case RS_SMSG_READ_REPLY:
            s = rs_sproto_read_reply_decode(buf, len, &m.u.read_reply);
            m.status = m.u.read_reply.status;
            break;
        case RS_SMSG_SPILL_LOAD:
            s = rs_sproto_spill_load_decode(buf, len, &m.u.spill_load);
            m.status = m.u.spill_load.status;
            break;
        case RS_SMSG_SPILL_REPLY:
            s = rs_sproto_spill_reply_decode(buf, len, &m.u.spill_reply);
            m.status = m.u.spill_reply.status;
            break;
        case RS_SMSG_READ_CLOSE:
            s = rs_sproto_read_close_decode(buf, len, &m.u.read_close);
            m.status = m.u.read_close.status;
            break;
        case RS_SMSG_DROP:
            s = rs_sproto_drop_decode(buf, len, &m.u.drop);
            m.status = m.u.drop.status;
            break;
        case RS_SMSG_INFO:
            s = rs_sproto_info_decode(buf, len, &m.u.info);
            m.status = m.u.info.status;
            break;
        case RS_SMSG_INFO_REPLY:
            s = rs_sproto_info_reply_decode(buf, len, &m.u.info_reply);
            m.status = m.u.info_reply.status;
            break;
        case RS_SMSG_COMMIT_REPLY:
        case RS_SMSG_DROP_REPLY:
        case RS_SMSG_RECLAIM:
            s = rs_sproto_status_decode(buf, len, type, &m.status);
            break;
        default:
            return RS_ERR_PROTOCOL;
    }
    if (s != RS_OK)
        return s;
    *out = m;
    return RS_OK;
}

/* ---------------------------------------------------------------- addresses */

rs_status_t rs_sproto_addr_split(const char *addr, char *host, size_t cap, uint16_t *port)
{
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon[1] < '0' || colon[1] > '9')
        return RS_ERR_INVALID;
    const char *h = addr;
    size_t hlen = (size_t)(colon - addr);
    if (addr[0] == '[') { /* "[v6 literal]:port": the host without its brackets */
        if (hlen < 3 || colon[-1] != ']')
            return RS_ERR_INVALID;
        h = addr + 1;
        hlen -= 2;
    } else if (memchr(addr, ':', hlen) != NULL) {
        return RS_ERR_INVALID; /* an IPv6 literal needs its brackets: which colon ends it? */
    }
    if (hlen == 0 || hlen >= cap)
        return RS_ERR_INVALID;
    char *end;
    unsigned long v = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || v == 0 || v > 65535)
        return RS_ERR_INVALID;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)v;
    return RS_OK;
}
