/*
 * The push engine: runs on the push queue's thread (pushq.c drives it
 * through hooks). Its jobs are files of their own, in this order, each
 * calling only those before it (pusher/internal.h): fail.c, seat.c,
 * lost.c, grants.c, post.c, take.c, commit.c, answer.c. This file is the
 * round hook: after the transport's progress, the writer's flush, the
 * workers' liveness, retries and merged writes' ages, then the commit.
 */
#include "pusher/internal.h"

#include "common/clock.h"

unsigned rs_push_engine_poll(rs_pusher_t *p)
{
    unsigned n = rs_progress(p->ctx);
    if (atomic_load_explicit(&p->flushed, memory_order_acquire) &&
        atomic_exchange(&p->flushed, 0)) {
        for (uint32_t i = 0; i < p->desc.n_workers; i++)
            if (!rs_push_worker_is(&p->workers[i], RS_PW_LOST))
                rs_push_try_post(&p->workers[i]);
        n++;
    }
    uint64_t now = rs_now_coarse_ns();
    for (uint32_t i = 0; i < p->desc.n_workers; i++) {
        pworker_t *w = &p->workers[i];
        rs_push_check_alive(w, now);
        if (i == 0 && rs_push_q_writer_short(p->q))
            rs_push_merge_blocks_free(p); /* kept blocks must not starve the writer */
        if (!rs_push_worker_is(w, RS_PW_LOST) && rs_push_merge_age(w, now))
            rs_push_try_post(w); /* a merged write filling for long: sealed, asked for */
        if (!rs_push_worker_is(w, RS_PW_LOST) && !w->req_out && w->retry_at != 0 &&
            now >= w->retry_at) {
            w->retry_at = 0;
            rs_push_try_post(w);
        }
    }
    rs_push_commit_progress(p);
    return n;
}
