/*
 * A reader's state (reader.c), seen also by spare.c, which frees a closed
 * reader a session or lane kept for the next open: lane.c and session.c
 * free those through it without calling into reader.c; by gather.c,
 * which reads a remote reader's next batches; and by coalesce.c, which
 * reads small partitions' batches together.
 */
#ifndef RS_READER_READER_INT_H
#define RS_READER_READER_INT_H

#include "reader/internal.h"

typedef struct rent {
    rs_snap_entry_t e;
    uint32_t index; /* in the worker's snapshot (for spill loads) */
} rent_t;

/* A winning map's state in this partition: not found yet, read from the current worker, read. */
enum { RMAP_OPEN = 0, RMAP_HERE, RMAP_DONE };

typedef struct rmap {
    int state;          /* RMAP_* */
    rs_snap_commit_t c; /* what the winning attempt committed (HERE, DONE) */
    uint64_t plan_seq;  /* while planning: the last seq seen in the snapshot, plus one */
    uint32_t batches;
    uint64_t bytes, checksum; /* what was read */
} rmap_t;

struct rs_reader {
    rs_reader_session_t *sess;
    int own_session; /* opened by rs_reader_open: closed with the reader */
    rconn_t *conn;
    uint32_t conn_gen; /* the connection its snapshot lives on */
    rs_mr_t *buf_mr;   /* remote partitions only */
    uint8_t *buf;
    uint32_t partition;
    rmap_t *maps;
    uint32_t maps_cap;
    uint32_t snap_id;
    int snap_open;
    rent_t *mem, *spill; /* kept entries, in memory (sorted by loc) and spilled */
    uint32_t n_mem, n_spill, next_mem, next_spill;
    uint32_t plan_cap; /* entries mem and spill each have room for */
    /* the batches of the current read: in buf, or in place in a local worker's arena */
    const uint8_t *data;
    rent_t *span;
    uint32_t span_n, span_i;
    uint64_t *span_off; /* offset of each frame in data */
    size_t span_cap;
    int co_held; /* data is the session's coalesced buffer (coalesce.c) */
    /* the current batch's records */
    const uint8_t *rec, *rec_end;
    uint8_t *raw;
    size_t raw_cap;
    rs_status_t error;
    int done;
    rs_reader_stats_t stats;
    uint32_t place;      /* the partition's first replica: its ring starts there */
    uint32_t ring;       /* the next ring position to try (R = 1: only 0) */
    uint64_t *delivered; /* R >= 2: batches handed out, (map << 32) | seq */
    size_t n_delivered, cap_delivered;
};

#define RS_RD_GAP_READ 256 /* a gap this small between batches is read, not a range of its own */

/*
 * Joins the batch [loc, loc + len) to the range c being built (at offset at
 * of a buffer of max bytes; batches come by loc) when it starts inside c or
 * within RS_RD_GAP_READ of its end and c then still fits; *off_p: its
 * offset in the buffer. 0: it needs a range of its own.
 */
static inline int rs_rd_seg_join(rs_get_seg_t *c, uint64_t at, uint64_t loc, uint64_t len,
                                 uint64_t max, uint64_t *off_p)
{
    uint64_t end = c->roff + c->len;
    if (loc < c->roff || (loc > end && loc - end > RS_RD_GAP_READ) ||
        at + (loc + len - c->roff) > max)
        return 0;
    *off_p = at + (loc - c->roff);
    if (loc + len > end)
        c->len = (size_t)(loc + len - c->roff);
    return 1;
}

/* gather.c */
/* Room for n frame offsets in span_off. */
rs_status_t rs_rd_span_reserve(rs_reader_t *r, size_t n);
/* A remote reader's next in-memory batches into buf, in one vectored read. */
rs_status_t rs_rd_gather(rs_reader_t *r);

/*
 * coalesce.c. read: before r's first remote read, when its batches are few
 * and small, reads them and those of the partitions read ahead on its
 * connection (snapshots here) in one vectored read; *done_p 1 when r's
 * span is now there. take: r's batches, all of them read with an earlier
 * partition's for this snapshot, become its span (1), else 0. release: r's
 * span leaves the buffer.
 */
rs_status_t rs_rd_co_read(rs_reader_t *r, int *done_p);
int rs_rd_co_take(rs_reader_t *r);
void rs_rd_co_release(rs_reader_t *r);

#endif
