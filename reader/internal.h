/*
 * Reader internals, from the top down. reader.c: one partition (plan,
 * reads, verification, records). session.c: the session (context, one
 * connection per worker, read buffers). lane.c: what a session borrows
 * from its client and gives back. replies.c: the lane's reply handlers.
 * ahead.c: snapshots asked for ahead of their opens. coalesce.c: small
 * partitions read ahead, read together. exchange.c: waits,
 * requests and reads on one worker. replica.c: which replica serves, which
 * worker is lost. spare.c: frees a closed reader kept for the next open
 * (its state: reader_int.h).
 */
#ifndef RS_READER_INTERNAL_H
#define RS_READER_INTERNAL_H

#include <stdlib.h>
#include <string.h>
#include <rshuffle/reader.h>
#include <rshuffle/transport.h>

#include "shuffle/client.h"
#include "shuffle/proto.h"

/*
 * A read lane: a context, its registered read buffers and the connections
 * of earlier sessions, lent by the client to one session at a time
 * (include/rshuffle/client.h).
 */
typedef struct rs_read_lane_key {
    rs_config_t tcfg;
    size_t read_max;
    int local_reads; /* kept connections remember whether their worker is read in place */
} rs_read_lane_key_t;

/*
 * A connection kept between sessions (attached again by the next one that
 * uses it). It holds no in-process worker's arena: that is looked up again.
 */
typedef struct rlconn {
    char *addr;
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    uint64_t made; /* the client's loss epoch the lane had seen when it was kept */
} rlconn_t;

typedef struct rs_read_lane {
    rs_lane_t base;
    rs_read_lane_key_t key;
    rs_ctx_t *ctx;
    struct rs_reader_session *sess; /* the session served (NULL between sessions) */
    rs_mr_t **bufs;                 /* idle read buffers */
    uint32_t n_bufs, cap_bufs;
    rlconn_t *conns; /* kept connections, by address */
    uint32_t n_conns, cap_conns;
    uint32_t next_tag;  /* tags never repeat on a lane: a late reply is never taken for another */
    uint64_t loss_seen; /* the client's losses up to this epoch were applied to conns */
    struct rs_reader *spare; /* a closed reader, lent to the next session (reader.c) */
} rs_read_lane_t;

/* A snapshot asked for ahead of its open (ahead.c). */
enum { RAHEAD_FREE = 0, RAHEAD_SENT, RAHEAD_GOT };
#define RS_READ_AHEAD         32 /* partitions whose READ_OPEN goes out before they are opened */
#define RS_READ_CLOSE_BATCH   16 /* READ_CLOSEs a connection holds back (closes.c) */
#define RS_READ_CLOSE_HOLD_MS 1  /* the oldest held goes at the next call after this */

/* The session's link to one worker. */
typedef struct rconn {
    rs_ep_t *ep;
    int attached; /* this session's attach answered (a kept connection is attached again) */
    rs_rkey_t *rkey;
    uint64_t arena_len; /* its arena's bytes, as the last attach answer said: every read inside */
    int garbled;        /* it sent an answer the session refused: not kept for a later one */
    const char *addr;
    uint32_t gen; /* counts (re)connections: a reader's snapshot lives on one of them */
    int lost;     /* R >= 2: the worker died or went silent; the session does not try it again */
    int said_unknown; /* R >= 2: "does not hold the shuffle" logged once for it */
    /* A worker of this process: its arena, read in place (NULL: remote, read by rs_get). */
    const uint8_t *local;
    uint64_t local_len;
    struct rs_local_reg *local_reg;
    /* snapshots closed and not yet said so (closes.c): on this connection's generation */
    uint32_t closes[RS_READ_CLOSE_BATCH];
    uint32_t n_closes;
    uint64_t closes_since; /* coarse ns: when the oldest was held */
} rconn_t;

/* A partition read with an earlier one (coalesce.c): its batches' bytes in the buffer. */
typedef struct rco_part {
    uint32_t partition, snap_id, gen; /* the snapshot they were read for */
    rconn_t *conn;
    uint32_t first, n; /* its ranges in co.ranges, by loc */
} rco_part_t;

typedef struct rco_range {
    uint64_t loc, off; /* in the worker's arena, in the buffer */
    uint32_t len;
} rco_range_t;

typedef struct rahead {
    uint32_t partition, tag, gen;
    rconn_t *conn;
    int state;
    int got;         /* the reply is here (set with state RAHEAD_GOT) */
    rs_status_t bad; /* the reply's decoder refused it: the open fails so */
    uint8_t *reply;
    size_t len, cap;
} rahead_t;

struct rs_reader_session {
    rs_reader_config_t cfg;
    rs_config_t tcfg; /* a copy: cfg.transport points here when given */
    rs_shuffle_desc_t desc;
    uint32_t replicas; /* R: workers holding each partition (rs_shuffle_replicas) */
    uint32_t n_maps;
    uint32_t *attempts;
    rs_ctx_t *ctx;
    rs_read_lane_t *lane;
    rconn_t *conns; /* per worker, connected on first use */
    rs_mr_t **bufs; /* idle read buffers */
    uint32_t n_bufs, cap_bufs;
    uint32_t open_readers;
    uint32_t next_tag;
    /* the reply being waited for */
    rs_ep_t *want_ep;
    unsigned want_type;
    uint32_t want_tag;
    int got;
    rs_status_t got_status;
    int got_garbled; /* the answer did not decode: its connection is not kept */
    uint8_t *reply;
    size_t reply_len, reply_cap;
    rs_smsg_t rep; /* the reply decoded (its views point into reply) */
    /* a kept connection's attach, sent without waiting: its answer (rs_rd_sess_attach_end) */
    rconn_t *att_conn;
    int att_got;
    rs_status_t att_status;
    uint8_t *att_reply;
    size_t att_len, att_cap;
    /*
     * read-ahead: the last partition opened, the step from the one before
     * (a session may read every R-th partition), opens so far at that step
     */
    uint32_t ahead_last, ahead_step, ahead_run;
    uint32_t ahead_upto; /* asked for at that step up to here, none skipped (UINT32_MAX: none) */
    rahead_t ahead[RS_READ_AHEAD];
    struct rs_reader *spare; /* the last reader closed, kept for the next open (reader.c) */
    struct {
        rs_mr_t *mr;    /* a read buffer, taken at the first coalesced read */
        uint32_t users; /* readers whose span lies in it: not read into again until 0 */
        rco_part_t parts[RS_READ_AHEAD];
        uint32_t n_parts;
        rco_range_t *ranges;
        size_t cap_ranges;
        struct rco_item *items; /* the read being built */
        size_t cap_items;
    } co; /* small partitions read together (coalesce.c) */
};

/* spare.c: frees a spare reader of a session or lane (NULL ignored). */
void rs_rd_reader_free(struct rs_reader *r);

/* Copies a reply into *buf, grown to len (*cap: its size); RS_ERR_NOMEM leaves both. */
static inline rs_status_t rs_rd_reply_copy(uint8_t **buf, size_t *cap, const void *data, size_t len)
{
    if (len > *cap) {
        uint8_t *n = realloc(*buf, len);
        if (n == NULL)
            return RS_ERR_NOMEM;
        *buf = n;
        *cap = len;
    }
    if (len > 0) /* an empty reply (a faulty peer's) may come before any: *buf is NULL then */
        memcpy(*buf, data, len);
    return RS_OK;
}

/* The key of the read lanes that fit a session of cfg (already checked); set on RS_OK only. */
rs_status_t rs_rd_lane_key_make(const rs_reader_config_t *cfg, rs_read_lane_key_t *key_p);
/*
 * Read lanes (lane.c). get: an idle lane of the client fit for key, else a
 * new one. conns_close: closes every kept connection. conn_lend: the
 * session's connection c takes the lane's kept one to its address (dead or
 * alive), if any. conn_keep: keeps c's connection for a later session (0:
 * it cannot; the caller closes it). handlers (replies.c): the lane's reply
 * handlers, which serve the lane's current session.
 */
rs_status_t rs_rd_lane_get(rs_client_t *c, const rs_read_lane_key_t *key, rs_read_lane_t **l_p);
void rs_rd_lane_conns_close(rs_read_lane_t *l);
void rs_rd_lane_conn_lend(rs_read_lane_t *l, rconn_t *c);
int rs_rd_lane_conn_keep(rs_read_lane_t *l, rconn_t *c);
/*
 * Warm-up (warm.c): the lane keeps a connection to addr, made now unless it
 * has a live one (a dead one kept to addr is closed first); no key yet (the
 * first session's attach brings it).
 */
rs_status_t rs_rd_lane_conn_warm(rs_read_lane_t *l, const char *addr);
rs_status_t rs_rd_lane_handlers(rs_read_lane_t *l);

/*
 * session.c. The connection to worker w, made and attached on first use.
 * When the transport says a renewal is due (rs_ctx_renew_due: a worker of
 * this host exited), every connection is closed and the context's receive
 * queue renewed first (not while another reader is open).
 */
rs_status_t rs_rd_sess_conn(rs_reader_session_t *s, uint32_t w, rconn_t **conn_p);

/*
 * A kept connection (its arena key known) is attached without waiting: the
 * ATTACH goes out and the first request on it follows at once. attach_end:
 * c's attach answer, waited for and applied (RS_OK at once when c has none
 * outstanding); the caller fails c on an error (conn_fail: closed, its
 * snapshots gone, lost as rs_rd_sess_lost says). The answer itself is kept
 * by the lane's reply handler (replies.c).
 */
rs_status_t rs_rd_sess_attach_end(rs_reader_session_t *s, rconn_t *c);
void rs_rd_sess_conn_fail(rs_reader_session_t *s, rconn_t *c, rs_status_t st);

/*
 * exchange.c. Sends an encoded request and waits (bounded) for its reply of reply_type
 * carrying tag (ATTACH_REPLY: no tag); the reply is in s->reply, decoded in
 * s->rep. Returns the transport error, RS_ERR_TIMEOUT, the decoder's status
 * for a malformed reply, or the status the reply carries.
 */
rs_status_t rs_rd_sess_request(rs_reader_session_t *s, rconn_t *c, unsigned type, const void *m,
                               size_t len, unsigned reply_type, uint32_t tag, const char *what);

/*
 * Reads len bytes at roff of the worker's arena into dst (inside mr), waiting for it;
 * RS_ERR_PROTOCOL, nothing read, for a range past the arena its attach answer named.
 */
rs_status_t rs_rd_sess_get(rs_reader_session_t *s, rconn_t *c, void *dst, size_t len, rs_mr_t *mr,
                           uint64_t roff);
/* rs_rd_sess_get for n ranges (rs_getv). */
rs_status_t rs_rd_sess_getv(rs_reader_session_t *s, rconn_t *c, const rs_get_seg_t *seg, unsigned n,
                            rs_mr_t *mr);

/* A registered read buffer of cfg.read_max bytes (reused across readers). */
rs_status_t rs_rd_sess_buf_get(rs_reader_session_t *s, rs_mr_t **mr_p);
void rs_rd_sess_buf_put(rs_reader_session_t *s, rs_mr_t *mr);

/* Progresses until *flag is set, c's endpoint dies or the session's wait_ms passes. */
rs_status_t rs_rd_sess_wait(rs_reader_session_t *s, rconn_t *c, volatile int *flag,
                            const char *what);

/*
 * READ_CLOSEs (closes.c). send: one on ep now, without waiting. add:
 * snap_id closed on c's current generation, held back (sent once
 * RS_READ_CLOSE_BATCH are held). flush: sends what c
 * holds (nothing when c is dead: its snapshots went with it); before any
 * other message on c. due: flushes the connections whose oldest waited
 * RS_READ_CLOSE_HOLD_MS. flush_all: every connection's (session close).
 */
void rs_rd_close_send(rs_ep_t *ep, uint32_t snap_id);
void rs_rd_closes_add(rconn_t *c, uint32_t snap_id);
void rs_rd_closes_flush(rconn_t *c);
void rs_rd_closes_due(rs_reader_session_t *s);
void rs_rd_closes_flush_all(rs_reader_session_t *s);

/*
 * Read-ahead (ahead.c). reply: a READ_REPLY for a snapshot asked ahead is
 * kept (returns 1), anything else is not ours (0). claim: partition's reply
 * asked ahead on c, waited for, into s->reply (*claimed_p 1), or nothing to
 * claim (0: ask as usual), or the decoder's status for a malformed reply;
 * a claimed reply is decoded in s->rep as
 * rs_rd_sess_request leaves it. issue: after partition opened, once opens go in
 * order, asks for the next RS_READ_AHEAD partitions on open connections.
 * drop: closes the snapshots asked ahead and never claimed.
 */
int rs_rd_sess_ahead_reply(rs_reader_session_t *s, rs_ep_t *ep, unsigned type, const void *data,
                           size_t len);
rs_status_t rs_rd_sess_ahead_claim(rs_reader_session_t *s, rconn_t *c, uint32_t partition,
                                   int *claimed_p);
void rs_rd_sess_ahead_issue(rs_reader_session_t *s, uint32_t opened);
void rs_rd_sess_ahead_drop(rs_reader_session_t *s);

/*
 * replica.c. R >= 2: after st from worker c, is the worker lost? Yes when its
 * connection is dead or st says it cannot be reached or answered nothing
 * (c is then never tried again in this session; logged once). Returns 1,
 * c not lost, when c went silent (RS_ERR_TIMEOUT) while a worker of this
 * host lay dead: that one may have blocked our receive queue mid-send
 * (rs_ctx_renew), which the next rs_rd_sess_conn renews; c is asked again.
 */
int rs_rd_sess_lost(rs_reader_session_t *s, rconn_t *c, rs_status_t st);

/* The first replica of partition that is not lost (R = 1: its placement). */
rs_status_t rs_rd_sess_replica(rs_reader_session_t *s, uint32_t partition, uint32_t *worker_p);

/* Sleeps about ms while keeping the session's context progressing. */
void rs_rd_sess_pause(rs_reader_session_t *s, uint32_t ms);

#endif
