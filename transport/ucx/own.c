/*
 * UCX backend: a client connection's own receive queue (RSHUFFLE_UCX_QUEUE=
 * local, the default, for a peer of this host; own for every peer). UCX's shared-memory transports
 * deliver every peer's messages through one FIFO per worker, and a peer killed between reserving a
 * slot and filling it blocks that FIFO for every peer (docs/transport.md). With a worker per
 * connection the dead peer blocks only its own connection's queue, which goes with that connection;
 * the others keep theirs, so nothing needs renewing mid-task. A peer elsewhere reaches us over the
 * network only, which has no such queue: local keeps those connections on
 * the context's worker, one UCX worker fewer per remote peer. Its endpoint, messages and one-sided
 * ops go through that worker (rs_ucx_uep_worker). Its wakeup fd sits in own_ep, an epoll nested in
 * the context's fd. Polling and arming every own worker each round costs a core's tenth when
 * there is no spare one, so a worker that arm found idle (armed, nothing of its connection in
 * flight) is skipped by progress and arm until own_ep says its efd fired, its connection has
 * something in flight again, or the coarse clock ticks: then it is progressed and armed again.
 */
#include "transport/ucx/ucx.h"

#include "common/assert.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

/* Progress rounds between looks at which skipped workers' efds fired. */
#define RS_UCX_OWN_CHECK 16

/* own_ep, nested in the context's fd, and room in own_evs for one more worker. */
static rs_status_t own_ep_grow(rs_ucx_ctx_t *uc)
{
    if (uc->own_ep < 0) {
        int fd = epoll_create1(EPOLL_CLOEXEC);
        if (fd < 0) {
            rs_error("epoll_create1 failed: errno %d", errno);
            return RS_ERR_IO;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(uc->wait_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            rs_error("cannot wait on the connections' UCX workers: errno %d", errno);
            close(fd);
            return RS_ERR_IO;
        }
        uc->own_ep = fd;
    }
    struct epoll_event *evs = realloc(uc->own_evs, (uc->own_n + 1) * sizeof(*evs));
    if (evs == NULL)
        return RS_ERR_NOMEM;
    uc->own_evs = evs;
    return RS_OK;
}

rs_status_t rs_ucx_own_open(rs_ucx_ep_t *uep, int local)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(uep->ctx);
    int own = uc->queue == RS_UCX_QUEUE_OWN || (uc->queue == RS_UCX_QUEUE_LOCAL && local);
    if (!own || uep->own != NULL)
        return RS_OK;
    rs_ucx_worker_t *w = malloc(sizeof(*w));
    if (w == NULL)
        return RS_ERR_NOMEM;
    rs_status_t st = rs_ucx_worker_open(uep->ctx, uc, w);
    if (st != RS_OK) {
        free(w);
        return st;
    }
    st = own_ep_grow(uc);
    if (st != RS_OK)
        goto err_close_worker;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
    if (epoll_ctl(uc->own_ep, EPOLL_CTL_ADD, w->efd, &ev) != 0) {
        rs_error("cannot wait on a connection's UCX worker: errno %d", errno);
        st = RS_ERR_IO;
        goto err_close_worker;
    }
    uep->own = w;
    uc->own_n++;
    rs_list_add_tail(&uc->owns, &uep->own_link);
    return RS_OK;

err_close_worker:
    rs_ucx_worker_close(w);
    free(w);
    return st;
}

void rs_ucx_own_close(rs_ucx_ep_t *uep)
{
    rs_ucx_worker_t *w = uep->own;
    if (w == NULL)
        return;
    rs_ucx_ctx_t *uc = rs_ucx_ctx(uep->ctx);
    (void)epoll_ctl(uc->own_ep, EPOLL_CTL_DEL, w->efd, NULL);
    if (w->armed)
        uc->own_armed--;
    w->armed = 0;
    uc->own_n--;
    uep->own = NULL;
    rs_list_del(&uep->own_link);
    /* This may run inside w's own progress (a control AM's completion). */
    rs_list_add_tail(&uc->own_dead, &w->link);
}

static void own_destroy_dead(rs_ucx_ctx_t *uc)
{
    while (!rs_list_empty(&uc->own_dead)) {
        rs_ucx_worker_t *w = rs_list_first(&uc->own_dead, rs_ucx_worker_t, link);
        rs_list_del(&w->link);
        rs_ucx_worker_close(w);
        free(w);
    }
}

static void own_wake(rs_ucx_ctx_t *uc, rs_ucx_worker_t *w)
{
    RS_ASSERT(w->armed && uc->own_armed > 0);
    w->armed = 0;
    uc->own_armed--;
}

/* Wakes the armed workers whose efd fired, or every one once a coarse tick. */
static void own_wake_fired(rs_ucx_ctx_t *uc)
{
    uint64_t now = rs_now_coarse_ns();
    if (now != uc->own_seen) {
        uc->own_seen = now;
        rs_list_t *pos, *tmp;
        rs_list_for_each_safe(pos, tmp, &uc->owns)
        {
            rs_ucx_worker_t *w = RS_CONTAINER_OF(pos, rs_ucx_ep_t, own_link)->own;
            if (w->armed)
                own_wake(uc, w);
        }
        return;
    }
    int n = epoll_wait(uc->own_ep, uc->own_evs, (int)uc->own_n, 0);
    for (int i = 0; i < n; i++) {
        rs_ucx_worker_t *w = uc->own_evs[i].data.ptr;
        if (w->armed)
            own_wake(uc, w);
    }
}

/* Nothing of uep's in flight: no op, no control message (they may need progress, not an fd). */
static int own_idle(const rs_ucx_ep_t *uep)
{
    return uep->ctl_inflight == 0 && (uep->ep == NULL || uep->ep->n_ops == 0);
}

/* uep's worker may be skipped: armed, its efd quiet, the connection idle. */
static int own_skip(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep)
{
    rs_ucx_worker_t *w = uep->own;
    if (!w->armed)
        return 0;
    if (own_idle(uep))
        return 1;
    own_wake(uc, w);
    return 0;
}

unsigned rs_ucx_own_progress(rs_ucx_ctx_t *uc)
{
    if (uc->in_worker == 0)
        own_destroy_dead(uc);
    /* A syscall per round would cost a busy poller more than progressing a few idle workers. */
    if (uc->own_armed > 0 && uc->own_rounds++ % RS_UCX_OWN_CHECK == 0)
        own_wake_fired(uc);
    unsigned n = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &uc->owns)
    {
        rs_ucx_ep_t *uep = RS_CONTAINER_OF(pos, rs_ucx_ep_t, own_link);
        if (own_skip(uc, uep))
            continue;
        uc->in_worker++;
        n += ucp_worker_progress(uep->own->worker);
        uc->in_worker--;
    }
    return n;
}

ucs_status_t rs_ucx_own_arm(rs_ucx_ctx_t *uc)
{
    uc->own_rounds = 0; /* the caller may sleep: the first progress after it looks at own_ep */
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &uc->owns)
    {
        rs_ucx_ep_t *uep = RS_CONTAINER_OF(pos, rs_ucx_ep_t, own_link);
        if (own_skip(uc, uep))
            continue;
        ucs_status_t s = ucp_worker_arm(uep->own->worker);
        if (s != UCS_OK)
            return s;
        if (own_idle(uep)) { /* else armed again each time, progressed each round */
            uep->own->armed = 1;
            uc->own_armed++;
        }
    }
    return rs_list_empty(&uc->own_dead) ? UCS_OK : UCS_ERR_BUSY;
}

void rs_ucx_own_close_all(rs_ucx_ctx_t *uc)
{
    while (!rs_list_empty(&uc->owns))
        rs_ucx_own_close(rs_list_first(&uc->owns, rs_ucx_ep_t, own_link));
    own_destroy_dead(uc); /* completions of control AMs may free their endpoints here */
    if (uc->own_ep >= 0)
        close(uc->own_ep);
    uc->own_ep = -1;
    free(uc->own_evs);
    uc->own_evs = NULL;
}
