/*
 * UCX backend: a client connection's own receive queue (RSHUFFLE_UCX_QUEUE=
 * local, the default, for a peer of this host; own for every peer). UCX's shared-memory transports
 * deliver every peer's messages through one FIFO per worker, and a peer killed between reserving a
 * slot and filling it blocks that FIFO for every peer (docs/transport.md). With a worker per
 * connection the dead peer blocks only its own connection's queue, which goes with that connection;
 * the others keep theirs, so nothing needs renewing mid-task. A peer elsewhere reaches us over the
 * network only, which has no such queue: local keeps those connections on
 * the context's worker, one UCX worker fewer per remote peer. Its endpoint, messages and one-sided
 * ops go through that worker (rs_ucx_uep_worker); the context polls and
 * arms each one, and waits on its wakeup fd through the context's fd.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>

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
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = w->efd};
    if (epoll_ctl(uc->wait_fd, EPOLL_CTL_ADD, w->efd, &ev) != 0) {
        rs_error("cannot wait on a connection's UCX worker: errno %d", errno);
        rs_ucx_worker_close(w);
        free(w);
        return RS_ERR_IO;
    }
    uep->own = w;
    rs_list_add_tail(&uc->owns, &uep->own_link);
    return RS_OK;
}

void rs_ucx_own_close(rs_ucx_ep_t *uep)
{
    rs_ucx_worker_t *w = uep->own;
    if (w == NULL)
        return;
    rs_ucx_ctx_t *uc = rs_ucx_ctx(uep->ctx);
    (void)epoll_ctl(uc->wait_fd, EPOLL_CTL_DEL, w->efd, NULL);
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

unsigned rs_ucx_own_progress(rs_ucx_ctx_t *uc)
{
    if (uc->in_worker == 0)
        own_destroy_dead(uc);
    unsigned n = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &uc->owns)
    {
        rs_ucx_ep_t *uep = RS_CONTAINER_OF(pos, rs_ucx_ep_t, own_link);
        uc->in_worker++;
        n += ucp_worker_progress(uep->own->worker);
        uc->in_worker--;
    }
    return n;
}

ucs_status_t rs_ucx_own_arm(rs_ucx_ctx_t *uc)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &uc->owns)
    {
        rs_ucx_ep_t *uep = RS_CONTAINER_OF(pos, rs_ucx_ep_t, own_link);
        ucs_status_t s = ucp_worker_arm(uep->own->worker);
        if (s != UCS_OK)
            return s;
    }
    return rs_list_empty(&uc->own_dead) ? UCS_OK : UCS_ERR_BUSY;
}

void rs_ucx_own_close_all(rs_ucx_ctx_t *uc)
{
    while (!rs_list_empty(&uc->owns))
        rs_ucx_own_close(rs_list_first(&uc->owns, rs_ucx_ep_t, own_link));
    own_destroy_dead(uc); /* completions of control AMs may free their endpoints here */
}
