/* The broadcast node: context, listener, service thread, message dispatch, timers. */
#include "broadcast/internal.h"
#include "broadcast/source.h"
#include "broadcast/entry.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "broadcast/blocks.h"
#include "broadcast/servecb.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/log.h"

#define RS_BSERVICE_WAIT_MS 5  /* longest sleep of the service thread */
#define RS_BREPLY_SLOTS     16 /* reply slots per slab */
#define RS_BSTAGE_SLOT      (16u << 10)
#define RS_BSTAGE_SLOTS     16

/* ---------------------------------------------------------------- callbacks */

/* Copies an event into the work queue and wakes the service thread. */
static void work_push(rs_bcast_node_t *node, int kind, rs_ep_t *ep, rs_status_t status,
                      const void *data, size_t len)
{
    rs_bc_work_t *w = malloc(sizeof(*w) + len);
    if (w == NULL) {
        rs_error("broadcast: out of memory queueing an event: dropped");
        return;
    }
    w->kind = kind;
    w->ep = ep;
    w->status = status;
    w->len = len;
    if (len > 0)
        memcpy(w->data, data, len);
    pthread_mutex_lock(&node->work_lock);
    __atomic_fetch_add(&node->work_queued, 1, __ATOMIC_RELEASE);
    rs_list_add_tail(&node->work, &w->link);
    pthread_cond_signal(&node->work_cond);
    pthread_mutex_unlock(&node->work_lock);
}

static rs_bc_epinfo_t *epinfo_of(rs_bcast_node_t *node, rs_ep_t *ep);
static void handle_notify(rs_bcast_node_t *node, uint32_t imm);

/*
 * Requests are answered at once when that needs no registration (inline
 * GETs; others when staging slots are free); the rest go to the service thread.
 */
static void on_req(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_bcast_node_t *node = arg;
    rs_bc_req_t q;
    rs_bc_epinfo_t *info;
    if (rs_bc_req_decode(data, len, &q) == RS_OK && (info = epinfo_of(node, ep)) != NULL &&
        (rs_bc_src_serve_fast(node, info, &q) || rs_bc_src_serve_cb(node, info, &q)))
        return;
    work_push(arg, RS_BWORK_REQ, ep, RS_OK, data, len);
}

static void on_destroy(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    work_push(arg, RS_BWORK_DESTROY, ep, RS_OK, data, len);
}

static void on_news(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_bc_news_t news;
    /* Applied at once: it only moves entry state (no transport call, no registration). */
    if (rs_bc_news_decode(data, len, &news) == RS_OK) {
        rs_bc_entry_news(arg, &news);
        return;
    }
    work_push(arg, RS_BWORK_NEWS, ep, RS_OK, data, len); /* malformed: reported there */
}

/* A reply landed: applied here, in the callback (no allocation of registered memory). */
static void on_notify(void *arg, rs_ep_t *ep, uint32_t imm)
{
    (void)ep;
    handle_notify(arg, imm);
}

static void on_ep(void *arg, rs_ep_t *ep, rs_status_t status)
{
    work_push(arg, RS_BWORK_EP, ep, status, NULL, 0);
}

/* ------------------------------------------------------------- work queue */

/* The state of an endpoint, created for endpoints peers opened to us. */
/*
 * The state of an endpoint: a peer's when we connected it, else created on
 * first sight for endpoints peers opened to us. Found in our own tables
 * (node->lock), not through the endpoint's user pointer, because callbacks
 * and the service thread both ask.
 */
static rs_bc_epinfo_t *epinfo_of(rs_bcast_node_t *node, rs_ep_t *ep)
{
    rs_list_t *pos, *tmp;
    rs_bc_epinfo_t *info = NULL;
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->peers)
    {
        rs_bc_peer_t *p = RS_CONTAINER_OF(pos, rs_bc_peer_t, link);
        if (p->ep == ep) {
            info = &p->info;
            goto out;
        }
    }
    rs_list_for_each_safe(pos, tmp, &node->epinfos)
    {
        rs_bc_epinfo_t *i = RS_CONTAINER_OF(pos, rs_bc_epinfo_t, link);
        if (i->ep == ep) {
            info = i;
            goto out;
        }
    }
    info = calloc(1, sizeof(*info));
    if (info == NULL) {
        rs_error("broadcast: out of memory tracking an endpoint");
        goto out;
    }
    info->ep = ep;
    pthread_mutex_init(&info->lock, NULL);
    rs_list_init(&info->rkeys);
    rs_list_add_tail(&node->epinfos, &info->link);
out:
    pthread_mutex_unlock(&node->lock);
    return info;
}

/* Fails every request awaiting a reply from peer (or every expired one when peer is NULL). */
static void pending_fail(rs_bcast_node_t *node, rs_bc_peer_t *peer, uint64_t now, rs_status_t st)
{
    rs_list_t failed, *pos, *tmp;
    rs_list_init(&failed);
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->pending)
    {
        rs_bc_pending_t *p = RS_CONTAINER_OF(pos, rs_bc_pending_t, link);
        if (peer != NULL ? p->peer == peer : now >= p->deadline_ns) {
            rs_list_del(&p->link);
            rs_list_add_tail(&failed, &p->link);
        }
    }
    pthread_mutex_unlock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &failed)
    {
        rs_bc_pending_t *p = RS_CONTAINER_OF(pos, rs_bc_pending_t, link);
        rs_list_del(&p->link);
        rs_bc_entry_reply(node, p, st);
    }
}

static void handle_req(rs_bcast_node_t *node, rs_bc_work_t *w)
{
    rs_bc_req_t q;
    rs_status_t st = rs_bc_req_decode(w->data, w->len, &q);
    if (st != RS_OK) {
        rs_warn("broadcast: dropped a malformed request of %zu bytes: %s", w->len, rs_strerror(st));
        return;
    }
    rs_bc_epinfo_t *info = epinfo_of(node, w->ep);
    if (info != NULL)
        rs_bc_src_serve(node, info, &q);
}

static void handle_notify(rs_bcast_node_t *node, uint32_t imm)
{
    rs_list_t *pos, *tmp;
    rs_bc_pending_t *found = NULL;
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->pending)
    {
        rs_bc_pending_t *p = RS_CONTAINER_OF(pos, rs_bc_pending_t, link);
        if (p->req_id == imm) {
            rs_list_del(&p->link);
            found = p;
            break;
        }
    }
    pthread_mutex_unlock(&node->lock);
    if (found == NULL) {
        rs_warn("broadcast: a reply for unknown request %u (late after a timeout?)", imm);
        return;
    }
    rs_bc_entry_reply(node, found, RS_OK);
}

static void handle_ep(rs_bcast_node_t *node, rs_bc_work_t *w)
{
    if (w->status == RS_OK) {
        epinfo_of(node, w->ep); /* a peer connected to us */
        return;
    }
    rs_bc_epinfo_t *info = epinfo_of(node, w->ep);
    if (info == NULL || __atomic_exchange_n(&info->dead, 1, __ATOMIC_ACQ_REL))
        return; /* told already */
    rs_bc_peer_t *peer = info->peer;
    if (peer == NULL) {
        rs_bc_src_conn_dead(node, info); /* a reader of ours is gone */
        return;
    }
    char name[300];
    rs_bc_addr_format(&peer->addr.a, name, sizeof(name));
    rs_info("broadcast: peer %s is gone: %s", name, rs_strerror(w->status));
    pthread_mutex_lock(&node->lock);
    peer->state = RS_BPEER_DEAD;
    peer->err = w->status;
    pthread_cond_broadcast(&node->cond);
    pthread_mutex_unlock(&node->lock);
    pending_fail(node, peer, 0, RS_ERR_UNREACHABLE);
    rs_bc_entry_peer_dead(node, peer);
}

static void handle_destroy(rs_bcast_node_t *node, rs_bc_work_t *w)
{
    uint64_t node_id, seq;
    rs_status_t st = rs_bc_destroy_decode(w->data, w->len, &node_id, &seq);
    if (st != RS_OK) {
        rs_warn("broadcast: dropped a malformed destroy notice: %s", rs_strerror(st));
        return;
    }
    rs_bc_entry_destroyed(node, node_id, seq);
}

static void handle_news(rs_bcast_node_t *node, rs_bc_work_t *w)
{
    rs_bc_news_t news;
    rs_status_t st = rs_bc_news_decode(w->data, w->len, &news);
    if (st != RS_OK) {
        rs_warn("broadcast: dropped malformed news: %s", rs_strerror(st));
        return;
    }
    rs_bc_entry_news(node, &news);
}

/* Handles every queued event; returns how many. */
static unsigned work_drain(rs_bcast_node_t *node)
{
    rs_list_t batch, *pos, *tmp;
    unsigned n = 0;
    rs_list_init(&batch);
    pthread_mutex_lock(&node->work_lock);
    if (!rs_list_empty(&node->work)) {
        /* Move the whole queue: callbacks of the handlers below may append. */
        batch.next = node->work.next;
        batch.prev = node->work.prev;
        batch.next->prev = &batch;
        batch.prev->next = &batch;
        rs_list_init(&node->work);
    }
    pthread_mutex_unlock(&node->work_lock);
    rs_list_for_each_safe(pos, tmp, &batch)
    {
        rs_bc_work_t *w = RS_CONTAINER_OF(pos, rs_bc_work_t, link);
        rs_list_del(&w->link);
        switch (w->kind) {
            case RS_BWORK_REQ:
                handle_req(node, w);
                break;
            case RS_BWORK_DESTROY:
                handle_destroy(node, w);
                break;
            case RS_BWORK_EP:
                handle_ep(node, w);
                break;
            case RS_BWORK_NEWS:
                handle_news(node, w);
                break;
        }
        free(w);
        __atomic_fetch_sub(&node->work_queued, 1, __ATOMIC_RELEASE);
        n++;
    }
    return n;
}

/*
 * The service thread: the transport's progress thread runs the callbacks,
 * which queue events; this thread handles them (it may register memory and
 * post, which a callback should not) and runs the timers.
 */
static void *service_main(void *arg)
{
    rs_bcast_node_t *node = arg;
    uint64_t next_timer = 0;
    while (!__atomic_load_n(&node->stop, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&node->work_lock);
        if (rs_list_empty(&node->work)) {
            uint64_t until = rs_now_ns() + RS_MS_TO_NS(RS_BSERVICE_WAIT_MS);
            struct timespec ts = rs_ns_to_timespec(until);
            pthread_cond_timedwait(&node->work_cond, &node->work_lock, &ts);
        }
        pthread_mutex_unlock(&node->work_lock);
        work_drain(node);
        uint64_t now = rs_now_ns();
        if (now >= next_timer) {
            pending_fail(node, NULL, now, RS_ERR_TIMEOUT);
            rs_bc_src_tick(node, now);
            rs_bc_entry_reap(node, now, 0);
            rs_bc_src_reap(node, now, 0);
            rs_bc_regions_tick(node, now);
            next_timer = now + RS_MS_TO_NS(RS_BSERVICE_WAIT_MS);
        }
    }
    return NULL;
}

/* ----------------------------------------------------------- life cycle */

static rs_status_t node_self_address(rs_bcast_node_t *node)
{
    rs_bc_addr_t a;
    memset(&a, 0, sizeof(a));
    a.kind = (uint8_t)node->cfg.addr_kind;
    if (node->cfg.addr_kind == RS_BCAST_ADDR_HOSTPORT) {
        a.port = rs_listener_port(node->listener);
        a.bytes.p = (const uint8_t *)node->cfg.host;
        a.bytes.len = (uint32_t)strlen(node->cfg.host);
        return rs_bc_addr_copy(&node->self, &a);
    }
    uint8_t *blob = malloc(RS_ADDR_BLOB_MAX);
    size_t len = 0;
    if (blob == NULL)
        return RS_ERR_NOMEM;
    rs_status_t st = rs_ctx_address(node->ctx, blob, RS_ADDR_BLOB_MAX, &len);
    if (st == RS_OK) {
        a.bytes.p = blob;
        a.bytes.len = (uint32_t)len;
        st = rs_bc_addr_copy(&node->self, &a);
    }
    free(blob);
    return st;
}

static void node_read_faults(rs_bcast_node_t *node)
{
#ifdef RS_FAULT_INJECTION
    static const char *const faults[] = {"none", "corrupt", "slow", NULL};
    int fault = 0;
    if (rs_env_choice("RSHUFFLE_BCAST_FAULT", faults, &fault) == RS_OK && fault == 1) {
        rs_warn("broadcast: fault injection: this node serves corrupted copies");
        node->fault_corrupt = 1;
    }
    if (fault == 2) {
        rs_warn("broadcast: fault injection: this node posts its reads slowly");
        node->fault_slow = 1;
    }
#else
    (void)node;
#endif
}

rs_status_t rs_bcast_node_create(const rs_config_t *tcfg, const rs_bcast_config_t *bcfg,
                                 rs_bcast_node_t **node_p)
{
    rs_config_t tc;
    rs_bcast_config_t bc;
    rs_status_t st;

    if (node_p == NULL)
        return RS_ERR_INVALID;
    st = tcfg != NULL ? rs_config_validate(tcfg) : rs_config_init(&tc);
    if (st != RS_OK)
        return st;
    if (tcfg != NULL)
        tc = *tcfg;
    st = bcfg != NULL ? rs_bcast_config_validate(bcfg) : rs_bcast_config_init(&bc);
    if (st != RS_OK)
        return st;
    if (bcfg != NULL)
        bc = *bcfg;
    tc.progress_thread = 1; /* targets of emulated one-sided ops must progress */

    rs_bcast_node_t *node = calloc(1, sizeof(*node));
    if (node == NULL) {
        rs_error("out of memory allocating a broadcast node");
        return RS_ERR_NOMEM;
    }
    node->cfg = bc;
    node->msg_max = tc.msg_max;
    node->peer_timeout_ms = tc.peer_timeout_ms;
    node->node_id = rs_bc_random_seed();
    node->next_seq = 1;
    node->next_req_id = 1;
    pthread_mutex_init(&node->lock, NULL);
    pthread_mutex_init(&node->work_lock, NULL);
    rs_cond_init_monotonic(&node->cond);
    rs_cond_init_monotonic(&node->work_cond);
    rs_list_init(&node->entries);
    rs_list_init(&node->retired);
    rs_list_init(&node->sources);
    rs_list_init(&node->retired_srcs);
    rs_list_init(&node->peers);
    rs_list_init(&node->epinfos);
    rs_list_init(&node->pending);
    rs_list_init(&node->lost_slots);
    rs_list_init(&node->regions);
    rs_list_init(&node->doomed);
    rs_list_init(&node->work);
    node_read_faults(node);

    st = rs_ctx_create(&tc, &node->ctx);
    if (st != RS_OK)
        goto err_free_node;
    rs_bc_slots_init(&node->replies, node->ctx, RS_MEM_REMOTE_WRITE,
                     (size_t)bc.inline_max + RS_BCAST_DATA_ALIGN + RS_BSTAGE_SLOT, RS_BREPLY_SLOTS);
    rs_bc_slots_init(&node->staging, node->ctx, RS_MEM_LOCAL, RS_BSTAGE_SLOT, RS_BSTAGE_SLOTS);
    rs_set_msg_handler(node->ctx, RS_BMSG_REQ, on_req, node);
    rs_set_msg_handler(node->ctx, RS_BMSG_DESTROY, on_destroy, node);
    rs_set_msg_handler(node->ctx, RS_BMSG_NEWS, on_news, node);
    rs_set_notify_handler(node->ctx, on_notify, node);
    rs_set_ep_handler(node->ctx, on_ep, node);
    /* A blob names the listener's address: on every interface, so a verbs
     * blob carries the device's own address, not the loopback default. */
    const char *listen_host = bc.addr_kind == RS_BCAST_ADDR_BLOB ? "0.0.0.0" : bc.host;
    st = rs_listen(node->ctx, listen_host, bc.port, &node->listener);
    if (st != RS_OK) {
        rs_error("broadcast: cannot listen on %s:%u: %s", listen_host, bc.port, rs_strerror(st));
        goto err_destroy_ctx;
    }
    st = node_self_address(node);
    if (st != RS_OK)
        goto err_destroy_ctx;
    if (pthread_create(&node->thread, NULL, service_main, node) != 0) {
        rs_error("broadcast: cannot start the service thread");
        st = RS_ERR_NOMEM;
        goto err_release_self;
    }
    rs_debug("broadcast node %016llx listening on %s:%u", (unsigned long long)node->node_id,
             listen_host, rs_listener_port(node->listener));
    *node_p = node;
    return RS_OK;

err_release_self:
    rs_bc_addr_release(&node->self);
err_destroy_ctx:
    rs_ctx_destroy(node->ctx);
    rs_bc_slots_fini(&node->staging);
    rs_bc_slots_fini(&node->replies);
err_free_node:
    pthread_cond_destroy(&node->work_cond);
    pthread_cond_destroy(&node->cond);
    pthread_mutex_destroy(&node->work_lock);
    pthread_mutex_destroy(&node->lock);
    free(node);
    return st;
}

void rs_bcast_node_destroy(rs_bcast_node_t *node)
{
    rs_list_t *pos, *tmp;
    if (node == NULL)
        return;
    /* Objects still published: tell their holders while the service thread runs. */
    for (;;) {
        pthread_mutex_lock(&node->lock);
        rs_bcast_t *src =
            rs_list_empty(&node->sources) ? NULL : rs_list_first(&node->sources, rs_bcast_t, link);
        pthread_mutex_unlock(&node->lock);
        if (src == NULL)
            break;
        rs_bcast_destroy(src);
    }
    __atomic_store_n(&node->stop, 1, __ATOMIC_RELEASE);
    pthread_join(node->thread, NULL);

    /* Give the destroy notices a moment to leave (bounded). */
    uint64_t end = rs_now_ns() + RS_MS_TO_NS(100);
    while (rs_now_ns() < end && __atomic_load_n(&node->sends, __ATOMIC_ACQUIRE) > 0)
        usleep(1000);
    /*
     * The context cancels what is still in flight (its callbacks find our
     * structures alive) and frees every endpoint, key and region; only our own
     * structures are left to free.
     */
    rs_ctx_destroy(node->ctx);
    pending_fail(node, NULL, UINT64_MAX, RS_ERR_CANCELED);
    rs_bc_entry_reap(node, UINT64_MAX, 1);
    rs_bc_src_reap(node, UINT64_MAX, 1);
    rs_bc_peers_fini(node);
    rs_bc_regions_fini(node);
    rs_bc_slots_fini(&node->staging);
    rs_bc_slots_fini(&node->replies);
    rs_list_for_each_safe(pos, tmp, &node->work)
    {
        rs_list_del(pos);
        free(RS_CONTAINER_OF(pos, rs_bc_work_t, link));
    }
    rs_bc_addr_release(&node->self);
    pthread_cond_destroy(&node->work_cond);
    pthread_cond_destroy(&node->cond);
    pthread_mutex_destroy(&node->work_lock);
    pthread_mutex_destroy(&node->lock);
    free(node);
}

uint16_t rs_bcast_node_port(const rs_bcast_node_t *node)
{
    if (node == NULL)
        return 0;
    return node->cfg.addr_kind == RS_BCAST_ADDR_HOSTPORT ? rs_listener_port(node->listener) : 0;
}

void rs_bcast_node_stats(rs_bcast_node_t *node, rs_bcast_stats_t *stats)
{
    if (node == NULL || stats == NULL)
        return;
    const uint64_t *src = (const uint64_t *)&node->stats;
    uint64_t *dst = (uint64_t *)stats;
    for (size_t i = 0; i < sizeof(*stats) / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}
