/*
 * Reader internals. session.c: the session (context, one connection per
 * worker, read buffers, request/reply matching). ahead.c: snapshots asked
 * for ahead of their opens. reader.c: one partition (plan, reads,
 * verification, records).
 */
#ifndef RS_READER_INTERNAL_H
#define RS_READER_INTERNAL_H

#include <rshuffle/reader.h>
#include <rshuffle/transport.h>

#include "shuffle/proto.h"
/* A snapshot asked for ahead of its open (ahead.c). */
enum { RAHEAD_FREE = 0, RAHEAD_SENT, RAHEAD_GOT };
#define RS_READ_AHEAD 32 /* partitions whose READ_OPEN goes out before they are opened */

/* The session's link to one worker. */
typedef struct rconn {
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    const char *addr;
    uint32_t gen; /* counts (re)connections: a reader's snapshot lives on one of them */
    int lost;     /* R >= 2: the worker died or went silent; the session does not try it again */
    int said_unknown; /* R >= 2: "does not hold the shuffle" logged once for it */
    /* A worker of this process: its arena, read in place (NULL: remote, read by rs_get). */
    const uint8_t *local;
    uint64_t local_len;
    struct rs_local_reg *local_reg;
} rconn_t;

typedef struct rahead {
    uint32_t partition, tag, gen;
    rconn_t *conn;
    int state;
    int got; /* the reply is here (set with state RAHEAD_GOT) */
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
    uint8_t *reply;
    size_t reply_len, reply_cap;
    rs_smsg_t rep; /* the reply decoded (its views point into reply) */
    /* read-ahead: the partition after the last one opened, in-order opens so far */
    uint32_t ahead_next, ahead_run;
    rahead_t ahead[RS_READ_AHEAD];
};

/*
 * The connection to worker w, made and attached on first use. After a worker
 * of this host exited, every connection is closed and the context's receive
 * queue renewed first (not while another reader is open).
 */
rs_status_t rs_rd_sess_conn(rs_reader_session_t *s, uint32_t w, rconn_t **conn_p);

/*
 * Sends an encoded request and waits (bounded) for its reply of reply_type
 * carrying tag (ATTACH_REPLY: no tag); the reply is in s->reply, decoded in
 * s->rep. Returns the transport error, RS_ERR_TIMEOUT, the decoder's status
 * for a malformed reply, or the status the reply carries.
 */
rs_status_t rs_rd_sess_request(rs_reader_session_t *s, rconn_t *c, unsigned type, const void *m,
                               size_t len, unsigned reply_type, uint32_t tag, const char *what);

/* Reads len bytes at roff of the worker's arena into dst (inside mr), waiting for it. */
rs_status_t rs_rd_sess_get(rs_reader_session_t *s, rconn_t *c, void *dst, size_t len, rs_mr_t *mr,
                           uint64_t roff);

/* A registered read buffer of cfg.read_max bytes (reused across readers). */
rs_status_t rs_rd_sess_buf_get(rs_reader_session_t *s, rs_mr_t **mr_p);
void rs_rd_sess_buf_put(rs_reader_session_t *s, rs_mr_t *mr);

/* Progresses until *flag is set, c's endpoint dies or the session's wait_ms passes. */
rs_status_t rs_rd_sess_wait(rs_reader_session_t *s, rconn_t *c, volatile int *flag,
                            const char *what);

/*
 * Read-ahead (ahead.c). reply: a READ_REPLY for a snapshot asked ahead is
 * kept (returns 1), anything else is not ours (0). claim: partition's reply
 * asked ahead on c, waited for, into s->reply (*claimed_p 1), or nothing to
 * claim (0: ask as usual); a claimed reply is decoded in s->rep as
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
 * R >= 2: after st from worker c, is the worker lost? Yes when its
 * connection is dead or st says it cannot be reached or answered nothing
 * (c is then never tried again in this session; logged once). Returns 1,
 * c not lost, when c went silent (RS_ERR_TIMEOUT) while a worker of this
 * host lay dead: that one may have blocked our receive queue mid-send
 * (rs_ctx_renew), which the next rs_rd_sess_conn renews; c is asked again.
 */
int rs_rd_sess_lost(rs_reader_session_t *s, rconn_t *c, rs_status_t st);

/* A worker of this host has exited (its connection is dead): the receive queue needs renewing. */
int rs_rd_sess_renew_due(rs_reader_session_t *s);

/* The first replica of partition that is not lost (R = 1: its placement). */
rs_status_t rs_rd_sess_replica(rs_reader_session_t *s, uint32_t partition, uint32_t *worker_p);

/* Sleeps about ms while keeping the session's context progressing. */
void rs_rd_sess_pause(rs_reader_session_t *s, uint32_t ms);

#endif
