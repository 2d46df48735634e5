/*
 * The verbs backend (rdma-core): the ops table, the context (device, PD,
 * one CQ with a completion channel, a shared receive queue of message
 * buffers, the CM event channel, one epoll fd over both channels) and
 * progress. Connections live in cm.c, work requests in post.c, memory in
 * mem.c, helpers they share in shared.c; docs/verbs.md has the design.
 */
#include "transport/verbs/verbs.h"

#include "common/assert.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Completions handled per poll call, and poll calls per progress round. */
#define RS_V_POLL_BATCH  32
#define RS_V_POLL_ROUNDS 8
/* Completion-channel events are acknowledged in batches (it takes a lock). */
#define RS_V_ACK_BATCH 64

/* ------------------------------------------------------------ the device */

static int port_active(struct ibv_context *dev, uint8_t nports, uint8_t *port_p)
{
    for (uint8_t p = 1; p <= nports; p++) {
        struct ibv_port_attr pa;
        if (ibv_query_port(dev, p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE) {
            *port_p = p;
            return 1;
        }
    }
    return 0;
}

/* The device named by verbs_device, else the first one with an active port. */
static rs_status_t open_device(rs_vctx_t *vc)
{
    const char *want = vc->cfg->verbs_device;
    int n = 0;
    vc->devices = rdma_get_devices(&n);
    if (vc->devices == NULL || n == 0) {
        rs_error("verbs: no RDMA device found");
        goto err_free;
    }
    for (int i = 0; i < n; i++) {
        struct ibv_context *dev = vc->devices[i];
        const char *name = ibv_get_device_name(dev->device);
        if (want[0] != '\0' && strcmp(want, name) != 0)
            continue;
        if (ibv_query_device(dev, &vc->dattr) != 0) {
            rs_warn("verbs: cannot query device %s: %s", name, strerror(errno));
            continue;
        }
        if (!port_active(dev, vc->dattr.phys_port_cnt, &vc->port)) {
            if (want[0] != '\0')
                rs_error("verbs: device %s (RSHUFFLE_VERBS_DEVICE) has no active port", want);
            continue;
        }
        vc->dev = dev;
        rs_debug("verbs: using device %s port %u", name, vc->port);
        return RS_OK;
    }
    if (want[0] != '\0')
        rs_error("verbs: no usable RDMA device named %s (RSHUFFLE_VERBS_DEVICE)", want);
    else
        rs_error("verbs: no RDMA device with an active port");
err_free:
    if (vc->devices != NULL)
        rdma_free_devices(vc->devices);
    vc->devices = NULL;
    return RS_ERR_UNSUPPORTED;
}

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Queue depths and budgets from the configuration, within the device's limits. */
static rs_status_t derive_limits(rs_vctx_t *vc)
{
    const rs_config_t *cfg = vc->cfg;
    const struct ibv_device_attr *a = &vc->dattr;
    if (a->max_srq_wr == 0 || a->max_qp_wr < 4) {
        rs_error("verbs: the device has no shared receive queues or tiny queues");
        return RS_ERR_UNSUPPORTED;
    }
    vc->sq_depth = clamp_u32(cfg->verbs_sq_depth, 2, (uint32_t)a->max_qp_wr - 2);
    vc->n_recv = clamp_u32(cfg->verbs_srq_depth, 1, (uint32_t)a->max_srq_wr);
    vc->msg_max = cfg->msg_max;
    vc->inline_req = cfg->verbs_inline;
    vc->signal_every = clamp_u32(cfg->verbs_signal_every, 1, vc->sq_depth / 2);
    uint32_t dev_rd = (uint32_t)a->max_qp_init_rd_atom;
    if (dev_rd > 255)
        dev_rd = 255;
    vc->rd_cap = cfg->verbs_max_rd_atom == 0 || cfg->verbs_max_rd_atom > dev_rd
                     ? dev_rd
                     : cfg->verbs_max_rd_atom;
    if (vc->rd_cap == 0)
        rs_warn("verbs: the device allows no outstanding RDMA reads: gets will fail");
    return RS_OK;
}

static rs_status_t create_cq(rs_vctx_t *vc)
{
    uint32_t want = vc->cfg->verbs_cq_depth;
    uint32_t need = vc->n_recv + vc->sq_depth + 16;
    if (want < need) {
        rs_info("verbs: CQ depth raised from %u to %u (receives + one send queue)", want, need);
        want = need;
    }
    if (want > (uint32_t)vc->dattr.max_cqe)
        want = (uint32_t)vc->dattr.max_cqe; /* too small for the SRQ: refused below */
    vc->chan = ibv_create_comp_channel(vc->dev);
    if (vc->chan == NULL) {
        rs_error("verbs: ibv_create_comp_channel failed: %s", strerror(errno));
        return RS_ERR_TRANSPORT;
    }
    vc->cq = ibv_create_cq(vc->dev, (int)want, NULL, vc->chan, 0);
    if (vc->cq == NULL) {
        rs_error("verbs: ibv_create_cq(%u) failed: %s", want, strerror(errno));
        ibv_destroy_comp_channel(vc->chan);
        vc->chan = NULL;
        return RS_ERR_TRANSPORT;
    }
    if ((uint32_t)vc->cq->cqe <= vc->n_recv + 2) {
        rs_error("verbs: CQ of %d entries cannot hold %u receives (RSHUFFLE_VERBS_CQ_DEPTH)",
                 vc->cq->cqe, vc->n_recv);
        ibv_destroy_cq(vc->cq);
        ibv_destroy_comp_channel(vc->chan);
        vc->cq = NULL;
        vc->chan = NULL;
        return RS_ERR_CONFIG;
    }
    vc->cq_free = (uint32_t)vc->cq->cqe - vc->n_recv;
    return RS_OK;
}

/* ----------------------------------------------------- receive buffers */

static int post_recvs(rs_vctx_t *vc, const uint32_t *idx, unsigned n)
{
    struct ibv_recv_wr wr[RS_V_POLL_BATCH];
    struct ibv_sge sge[RS_V_POLL_BATCH];
    while (n > 0) {
        unsigned k = n < RS_V_POLL_BATCH ? n : RS_V_POLL_BATCH;
        for (unsigned i = 0; i < k; i++) {
            sge[i].addr = (uintptr_t)(vc->rbuf + (size_t)idx[i] * vc->msg_max);
            sge[i].length = vc->msg_max;
            sge[i].lkey = vc->rbuf_mr->lkey;
            wr[i].wr_id = RS_V_RECV_WRID | idx[i];
            wr[i].sg_list = &sge[i];
            wr[i].num_sge = 1;
            wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
        }
        struct ibv_recv_wr *bad = NULL;
        int rc = ibv_post_srq_recv(vc->srq, wr, &bad);
        if (rc != 0) {
            rs_error("verbs: ibv_post_srq_recv failed: %s", strerror(rc));
            return -1;
        }
        idx += k;
        n -= k;
    }
    return 0;
}

static rs_status_t create_srq(rs_vctx_t *vc)
{
    struct ibv_srq_init_attr attr = {.attr = {.max_wr = vc->n_recv, .max_sge = 1}};
    vc->srq = ibv_create_srq(vc->pd, &attr);
    if (vc->srq == NULL) {
        rs_error("verbs: ibv_create_srq(%u) failed: %s", vc->n_recv, strerror(errno));
        return RS_ERR_TRANSPORT;
    }
    size_t bytes = (size_t)vc->n_recv * vc->msg_max;
    if (posix_memalign((void **)&vc->rbuf, 4096, bytes) != 0) {
        rs_error("verbs: out of memory for %zu bytes of receive buffers", bytes);
        goto err_destroy_srq;
    }
    vc->rbuf_mr = ibv_reg_mr(vc->pd, vc->rbuf, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (vc->rbuf_mr == NULL) {
        rs_error("verbs: cannot register receive buffers: %s", strerror(errno));
        goto err_free_buf;
    }
    uint32_t idx[RS_V_POLL_BATCH];
    for (uint32_t i = 0; i < vc->n_recv; i += RS_V_POLL_BATCH) {
        unsigned k = 0;
        for (uint32_t j = i; j < vc->n_recv && k < RS_V_POLL_BATCH; j++)
            idx[k++] = j;
        if (post_recvs(vc, idx, k) != 0)
            goto err_dereg;
    }
    return RS_OK;

err_dereg:
    ibv_dereg_mr(vc->rbuf_mr);
    vc->rbuf_mr = NULL;
err_free_buf:
    free(vc->rbuf);
    vc->rbuf = NULL;
err_destroy_srq:
    ibv_destroy_srq(vc->srq);
    vc->srq = NULL;
    return RS_ERR_TRANSPORT;
}

/* ----------------------------------------------------------- wait fd */

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void close_epoll(rs_vctx_t *vc)
{
    if (vc->epfd >= 0)
        close(vc->epfd);
    if (vc->wake_fd >= 0)
        close(vc->wake_fd);
    vc->epfd = vc->wake_fd = -1;
}

static rs_status_t create_epoll(rs_vctx_t *vc)
{
    if (set_nonblock(vc->chan->fd) != 0 || set_nonblock(vc->cm->fd) != 0) {
        rs_error("verbs: cannot make the event channels non-blocking: %s", strerror(errno));
        return RS_ERR_IO;
    }
    vc->epfd = epoll_create1(EPOLL_CLOEXEC);
    vc->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (vc->epfd < 0 || vc->wake_fd < 0) {
        rs_error("verbs: cannot create the wait fd: %s", strerror(errno));
        close_epoll(vc);
        return RS_ERR_IO;
    }
    int fds[3] = {vc->chan->fd, vc->cm->fd, vc->wake_fd};
    for (int i = 0; i < 3; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(vc->epfd, EPOLL_CTL_ADD, fds[i], &ev) != 0) {
            rs_error("verbs: epoll_ctl failed: %s", strerror(errno));
            close_epoll(vc);
            return RS_ERR_IO;
        }
    }
    return RS_OK;
}

/* ------------------------------------------------------ open and close */

static void release_queues(rs_vctx_t *vc)
{
    if (vc->srq != NULL)
        ibv_destroy_srq(vc->srq);
    if (vc->rbuf_mr != NULL)
        ibv_dereg_mr(vc->rbuf_mr);
    free(vc->rbuf);
    if (vc->cq != NULL) {
        ibv_ack_cq_events(vc->cq, vc->cq_events_unacked);
        ibv_destroy_cq(vc->cq);
    }
    if (vc->chan != NULL)
        ibv_destroy_comp_channel(vc->chan);
}

static rs_status_t verbs_ctx_open(rs_ctx_t *ctx)
{
    rs_status_t st;
    rs_vctx_t *vc = calloc(1, sizeof(*vc));
    if (vc == NULL) {
        rs_error("verbs: out of memory");
        return RS_ERR_NOMEM;
    }
    vc->ctx = ctx;
    vc->cfg = rs_tp_ctx_cfg(ctx);
    vc->epfd = vc->wake_fd = -1;
    vc->next_uid = 1;
    rs_list_init(&vc->eps);
    rs_list_init(&vc->listeners);
    rs_list_init(&vc->backlogged);
    rs_list_init(&vc->tails);
    rs_list_init(&vc->deferred);
    rs_list_init(&vc->work_free);

    vc->cm = rdma_create_event_channel();
    if (vc->cm == NULL) {
        rs_error("verbs: no RDMA connection manager (%s): no RDMA device or rdma_ucm not loaded",
                 strerror(errno));
        st = RS_ERR_UNSUPPORTED;
        goto err_free_vc;
    }
    st = open_device(vc);
    if (st != RS_OK)
        goto err_destroy_cm;
    st = derive_limits(vc);
    if (st != RS_OK)
        goto err_free_devices;
    vc->pd = ibv_alloc_pd(vc->dev);
    if (vc->pd == NULL) {
        rs_error("verbs: ibv_alloc_pd failed: %s", strerror(errno));
        st = RS_ERR_TRANSPORT;
        goto err_free_devices;
    }
    st = create_cq(vc);
    if (st != RS_OK)
        goto err_dealloc_pd;
    st = create_srq(vc);
    if (st != RS_OK)
        goto err_release_queues;
    st = create_epoll(vc);
    if (st != RS_OK)
        goto err_release_queues;
    st = rs_verbs_pool_init(vc, &vc->msg_pool, vc->msg_max, 32, "message copies");
    if (st != RS_OK)
        goto err_close_epoll;
    st = rs_verbs_pool_init(vc, &vc->atomic_pool, sizeof(uint64_t), 256, "atomic results");
    if (st != RS_OK)
        goto err_destroy_pool;
    rs_tp_ctx_set_be(ctx, vc);
    return RS_OK;

err_destroy_pool:
    rs_verbs_pool_destroy(&vc->msg_pool);
err_close_epoll:
    close_epoll(vc);
err_release_queues:
    release_queues(vc);
err_dealloc_pd:
    ibv_dealloc_pd(vc->pd);
err_free_devices:
    rdma_free_devices(vc->devices);
err_destroy_cm:
    rdma_destroy_event_channel(vc->cm);
err_free_vc:
    free(vc);
    return st;
}

static void verbs_ctx_close(rs_ctx_t *ctx)
{
    rs_vctx_t *vc = rs_verbs_vctx(ctx);
    if (vc == NULL)
        return;
    if (vc->own_listener != NULL)
        rs_verbs_listener_free(vc->own_listener);
    while (!rs_list_empty(&vc->eps)) {
        /* The generic layer closes every endpoint first; this is a safety net. */
        rs_vep_t *v = rs_list_first(&vc->eps, rs_vep_t, link);
        rs_warn("verbs: endpoint %p still open at context close", (void *)v->ep);
        rs_verbs_ep_close(v->ep);
    }
    while (!rs_list_empty(&vc->deferred)) {
        rs_vdeferred_t *d = rs_list_first(&vc->deferred, rs_vdeferred_t, link);
        rs_list_del(&d->link);
        free(d);
    }
    rs_verbs_work_free_all(vc);
    rs_verbs_pool_destroy(&vc->atomic_pool);
    rs_verbs_pool_destroy(&vc->msg_pool);
    close_epoll(vc);
    release_queues(vc);
    ibv_dealloc_pd(vc->pd);
    rdma_free_devices(vc->devices);
    rdma_destroy_event_channel(vc->cm);
    rs_tp_ctx_set_be(ctx, NULL);
    free(vc);
}

/* ------------------------------------------------------------ progress */

static void handle_recv(rs_vctx_t *vc, const struct ibv_wc *wc, uint32_t *repost, unsigned *nr)
{
    uint32_t idx = (uint32_t)(wc->wr_id & 0xffffffffu);
    if (idx >= vc->n_recv) {
        rs_error("verbs: receive completion with a bad buffer index %u", idx);
        return;
    }
    repost[(*nr)++] = idx;
    rs_vep_t *v = rs_verbs_qp_table_find(vc, wc->qp_num);
    if (v == NULL || v->failed || v->ep == NULL)
        return; /* an endpoint already gone: drop */
    if (wc->status != IBV_WC_SUCCESS) {
        rs_debug("verbs: receive failed on QP %u: %s", wc->qp_num, ibv_wc_status_str(wc->status));
        rs_tp_ep_failed(v->ep, rs_verbs_wc_status(wc->status));
        return;
    }
    if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
        rs_warn("verbs: message without immediate data on QP %u dropped", wc->qp_num);
        return;
    }
    uint32_t imm = ntohl(wc->imm_data);
    if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        rs_tp_notify_recv(v->ep, imm);
    } else if (imm < RS__MSG_TYPE_LIMIT) {
        rs_tp_msg_recv(v->ep, imm, vc->rbuf + (size_t)idx * vc->msg_max, wc->byte_len);
    } else {
        rs_warn("verbs: message of unknown type %u on QP %u dropped", imm, wc->qp_num);
    }
}

static unsigned handle_wcs(rs_vctx_t *vc, const struct ibv_wc *wcs, int n)
{
    uint32_t repost[RS_V_POLL_BATCH];
    unsigned nr = 0;
    for (int i = 0; i < n; i++) {
        if (wcs[i].wr_id & RS_V_RECV_WRID)
            handle_recv(vc, &wcs[i], repost, &nr);
        else
            rs_verbs_handle_send_wc(vc, &wcs[i]);
    }
    if (nr > 0)
        post_recvs(vc, repost, nr);
    return (unsigned)n;
}

static unsigned poll_cq(rs_vctx_t *vc)
{
    unsigned handled = 0;
    if (vc->n_stash > 0) {
        int n = vc->n_stash;
        RS_ASSERT(n <= (int)(sizeof(vc->stash) / sizeof(vc->stash[0])));
        vc->n_stash = 0;
        handled += handle_wcs(vc, vc->stash, n);
    }
    struct ibv_wc wcs[RS_V_POLL_BATCH];
    for (int round = 0; round < RS_V_POLL_ROUNDS; round++) {
        int n = ibv_poll_cq(vc->cq, RS_V_POLL_BATCH, wcs);
        if (n < 0) {
            rs_error("verbs: ibv_poll_cq failed (%d)", n);
            break;
        }
        handled += handle_wcs(vc, wcs, n);
        if (n < RS_V_POLL_BATCH)
            break;
    }
    return handled;
}

/* Consumes completion-channel events so the fd stops being readable. */
static void drain_cq_channel(rs_vctx_t *vc)
{
    struct ibv_cq *cq;
    void *cq_ctx;
    while (ibv_get_cq_event(vc->chan, &cq, &cq_ctx) == 0) {
        if (++vc->cq_events_unacked >= RS_V_ACK_BATCH) {
            ibv_ack_cq_events(vc->cq, vc->cq_events_unacked);
            vc->cq_events_unacked = 0;
        }
    }
}

static unsigned verbs_progress(rs_ctx_t *ctx)
{
    rs_vctx_t *vc = rs_verbs_vctx(ctx);
    vc->armed = 0;
    if (vc->woken) {
        uint64_t v;
        vc->woken = 0;
        if (read(vc->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
            rs_debug("verbs: reading the wake fd failed: %s", strerror(errno));
    }
    unsigned n = rs_verbs_cm_progress(vc);
    drain_cq_channel(vc);
    n += poll_cq(vc);
    rs_verbs_post_backlogs(vc);
    n += rs_verbs_run_deferred(vc);
    rs_verbs_post_tails(vc);
    return n;
}

static int verbs_fd(rs_ctx_t *ctx)
{
    return rs_verbs_vctx(ctx)->epfd;
}

static rs_status_t verbs_arm(rs_ctx_t *ctx)
{
    rs_vctx_t *vc = rs_verbs_vctx(ctx);
    if (vc->n_stash > 0 || !rs_list_empty(&vc->deferred))
        return RS_ERR_BUSY;
    int rc = ibv_req_notify_cq(vc->cq, 0);
    if (rc != 0) {
        rs_error("verbs: ibv_req_notify_cq failed: %s", strerror(rc));
        return RS_ERR_TRANSPORT;
    }
    /* Completions that arrived before the request do not raise an event. */
    int n = ibv_poll_cq(vc->cq, (int)(sizeof(vc->stash) / sizeof(vc->stash[0])), vc->stash);
    if (n > 0) {
        vc->n_stash = n;
        return RS_ERR_BUSY;
    }
    struct pollfd pfd = {.fd = vc->cm->fd, .events = POLLIN};
    if (poll(&pfd, 1, 0) > 0)
        return RS_ERR_BUSY;
    vc->armed = 1;
    return RS_OK;
}

/* Every queue pair has its own receive queue; memory is private and pinned; the CM listens. */
static unsigned verbs_caps(const rs_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

const rs_backend_ops_t rs_verbs_ops = {
    .name = "verbs",
    .ctx_open = verbs_ctx_open,
    .ctx_close = verbs_ctx_close,
    .caps = verbs_caps,
    .progress = verbs_progress,
    .fd = verbs_fd,
    .arm = verbs_arm,
    .mem_reg = rs_verbs_mem_reg,
    .mem_dereg = rs_verbs_mem_dereg,
    .rkey_pack = rs_verbs_rkey_pack,
    .rkey_unpack = rs_verbs_rkey_unpack,
    .rkey_release = rs_verbs_rkey_release,
    .listen = rs_verbs_listen,
    .listener_close = rs_verbs_listener_close,
    .connect = rs_verbs_connect,
    .address = rs_verbs_address,
    .connect_address = rs_verbs_connect_address,
    .ep_fail = rs_verbs_ep_fail,
    .ep_close = rs_verbs_ep_close,
    .put = rs_verbs_put,
    .get = rs_verbs_get,
    .fetch_add = rs_verbs_fetch_add,
    .flush = rs_verbs_flush,
    .msg_send = rs_verbs_msg_send,
};
