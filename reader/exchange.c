/*
 * A session's exchanges with one worker: a bounded wait, a request and its
 * reply, a one-sided read, a pause that keeps the context progressing.
 */
#include "reader/internal.h"

#include "common/clock.h"
#include "common/log.h"
#include "shuffle/proto.h"

#include <sched.h>

/* A reply is waited for by polling this long before sleeping (as the worker and push engine do). */
#define RSESS_SPIN_NS 100000

typedef struct op_wait {
    int done;
    rs_status_t status;
} op_wait_t;

static void on_op(void *arg, rs_status_t status)
{
    op_wait_t *o = arg;
    o->status = status;
    o->done = 1;
}

rs_status_t rs_rd_sess_wait(rs_reader_session_t *s, rconn_t *c, volatile int *flag,
                            const char *what)
{
    uint64_t deadline = 0, spin_end = rs_now_ns() + RSESS_SPIN_NS;
    /* Replicated: a worker silent for the peer timeout counts as dead, as for the pusher. */
    uint32_t wait_ms = s->cfg.wait_ms, peer_ms = rs_ctx_config(s->ctx)->peer_timeout_ms;
    if (s->replicas > 1 && peer_ms < wait_ms)
        wait_ms = peer_ms;
    while (!*flag) {
        rs_status_t es = rs_ep_status(c->ep);
        if (es != RS_OK) {
            rs_error("reader: worker %s gone during %s: %s", c->addr, what, rs_strerror(es));
            return es;
        }
        uint64_t now = rs_now_coarse_ns();
        if (deadline == 0)
            deadline = now + RS_MS_TO_NS(wait_ms);
        if (now >= deadline) {
            rs_error("reader: no answer from worker %s to %s within %u ms", c->addr, what, wait_ms);
            return RS_ERR_TIMEOUT;
        }
        if (rs_progress(s->ctx) > 0 || *flag)
            continue;
        if (rs_now_ns() < spin_end)
            sched_yield(); /* an answer is a few µs away: a sleep costs a wake-up per request */
        else
            rs_wait(s->ctx, 10);
    }
    return RS_OK;
}

rs_status_t rs_rd_sess_request(rs_reader_session_t *s, rconn_t *c, unsigned type, const void *m,
                               size_t len, unsigned reply_type, uint32_t tag, const char *what)
{
    s->want_ep = c->ep;
    s->want_type = reply_type;
    s->want_tag = tag;
    s->got = 0;
    s->got_garbled = 0;
    rs_rd_closes_flush(c); /* ahead of the request: the worker may need what they pin */
    rs_status_t st = rs_msg_send(c->ep, type, m, len, NULL, NULL);
    if (st == RS_OK)
        st = rs_rd_sess_wait(s, c, &s->got, what);
    s->want_ep = NULL;
    if (st == RS_OK)
        st = s->got_status;
    if (st == RS_OK &&
        (st = rs_sproto_decode(s->reply, s->reply_len, reply_type, &s->rep)) != RS_OK)
        s->got_garbled = 1;
    c->garbled |= s->got_garbled; /* not an answer the session can take */
    if (st == RS_OK)
        st = s->rep.status;
    return st;
}

/* Once posted, the callback runs exactly once: wait for it even past an error. */
static rs_status_t op_wait(rs_reader_session_t *s, rconn_t *c, op_wait_t *o)
{
    rs_status_t st = rs_rd_sess_wait(s, c, &o->done, "a read");
    while (!o->done)
        rs_wait(s->ctx, 10); /* the endpoint failed: its ops complete within a bound */
    return st != RS_OK ? st : o->status;
}

/*
 * A range the worker named (index, staged spill, a snapshot's batch) must
 * lie in its arena: checked here, not left to the transport's key check,
 * whose status would not say the worker answered wrong.
 */
static rs_status_t in_arena(rconn_t *c, uint64_t roff, uint64_t len)
{
    if (roff <= c->arena_len && len <= c->arena_len - roff)
        return RS_OK;
    c->garbled = 1;
    rs_error("reader: worker %s named range %llu+%llu outside its %llu-byte arena", c->addr,
             (unsigned long long)roff, (unsigned long long)len, (unsigned long long)c->arena_len);
    return RS_ERR_PROTOCOL;
}

rs_status_t rs_rd_sess_get(rs_reader_session_t *s, rconn_t *c, void *dst, size_t len, rs_mr_t *mr,
                           uint64_t roff)
{
    op_wait_t o = {0};
    rs_status_t st = in_arena(c, roff, len);
    if (st != RS_OK)
        return st;
    st = rs_get(c->ep, dst, len, mr, c->rkey, roff, on_op, &o);
    if (st != RS_OK) {
        rs_error("reader: read of %zu bytes at %llu from worker %s: %s", len,
                 (unsigned long long)roff, c->addr, rs_strerror(st));
        return st;
    }
    return op_wait(s, c, &o);
}

rs_status_t rs_rd_sess_getv(rs_reader_session_t *s, rconn_t *c, const rs_get_seg_t *seg, unsigned n,
                            rs_mr_t *mr)
{
    op_wait_t o = {0};
    for (unsigned i = 0; i < n; i++) {
        rs_status_t rs = in_arena(c, seg[i].roff, seg[i].len);
        if (rs != RS_OK)
            return rs;
    }
    rs_status_t st = rs_getv(c->ep, seg, n, mr, c->rkey, on_op, &o);
    if (st != RS_OK) {
        rs_error("reader: read of %u ranges (the first %zu bytes at %llu) from worker %s: %s", n,
                 seg[0].len, (unsigned long long)seg[0].roff, c->addr, rs_strerror(st));
        return st;
    }
    return op_wait(s, c, &o);
}

void rs_rd_sess_pause(rs_reader_session_t *s, uint32_t ms)
{
    uint64_t end = rs_now_coarse_ns() + RS_MS_TO_NS(ms);
    while (rs_now_coarse_ns() < end)
        rs_wait(s->ctx, (int)ms);
}
