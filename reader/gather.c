/*
 * A remote partition's in-memory batches, read many at a time: its batches
 * lie apart in the worker's arena (one extent per grant, or frames inside
 * merged writes), so the next ones up to RD_READ_BYTES and read_ranges
 * ranges go in one vectored read, each range at a 64-byte
 * offset of the buffer. Batches closer than RS_RD_GAP_READ bytes share a
 * range (the gap is read through).
 */
#include "reader/reader_int.h"

#include "common/assert.h"
#include "shuffle/proto.h"

#include <stdlib.h>

/*
 * A read's bytes at most (or its first batch's, up to read_max): they are
 * verified and consumed right after, while still in cache. 64 ranges of
 * 192 KiB frames, 12 MiB in one read, had gone back to memory by then
 * (docs/shuffle.md, "Read path").
 */
#define RD_READ_BYTES (1u << 20)

rs_status_t rs_rd_span_reserve(rs_reader_t *r, size_t n)
{
    if (n <= r->span_cap)
        return RS_OK;
    uint64_t *o = realloc(r->span_off, n * sizeof(*o));
    if (o == NULL)
        return RS_ERR_NOMEM;
    r->span_off = o;
    r->span_cap = n;
    return RS_OK;
}

rs_status_t rs_rd_gather(rs_reader_t *r)
{
    const size_t max = RD_READ_BYTES; /* a larger first batch still fits: read_max >= 16 MiB */
    const uint32_t first = r->next_mem;
    const unsigned ranges = r->sess->cfg.read_ranges;
    rs_get_seg_t seg[RS_GETV_MAX];
    unsigned n = 0;
    uint64_t at = 0; /* the open range's offset in buf */
    uint32_t i = first;
    RS_ASSERT(first < r->n_mem && r->conn->local == NULL);
    RS_ASSERT(ranges >= 1 && ranges <= RS_GETV_MAX); /* the config check */
    rs_status_t st = rs_rd_span_reserve(r, r->n_mem - first);
    if (st != RS_OK)
        return st;
    for (; i < r->n_mem; i++) {
        uint64_t loc = r->mem[i].e.loc, len = r->mem[i].e.len; /* len <= read_max (plan) */
        if (n > 0) {
            if (rs_rd_seg_join(&seg[n - 1], at, loc, len, max, &r->span_off[i - first]))
                continue;
            uint64_t next = at + rs_sproto_round(seg[n - 1].len);
            if (n == ranges || next + len > max)
                break;
            at = next;
        }
        seg[n++] = (rs_get_seg_t){.dst = r->buf + at, .len = (size_t)len, .roff = loc};
        r->span_off[i - first] = at;
    }
    r->stats.reads++;
    if ((st = rs_rd_sess_getv(r->sess, r->conn, seg, n, r->buf_mr)) != RS_OK)
        return st;
    r->data = r->buf;
    r->span = &r->mem[first];
    r->span_n = i - first;
    r->span_i = 0;
    r->next_mem = i;
    return RS_OK;
}
