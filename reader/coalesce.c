/*
 * Small partitions read together (docs/shuffle.md, "Read path"): a remote
 * partition whose batches are few and small is read in one vectored read
 * with the batches of the partitions read ahead on the same connection
 * whose snapshots are already here, into the session's coalesced buffer.
 * Their opens then find their bytes there and read nothing: at 20,000
 * partitions a reducer made one system call per partition, whose fixed
 * part cost more than the copy of the partition's few KiB.
 *
 * The bytes are read while each snapshot pins them; a partition takes them
 * only for the snapshot they were read for (same connection generation and
 * snapshot id) and only when every batch its plan kept is there, else it
 * reads as before. The buffer is filled again only when no reader holds a
 * span of it.
 */
#include "reader/reader_int.h"

#include <rshuffle/codec.h>

#include "common/assert.h"
#include "shuffle/proto.h"

#include <stdlib.h>

#define CO_PART_MAX (256u << 10) /* a partition of more bytes reads on its own */
#define CO_BYTES    (512u << 10) /* one coalesced read's bytes at most */

typedef struct rco_item {
    uint64_t loc;
    uint32_t len;
    uint32_t part; /* index in s->co.parts; CO_SELF: the reader's own */
    uint64_t off;  /* in the buffer, once placed */
} co_item_t;       /* the session's co.items (internal.h) */

#define CO_SELF UINT32_MAX

static int cmp_item_loc(const void *a, const void *b)
{
    const co_item_t *x = a, *y = b;
    return (x->loc > y->loc) - (x->loc < y->loc);
}

static rs_status_t items_reserve(rs_reader_session_t *s, size_t n)
{
    if (n <= s->co.cap_items)
        return RS_OK;
    co_item_t *it = realloc(s->co.items, n * sizeof(*it));
    if (it == NULL)
        return RS_ERR_NOMEM;
    s->co.items = it;
    s->co.cap_items = n;
    return RS_OK;
}

/*
 * The batches of a's snapshot that a plan of this session may keep (the
 * reader's attempts, in memory) appended to the items as part k; 0 when the
 * snapshot is not one to read ahead (malformed, refused, index not inline,
 * too large) or the read has no room left for it.
 */
static int part_add(rs_reader_session_t *s, const rahead_t *a, uint32_t k, size_t *n_p,
                    uint64_t *bytes_p, unsigned ranges)
{
    rs_smsg_read_reply_t rr;
    rs_snap_hdr_t h;
    if (rs_sproto_read_reply_decode(a->reply, a->len, &rr) != RS_OK || rr.status != RS_OK ||
        rr.index_off != RS_SPROTO_INLINE ||
        rs_sproto_snap_decode(rr.index, rr.index_len, &h) != RS_OK || h.partition != a->partition)
        return 0;
    size_t n = *n_p;
    uint64_t bytes = 0;
    if (n + h.n_entries > ranges || items_reserve(s, n + h.n_entries) != RS_OK)
        return 0;
    for (uint32_t i = 0; i < h.n_entries; i++) {
        rs_snap_entry_t e = rs_sproto_snap_entry_get(&h, i);
        if (e.map_id >= s->n_maps || e.attempt != s->attempts[e.map_id] ||
            (e.flags & RS_SNAP_SPILLED) || e.len < RS_FRAME_HEADER_SIZE)
            continue;
        bytes += rs_sproto_round(e.len);
        if (bytes > CO_PART_MAX || *bytes_p + bytes > CO_BYTES)
            return 0;
        s->co.items[n++] = (co_item_t){.loc = e.loc, .len = e.len, .part = k};
    }
    if (n == *n_p)
        return 0; /* nothing to read ahead */
    s->co.parts[k] = (rco_part_t){
        .partition = a->partition, .snap_id = rr.snap_id, .gen = a->gen, .conn = a->conn};
    *n_p = n;
    *bytes_p += bytes;
    return 1;
}

/*
 * Places the n items (sorted by loc) in a buffer of max bytes, batches
 * apart by at most RS_RD_GAP_READ in one range, each range at a 64-byte
 * offset; fills seg and returns the ranges' count.
 */
static unsigned place(co_item_t *it, size_t n, uint8_t *base, uint64_t max, rs_get_seg_t *seg)
{
    unsigned k = 0;
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (k > 0) {
            if (rs_rd_seg_join(&seg[k - 1], at, it[i].loc, it[i].len, max, &it[i].off))
                continue;
            at += rs_sproto_round(seg[k - 1].len);
        }
        RS_ASSERT(at + it[i].len <= max); /* CO_BYTES and its gaps: far below read_max */
        seg[k++] = (rs_get_seg_t){.dst = base + at, .len = it[i].len, .roff = it[i].loc};
        it[i].off = at;
    }
    return k;
}

/* r's span becomes all its in-memory batches, in the buffer at span_off: it holds the buffer. */
static void co_hold(rs_reader_t *r)
{
    r->data = rs_mr_addr(r->sess->co.mr);
    r->span = r->mem;
    r->span_n = r->n_mem;
    r->span_i = 0;
    r->next_mem = r->n_mem;
    r->co_held = 1;
    r->sess->co.users++;
}

/* The reader's own batches, at the offsets the items (by loc) give. */
static void self_span(rs_reader_t *r, const co_item_t *it, size_t n)
{
    uint32_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (it[i].part == CO_SELF)
            r->span_off[j++] = it[i].off; /* r->mem is sorted by loc too */
    RS_ASSERT(j == r->n_mem);
    co_hold(r);
}

/* The ranges of the n_parts other parts, by part and then by loc, for their opens. */
static rs_status_t parts_keep(rs_reader_session_t *s, uint32_t n_parts, const co_item_t *it,
                              size_t n)
{
    if (n > s->co.cap_ranges) {
        rco_range_t *rg = realloc(s->co.ranges, n * sizeof(*rg));
        if (rg == NULL)
            return RS_ERR_NOMEM;
        s->co.ranges = rg;
        s->co.cap_ranges = n;
    }
    uint32_t at = 0;
    for (uint32_t k = 0; k < n_parts; k++) {
        s->co.parts[k].first = at;
        for (size_t i = 0; i < n; i++)
            if (it[i].part == k)
                s->co.ranges[at++] =
                    (rco_range_t){.loc = it[i].loc, .len = it[i].len, .off = it[i].off};
        s->co.parts[k].n = at - s->co.parts[k].first;
    }
    return RS_OK;
}

/* Are r's batches few and small enough to read with others? *bytes_p: their bytes, rounded. */
static int co_wanted(const rs_reader_t *r, uint64_t *bytes_p)
{
    const rs_reader_session_t *s = r->sess;
    if (r->next_mem != 0 || r->n_mem > s->cfg.read_ranges)
        return 0;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < r->n_mem; i++)
        bytes += rs_sproto_round(r->mem[i].e.len);
    *bytes_p = bytes;
    return bytes <= CO_PART_MAX;
}

/* Distance of partition q after p in the reading order (unsigned: wraps). */
static uint32_t ahead_dist(const rs_reader_session_t *s, uint32_t p, uint32_t q)
{
    return q >= p ? q - p : q + (s->desc.n_partitions - p);
}

rs_status_t rs_rd_co_read(rs_reader_t *r, int *done_p)
{
    rs_reader_session_t *s = r->sess;
    uint64_t bytes;
    *done_p = 0;
    if (!co_wanted(r, &bytes) || s->co.users > 0)
        return RS_OK;
    for (int i = 0; i < 4 && rs_progress(s->ctx) > 0; i++)
        ; /* answers already here are taken along */
    /* The candidates: snapshots read ahead on this connection and here, nearest first. */
    uint32_t cand[RS_READ_AHEAD], n_cand = 0;
    for (uint32_t i = 0; i < RS_READ_AHEAD; i++) {
        const rahead_t *a = &s->ahead[i];
        if (a->state == RAHEAD_GOT && a->conn == r->conn && a->gen == r->conn->gen && a->len > 0)
            cand[n_cand++] = i;
    }
    if (n_cand == 0)
        return RS_OK;                     /* nothing to read with it */
    for (uint32_t i = 1; i < n_cand; i++) /* insertion sort: at most RS_READ_AHEAD */
        for (uint32_t j = i;
             j > 0 && ahead_dist(s, r->partition, s->ahead[cand[j]].partition) <
                          ahead_dist(s, r->partition, s->ahead[cand[j - 1]].partition);
             j--) {
            uint32_t t = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = t;
        }
    rs_status_t st = items_reserve(s, r->n_mem);
    if (st != RS_OK)
        return st;
    size_t n = 0;
    for (uint32_t i = 0; i < r->n_mem; i++)
        s->co.items[n++] =
            (co_item_t){.loc = r->mem[i].e.loc, .len = r->mem[i].e.len, .part = CO_SELF};
    s->co.n_parts = 0; /* part_add overwrites the parts: none is valid until the read is done */
    uint32_t n_parts = 0;
    for (uint32_t i = 0; i < n_cand; i++)
        n_parts += part_add(s, &s->ahead[cand[i]], n_parts, &n, &bytes, s->cfg.read_ranges);
    if (n_parts == 0)
        return RS_OK;
    if (s->co.mr == NULL && (st = rs_rd_sess_buf_get(s, &s->co.mr)) != RS_OK)
        return st;
    co_item_t *it = s->co.items;
    qsort(it, n, sizeof(*it), cmp_item_loc);
    rs_get_seg_t seg[RS_GETV_MAX];
    unsigned k = place(it, n, rs_mr_addr(s->co.mr), s->cfg.read_max, seg);
    if ((st = rs_rd_span_reserve(r, r->n_mem)) != RS_OK ||
        (st = parts_keep(s, n_parts, it, n)) != RS_OK)
        return st;
    r->stats.reads++;
    if ((st = rs_rd_sess_getv(s, r->conn, seg, k, s->co.mr)) != RS_OK)
        return st;
    s->co.n_parts = n_parts;
    self_span(r, it, n);
    *done_p = 1;
    return RS_OK;
}

int rs_rd_co_take(rs_reader_t *r)
{
    rs_reader_session_t *s = r->sess;
    if (r->next_mem != 0)
        return 0;
    for (uint32_t k = 0; k < s->co.n_parts; k++) {
        rco_part_t *p = &s->co.parts[k];
        if (p->partition != r->partition || p->conn != r->conn || p->snap_id != r->snap_id ||
            p->gen != r->conn_gen || r->conn->gen != p->gen)
            continue;
        if (rs_rd_span_reserve(r, r->n_mem) != RS_OK)
            return 0;
        const rco_range_t *rg = &s->co.ranges[p->first];
        uint32_t j = 0;
        for (uint32_t i = 0; i < r->n_mem; i++) { /* both sorted by loc */
            const rs_snap_entry_t *e = &r->mem[i].e;
            while (j < p->n && rg[j].loc < e->loc)
                j++;
            if (j == p->n || rg[j].loc != e->loc || rg[j].len != e->len)
                return 0; /* not all here: read as usual */
            r->span_off[i] = rg[j].off;
        }
        p->partition = UINT32_MAX; /* taken once */
        co_hold(r);
        return 1;
    }
    return 0;
}

void rs_rd_co_release(rs_reader_t *r)
{
    if (!r->co_held)
        return;
    RS_ASSERT(r->sess->co.users > 0);
    r->sess->co.users--;
    r->co_held = 0;
}
