/*
 * Reader sessions (include/rshuffle/reader.h): one context, one connection
 * per worker (made, attached, renewed), a pool of registered read buffers.
 * Requests and their replies: exchange.c and replies.c; replicas:
 * replica.c.
 */
#include "reader/internal.h"
#include "reader/config.h"

#include "common/log.h"
#include "shuffle/local.h"
#include "shuffle/name.h"
#include "shuffle/proto.h"

#include <stdlib.h>
#include <string.h>

static void conn_close(rconn_t *c);

/* This session's ATTACH, encoded into buf (RS_SPROTO_ATTACH_LEN bytes). */
static rs_status_t attach_encode(const rs_reader_session_t *s, uint8_t *buf, size_t *len_p)
{
    rs_smsg_attach_t a = {.status = RS_OK,
                          .role = RS_ROLE_READER,
                          .shuffle_id = s->desc.shuffle_id,
                          .replicas = s->replicas,
                          .generation = s->desc.generation};
    return rs_sproto_attach_encode(&a, buf, RS_SPROTO_ATTACH_LEN, len_p);
}

/* What an attach's answer ar says of c: the replicas agree, its arena key, in place or not. */
static rs_status_t attach_take(rs_reader_session_t *s, rconn_t *c, const rs_smsg_attach_reply_t *ar)
{
    rs_status_t st;
    if (ar->replicas != 0 && ar->replicas != s->replicas) {
        /*
         * A reader with more replicas than the pushers would take a worker that is no
         * replica (its commits list the partition with 0 batches) for an empty one.
         */
        rs_error("reader: shuffle %u was pushed with %u replicas but is read with %u (the "
                 "descriptor's replicas or RSHUFFLE_REPLICAS must agree)",
                 s->desc.shuffle_id, ar->replicas, s->replicas);
        return RS_ERR_INVALID;
    }
    c->attached = 1;
    c->arena_len = ar->arena_len; /* the decoder checked it is not 0 */
    /* A kept connection keeps its key: the same worker, the same arena. */
    if (c->rkey == NULL && (st = rs_rkey_unpack(c->ep, ar->rkey, ar->rkey_len, &c->rkey)) != RS_OK)
        return st;
    /*
     * A worker of this process (same address, same arena key): its arena is
     * read in place. Looked up at every attach: an idle lane holds none.
     */
    if (s->cfg.local_reads && c->local_reg == NULL &&
        rs_sproto_local_lookup(c->addr, ar->rkey, ar->rkey_len, &c->local, &c->local_len,
                               &c->local_reg) == RS_OK)
        rs_debug("reader: worker %s is in this process: reading in place", c->addr);
    return RS_OK;
}

static rs_status_t conn_open(rs_reader_session_t *s, rconn_t *c)
{
    rs_status_t st = RS_OK;
    if (c->ep == NULL && (st = rs_sproto_name_connect(s->ctx, c->addr, &c->ep)) != RS_OK) {
        c->ep = NULL;
        if (s->replicas > 1) /* another replica may serve: not an error yet */
            rs_warn("reader: cannot connect to worker %s: %s", c->addr, rs_strerror(st));
        else
            rs_error("reader: cannot connect to worker %s: %s", c->addr, rs_strerror(st));
        return st;
    }
    uint8_t buf[RS_SPROTO_ATTACH_LEN];
    size_t len;
    st = attach_encode(s, buf, &len);
    if (st == RS_OK && c->rkey != NULL) {
        /*
         * A kept connection: its key is known, so nothing needs the answer
         * before the first open's. The attach goes now and is answered with
         * that open (rs_rd_sess_attach_end): one round trip, not two.
         */
        s->att_got = 0;
        s->att_status = RS_OK;
        if ((st = rs_msg_send(c->ep, RS_SMSG_ATTACH, buf, len, NULL, NULL)) == RS_OK) {
            s->att_conn = c;
            return RS_OK;
        }
    } else if (st == RS_OK) {
        st = rs_rd_sess_request(s, c, RS_SMSG_ATTACH, buf, len, RS_SMSG_ATTACH_REPLY, 0, "attach");
    }
    if (st != RS_OK) {
        rs_error("reader: worker %s refused the attach: %s", c->addr, rs_strerror(st));
        return st;
    }
    return attach_take(s, c, &s->rep.u.attach_reply);
}

rs_status_t rs_rd_sess_attach_end(rs_reader_session_t *s, rconn_t *c)
{
    if (s->att_conn != c)
        return RS_OK;
    rs_status_t st = rs_rd_sess_wait(s, c, &s->att_got, "attach");
    s->att_conn = NULL;
    if (st != RS_OK)
        return st;                /* the wait said why */
    if (s->att_status != RS_OK) { /* the reply handler could not copy it */
        rs_error("reader: cannot keep worker %s's attach answer: %s", c->addr,
                 rs_strerror(s->att_status));
        return s->att_status;
    }
    rs_smsg_t m;
    if ((st = rs_sproto_decode(s->att_reply, s->att_len, RS_SMSG_ATTACH_REPLY, &m)) != RS_OK) {
        rs_error("reader: bad attach answer from worker %s: %s", c->addr, rs_strerror(st));
        return st;
    }
    if (m.status != RS_OK) {
        rs_error("reader: worker %s refused the attach: %s", c->addr, rs_strerror(m.status));
        return m.status;
    }
    return attach_take(s, c, &m.u.attach_reply);
}

void rs_rd_sess_conn_fail(rs_reader_session_t *s, rconn_t *c, rs_status_t st)
{
    if (s->att_conn == c)
        s->att_conn = NULL; /* its answer, if any, goes with the connection */
    conn_close(c);
    c->gen++; /* snapshots on it are gone */
    rs_rd_sess_lost(s, c, st);
}

static void conn_close(rconn_t *c)
{
    rs_rd_closes_flush(c); /* said as before, though the worker frees them with the connection */
    if (c->ep != NULL)
        rs_ep_close(c->ep); /* also releases the rkey unpacked for it */
    c->ep = NULL;
    c->rkey = NULL;
    c->arena_len = 0;
    c->garbled = 0;
    c->attached = 0;
    rs_sproto_local_release(c->local_reg);
    c->local_reg = NULL;
    c->local = NULL;
    c->local_len = 0;
}

/*
 * Closes every connection (lost workers stay lost) and renews the context's
 * receive queue (rs_ctx_renew): one left blocked by a worker killed
 * mid-send would never deliver a reply again, from any worker. Not while
 * another reader is open: its snapshot lives on these connections.
 */
static void sess_renew(rs_reader_session_t *s)
{
    if (s->open_readers > 1)
        return;
    rs_rd_sess_ahead_drop(s);
    s->att_conn = NULL;
    for (uint32_t w = 0; w < s->desc.n_workers; w++) {
        if (s->conns[w].ep != NULL) {
            conn_close(&s->conns[w]);
            s->conns[w].gen++;
        }
    }
    rs_rd_lane_conns_close(
        s->lane); /* kept for other workers: the renewal needs every one closed */
    rs_status_t st = rs_ctx_renew(s->ctx);
    if (st != RS_OK)
        rs_error("reader: cannot renew the receive queue: %s", rs_strerror(st));
    else
        rs_info("reader: a worker of this host exited: receive queue renewed, reconnecting");
}

rs_status_t rs_rd_sess_conn(rs_reader_session_t *s, uint32_t w, rconn_t **conn_p)
{
    rconn_t *c = &s->conns[w];
    if (c->lost)
        return RS_ERR_UNREACHABLE; /* R >= 2: not tried again (rs_rd_sess_lost) */
    if (rs_ctx_renew_due(s->ctx))
        sess_renew(s);
    if ((c->attached || s->att_conn == c) && rs_ep_status(c->ep) == RS_OK) {
        *conn_p = c; /* attached, or its attach answered with the open (rs_rd_sess_attach_end) */
        return RS_OK;
    }
    /* Live without a key: made by a warm-up, its attach (conn_open) brings the key. */
    if (c->ep == NULL || rs_ep_status(c->ep) != RS_OK) {
        conn_close(c); /* a failed or dead one is made again */
        c->gen++;
    }
    rs_status_t st = conn_open(s, c);
    if (st != RS_OK) {
        conn_close(c);
        rs_rd_sess_lost(s, c, st);
        return st;
    }
    *conn_p = c;
    return RS_OK;
}

rs_status_t rs_rd_sess_buf_get(rs_reader_session_t *s, rs_mr_t **mr_p)
{
    if (s->n_bufs > 0) {
        *mr_p = s->bufs[--s->n_bufs];
        return RS_OK;
    }
    /* Lazy: a read of a small partition touches a fraction of read_max (docs/shuffle.md). */
    return rs_mem_alloc(s->ctx, s->cfg.read_max, RS_MEM_LOCAL | RS_MEM_LAZY, mr_p);
}

void rs_rd_sess_buf_put(rs_reader_session_t *s, rs_mr_t *mr)
{
    if (s->n_bufs == s->cap_bufs) {
        uint32_t cap = s->cap_bufs ? 2 * s->cap_bufs : 4;
        rs_mr_t **n = realloc(s->bufs, cap * sizeof(*n));
        if (n == NULL) {
            rs_mem_free(mr);
            return;
        }
        s->bufs = n;
        s->cap_bufs = cap;
    }
    s->bufs[s->n_bufs++] = mr;
}

/* Waits (briefly) for the answers to snapshots asked ahead, so the next session's ask none. */
static int ahead_settle(rs_reader_session_t *s)
{
    for (uint32_t i = 0; i < RS_READ_AHEAD; i++) {
        rahead_t *a = &s->ahead[i];
        if (a->state != RAHEAD_SENT)
            continue;
        if (a->gen != a->conn->gen || rs_rd_sess_wait(s, a->conn, &a->got, "a read ahead") != RS_OK)
            return 0;
    }
    return 1;
}

rs_status_t rs_reader_session_open(const rs_shuffle_desc_t *desc, uint32_t n_maps,
                                   const uint32_t *attempts, const rs_reader_config_t *cfg,
                                   rs_reader_session_t **sess_p)
{
    rs_client_t *c = rs_client_default();
    if (c == NULL)
        return RS_ERR_NOMEM;
    return rs_reader_session_open_in(c, desc, n_maps, attempts, cfg, sess_p);
}

rs_status_t rs_reader_session_open_in(rs_client_t *client, const rs_shuffle_desc_t *desc,
                                      uint32_t n_maps, const uint32_t *attempts,
                                      const rs_reader_config_t *cfg, rs_reader_session_t **sess_p)
{
    if (client == NULL || sess_p == NULL || desc == NULL || desc->n_workers == 0 ||
        desc->workers == NULL || (n_maps > 0 && attempts == NULL))
        return RS_ERR_INVALID;
    rs_reader_session_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return RS_ERR_NOMEM;
    s->ahead_last = UINT32_MAX; /* as if partition -1 was opened: 0, 1, 2 is a run from the start */
    s->ahead_step = 1;
    s->ahead_upto = UINT32_MAX;
    rs_status_t st;
    if (cfg != NULL) {
        s->cfg = *cfg;
        if (cfg->transport != NULL) {
            s->tcfg = *cfg->transport;
            s->cfg.transport = &s->tcfg;
        }
    } else {
        rs_reader_config_defaults(&s->cfg);
        if ((st = rs_reader_config_from_env(&s->cfg)) != RS_OK) {
            free(s);
            return st;
        }
    }
    if ((st = rs_rd_config_check(&s->cfg)) != RS_OK) {
        free(s);
        return st;
    }
    s->desc = *desc;
    if ((st = rs_shuffle_replicas(desc, &s->replicas)) != RS_OK) {
        free(s);
        return st;
    }
    rs_read_lane_key_t key;
    if ((st = rs_rd_lane_key_make(&s->cfg, &key)) != RS_OK) {
        free(s);
        return st;
    }
    s->n_maps = n_maps;
    s->attempts = malloc((n_maps ? n_maps : 1) * sizeof(*s->attempts));
    s->conns = calloc(desc->n_workers, sizeof(*s->conns));
    st = RS_ERR_NOMEM;
    if (s->attempts == NULL || s->conns == NULL)
        goto err_free;
    if (n_maps > 0)
        memcpy(s->attempts, attempts, n_maps * sizeof(*attempts));
    for (uint32_t i = 0; i < desc->n_workers; i++)
        s->conns[i].addr = desc->workers[i];
    if ((st = rs_rd_lane_get(client, &key, &s->lane)) != RS_OK)
        goto err_free;
    rs_read_lane_t *l = s->lane;
    s->ctx = l->ctx;
    s->next_tag = l->next_tag;
    s->bufs = l->bufs;
    s->n_bufs = l->n_bufs;
    s->cap_bufs = l->cap_bufs;
    l->bufs = NULL;
    l->n_bufs = l->cap_bufs = 0;
    s->spare = l->spare;
    l->spare = NULL;
    for (uint32_t i = 0; i < desc->n_workers; i++)
        rs_rd_lane_conn_lend(l, &s->conns[i]);
    l->sess = s;
    *sess_p = s;
    return RS_OK;

err_free:
    rs_reader_session_close(s);
    return st;
}

void rs_reader_session_close(rs_reader_session_t *s)
{
    if (s == NULL)
        return;
    if (s->open_readers > 0)
        rs_warn("reader: session closed with %u readers still open", s->open_readers);
    rs_read_lane_t *l = s->lane;
    /* Kept only when nothing of this session stays on it: its snapshots are all closed. */
    rs_rd_closes_flush_all(s); /* before a connection is kept for the next session */
    int reusable = l != NULL && s->open_readers == 0 && ahead_settle(s);
    rs_rd_sess_ahead_drop(s);
    if (s->co.mr != NULL) /* to the lane: a reader left open (warned above) is not to be used */
        rs_rd_sess_buf_put(s, s->co.mr);
    for (uint32_t i = 0; s->conns != NULL && i < s->desc.n_workers; i++) {
        /*
         * An attach never answered would be taken for the next session's; a
         * worker that answered garbled keeps what it opened until its connection goes.
         */
        if (!reusable || s->att_conn == &s->conns[i] || s->conns[i].garbled ||
            !rs_rd_lane_conn_keep(l, &s->conns[i]))
            conn_close(&s->conns[i]);
    }
    if (l != NULL) {
        l->sess = NULL;
        l->next_tag = s->next_tag;
        l->bufs = s->bufs; /* registered on the lane's context: they stay with it */
        l->n_bufs = s->n_bufs;
        l->cap_bufs = s->cap_bufs;
        s->bufs = NULL;
        s->n_bufs = 0;
        l->spare = s->spare; /* holds nothing of the session's: arrays only */
        s->spare = NULL;
        rs_lane_give(&l->base, reusable);
    }
    rs_rd_reader_free(s->spare);
    free(s->bufs);
    free(s->conns);
    free(s->attempts);
    free(s->reply);
    free(s->att_reply);
    free(s->co.ranges);
    free(s->co.items);
    free(s);
}
