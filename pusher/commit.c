/*
 * The map commit: once close has handed everything over and every write
 * completed, each worker is sent what it should hold; close's wait ends
 * when every worker answered (or was lost).
 */
#include "pusher/internal.h"

static void send_commit(pworker_t *w)
{
    rs_pusher_t *p = w->p;
    /* Once, to a worker that owes it. */
    RS_ASSERT(!rs_push_worker_is(w, RS_PW_COMMIT_SENT) && !rs_push_worker_is(w, RS_PW_COMMIT_DONE));
    size_t per = rs_sproto_commit_max(p->msg_max);
    uint8_t *buf = p->msg_buf;
    /* R = 1 and no batch framed (take.c counts them): no partition to list, none to scan. */
    uint32_t part = p->replicas == 1 && p->stats.batches == 0 ? p->desc.n_partitions : 0;
    for (;;) {
        uint32_t n = 0;
        for (; part < p->desc.n_partitions && n < per; part++) {
            /* R >= 2: every partition held is listed, so readers can tell a holder of nothing. */
            if (w->counts[part].batches == 0 &&
                (p->replicas == 1 || !rs_push_holds(p, part, w->index)))
                continue;
            rs_commit_entry_t e = w->counts[part];
            e.partition = part;
            rs_sproto_commit_put(buf, p->msg_max, n++, &e);
        }
        int last = part >= p->desc.n_partitions;
        rs_smsg_commit_t m = {.status = RS_OK,
                              .n = n,
                              .last = (uint32_t)last,
                              .total_batches = last ? w->batches : 0};
        size_t len;
        rs_status_t s = rs_sproto_commit_encode(&m, buf, p->msg_max, &len);
        if (s == RS_OK)
            s = rs_msg_send(w->ep, RS_SMSG_COMMIT, buf, len, NULL, NULL);
        if (s != RS_OK) {
            rs_push_send_failed(w, s, "sending the commit");
            break;
        }
        if (last)
            break;
    }
    rs_push_worker_set(w, RS_PW_COMMIT_SENT);
}

void rs_push_commit_progress(rs_pusher_t *p)
{
    if (!atomic_load(&p->closing) || p->commit_finished)
        return;
    if (rs_push_err(p) == RS_OK && rs_push_q_outstanding(p->q) != 0)
        return;
    /* Every batch is with the engine: merged writes still filling go now. */
    for (uint32_t i = 0; rs_push_err(p) == RS_OK && i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        if (w->mcur != NULL && !rs_push_worker_is(w, RS_PW_LOST)) {
            rs_push_merge_seal(w);
            rs_push_try_post(w);
        }
    }
    /* Compressed batches outlive their raw buffers: wait for them too. */
    for (uint32_t i = 0; rs_push_err(p) == RS_OK && i < p->desc.n_workers; i++)
        if (!rs_list_empty(&p->workers[i].pending) || p->workers[i].n_blocked != 0 ||
            p->workers[i].inflight != 0 || rs_push_merge_busy(&p->workers[i]))
            return;
    int all = 1;
    for (uint32_t i = 0; i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        if (rs_push_err(p) != RS_OK)
            rs_push_commit_end(w, rs_push_err(p));
        /* A lost worker's commit is not waited for. */
        RS_ASSERT(!rs_push_worker_is(w, RS_PW_LOST) || rs_push_worker_is(w, RS_PW_COMMIT_DONE));
        if (!rs_push_worker_is(w, RS_PW_COMMIT_SENT) && !rs_push_worker_is(w, RS_PW_COMMIT_DONE))
            send_commit(w);
        all &= rs_push_worker_is(w, RS_PW_COMMIT_DONE);
    }
    if (!all)
        return;
    pthread_mutex_lock(&p->lock);
    __atomic_store_n(&p->commit_finished, 1, __ATOMIC_RELEASE); /* close spins on it unlocked */
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}
