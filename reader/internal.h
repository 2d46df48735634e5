/*
 * Reader internals. session.c: the session (context, one connection per
 * worker, read buffers, request/reply matching). reader.c: one partition
 * (plan, reads, verification, records).
 */
#ifndef RS_READER_INTERNAL_H
#define RS_READER_INTERNAL_H

#include <rshuffle/reader.h>
#include <rshuffle/transport.h>

#include "shuffle/proto.h"

/* The session's link to one worker. */
typedef struct rconn {
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    const char *addr;
    uint32_t gen; /* counts (re)connections: a reader's snapshot lives on one of them */
    /* A worker of this process: its arena, read in place (NULL: remote, read by rs_get). */
    const uint8_t *local;
    uint64_t local_len;
    struct rs_local_reg *local_reg;
} rconn_t;

struct rs_reader_session {
    rs_reader_config_t cfg;
    rs_config_t tcfg; /* a copy: cfg.transport points here when given */
    rs_shuffle_desc_t desc;
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
};

/* The connection to worker w, made and attached on first use. */
rs_status_t rs__rsess_conn(rs_reader_session_t *s, uint32_t w, rconn_t **conn_p);

/*
 * Sends an encoded request and waits (bounded) for its reply of reply_type
 * carrying tag (ATTACH_REPLY: no tag); the reply is in s->reply, decoded in
 * s->rep. Returns the transport error, RS_ERR_TIMEOUT, the decoder's status
 * for a malformed reply, or the status the reply carries.
 */
rs_status_t rs__rsess_request(rs_reader_session_t *s, rconn_t *c, unsigned type, const void *m,
                              size_t len, unsigned reply_type, uint32_t tag, const char *what);

/* Reads len bytes at roff of the worker's arena into dst (inside mr), waiting for it. */
rs_status_t rs__rsess_get(rs_reader_session_t *s, rconn_t *c, void *dst, size_t len, rs_mr_t *mr,
                          uint64_t roff);

/* A registered read buffer of cfg.read_max bytes (reused across readers). */
rs_status_t rs__rsess_buf_get(rs_reader_session_t *s, rs_mr_t **mr_p);
void rs__rsess_buf_put(rs_reader_session_t *s, rs_mr_t *mr);

/* Sleeps about ms while keeping the session's context progressing. */
void rs__rsess_pause(rs_reader_session_t *s, uint32_t ms);

#endif
