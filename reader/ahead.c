/*
 * Read-ahead of partition snapshots: a session that opens partitions in
 * order, or at any fixed step (every R-th, as a reducer of R does), sends
 * the READ_OPENs of the next ones before they are asked for,
 * so 100,000 small partitions cost a few waits instead of 100,000 round
 * trips (docs/shuffle.md, "Many partitions").
 */
#include "reader/internal.h"

#include "common/log.h"
#include "shuffle/proto.h"

#include <stdlib.h>

/* Opens at one step seen before reading ahead (one in-order pair is not a pattern yet). */
#define AHEAD_AFTER 2

/*
 * The window is topped up once no more than this many of its partitions
 * are asked ahead, then in one burst: a worker woken for each open's one
 * request spent the read-ahead on its own wake-ups (docs/shuffle.md).
 */
#define AHEAD_REFILL (RS_READ_AHEAD / 2)

static rahead_t *ahead_find(rs_reader_session_t *s, uint32_t partition)
{
    for (uint32_t i = 0; i < RS_READ_AHEAD; i++)
        if (s->ahead[i].state != RAHEAD_FREE && s->ahead[i].partition == partition)
            return &s->ahead[i];
    return NULL;
}

static rahead_t *ahead_find_free(rs_reader_session_t *s)
{
    for (uint32_t i = 0; i < RS_READ_AHEAD; i++)
        if (s->ahead[i].state == RAHEAD_FREE)
            return &s->ahead[i];
    return NULL;
}

static void ahead_free(rahead_t *a)
{
    a->state = RAHEAD_FREE;
    a->got = 0;
    a->len = 0;
    a->bad = RS_OK;
}

/*
 * The entry a READ_REPLY on ep answers: the one of its tag; for a reply too
 * malformed to say its tag, the oldest asked on ep (a worker answers in
 * order, and a session's own request goes out after every read-ahead
 * outstanding), which would otherwise wait its whole wait_ms.
 */
static rahead_t *ahead_match(rs_reader_session_t *s, rs_ep_t *ep, const rs_smsg_read_reply_t *rr)
{
    rahead_t *best = NULL;
    for (uint32_t i = 0; i < RS_READ_AHEAD; i++) {
        rahead_t *a = &s->ahead[i];
        if (a->state != RAHEAD_SENT || a->conn->ep != ep)
            continue;
        if (rr != NULL && a->tag == rr->tag)
            return a;
        if (rr == NULL && (best == NULL || (int32_t)(a->tag - best->tag) < 0))
            best = a;
    }
    return best;
}

int rs_rd_sess_ahead_reply(rs_reader_session_t *s, rs_ep_t *ep, unsigned type, const void *data,
                           size_t len)
{
    rs_smsg_read_reply_t rr;
    if (type != RS_SMSG_READ_REPLY)
        return 0;
    rs_status_t ds = rs_sproto_read_reply_decode(data, len, &rr);
    rahead_t *a = ahead_match(s, ep, ds == RS_OK ? &rr : NULL);
    if (a == NULL)
        return 0; /* a malformed reply fails the request waiting for it, if any */
    if (ds != RS_OK)
        a->bad = ds;
    else if (rs_rd_reply_copy(&a->reply, &a->cap, data, len) == RS_OK)
        a->len = len;
    else
        a->len = 0; /* claimed as not there: the open asks again */
    a->state = RAHEAD_GOT;
    a->got = 1;
    return 1;
}

rs_status_t rs_rd_sess_ahead_claim(rs_reader_session_t *s, rconn_t *c, uint32_t partition,
                                   int *claimed_p)
{
    *claimed_p = 0;
    rahead_t *a = ahead_find(s, partition);
    if (a == NULL)
        return RS_OK;
    if (a->conn != c || a->gen != c->gen) { /* asked on a connection since replaced */
        ahead_free(a);
        return RS_OK;
    }
    rs_status_t st = rs_rd_sess_wait(s, c, &a->got, "an open read ahead");
    if (st != RS_OK) {
        ahead_free(a);
        return st;
    }
    if (a->bad != RS_OK) {
        st = a->bad;
        c->garbled = 1;
        rs_error("reader: bad answer from worker %s to an open read ahead: %s", c->addr,
                 rs_strerror(st));
        ahead_free(a);
        return st;
    }
    /* A refusal (e.g. no room for the index yet) is asked again by the open itself. */
    rs_smsg_read_reply_t rr;
    if (a->len > 0 && rs_sproto_read_reply_decode(a->reply, a->len, &rr) == RS_OK &&
        rr.status == RS_OK) {
        if (rs_rd_reply_copy(&s->reply, &s->reply_cap, a->reply, a->len) != RS_OK) {
            ahead_free(a);
            return RS_ERR_NOMEM; /* its snapshot goes with the connection */
        }
        s->reply_len = a->len;
        /* decoded again where it now lies: the views point into s->reply */
        if (rs_sproto_decode(s->reply, s->reply_len, RS_SMSG_READ_REPLY, &s->rep) == RS_OK)
            *claimed_p = 1;
    }
    ahead_free(a);
    return RS_OK;
}

void rs_rd_sess_ahead_issue(rs_reader_session_t *s, uint32_t opened)
{
    /* Unsigned: from the start (ahead_last = -1) partition 0 is one step of 1. */
    uint32_t step = opened - s->ahead_last;
    s->ahead_run = step == s->ahead_step ? s->ahead_run + 1 : 1;
    s->ahead_step = step;
    s->ahead_last = opened;
    if (s->ahead_run < AHEAD_AFTER || step == 0 || step >= s->desc.n_partitions) {
        s->ahead_upto = UINT32_MAX;
        return; /* no pattern yet, or backwards */
    }
    /*
     * Every partition up to ahead_upto at this step was asked for already
     * (none skipped): only the ones past it are new, without a search per
     * partition of the window.
     */
    uint64_t k = 1;
    if (s->ahead_upto != UINT32_MAX && s->ahead_upto > opened &&
        (s->ahead_upto - opened) % step == 0)
        k = (s->ahead_upto - opened) / step + 1;
    if (k > AHEAD_REFILL)
        return;       /* half the window or more still asked: top it up later, in one burst */
    int complete = 1; /* no partition of the window skipped */
    for (; k <= RS_READ_AHEAD; k++) {
        uint64_t q64 = opened + k * step;
        if (q64 >= s->desc.n_partitions)
            break;
        uint32_t q = (uint32_t)q64;
        if (ahead_find(s, q) != NULL) {
            if (complete)
                s->ahead_upto = q;
            continue;
        }
        rahead_t *a = ahead_find_free(s);
        if (a == NULL)
            break;
        uint32_t w;
        rconn_t *c = NULL;
        if (rs_rd_sess_replica(s, q, &w) == RS_OK)
            c = &s->conns[w];
        if (c == NULL || c->rkey == NULL || rs_ep_status(c->ep) != RS_OK) {
            /* every replica lost (the open says so), or not connected: never connects for a
             * guess, the open does (and a later open asks again) */
            complete = 0;
            continue;
        }
        rs_rd_closes_flush(c); /* in the same burst */
        rs_smsg_read_open_t o = {.status = RS_OK,
                                 .shuffle_id = s->desc.shuffle_id,
                                 .partition = q,
                                 .tag = ++s->next_tag,
                                 .n_partitions = s->desc.n_partitions};
        uint8_t buf[RS_SPROTO_READ_OPEN_LEN];
        size_t len;
        if (rs_sproto_read_open_encode(&o, buf, sizeof(buf), &len) != RS_OK ||
            rs_msg_send(c->ep, RS_SMSG_READ_OPEN, buf, len, NULL, NULL) != RS_OK) {
            s->ahead_upto = UINT32_MAX;
            return;
        }
        *a = (rahead_t){.partition = q,
                        .tag = o.tag,
                        .gen = c->gen,
                        .conn = c,
                        .state = RAHEAD_SENT,
                        .reply = a->reply,
                        .cap = a->cap};
        if (complete)
            s->ahead_upto = q;
    }
    if (!complete)
        s->ahead_upto = UINT32_MAX;
}

void rs_rd_sess_ahead_drop(rs_reader_session_t *s)
{
    s->ahead_upto = UINT32_MAX;
    for (uint32_t i = 0; i < RS_READ_AHEAD; i++) {
        rahead_t *a = &s->ahead[i];
        rs_smsg_read_reply_t rr;
        if (a->state == RAHEAD_GOT && a->len > 0 && a->gen == a->conn->gen &&
            rs_ep_status(a->conn->ep) == RS_OK &&
            rs_sproto_read_reply_decode(a->reply, a->len, &rr) == RS_OK && rr.status == RS_OK)
            rs_rd_close_send(a->conn->ep, rr.snap_id); /* now: the lane may keep the connection */
        /* Sent and not answered: the snapshot goes when the connection closes. */
        ahead_free(a);
        free(a->reply);
        a->reply = NULL;
        a->cap = 0;
    }
}
