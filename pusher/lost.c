/*
 * A worker lost (with R >= 2: dead, silent, or unable to take its data):
 * its queued sends dropped, its partitions not started seated elsewhere
 * (seat.c); with R = 1 the pusher fails instead. Below grants.c, post.c,
 * commit.c, answer.c and engine.c, which all find workers lost.
 */
#include "pusher/internal.h"

#include "common/clock.h"
#include "common/log.h"

/* A message to w could not go out: with R >= 2 w is lost, else the pusher fails. */
void rs_push_send_failed(pworker_t *w, rs_status_t status, const char *what)
{
    if (w->p->replicas > 1)
        rs_push_worker_lost(w, status, what);
    else
        rs_push_fail(w->p, status, what);
}

static void drop_list(pworker_t *w, rs_list_t *list)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, list)
    {
        rs_psend_t *sd = RS_CONTAINER_OF(pos, rs_psend_t, link);
        rs_list_del(&sd->link);
        RS_ASSERT(w->parts[sd->b->partition].n_pending > 0);
        w->parts[sd->b->partition].n_pending--;
        rs_push_batch_unref(w->p, sd->b);
    }
}

void rs_push_drop_pending(pworker_t *w)
{
    rs_push_merge_drop(w);
    drop_list(w, &w->pending);
    for (uint32_t i = 0; w->n_blocked > 0 && i < w->p->desc.n_partitions; i++) {
        drop_list(w, &w->parts[i].blocked);
        RS_ASSERT(w->n_blocked >= w->parts[i].n_blocked);
        w->n_blocked -= w->parts[i].n_blocked;
        w->parts[i].n_blocked = 0;
    }
    w->n_blocked = 0;
}

/*
 * With R >= 2: w is gone (dead, or silent past the peer timeout). Its queued
 * sends are dropped (the other holders have theirs), its puts in flight
 * complete with errors, and nothing more is sent to it; its commit is not
 * waited for. Partitions with no batch yet move to the next live workers of
 * their rings; started ones go on with their other holders (the batches
 * already written would have to be read back from one of them to copy them
 * to a new holder: docs/shuffle.md). The pusher fails only when a partition
 * has no holder left.
 */
void rs_push_worker_lost(pworker_t *w, rs_status_t status, const char *why)
{
    rs_pusher_t *p = w->p;
    if (rs_push_worker_is(w, RS_PW_LOST))
        return;
    rs_push_worker_set(w, RS_PW_LOST);
    w->req_out = 0;
    p->stats.workers_lost++;
    rs_push_lane_conn_lost(w->conn); /* the client's other lanes hear of it once */
    rs_warn("pusher (shuffle %u map %u attempt %u): worker %s lost (%s: %s): its partitions go on "
            "with their other replicas",
            p->desc.shuffle_id, p->map_id, p->attempt, p->desc.workers[w->index], why,
            rs_strerror(status));
    rs_push_drop_pending(w);
    rs_push_commit_end(w, status);
    rs_push_seat_unstarted(p);
    if (!rs_push_replicas_live(p))
        rs_push_fail(p, status, "every replica of a partition lost");
}

/*
 * A worker that owes an answer (a grant, a write's completion, the commit's
 * reply) and sent nothing for peer_timeout_ms is taken as gone: a stopped
 * process keeps its connection up, so the transport alone never says so.
 */
void rs_push_check_alive(pworker_t *w, uint64_t now)
{
    rs_pusher_t *p = w->p;
    int owed =
        w->req_out || w->inflight > 0 ||
        (rs_push_worker_is(w, RS_PW_COMMIT_SENT) && !rs_push_worker_is(w, RS_PW_COMMIT_DONE));
    if (!owed || rs_push_err(p) != RS_OK || rs_push_worker_is(w, RS_PW_LOST)) {
        w->wait_since = 0;
        return;
    }
    if (w->wait_since == 0)
        w->wait_since = now;
    uint64_t since = w->heard_at > w->wait_since ? w->heard_at : w->wait_since;
    if (now - since <= RS_MS_TO_NS(rs_ctx_config(p->ctx)->peer_timeout_ms))
        return;
    if (p->replicas > 1) { /* counts as dead, exactly like a killed one */
        rs_push_worker_lost(w, RS_ERR_TIMEOUT, "answered nothing for the peer timeout");
        return;
    }
    rs_error("pusher: worker %s answered nothing for %u ms (peer timeout)",
             p->desc.workers[w->index], rs_ctx_config(p->ctx)->peer_timeout_ms);
    rs_push_fail(p, RS_ERR_TIMEOUT, "worker not answering");
    w->req_out = 0;
    rs_push_drop_pending(w);
    rs_push_commit_end(w, RS_ERR_TIMEOUT);
}
