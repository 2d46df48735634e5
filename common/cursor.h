/*
 * Bounded little-endian cursors for encoding and strictly decoding bytes that
 * cross the fabric. A writer that runs out of room, or a reader that runs out
 * of bytes, remembers it and every later access is a no-op: callers check
 * the status once at the end instead of after every field.
 */
#ifndef RS_COMMON_CURSOR_H
#define RS_COMMON_CURSOR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <rshuffle/status.h>

#include "common/byteorder.h"

typedef struct rs_wbuf {
    uint8_t *p;
    size_t cap;
    size_t off;
    int overflow;
} rs_wbuf_t;

typedef struct rs_rbuf {
    const uint8_t *p;
    size_t len;
    size_t off;
    int truncated;
} rs_rbuf_t;

static inline void rs_wbuf_init(rs_wbuf_t *w, void *p, size_t cap)
{
    w->p = p;
    w->cap = cap;
    w->off = 0;
    w->overflow = 0;
}

/* Reserves n bytes and returns them (NULL, and overflow set, when they do not fit). */
static inline uint8_t *rs_w_reserve(rs_wbuf_t *w, size_t n)
{
    if (w->overflow || n > w->cap - w->off) {
        w->overflow = 1;
        return NULL;
    }
    uint8_t *q = w->p + w->off;
    w->off += n;
    return q;
}

/* src may already lie where the bytes go (built in place): then nothing is copied. */
static inline void rs_w_bytes(rs_wbuf_t *w, const void *src, size_t n)
{
    uint8_t *q = rs_w_reserve(w, n);
    if (q != NULL && n > 0 && q != src)
        memcpy(q, src, n);
}

static inline void rs_w_zero(rs_wbuf_t *w, size_t n)
{
    uint8_t *q = rs_w_reserve(w, n);
    if (q != NULL && n > 0)
        memset(q, 0, n);
}

static inline void rs_w_uint(rs_wbuf_t *w, uint64_t v, unsigned n)
{
    uint8_t *q = rs_w_reserve(w, n);
    if (q != NULL)
        rs_put_le(q, v, n);
}

#define rs_w_u8(w, v)  rs_w_uint((w), (v), 1)
#define rs_w_u16(w, v) rs_w_uint((w), (v), 2)
#define rs_w_u32(w, v) rs_w_uint((w), (v), 4)
#define rs_w_u64(w, v) rs_w_uint((w), (v), 8)

static inline void rs_rbuf_init(rs_rbuf_t *r, const void *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->off = 0;
    r->truncated = 0;
}

/* The next n bytes (NULL, and truncated set, when fewer remain). */
static inline const uint8_t *rs_r_take(rs_rbuf_t *r, size_t n)
{
    if (r->truncated || n > r->len - r->off) {
        r->truncated = 1;
        return NULL;
    }
    const uint8_t *q = r->p + r->off;
    r->off += n;
    return q;
}

static inline uint64_t rs_r_uint(rs_rbuf_t *r, unsigned n)
{
    const uint8_t *q = rs_r_take(r, n);
    return q != NULL ? rs_get_le(q, n) : 0;
}

#define rs_r_u8(r)  ((uint8_t)rs_r_uint((r), 1))
#define rs_r_u16(r) ((uint16_t)rs_r_uint((r), 2))
#define rs_r_u32(r) ((uint32_t)rs_r_uint((r), 4))
#define rs_r_u64(r) rs_r_uint((r), 8)

static inline size_t rs_r_left(const rs_rbuf_t *r)
{
    return r->truncated ? 0 : r->len - r->off;
}

#endif
