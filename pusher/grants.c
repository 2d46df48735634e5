/*
 * Asking workers for space: grants retired, one grant request per worker
 * at a time (space for blocked batches, merged writes' grants, next grants
 * asked ahead for streaming partitions), and the prefetch at open.
 */
#include "pusher/internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

/* Remembers that the pusher is done with g; the next request tells the worker. */
void rs_push_retire(pworker_t *w, uint32_t partition, pgrant_t *g)
{
    if (g->len == 0)
        return;
    if (w->n_retires == w->cap_retires) {
        uint32_t cap = w->cap_retires ? 2 * w->cap_retires : 64;
        pretire_t *n = realloc(w->retires, cap * sizeof(*n));
        if (n == NULL) {
            /* The worker then learns at the commit; until then the room stays held. */
            rs_warn("pusher: out of memory queueing a grant retire");
            *g = (pgrant_t){0};
            return;
        }
        w->retires = n;
        w->cap_retires = cap;
    }
    w->retires[w->n_retires++] =
        (pretire_t){.partition = partition, .slot = g->slot, .used = g->used};
    *g = (pgrant_t){0};
}

/* Worker short of memory: every grant not needed by a waiting batch goes back. */
static void reclaim(pworker_t *w)
{
    w->reclaim = 0;
    for (uint32_t i = 0; i < w->p->desc.n_partitions; i++) {
        ppart_t *pp = &w->parts[i];
        w->p->stats.reclaimed += (pp->next.len > 0) + (pp->n_pending == 0 && pp->cur.len > 0);
        rs_push_retire(w, i, &pp->next);
        if (pp->n_pending == 0)
            rs_push_retire(w, i, &pp->cur);
        pp->ahead_refused = 1; /* no asking ahead until a grant comes without pressure */
    }
}

static int in_backoff(const pworker_t *w)
{
    return w->retry_at != 0 && rs_now_coarse_ns() < w->retry_at;
}

/* A partition whose batches wait for space joins the queue of those to ask for (once). */
void rs_push_needs_grant(pworker_t *w, uint32_t part, ppart_t *pp)
{
    if (pp->needy || pp->in_req || pp->n_blocked == 0)
        return;
    pp->needy = 1;
    RS_ASSERT(w->n_needy < w->p->desc.n_partitions); /* each partition once */
    w->needy[(w->needy_head + w->n_needy++) % w->p->desc.n_partitions] = part;
}

/* Puts w's retires not yet told at msg_buf[0..ret_max); returns how many. */
static uint32_t put_retires(pworker_t *w, uint32_t ret_max)
{
    rs_pusher_t *p = w->p;
    uint32_t n_ret = 0;
    for (; w->ret_head + n_ret < w->n_retires && n_ret < ret_max; n_ret++) {
        const pretire_t *rt = &w->retires[w->ret_head + n_ret];
        uint32_t flags = rt->partition == RS_MERGED_PART ? RS_GRANT_MERGED : 0;
        rs_sproto_grant_want_put(p->msg_buf, p->msg_max, n_ret,
                                 &(rs_grant_want_t){.partition = rt->partition,
                                                    .flags = flags,
                                                    .retire_slot = rt->slot,
                                                    .retire_used = rt->used});
    }
    return n_ret;
}

/*
 * Puts space for the partitions whose first blocked batch needs it, in
 * the order they blocked, at msg_buf[n..max_n); returns the new n.
 */
static uint32_t put_needy(pworker_t *w, uint32_t n, size_t max_n)
{
    rs_pusher_t *p = w->p;
    while (w->n_needy > 0 && n < max_n) {
        uint32_t part = w->needy[w->needy_head];
        w->needy_head = (w->needy_head + 1) % p->desc.n_partitions;
        w->n_needy--;
        ppart_t *pp = &w->parts[part];
        pp->needy = 0;
        if (pp->in_req || rs_list_empty(&pp->blocked))
            continue; /* asked for already, or unblocked meanwhile */
        rs_pbuf_int_t *b = rs_list_first(&pp->blocked, rs_psend_t, link)->b;
        uint64_t need = rs_sproto_round(b->frame_len);
        rs_grant_want_t wt = {.partition = part,
                              .flags = b->full ? RS_GRANT_BULK : 0,
                              .want = need,
                              .retire_slot = RS_SLOT_NONE};
        if (pp->cur.len > 0) { /* exhausted: it retires with this request */
            wt.retire_slot = pp->cur.slot;
            wt.retire_used = pp->cur.used;
            pp->cur = (pgrant_t){0};
        }
        rs_push_retire(w, part, &pp->next); /* too small for this batch */
        rs_sproto_grant_want_put(p->msg_buf, p->msg_max, n++, &wt);
        pp->in_req = 1;
    }
    return n;
}

/*
 * Puts next grants for streaming partitions, so their writes never wait
 * for a round trip, at msg_buf[n..max_n); returns the new n. Those that
 * must wait (backoff, no room left) stay queued; stop (closing or
 * flushing) drops every one.
 */
static uint32_t put_ahead(pworker_t *w, uint32_t n, size_t max_n, int stop, int backoff)
{
    rs_pusher_t *p = w->p;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < w->n_ahead; i++) {
        uint32_t part = w->ahead[i];
        ppart_t *pp = &w->parts[part];
        if (stop || pp->in_req || pp->next.len > 0 || pp->cur.len == 0 || pp->ahead_refused) {
            pp->ahead_queued = 0;
            continue;
        }
        if (backoff || n == max_n) {
            w->ahead[kept++] = part;
            continue;
        }
        pp->ahead_queued = 0;
        pp->ahead_out = 1;
        pp->in_req = 1;
        rs_sproto_grant_want_put(p->msg_buf, p->msg_max, n++,
                                 &(rs_grant_want_t){.partition = part,
                                                    .flags = RS_GRANT_AHEAD | RS_GRANT_BULK,
                                                    .want = pp->ahead_want,
                                                    .retire_slot = RS_SLOT_NONE});
    }
    w->n_ahead = kept;
    return n;
}

/* Sends the request of n entries put in msg_buf; its first n_ret, retires, are told then. */
static void send_request(pworker_t *w, uint32_t n, uint32_t n_ret)
{
    rs_pusher_t *p = w->p;
    uint8_t *buf = p->msg_buf;
    rs_smsg_grant_req_t m = {.status = RS_OK, .req_id = ++w->req_id, .n = n};
    size_t len;
    rs_status_t s = rs_sproto_grant_req_encode(&m, buf, p->msg_max, &len);
    if (s == RS_OK)
        s = rs_msg_send(w->ep, RS_SMSG_GRANT_REQ, buf, len, NULL, NULL);
    if (s != RS_OK) {
        rs_push_send_failed(w, s, "sending a grant request");
        return;
    }
    w->ret_head += n_ret;
    RS_ASSERT(w->ret_head <= w->n_retires);
    if (w->ret_head == w->n_retires) {
        w->ret_head = w->n_retires = 0;
    } else if (w->ret_head > w->n_retires / 2) { /* compact now and then, not per request */
        memmove(w->retires, w->retires + w->ret_head,
                (w->n_retires - w->ret_head) * sizeof(*w->retires));
        w->n_retires -= w->ret_head;
        w->ret_head = 0;
    }
    w->req_out = 1;
    p->stats.grant_requests++;
}

/*
 * One request per worker at a time: retires first, then space for the
 * partitions whose waiting batches do not fit (their exhausted grant
 * retires with it), then next grants asked ahead for streaming partitions.
 */
void rs_push_request_grants(pworker_t *w)
{
    rs_pusher_t *p = w->p;
    if (w->req_out || rs_push_worker_is(w, RS_PW_COMMIT_SENT))
        return; /* after the commit the worker has retired every grant: nothing to ask or tell */
    /* Close is still handing over last buffers: asked for together after (merged writes now). */
    int flushing = atomic_load_explicit(&p->flushing, memory_order_relaxed);
    if (flushing && !rs_push_merge_wants(w))
        return;
    if (w->reclaim)
        reclaim(w);
    /*
     * Closing, the commit retires every grant left: a request of retires
     * or grants ahead alone would only put a round trip before the next
     * one that carries space a last batch waits for.
     */
    int closing = atomic_load_explicit(&p->closing, memory_order_relaxed);
    if (closing && w->n_needy == 0 && !rs_push_merge_wants(w))
        return;
    int backoff = in_backoff(w);
    size_t max_n = rs_sproto_grant_max(p->msg_max);
    size_t max_req = rs_sproto_grant_req_max(p->msg_max);
    if (max_req < max_n)
        max_n = max_req;
    /* Retires first (the worker frees before it grants), but leave room for what waits. */
    int waits = w->n_needy > 0 || rs_push_merge_wants(w);
    uint32_t n_ret = put_retires(w, waits ? (uint32_t)max_n / 2 : (uint32_t)max_n);
    uint32_t n = n_ret;
    /* Merged writes waiting for their grant (merge.c): one entry each. */
    if (!backoff)
        n = rs_push_merge_ask(w, p->msg_buf, p->msg_max, n, (uint32_t)max_n);
    if (!backoff && !flushing)
        n = put_needy(w, n, max_n);
    n = put_ahead(w, n, max_n, closing || flushing, backoff);
    if (n == 0)
        return;
    send_request(w, n, n_ret);
}

void rs_push_prefetch(rs_pusher_t *p, const uint32_t *hint)
{
    size_t max_n = rs_sproto_grant_req_max(p->msg_max);
    if (rs_sproto_grant_max(p->msg_max) < max_n)
        max_n = rs_sproto_grant_max(p->msg_max);
    for (uint32_t i = 0; i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        if (rs_push_worker_is(w, RS_PW_LOST) || !rs_push_worker_is(w, RS_PW_ATTACHED) ||
            w->attach_status != RS_OK || w->req_out)
            continue;
        uint32_t n = 0;
        for (uint32_t part = 0; part < p->desc.n_partitions && n < max_n; part++) {
            if (hint[part] == 0 || !rs_push_holds(p, part, w->index))
                continue;
            if (hint[part] + RS_FRAME_HEADER_SIZE < p->merge_below)
                continue; /* its batch will go in a merged write */
            rs_grant_want_t wt = {.partition = part,
                                  .want = rs_sproto_round(hint[part] + RS_FRAME_HEADER_SIZE),
                                  .retire_slot = RS_SLOT_NONE};
            rs_sproto_grant_want_put(p->msg_buf, p->msg_max, n++, &wt);
            w->parts[part].in_req = 1;
        }
        if (n == 0)
            continue;
        rs_smsg_grant_req_t m = {.status = RS_OK, .req_id = ++w->req_id, .n = n};
        size_t len;
        rs_status_t s = rs_sproto_grant_req_encode(&m, p->msg_buf, p->msg_max, &len);
        if (s == RS_OK)
            s = rs_msg_send(w->ep, RS_SMSG_GRANT_REQ, p->msg_buf, len, NULL, NULL);
        if (s != RS_OK) { /* a hint only: close asks in the usual way */
            for (uint32_t part = 0; part < p->desc.n_partitions; part++)
                w->parts[part].in_req = 0;
            continue;
        }
        w->req_out = 1;
        w->prefetch_id = m.req_id;
        p->stats.grant_requests++;
    }
}
