/*
 * The workers' messages to the pusher: attach replies, grants (and their
 * refusals: backpressure, busy), reclaims, nacks, commit replies, and
 * connection events.
 */
#include "pusher/internal.h"

#include "common/clock.h"
#include "common/log.h"

/* A worker full and unable to spill (disk full): given up after this at most. */
#define RS_PUSH_SPILL_FAIL_MS 2000

/*
 * The live worker of ep for the lane's current pusher (NULL: no pusher, not
 * ours, or lost: its late messages are ignored). A connection carries the
 * tasks of a lane one after the other: what arrives before the reply to
 * this task's attach answers an earlier task and is dropped (the worker
 * answers in order).
 */
static pworker_t *worker_any(void *arg, rs_ep_t *ep)
{
    rs_push_lane_t *l = arg;
    rs_pusher_t *p = atomic_load_explicit(&l->p, memory_order_relaxed);
    pworker_t *w = rs_ep_user(ep);
    if (p == NULL || w == NULL || w->p != p || rs_push_worker_is(w, RS_PW_LOST))
        return NULL;
    return rs_push_worker_is(w, RS_PW_ATTACH_SENT) ? w : NULL;
}

static pworker_t *worker_of(void *arg, rs_ep_t *ep)
{
    pworker_t *w = worker_any(arg, ep);
    return (w != NULL && rs_push_worker_is(w, RS_PW_ATTACHED)) ? w : NULL;
}

static void on_attach_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    pworker_t *w = worker_any(arg, ep);
    rs_smsg_attach_reply_t r;
    if (w == NULL || rs_push_worker_is(w, RS_PW_ATTACHED))
        return;
    rs_status_t s = rs_sproto_attach_reply_decode(data, len, &r);
    if (s == RS_OK)
        s = r.status;
    if (s == RS_OK && w->conn->rkey == NULL) /* one worker process per connection: one arena */
        s = rs_rkey_unpack(ep, r.rkey, r.rkey_len, &w->conn->rkey);
    if (s == RS_OK) {
        w->rkey = w->conn->rkey;
        w->arena_len = r.arena_len;
    }
    w->attach_status = s;
    rs_push_worker_set(w, RS_PW_ATTACHED);
}

/* A grant came: the partition's blocked batches go back to pending, in order. */
static void unblock(pworker_t *w, ppart_t *pp)
{
    while (!rs_list_empty(&pp->blocked)) {
        rs_psend_t *sd = rs_list_first(&pp->blocked, rs_psend_t, link);
        rs_list_del(&sd->link);
        rs_list_add_tail(&w->pending, &sd->link);
    }
    RS_ASSERT(w->n_blocked >= pp->n_blocked);
    w->n_blocked -= pp->n_blocked;
    pp->n_blocked = 0;
}

/* What the entries of one grant message said, for the worker's retry state. */
typedef struct grant_seen {
    int backpressure, granted, busy, spill_failed;
} grant_seen_t;

/* A merged write's grant entry (merge.c): 0 when it failed the pusher. */
static int merged_grant(pworker_t *w, const rs_grant_t *g, grant_seen_t *seen)
{
    rs_status_t ms = rs_push_merge_granted(w, g);
    if (ms == RS_ERR_BACKPRESSURE || ms == RS_ERR_IO) {
        seen->backpressure = 1;
        seen->spill_failed |= ms == RS_ERR_IO;
    } else if (ms == RS_ERR_BUSY) {
        seen->busy = 1;
    } else if (ms != RS_OK) {
        w->garbled |= ms == RS_ERR_PROTOCOL; /* not a refusal: a grant the pusher cannot take */
        rs_push_fail(w->p, ms, "merged grant refused by a worker");
        rs_push_drop_pending(w);
        return 0;
    } else {
        seen->granted = 1;
    }
    return 1;
}

/* A partition's grant entry: the grant taken, or its refusal noted; 0 when it failed the pusher. */
static int part_grant(pworker_t *w, const rs_grant_t *g, int prefetch, grant_seen_t *seen)
{
    rs_pusher_t *p = w->p;
    if (g->partition >= p->desc.n_partitions) {
        w->garbled = 1;
        rs_push_fail(p, RS_ERR_PROTOCOL, "grant for an unknown partition");
        rs_push_drop_pending(w);
        return 0;
    }
    ppart_t *pp = &w->parts[g->partition];
    int ahead = pp->ahead_out;
    pp->in_req = 0;
    pp->ahead_out = 0;
    if (prefetch && g->status != RS_OK) {
        rs_push_needs_grant(w, g->partition, pp); /* asked for at open: what waits asks now */
        return 1;
    }
    if (g->status == RS_ERR_BACKPRESSURE || g->status == RS_ERR_IO) {
        seen->backpressure = 1;
        seen->spill_failed |= g->status == RS_ERR_IO; /* full, and its spill disk takes nothing */
        rs_push_needs_grant(w, g->partition, pp);     /* asked again after retry_ms */
        return 1;
    }
    if (g->status == RS_ERR_BUSY) { /* no grant ahead while the worker is short */
        pp->ahead_refused = 1;
        seen->busy |= !ahead; /* no slot free for a batch that waits: ask again a little later */
        rs_push_needs_grant(w, g->partition, pp);
        return 1;
    }
    if (g->status != RS_OK || g->len > RS_GRANT_MAX || g->slot >= RS_GRANT_SLOTS) {
        w->garbled |= g->status == RS_OK; /* a refusal is an answer; this is not one */
        rs_push_fail(p, g->status != RS_OK ? (rs_status_t)g->status : RS_ERR_PROTOCOL,
                     "grant refused by a worker");
        rs_push_drop_pending(w);
        return 0;
    }
    if (!rs_push_grant_in_arena(w, g->off, g->len)) {
        w->garbled = 1;
        rs_push_fail(p, RS_ERR_PROTOCOL, "grant outside the worker's arena");
        rs_push_drop_pending(w);
        return 0;
    }
    if (g->len == 0) {
        rs_push_needs_grant(w, g->partition, pp); /* a retire only: what waits still asks */
        return 1;
    }
    pgrant_t ng = {.slot = g->slot, .off = g->off, .len = g->len};
    unblock(w, pp);
    if (pp->cur.len == 0)
        pp->cur = ng;
    else if (pp->next.len == 0)
        pp->next = ng;
    else
        rs_push_retire(w, g->partition, &ng); /* cannot happen: give it straight back */
    if (!ahead) {
        pp->ahead_refused = 0;
        seen->granted = 1;
    }
    return 1;
}

/*
 * After a grant message: refused for backpressure longer than its bound,
 * the worker is lost (R >= 2) or the pusher fails (0 returned); refused
 * for now, w asks again after retry_ms (backpressure) or 10 ms (busy).
 */
static int grant_retry(pworker_t *w, uint32_t retry_ms, const grant_seen_t *seen)
{
    rs_pusher_t *p = w->p;
    uint64_t now = rs_now_coarse_ns();
    if (seen->backpressure) {
        p->stats.backpressure++;
        if (w->bp_since == 0)
            w->bp_since = now;
        /* A worker that cannot spill will not free memory: a shorter bound. */
        uint32_t bound = p->cfg.backpressure_ms;
        if (seen->spill_failed && bound > RS_PUSH_SPILL_FAIL_MS)
            bound = RS_PUSH_SPILL_FAIL_MS;
        if (now - w->bp_since > RS_MS_TO_NS(bound)) {
            /* With R >= 2 a replica that cannot take its partitions' data is a lost one. */
            rs_status_t why = seen->spill_failed ? RS_ERR_IO : RS_ERR_BACKPRESSURE;
            if (p->replicas >= 2) {
                rs_push_worker_lost(w, why,
                                    seen->spill_failed
                                        ? "full, and its spill failed (disk full: its log "
                                          "names the directory)"
                                        : "memory full for too long");
                return 0;
            }
            rs_push_fail(p, why,
                         seen->spill_failed
                             ? "worker memory full and its spill failed (no space left "
                               "on its spill disk, or an I/O error: its log names the "
                               "directory)"
                             : "worker memory full for too long");
            rs_push_drop_pending(w);
            return 0;
        }
        w->retry_at = now + RS_MS_TO_NS(retry_ms ? retry_ms : 10);
        w->reclaim = 1; /* our own idle grants may be what holds the memory */
    } else if (seen->granted) {
        w->bp_since = 0;
    }
    if (seen->busy && !seen->backpressure) {
        w->retry_at = now + RS_MS_TO_NS(10);
        w->reclaim = 1; /* idle grants hold slots too */
    }
    return 1;
}

static void on_grant(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    pworker_t *w = worker_of(arg, ep);
    rs_pusher_t *p = w != NULL ? w->p : NULL;
    rs_smsg_grant_t r;
    rs_status_t s = rs_sproto_grant_decode(data, len, &r);
    if (w == NULL)
        return;
    w->garbled |= s != RS_OK;
    int prefetch = s == RS_OK && w->prefetch_id != 0 && r.req_id == w->prefetch_id;
    if (prefetch)
        w->prefetch_id = 0;
    if (s == RS_OK && prefetch && r.status != RS_OK) {
        /*
         * Refused as a whole: a hint only. Batches that blocked behind it
         * asked nothing (in_req): they ask now, else close waits them out.
         */
        r.n = 0;
        for (uint32_t i = 0; i < p->desc.n_partitions; i++) {
            w->parts[i].in_req = 0;
            rs_push_needs_grant(w, i, &w->parts[i]);
        }
    } else if (s == RS_OK)
        s = r.status;
    w->req_out = 0;
    w->heard_at = rs_now_coarse_ns();
    if (s != RS_OK) {
        rs_push_fail(p, s, "grant request refused by a worker");
        rs_push_drop_pending(w);
        return;
    }
    grant_seen_t seen = {0};
    for (uint32_t i = 0; i < r.n; i++) {
        rs_grant_t g = rs_sproto_grant_get(&r, i);
        /* A merged write's grant (merge.c); len 0: a retire's answer, nothing waits on it. */
        if (g.partition == RS_MERGED_PART && g.status == RS_OK && g.len == 0)
            continue;
        int ok = g.partition == RS_MERGED_PART ? merged_grant(w, &g, &seen)
                                               : part_grant(w, &g, prefetch, &seen);
        if (!ok)
            return;
    }
    if (grant_retry(w, r.retry_ms, &seen))
        rs_push_try_post(w);
}

/* The worker is short of memory: give back the grants no batch waits for. */
static void on_reclaim(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    pworker_t *w = worker_of(arg, ep);
    rs_pusher_t *p = w != NULL ? w->p : NULL;
    rs_status_t carried;
    if (w == NULL)
        return;
    if (rs_sproto_status_decode(data, len, RS_SMSG_RECLAIM, &carried) != RS_OK) {
        w->garbled = 1; /* only a hint: ignored, but the connection is not kept */
        return;
    }
    w->reclaim = 1;
    w->heard_at = rs_now_coarse_ns();
    if (rs_push_err(p) == RS_OK)
        rs_push_try_post(w);
}

static void on_nack(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    pworker_t *w = worker_of(arg, ep);
    rs_smsg_nack_t n;
    if (w == NULL)
        return;
    rs_pusher_t *p = w->p;
    rs_status_t s = rs_sproto_nack_decode(data, len, &n);
    if (s != RS_OK) { /* some batch was refused, which one is unreadable */
        w->garbled = 1;
        rs_push_fail(p, s, "a worker's refusal of a batch is unreadable");
        return;
    }
    rs_error("pusher: a worker refused a batch of partition %u: %s", n.partition,
             rs_strerror(n.status));
    rs_push_fail(p, n.status, "batch refused");
}

static void on_commit_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    pworker_t *w = worker_of(arg, ep);
    rs_pusher_t *p = w != NULL ? w->p : NULL;
    if (w == NULL)
        return;
    rs_status_t carried;
    rs_status_t s = rs_sproto_status_decode(data, len, RS_SMSG_COMMIT_REPLY, &carried);
    if (s == RS_OK)
        s = carried;
    if (s != RS_OK)
        rs_error("pusher: worker %s refused the commit of map %u attempt %u: %s",
                 p->desc.workers[w->index], p->map_id, p->attempt, rs_strerror(s));
    w->commit_status = s;
    rs_push_worker_set(w, RS_PW_COMMIT_DONE);
    w->heard_at = rs_now_coarse_ns();
}

static void on_ep(void *arg, rs_ep_t *ep, rs_status_t status)
{
    pworker_t *w = worker_any(arg, ep); /* also while open waits for the attach */
    if (w == NULL || status == RS_OK)
        return;
    rs_pusher_t *p = w->p;
    if (p->replicas > 1) {
        if (rs_push_err(p) == RS_OK) /* else: failed already, or closed by rs_pusher_destroy */
            rs_push_worker_lost(w, status, "connection lost");
        return;
    }
    rs_error("pusher: worker %s is gone: %s", p->desc.workers[w->index], rs_strerror(status));
    rs_push_fail(p, status, "worker connection lost");
    w->req_out = 0;
    rs_push_drop_pending(w);
    rs_push_commit_end(w, status);
}

rs_status_t rs_push_install_handlers(rs_push_lane_t *l)
{
    rs_status_t s;
    if ((s = rs_set_msg_handler(l->ctx, RS_SMSG_ATTACH_REPLY, on_attach_reply, l)) != RS_OK ||
        (s = rs_set_msg_handler(l->ctx, RS_SMSG_GRANT, on_grant, l)) != RS_OK ||
        (s = rs_set_msg_handler(l->ctx, RS_SMSG_NACK, on_nack, l)) != RS_OK ||
        (s = rs_set_msg_handler(l->ctx, RS_SMSG_COMMIT_REPLY, on_commit_reply, l)) != RS_OK ||
        (s = rs_set_msg_handler(l->ctx, RS_SMSG_RECLAIM, on_reclaim, l)) != RS_OK)
        return s;
    rs_set_ep_handler(l->ctx, on_ep, l);
    return RS_OK;
}
