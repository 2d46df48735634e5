/*
 * One partition read back (include/rshuffle/reader.h, docs/shuffle.md "Read
 * path"), from the first of its replicas that answers. With R >= 2 each
 * winning map is read from the first worker of the partition's ring that
 * holds it (its replicas first, then the workers a pusher that lost one
 * moved the partition to), and a worker lost mid-read is replaced by the
 * next, whose batches already delivered are skipped by identity
 * (docs/shuffle.md, "Replication and failover").
 */
#include "reader/internal.h"
#include "reader/reader_int.h"

#include <rshuffle/codec.h>

#include "common/byteorder.h"
#include "common/clock.h"
#include "common/log.h"
#include "shuffle/proto.h"

#include <stdlib.h>
#include <string.h>

/* A closed reader kept by its session for the next open keeps a decode buffer up to this. */
#define READER_RAW_KEEP (1u << 20)

/* How many winning maps are in state (RMAP_*). */
static uint32_t maps_in(const rs_reader_t *r, int state)
{
    uint32_t n = 0;
    for (uint32_t m = 0; m < r->sess->n_maps; m++)
        n += r->maps[m].state == state;
    return n;
}

/* Every winning map in state from goes to state to. */
static void maps_move(rs_reader_t *r, int from, int to)
{
    for (uint32_t m = 0; m < r->sess->n_maps; m++) {
        if (r->maps[m].state == from)
            r->maps[m].state = to;
    }
}

static uint64_t batch_key(uint32_t map_id, uint64_t seq)
{
    return ((uint64_t)map_id << 32) | (seq & 0xffffffffu); /* seq < 2^32 (the snapshot decoder) */
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Was this batch handed out already, from a replica read before? (delivered is sorted) */
static int was_delivered(const rs_reader_t *r, const rs_snap_entry_t *e)
{
    uint64_t k = batch_key(e->map_id, e->seq);
    return r->n_delivered > 0 &&
           bsearch(&k, r->delivered, r->n_delivered, sizeof(k), cmp_u64) != NULL;
}

static int cmp_loc(const void *a, const void *b)
{
    const rent_t *x = a, *y = b;
    return (x->e.loc > y->e.loc) - (x->e.loc < y->e.loc);
}

static int cmp_dedup(const void *a, const void *b)
{
    const rent_t *x = a, *y = b;
    if (x->e.map_id != y->e.map_id)
        return (x->e.map_id > y->e.map_id) - (x->e.map_id < y->e.map_id);
    if (x->e.seq != y->e.seq)
        return (x->e.seq > y->e.seq) - (x->e.seq < y->e.seq);
    return (x->index > y->index) - (x->index < y->index);
}

/* Grows the plan's arrays to n entries each (kept across plans and, in the session, opens). */
static rs_status_t plan_reserve(rs_reader_t *r, uint32_t n)
{
    if (n <= r->plan_cap && r->mem != NULL)
        return RS_OK;
    size_t cap = n ? n : 1;
    rent_t *m = malloc(cap * sizeof(*m)), *sp = malloc(cap * sizeof(*sp));
    if (m == NULL || sp == NULL) {
        free(m);
        free(sp);
        return RS_ERR_NOMEM;
    }
    free(r->mem);
    free(r->spill);
    r->mem = m;
    r->spill = sp;
    r->plan_cap = (uint32_t)cap;
    return RS_OK;
}

static int sorted_by_loc(const rent_t *e, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++)
        if (e[i].e.loc < e[i - 1].e.loc)
            return 0;
    return 1;
}

/*
 * Entries repeated (same map and seq) among e[0 .. n): sorted by map, seq
 * and index, the first of each kept; returns how many are left. Only when
 * some map's seqs did not rise in the snapshot's order (a batch sent
 * again), so a plan usually sorts nothing.
 */
static uint32_t plan_dedup(rs_reader_t *r, rent_t *e, uint32_t n)
{
    qsort(e, n, sizeof(*e), cmp_dedup);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (k > 0 && e[i].e.map_id == e[k - 1].e.map_id && e[i].e.seq == e[k - 1].e.seq) {
            r->stats.duplicates++;
            continue;
        }
        e[k++] = e[i];
    }
    return k;
}

/*
 * The n entries kept in r->mem go to mem or spill by where they lie, but
 * those a replica read before handed out already.
 */
static void plan_split(rs_reader_t *r, uint32_t n)
{
    r->n_mem = r->n_spill = 0;
    for (uint32_t i = 0; i < n; i++) {
        rent_t e = r->mem[i];
        if (was_delivered(r, &e.e))
            continue; /* read from a replica lost since */
        if (e.e.flags & RS_SNAP_SPILLED)
            r->spill[r->n_spill++] = e;
        else
            r->mem[r->n_mem++] = e; /* n_mem <= i: nothing unread is overwritten */
    }
}

/* Parses the snapshot: keeps batches of winning attempts, once each. */
static rs_status_t plan(rs_reader_t *r, const uint8_t *snap, size_t len)
{
    rs_reader_session_t *s = r->sess;
    rs_snap_hdr_t h;
    if (rs_sproto_snap_decode(snap, len, &h) != RS_OK || h.partition != r->partition) {
        rs_error("reader: malformed index of shuffle %u partition %u from worker %s",
                 s->desc.shuffle_id, r->partition, r->conn->addr);
        r->conn->garbled = 1;
        return RS_ERR_PROTOCOL;
    }
    for (uint32_t i = 0; i < h.n_commits; i++) {
        rs_snap_commit_t c = rs_sproto_snap_commit_get(&h, i);
        if (c.map_id >= s->n_maps) { /* its records would be lost without a word */
            rs_error("reader: map %u committed shuffle %u at worker %s, outside the reader's "
                     "n_maps %u",
                     c.map_id, s->desc.shuffle_id, r->conn->addr, s->n_maps);
            return RS_ERR_INVALID;
        }
        if (c.attempt != s->attempts[c.map_id])
            continue;
        /* R >= 2: only a commit that lists the partition says the worker holds it. */
        rmap_t *m = &r->maps[c.map_id];
        if (m->state == RMAP_OPEN && (s->replicas == 1 || (c.flags & RS_SNAP_C_HOLDER))) {
            m->state = RMAP_HERE;
            m->c = c;
        }
    }
    for (uint32_t m = 0; m < s->n_maps; m++) {
        r->maps[m].plan_seq = 0;
        if (r->maps[m].state == RMAP_OPEN && s->replicas == 1) {
            rs_error("reader: map %u attempt %u has not committed shuffle %u at worker %s", m,
                     s->attempts[m], s->desc.shuffle_id, r->conn->addr);
            return RS_ERR_STATE;
        }
    }
    rs_status_t st = plan_reserve(r, h.n_entries);
    if (st != RS_OK)
        return st;
    r->next_mem = r->next_spill = 0; /* planned again after a failover */
    uint32_t n = 0;
    int repeats = 0; /* a map's seq did not rise: there may be repeated batches */
    for (uint32_t i = 0; i < h.n_entries; i++) {
        rent_t e = {.index = i, .e = rs_sproto_snap_entry_get(&h, i)};
        if (e.e.map_id >= s->n_maps || e.e.attempt != s->attempts[e.e.map_id]) {
            r->stats.other_attempts++;
            continue;
        }
        rmap_t *m = &r->maps[e.e.map_id];
        if (m->state != RMAP_HERE)
            continue; /* R >= 2: read from another worker (done, or not found yet) */
        if (e.e.len < RS_FRAME_HEADER_SIZE || e.e.len > s->cfg.read_max)
            return RS_ERR_BAD_LENGTH;
        if (e.e.seq < m->plan_seq)
            repeats = 1;
        m->plan_seq = e.e.seq + 1; /* seq < RS_SEQ_MAX (the snapshot decoder) */
        r->mem[n++] = e;
    }
    if (repeats)
        n = plan_dedup(r, r->mem, n);
    plan_split(r, n);
    if (!sorted_by_loc(r->mem, r->n_mem))
        qsort(r->mem, r->n_mem, sizeof(*r->mem), cmp_loc);
    if (!sorted_by_loc(r->spill, r->n_spill))
        qsort(r->spill, r->n_spill, sizeof(*r->spill), cmp_loc);
    return RS_OK;
}

/*
 * Sends a request the worker may refuse for want of memory (index or stage
 * room): asks again after its retry_ms, within the session's wait bound.
 */
static rs_status_t request_retry(rs_reader_t *r, unsigned type, const void *m, uint32_t *tag_field,
                                 unsigned reply_type, const char *what)
{
    rs_reader_session_t *s = r->sess;
    uint64_t deadline = rs_now_coarse_ns() + RS_MS_TO_NS(s->cfg.wait_ms);
    for (;;) {
        uint32_t tag = *tag_field = ++s->next_tag;
        uint8_t buf[RS_SPROTO_READ_OPEN_LEN > RS_SPROTO_SPILL_LOAD_LEN ? RS_SPROTO_READ_OPEN_LEN
                                                                       : RS_SPROTO_SPILL_LOAD_LEN];
        size_t len;
        rs_status_t st = type == RS_SMSG_READ_OPEN
                             ? rs_sproto_read_open_encode(m, buf, sizeof(buf), &len)
                             : rs_sproto_spill_load_encode(m, buf, sizeof(buf), &len);
        if (st == RS_OK)
            st = rs_rd_sess_request(s, r->conn, type, buf, len, reply_type, tag, what);
        if (st != RS_ERR_BACKPRESSURE || rs_now_coarse_ns() >= deadline) {
            if (st == RS_ERR_NOT_FOUND && s->replicas > 1) {
                /* A worker restarted empty answers so for every partition: said once. */
                if (!r->conn->said_unknown)
                    rs_warn("reader: worker %s does not hold shuffle %u (restarted empty?): its "
                            "partitions are read from their other replicas",
                            r->conn->addr, s->desc.shuffle_id);
                r->conn->said_unknown = 1;
            } else if (st != RS_OK) {
                rs_error("reader: worker %s refused %s of shuffle %u partition %u: %s",
                         r->conn->addr, what, s->desc.shuffle_id, r->partition, rs_strerror(st));
            }
            return st;
        }
        uint32_t retry_ms = 10;
        if (type == RS_SMSG_SPILL_LOAD && s->rep.type == RS_SMSG_SPILL_REPLY) {
            const rs_smsg_spill_reply_t *sr = &s->rep.u.spill_reply;
            retry_ms = sr->retry_ms ? sr->retry_ms : retry_ms;
        }
        rs_rd_sess_pause(s, retry_ms);
    }
}

/*
 * The bytes [off, off+len) of a local worker's arena, which the snapshot
 * keeps in place until the reader closes it (extents pinned, index and
 * stage owned by the snapshot).
 */
static rs_status_t local_at(rs_reader_t *r, uint64_t off, uint64_t len, const uint8_t **p)
{
    const rconn_t *c = r->conn;
    if (off > c->local_len || len > c->local_len - off) {
        rs_error("reader: range %llu+%llu outside worker %s's %llu-byte arena",
                 (unsigned long long)off, (unsigned long long)len, c->addr,
                 (unsigned long long)c->local_len);
        return RS_ERR_PROTOCOL;
    }
    *p = c->local + off;
    return RS_OK;
}

/* The span's bytes: in place for a local worker, else one one-sided read into buf. */
static rs_status_t span_fetch(rs_reader_t *r, uint64_t off, uint64_t len)
{
    if (r->conn->local != NULL)
        return local_at(r, off, len, &r->data);
    r->stats.reads++;
    rs_status_t st = rs_rd_sess_get(r->sess, r->conn, r->buf, len, r->buf_mr, off);
    if (st == RS_OK)
        r->data = r->buf;
    return st;
}

static void snapshot_close(rs_reader_t *r);

/* A remote partition's read buffer, taken from the session's pool once. */
static rs_status_t reader_buf(rs_reader_t *r)
{
    if (r->conn->local != NULL || r->buf_mr != NULL)
        return RS_OK;
    rs_status_t st = rs_rd_sess_buf_get(r->sess, &r->buf_mr);
    if (st == RS_OK)
        r->buf = rs_mr_addr(r->buf_mr);
    return st;
}

static rs_status_t open_snapshot_once(rs_reader_t *r, int may_claim, int *claimed_p)
{
    rs_reader_session_t *s = r->sess;
    rs_smsg_read_open_t o = {.status = RS_OK,
                             .shuffle_id = s->desc.shuffle_id,
                             .partition = r->partition,
                             .n_partitions = s->desc.n_partitions};
    int claimed = 0;
    rs_status_t st = may_claim ? rs_rd_sess_ahead_claim(s, r->conn, r->partition, &claimed) : RS_OK;
    *claimed_p = claimed;
    if (st == RS_OK && !claimed)
        st = request_retry(r, RS_SMSG_READ_OPEN, &o, &o.tag, RS_SMSG_READ_REPLY, "open");
    rs_status_t as = rs_rd_sess_attach_end(s, r->conn); /* a kept connection's, sent before */
    if (as != RS_OK) {
        if (st == RS_OK) { /* opened on a connection whose attach failed: not ours */
            r->snap_id = s->rep.u.read_reply.snap_id;
            r->snap_open = 1;
            snapshot_close(r);
        }
        rs_rd_sess_conn_fail(s, r->conn, as);
        return as;
    }
    if (st == RS_ERR_INVALID)
        rs_error("reader: worker %s holds shuffle %u with another n_partitions than this "
                 "reader's %u",
                 r->conn->addr, s->desc.shuffle_id, s->desc.n_partitions);
    if (st != RS_OK)
        return st;
    rs_smsg_read_reply_t rr = s->rep.u.read_reply;
    r->snap_id = rr.snap_id;
    r->snap_open = 1;
    if ((st = reader_buf(r)) != RS_OK)
        return st;
    rs_rd_sess_ahead_issue(s, r->partition); /* answered while this one is read */
    if (rr.index_off == RS_SPROTO_INLINE)
        return plan(r, rr.index, rr.index_len);
    if (r->conn->local == NULL && rr.index_len > s->cfg.read_max) {
        rs_error("reader: partition index of %llu bytes exceeds the %zu-byte read buffer",
                 (unsigned long long)rr.index_len, s->cfg.read_max);
        return RS_ERR_NO_SPACE;
    }
    if ((st = span_fetch(r, rr.index_off, rr.index_len)) != RS_OK)
        return st;
    return plan(r, r->data, rr.index_len);
}

/* Sends READ_CLOSE for r's snapshot, if it is open on a live connection. */
static void snapshot_close(rs_reader_t *r)
{
    if (r->snap_open && r->conn != NULL && r->conn->gen == r->conn_gen &&
        rs_ep_status(r->conn->ep) == RS_OK)
        rs_rd_closes_add(r->conn, r->snap_id);
    r->snap_open = 0;
}

/*
 * A snapshot read ahead was taken before its open: a map that committed in
 * between is missing from it (R = 1: RS_ERR_STATE; R >= 2: a map not found
 * there), so that one is asked again.
 */
static rs_status_t open_snapshot(rs_reader_t *r)
{
    int claimed;
    rs_status_t st = open_snapshot_once(r, 1, &claimed);
    if (claimed && (st == RS_ERR_STATE || (st == RS_OK && maps_in(r, RMAP_OPEN) > 0))) {
        snapshot_close(r);
        maps_move(r, RMAP_HERE, RMAP_OPEN); /* what was read so far still counts */
        st = open_snapshot_once(r, 0, &claimed);
    }
    return st;
}

/* Opens the partition on worker w: connection, read buffer (remote), snapshot and plan. */
static rs_status_t open_on(rs_reader_t *r, uint32_t w)
{
    rs_reader_session_t *s = r->sess;
    rs_status_t st = rs_rd_sess_conn(s, w, &r->conn);
    if (st != RS_OK)
        return st;
    r->conn_gen = r->conn->gen;
    /*
     * A kept connection whose attach is still out may turn out local: the
     * read buffer waits for the answer (taken with the open's).
     */
    if (s->att_conn != r->conn && (st = reader_buf(r)) != RS_OK)
        return st;
    return open_snapshot(r);
}

/*
 * Opens the partition on the next worker of its ring that is not lost and
 * holds a winning map not read yet. R = 1: its one worker. R >= 2: its
 * replicas, then the workers after them in ring order, where a pusher that
 * lost a replica before the partition's first batch put it instead. A
 * worker that fails is left for the next one (marked lost when it is dead
 * or silent); the last failure is returned when none is left.
 */
static rs_status_t open_next(rs_reader_t *r, rs_status_t st)
{
    rs_reader_session_t *s = r->sess;
    uint32_t nw = s->desc.n_workers, end = s->replicas == 1 ? 1 : nw;
    while (r->ring < end) {
        uint32_t k = r->ring++, w = (r->place + k) % nw;
        if (s->conns[w].lost) {
            st = RS_ERR_UNREACHABLE;
            continue;
        }
        st = open_on(r, w);
        if (st == RS_OK && (maps_in(r, RMAP_HERE) > 0 || maps_in(r, RMAP_OPEN) == 0))
            return RS_OK;
        if (st == RS_ERR_NOMEM || st == RS_ERR_INVALID) /* ours, or pushers with another R */
            return st;
        if (st == RS_OK) {
            st = RS_ERR_STATE; /* holds none of the maps still to read */
        } else if (s->replicas > 1 && st != RS_ERR_STATE && st != RS_ERR_NOT_FOUND) {
            rs_warn("reader: partition %u of shuffle %u at worker %s (ring position %u): %s",
                    r->partition, s->desc.shuffle_id, s->conns[w].addr, k, rs_strerror(st));
            if (rs_rd_sess_lost(s, &s->conns[w], st))
                r->ring = k; /* once: the queue is renewed before w is asked again */
        }
        maps_move(r, RMAP_HERE, RMAP_OPEN);
        snapshot_close(r);
        r->conn = NULL;
    }
    for (uint32_t m = 0; m < s->n_maps && s->replicas > 1; m++) {
        if (r->maps[m].state == RMAP_OPEN) {
            rs_error("reader: partition %u of shuffle %u: no live worker holds map %u attempt %u",
                     r->partition, s->desc.shuffle_id, m, s->attempts[m]);
            break;
        }
    }
    return st;
}

/*
 * A reader for s: the one its lane kept from the last close (arrays kept,
 * cleared: a reduce task of one partition allocates nothing for it), else
 * a new one. maps is NULL when it could not be had.
 */
static rs_reader_t *reader_new(rs_reader_session_t *s)
{
    uint32_t n = s->n_maps ? s->n_maps : 1;
    rs_reader_t *r = s->spare;
    s->spare = NULL;
    if (r != NULL) {
        rs_reader_t keep = *r;
        *r = (rs_reader_t){.maps = keep.maps,
                           .maps_cap = keep.maps_cap,
                           .mem = keep.mem,
                           .spill = keep.spill,
                           .plan_cap = keep.plan_cap,
                           .span_off = keep.span_off,
                           .span_cap = keep.span_cap,
                           .raw = keep.raw,
                           .raw_cap = keep.raw_cap};
        if (r->maps_cap < n) {
            free(r->maps);
            r->maps = NULL;
            r->maps_cap = 0;
        }
    } else if ((r = calloc(1, sizeof(*r))) == NULL) {
        return NULL;
    }
    r->sess = s;
    if (r->maps == NULL) {
        r->maps = malloc(n * sizeof(*r->maps));
        r->maps_cap = r->maps != NULL ? n : 0;
    }
    if (r->maps != NULL)
        memset(r->maps, 0, n * sizeof(*r->maps));
    return r;
}

rs_status_t rs_reader_open_in(rs_reader_session_t *s, uint32_t partition, rs_reader_t **reader_p)
{
    if (s == NULL || reader_p == NULL)
        return RS_ERR_INVALID;
    uint32_t w;
    if (s->lane != NULL && rs_lane_client_closed(&s->lane->base)) {
        rs_error("reader: the session's client was destroyed");
        return RS_ERR_CANCELED;
    }
    rs_rd_closes_due(s);
    rs_status_t st = rs_shuffle_place(&s->desc, partition, &w);
    if (st != RS_OK)
        return st;
    rs_reader_t *r = reader_new(s);
    if (r == NULL)
        return RS_ERR_NOMEM;
    r->partition = partition;
    r->place = w;
    s->open_readers++;
    st = r->maps != NULL ? RS_OK : RS_ERR_NOMEM;
    if (st == RS_OK)
        st = open_next(r, RS_ERR_UNREACHABLE);
    if (st != RS_OK) {
        rs_reader_close(r);
        return st;
    }
    *reader_p = r;
    return RS_OK;
}

/* Leaves the current worker's snapshot; its maps become `to` (RMAP_OPEN or RMAP_DONE). */
static void leave_worker(rs_reader_t *r, int to)
{
    rs_rd_co_release(r);
    snapshot_close(r);
    r->conn = NULL;
    r->span = NULL;
    r->span_n = r->span_i = 0;
    r->rec = r->rec_end = NULL;
    if (r->n_delivered > 1) /* none yet: delivered may be NULL, which qsort must not get */
        qsort(r->delivered, r->n_delivered, sizeof(*r->delivered), cmp_u64);
    maps_move(r, RMAP_HERE, to);
}

/*
 * R >= 2: the worker being read failed with st: go on from the next one,
 * skipping every batch already handed out (same map and seq: the same
 * bytes, as every holder got the same frames). RS_OK when one took over.
 */
static rs_status_t failover(rs_reader_t *r, rs_status_t st)
{
    rs_reader_session_t *s = r->sess;
    if (s->replicas < 2 || st == RS_ERR_NOMEM)
        return st;
    rs_warn("reader: partition %u of shuffle %u: worker %s failed mid-read (%s), %zu batches in: "
            "going on from another replica",
            r->partition, s->desc.shuffle_id, r->conn->addr, rs_strerror(st), r->n_delivered);
    if (rs_rd_sess_lost(s, r->conn, st))
        r->ring--; /* this worker again, on a renewed queue */
    leave_worker(r, RMAP_OPEN);
    rs_status_t ns = open_next(r, st);
    if (ns == RS_OK)
        r->stats.failovers++;
    return ns;
}

/* Remembers a batch handed out (R >= 2), so a replica taking over skips it. */
static rs_status_t delivered_add(rs_reader_t *r, const rs_snap_entry_t *e)
{
    if (r->n_delivered == r->cap_delivered) {
        size_t cap = r->cap_delivered ? 2 * r->cap_delivered : 64;
        uint64_t *n = realloc(r->delivered, cap * sizeof(*n));
        if (n == NULL)
            return RS_ERR_NOMEM;
        r->delivered = n;
        r->cap_delivered = cap;
    }
    r->delivered[r->n_delivered++] = batch_key(e->map_id, e->seq);
    return RS_OK;
}

rs_status_t rs_reader_open(const rs_shuffle_desc_t *desc, uint32_t partition, uint32_t n_maps,
                           const uint32_t *attempts, const rs_reader_config_t *cfg,
                           rs_reader_t **reader_p)
{
    if (reader_p == NULL)
        return RS_ERR_INVALID;
    rs_reader_session_t *s;
    rs_status_t st = rs_reader_session_open(desc, n_maps, attempts, cfg, &s);
    if (st != RS_OK)
        return st;
    rs_reader_t *r;
    st = rs_reader_open_in(s, partition, &r);
    if (st != RS_OK) {
        rs_reader_session_close(s);
        return st;
    }
    r->own_session = 1;
    *reader_p = r;
    return RS_OK;
}

/*
 * The next adjacent in-memory batches (gaps of at most 64 KiB taken along):
 * in place for a local worker; a remote one's in one vectored read.
 */
static rs_status_t next_mem_span(rs_reader_t *r)
{
    rs_reader_session_t *s = r->sess;
    if (r->conn->local == NULL) {
        if (r->next_mem == 0) { /* read with an earlier partition's, or with later ones' */
            int done;
            if (rs_rd_co_take(r))
                return RS_OK;
            rs_status_t st = rs_rd_co_read(r, &done);
            if (st != RS_OK || done)
                return st;
        }
        return rs_rd_gather(r);
    }
    uint32_t first = r->next_mem, last = first;
    uint64_t base = r->mem[first].e.loc;
    while (last + 1 < r->n_mem &&
           r->mem[last + 1].e.loc + r->mem[last + 1].e.len - base <= s->cfg.read_max &&
           r->mem[last + 1].e.loc - (r->mem[last].e.loc + r->mem[last].e.len) <= (64 << 10))
        last++;
    uint64_t end = r->mem[last].e.loc + r->mem[last].e.len;
    rs_status_t st = rs_rd_span_reserve(r, last - first + 1);
    if (st != RS_OK)
        return st;
    if ((st = span_fetch(r, base, end - base)) != RS_OK)
        return st;
    r->span = &r->mem[first];
    r->span_n = last - first + 1;
    for (uint32_t i = 0; i < r->span_n; i++)
        r->span_off[i] = r->span[i].e.loc - base;
    r->next_mem = last + 1;
    r->span_i = 0;
    return RS_OK;
}

/* Consecutive snapshot entries staged by the worker back to back (all or a leading part). */
static rs_status_t next_spill_span(rs_reader_t *r)
{
    rs_reader_session_t *s = r->sess;
    uint32_t first = r->next_spill, last = first;
    uint64_t total = rs_sproto_round(r->spill[first].e.len);
    while (last + 1 < r->n_spill && r->spill[last + 1].index == r->spill[last].index + 1 &&
           total + rs_sproto_round(r->spill[last + 1].e.len) <= RS_STAGE_MAX)
        total += rs_sproto_round(r->spill[++last].e.len);
    rs_smsg_spill_load_t m = {.status = RS_OK,
                              .snap_id = r->snap_id,
                              .first = r->spill[first].index,
                              .n = last - first + 1};
    rs_status_t st =
        request_retry(r, RS_SMSG_SPILL_LOAD, &m, &m.tag, RS_SMSG_SPILL_REPLY, "spill load");
    if (st != RS_OK)
        return st;
    r->stats.spill_loads++;
    rs_smsg_spill_reply_t sr = s->rep.u.spill_reply;
    uint64_t staged = 0;
    for (uint32_t i = 0; i < sr.n && i < m.n; i++)
        staged += rs_sproto_round(r->spill[first + i].e.len);
    if (sr.n == 0 || sr.n > m.n || sr.len < staged || staged > s->cfg.read_max) {
        rs_error("reader: malformed spill reply from worker %s", r->conn->addr);
        r->conn->garbled = 1;
        return RS_ERR_PROTOCOL;
    }
    if ((st = rs_rd_span_reserve(r, sr.n)) != RS_OK)
        return st;
    if ((st = span_fetch(r, sr.off, staged)) != RS_OK)
        return st;
    r->span = &r->spill[first];
    r->span_n = sr.n;
    uint64_t at = 0;
    for (uint32_t i = 0; i < r->span_n; i++) {
        r->span_off[i] = at;
        at += rs_sproto_round(r->span[i].e.len);
    }
    r->next_spill = first + sr.n;
    r->span_i = 0;
    return RS_OK;
}

/*
 * Verifies and decodes the next batch into the record cursor; at the end,
 * RS_OK with *end_p 1 (not a status: a worker's refusal may be any).
 */
static rs_status_t next_batch(rs_reader_t *r, int *end_p)
{
    rs_reader_session_t *s = r->sess;
    rs_status_t st;
    if (r->span_i >= r->span_n) {
        if (r->conn->gen != r->conn_gen) {
            /* The connection died and another reader made a new one: our snapshot is gone. */
            if (s->replicas > 1) /* a failover may follow: not an error yet */
                rs_warn("reader: the connection to worker %s was lost", r->conn->addr);
            else
                rs_error("reader: the connection to worker %s was lost", r->conn->addr);
            return RS_ERR_UNREACHABLE;
        }
        if (r->conn->local != NULL && rs_ep_status(r->conn->ep) != RS_OK) {
            /* The worker releases the snapshot of a dead connection: its pins are gone. */
            if (s->replicas > 1)
                rs_warn("reader: the connection to local worker %s was lost", r->conn->addr);
            else
                rs_error("reader: the connection to local worker %s was lost", r->conn->addr);
            return RS_ERR_UNREACHABLE;
        }
        rs_rd_co_release(r);
        if (r->next_mem < r->n_mem)
            st = next_mem_span(r);
        else if (r->next_spill < r->n_spill)
            st = next_spill_span(r);
        else {
            *end_p = 1; /* the end */
            return RS_OK;
        }
        if (st != RS_OK)
            return st;
    }
    const rent_t *e = &r->span[r->span_i];
    const uint8_t *frame = r->data + r->span_off[r->span_i];
    r->span_i++;
    /*
     * Frames of merged writes lie apart, each in another worker's write: the
     * next one's first lines (and its page's translation) are fetched while
     * this one is verified.
     */
    if (r->span_i < r->span_n) {
        const uint8_t *next = r->data + r->span_off[r->span_i];
        __builtin_prefetch(next, 0, 3);
        __builtin_prefetch(next + 64, 0, 3);
    }
    rs_frame_t f;
    st = rs_frame_verify(frame, e->e.len, &f);
    if (st == RS_OK && (f.frame_len != e->e.len || f.ids.shuffle_id != s->desc.shuffle_id ||
                        f.ids.partition != r->partition || f.ids.map_id != e->e.map_id ||
                        f.ids.attempt != e->e.attempt || f.ids.seq != e->e.seq))
        st = RS_ERR_PROTOCOL;
    if (st != RS_OK) {
        rs_error("reader: batch %llu of map %u (shuffle %u partition %u) is bad: %s",
                 (unsigned long long)e->e.seq, e->e.map_id, s->desc.shuffle_id, r->partition,
                 rs_strerror(st));
        return st;
    }
    const uint8_t *rec = f.payload;
    if (f.codec != RS_CODEC_NONE) {
        if (f.raw_len > r->raw_cap) {
            uint8_t *n = realloc(r->raw, f.raw_len);
            if (n == NULL)
                return RS_ERR_NOMEM;
            r->raw = n;
            r->raw_cap = f.raw_len;
        }
        if ((st = rs_frame_decode(&f, r->raw, r->raw_cap)) != RS_OK)
            return st;
        rec = r->raw;
    }
    /* Counted only once its records are about to be handed out (a replica may take over). */
    if (s->replicas > 1 && (st = delivered_add(r, &e->e)) != RS_OK)
        return st;
    rmap_t *m = &r->maps[e->e.map_id];
    m->batches++;
    m->bytes += f.frame_len;
    m->checksum += f.checksum;
    r->stats.batches++;
    r->stats.bytes += f.frame_len;
    if (r->conn->local != NULL) {
        r->stats.local_batches++;
        r->stats.zero_copy_bytes += f.frame_len;
    }
    r->rec = rec;
    r->rec_end = r->rec + f.raw_len;
    return RS_OK;
}

/* At the end: what was read must be exactly what each winning attempt committed. */
static rs_status_t check_commits(rs_reader_t *r)
{
    rs_reader_session_t *s = r->sess;
    for (uint32_t i = 0; i < s->n_maps; i++) {
        const rmap_t *m = &r->maps[i];
        if (m->batches != m->c.batches || m->bytes != m->c.bytes || m->checksum != m->c.checksum) {
            rs_error("reader: shuffle %u partition %u map %u: committed %u batches / %llu bytes, "
                     "read %u / %llu",
                     s->desc.shuffle_id, r->partition, i, m->c.batches,
                     (unsigned long long)m->c.bytes, m->batches, (unsigned long long)m->bytes);
            return RS_ERR_CHECKSUM;
        }
    }
    return RS_OK;
}

/* Hands out the record of len bytes at r->rec (checked to fit its batch). */
static inline rs_status_t hand_out(rs_reader_t *r, uint32_t len, const void **rec_p,
                                   uint32_t *len_p)
{
    *rec_p = r->rec + RS_RECORD_HDR;
    *len_p = len;
    r->rec += RS_RECORD_HDR + len;
    r->stats.records++;
    return RS_OK;
}

/* rs_reader_next past the current batch, or at an error or the end. */
static __attribute__((noinline)) rs_status_t next_slow(rs_reader_t *r, const void **rec_p,
                                                       uint32_t *len_p)
{
    if (r->error != RS_OK)
        return r->error;
    if (r->done) {
        *rec_p = NULL;
        *len_p = 0;
        return RS_OK;
    }
    while (r->rec == NULL || r->rec >= r->rec_end) {
        int end = 0;
        rs_status_t st = next_batch(r, &end);
        if (st != RS_OK && failover(r, st) == RS_OK)
            continue; /* R >= 2: another replica took over */
        if (end && maps_in(r, RMAP_OPEN) > 0) {
            /* R >= 2: this worker's maps are read; the others are further along the ring. */
            leave_worker(r, RMAP_DONE);
            if ((st = open_next(r, RS_ERR_STATE)) == RS_OK)
                continue;
            return r->error = st;
        }
        if (end) {
            st = check_commits(r);
            if (st != RS_OK)
                return r->error = st;
            r->done = 1;
            *rec_p = NULL;
            *len_p = 0;
            return RS_OK;
        }
        if (st != RS_OK)
            return r->error = st;
    }
    if (r->rec_end - r->rec < RS_RECORD_HDR)
        return r->error = RS_ERR_TRUNCATED;
    uint32_t len = rs_get_le32(r->rec);
    if ((size_t)(r->rec_end - r->rec - RS_RECORD_HDR) < len) {
        rs_error("reader: a record of %u bytes overruns its batch", len);
        return r->error = RS_ERR_TRUNCATED;
    }
    return hand_out(r, len, rec_p, len_p);
}

rs_status_t rs_reader_next(rs_reader_t *r, const void **rec_p, uint32_t *len_p)
{
    if (r == NULL || rec_p == NULL || len_p == NULL)
        return RS_ERR_INVALID;
    /*
     * Per record: a whole record left in the verified batch is handed out
     * here, with no stack frame to build; everything else is next_slow's.
     */
    if (r->error == RS_OK && !r->done && r->rec != NULL && r->rec_end - r->rec >= RS_RECORD_HDR) {
        uint32_t len = rs_get_le32(r->rec);
        if ((size_t)(r->rec_end - r->rec - RS_RECORD_HDR) >= len)
            return hand_out(r, len, rec_p, len_p);
    }
    return next_slow(r, rec_p, len_p);
}

void rs_reader_stats(const rs_reader_t *r, rs_reader_stats_t *stats)
{
    if (r == NULL || stats == NULL)
        return;
    *stats = r->stats;
}

void rs_reader_close(rs_reader_t *r)
{
    if (r == NULL)
        return;
    rs_reader_session_t *s = r->sess;
    rs_rd_co_release(r);
    snapshot_close(r);
    rs_rd_closes_due(s);
    if (r->buf_mr != NULL)
        rs_rd_sess_buf_put(s, r->buf_mr);
    s->open_readers--;
    if (r->own_session) {
        rs_rd_reader_free(r);
        rs_reader_session_close(s);
        return;
    }
    /* The next open (of this session or, through the lane, a later one) takes it. */
    free(r->delivered);
    r->delivered = NULL;
    if (r->raw_cap > READER_RAW_KEEP) {
        free(r->raw);
        r->raw = NULL;
        r->raw_cap = 0;
    }
    if (r->maps == NULL || s->spare != NULL) {
        rs_rd_reader_free(r);
        return;
    }
    s->spare = r;
}
