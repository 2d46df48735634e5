/* The worker's lifecycle and thread (its configuration: worker/config.c). */
#include "worker/internal.h"
#include "worker/config.h"
#include "worker/limits.h"
#include "worker/watch.h"

#include "common/clock.h"
#include "common/log.h"
#include "shuffle/local.h"
#include "shuffle/name.h"

#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define W_WAIT_MS       10      /* housekeeping (commit deadlines, spill) at least this often */
#define W_SPIN_NS       50000   /* keep polling this long after the last event before sleeping */
#define W_HOUSE_NS      1000000 /* housekeeping at most this often while busy */
#define W_WATCH_NS      2000000000ull /* the listener watch this often */
#define W_WATCH_STRIKES 4             /* checks in a row with connections nobody accepts */

/*
 * The transport's own TCP listeners (UCX's), as found once the worker
 * listens: one that no longer listens, or whose connections stay
 * unaccepted for W_WATCH_STRIKES checks, has stopped for good (an accept of
 * UCX's found no descriptor): no new peer can reach this worker again, and
 * a worker that looks alive but refuses everyone is worse than none. It
 * exits with status 3, for its supervisor to restart it.
 */
static atomic_int listening_workers; /* the watch runs only in a process with one */

static void listen_watch(rs_worker_t *w, uint64_t now)
{
    /* Published by rs_worker_listen on the caller's thread while this one runs. */
    const rs_listener_t *l = __atomic_load_n(&w->listener, __ATOMIC_ACQUIRE);
    if (l == NULL || w->n_watched <= 0 || now < w->next_watch ||
        atomic_load(&listening_workers) != 1)
        return;
    w->next_watch = now + W_WATCH_NS;
    rs_wk_listening_t v[RS_WK_WATCH_PORTS];
    int n = rs_wk_listening(rs_listener_port(l), v);
    if (n < 0 || n == RS_WK_WATCH_PORTS)
        return; /* cannot be told (or more listeners than scanned: ours may be past them) */
    uint32_t waiting = 0;
    uint16_t port = 0;
    for (int i = 0; i < w->n_watched; i++) {
        int found = 0;
        for (int j = 0; j < n && !found; j++) {
            found = v[j].port == w->watched[i];
            if (found && v[j].waiting > 0)
                waiting = v[j].waiting, port = v[j].port;
        }
        if (!found) {
            rs_error("worker: the transport's listener on port %u is gone (descriptors ran "
                     "out?): no new peer can reach this worker; exiting with status 3",
                     w->watched[i]);
            _exit(3);
        }
    }
    if (waiting == 0) {
        w->watch_strikes = 0;
        return;
    }
    if (++w->watch_strikes < W_WATCH_STRIKES)
        return;
    rs_error("worker: the transport's listener on port %u has accepted nothing for %u s (%u "
             "connections waiting; descriptors ran out?): no new peer can reach this worker; "
             "exiting with status 3",
             port, (unsigned)(W_WATCH_STRIKES * (W_WATCH_NS / 1000000000ull)), waiting);
    _exit(3);
}

static void housekeeping(rs_worker_t *w)
{
    for (size_t i = 0; i < w->n_dead; i++)
        rs_ep_close(w->dead[i]);
    w->n_dead = 0;
    uint64_t now = rs_now_coarse_ns();
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->conns)
    {
        wconn_t *c = RS_CONTAINER_OF(pos, wconn_t, link);
        if (c->commit_pending)
            rs_wk_commit_check(w, c, now >= c->commit_deadline);
    }
    if (rs_wk_store_held(&w->st) > w->st.high_water)
        rs_wk_store_spill(&w->st, 0);
    rs_wk_stats_publish(w);
    listen_watch(w, now);
}

/*
 * Polls while events keep coming (a notification per batch: sleeping on the
 * fd between them would cost a wake-up each), yielding the CPU between empty
 * polls (measured: +30 % push rate with pusher, engine and worker on two
 * cores), and sleeps on the fd when idle.
 */
static void *worker_main(void *arg)
{
    rs_worker_t *w = arg;
    uint64_t last_event = rs_now_ns();
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        uint64_t now = rs_now_ns();
        if (now - last_event < W_SPIN_NS) {
            if (rs_progress(w->ctx) > 0)
                last_event = now;
            else
                sched_yield(); /* a spinning worker must not starve the threads feeding it */
        } else if (rs_wait(w->ctx, W_WAIT_MS) == RS_OK) {
            last_event = rs_now_ns();
        }
        uint64_t coarse = rs_now_coarse_ns();
        if (coarse >= w->next_housekeeping) {
            w->next_housekeeping = coarse + W_HOUSE_NS;
            housekeeping(w);
        }
    }
    return NULL;
}

rs_status_t rs_worker_create(const rs_config_t *tcfg, const rs_worker_config_t *wcfg,
                             rs_worker_t **worker_p)
{
    if (worker_p == NULL)
        return RS_ERR_INVALID;
    rs_worker_config_t cfg;
    if (wcfg != NULL) {
        cfg = *wcfg;
    } else {
        rs_worker_config_defaults(&cfg);
        rs_status_t s = rs_worker_config_from_env(&cfg);
        if (s != RS_OK)
            return s;
    }
    if (rs_wk_config_check(&cfg) != RS_OK)
        return RS_ERR_CONFIG;
    if (!cfg.sink && rs_wk_check_spill_dir(cfg.spill_dir) != RS_OK)
        return RS_ERR_CONFIG;
    rs_worker_t *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return RS_ERR_NOMEM;
    rs_list_init(&w->conns);
    pthread_mutex_init(&w->stats_lock, NULL);
    /* The listeners the context opens (UCX's own TCP ones) are watched once it listens. */
    rs_wk_listening_t before[RS_WK_WATCH_PORTS], after[RS_WK_WATCH_PORTS];
    int n_before = rs_wk_listening(0, before);
    rs_status_t s = rs_ctx_create(tcfg, &w->ctx);
    if (s != RS_OK)
        goto err_free_w;
    int n_after = n_before >= 0 ? rs_wk_listening(0, after) : -1;
    for (int i = 0; i < n_after && w->n_watched < RS_WK_WATCH_MINE; i++) {
        int old = 0;
        for (int j = 0; j < n_before && !old; j++)
            old = before[j].port == after[i].port;
        if (!old && (rs_ctx_caps(w->ctx) & RS_CAP_OWN_LISTENERS))
            w->watched[w->n_watched++] = after[i].port;
    }
    w->msg_buf = malloc(rs_ctx_config(w->ctx)->msg_max);
    if (w->msg_buf == NULL) {
        s = RS_ERR_NOMEM;
        goto err_destroy_ctx;
    }
    /* Before the arena: /dev/shm must hold it too where the backend allocates it there. */
    s = rs_wk_check_mem(cfg.mem_limit, "/proc/meminfo",
                        (rs_ctx_caps(w->ctx) & RS_CAP_MEM_SHM) ? "/dev/shm" : NULL);
    if (s != RS_OK)
        goto err_destroy_ctx;
    s = rs_mem_alloc(w->ctx, cfg.mem_limit, RS_MEM_REMOTE_READ | RS_MEM_REMOTE_WRITE, &w->arena_mr);
    if (s != RS_OK)
        goto err_destroy_ctx;
    s = rs_mr_pack_rkey(w->arena_mr, w->rkey, sizeof(w->rkey), &w->rkey_len);
    if (s != RS_OK)
        goto err_free_arena;
    s = rs_wk_store_init(&w->st, &cfg, rs_mr_addr(w->arena_mr), rs_mr_len(w->arena_mr));
    if (s != RS_OK)
        goto err_free_arena;
    s = rs_wk_handlers(w);
    if (s != RS_OK)
        goto err_cleanup_store;
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        rs_error("worker: cannot start its thread");
        s = RS_ERR_NOMEM;
        goto err_cleanup_store;
    }
    w->thread_started = 1;
    *worker_p = w;
    return RS_OK;

err_cleanup_store:
    rs_wk_store_cleanup(&w->st);
err_free_arena:
    rs_mem_free(w->arena_mr);
err_destroy_ctx:
    free(w->msg_buf);
    rs_ctx_destroy(w->ctx);
err_free_w:
    pthread_mutex_destroy(&w->stats_lock);
    free(w);
    return s;
}

rs_status_t rs_worker_listen(rs_worker_t *w, const char *host, uint16_t port)
{
    if (w == NULL)
        return RS_ERR_INVALID;
    if (w->listener != NULL)
        return RS_ERR_STATE;
    rs_wk_raise_nofile();
    rs_wk_ignore_sigpipe();
    rs_listener_t *l;
    rs_status_t s = rs_listen(w->ctx, host, port, &l);
    if (s != RS_OK)
        return s;
    __atomic_store_n(&w->listener, l, __ATOMIC_RELEASE); /* the worker thread's watch reads it */
    /* Readers of this process then read its partitions in place (not an error if it fails). */
    w->counted = 1;
    atomic_fetch_add(&listening_workers, 1);
    s = rs_sproto_local_register(host, rs_listener_port(w->listener), w->rkey, w->rkey_len,
                                 w->st.arena, w->st.arena_len, &w->local);
    if (s != RS_OK)
        rs_warn("worker: local readers will copy (arena not registered: %s)", rs_strerror(s));
    return RS_OK;
}

rs_status_t rs_worker_name(rs_worker_t *w, char *buf, size_t cap)
{
    if (w == NULL || buf == NULL)
        return RS_ERR_INVALID;
    if (w->listener == NULL)
        return RS_ERR_STATE;
    uint8_t blob[RS_ADDR_BLOB_MAX];
    size_t len;
    rs_status_t s = rs_ctx_address(w->ctx, blob, sizeof(blob), &len);
    if (s != RS_OK)
        return s;
    return rs_sproto_name_encode(blob, len, buf, cap);
}

uint16_t rs_worker_port(const rs_worker_t *w)
{
    if (w == NULL)
        return 0;
    return w->listener != NULL ? rs_listener_port(w->listener) : 0;
}

void rs_worker_stats(rs_worker_t *w, rs_worker_stats_t *stats)
{
    if (w == NULL || stats == NULL)
        return;
    pthread_mutex_lock(&w->stats_lock);
    *stats = w->stats_copy;
    pthread_mutex_unlock(&w->stats_lock);
}

void rs_worker_drain(rs_worker_t *w)
{
    if (w != NULL)
        __atomic_store_n(&w->draining, 1, __ATOMIC_RELAXED); /* read by the worker thread */
}

int rs_worker_draining(const rs_worker_t *w)
{
    return w != NULL && __atomic_load_n(&w->draining, __ATOMIC_RELAXED);
}

void rs_worker_destroy(rs_worker_t *w)
{
    if (w == NULL)
        return;
    rs_sproto_local_unregister(w->local);
    if (w->counted)
        atomic_fetch_sub(&listening_workers, 1);
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
    if (w->thread_started)
        pthread_join(w->thread, NULL);
    if (w->listener != NULL)
        rs_listener_destroy(w->listener);
    rs_set_ep_handler(w->ctx, NULL, NULL);
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->conns)
    {
        wconn_t *c = RS_CONTAINER_OF(pos, wconn_t, link);
        rs_ep_t *ep = c->ep;
        rs_wk_conn_free(w, c);
        rs_ep_set_user(ep, NULL);
        rs_ep_close(ep);
    }
    for (size_t i = 0; i < w->n_dead; i++)
        rs_ep_close(w->dead[i]);
    free(w->dead);
    rs_wk_store_cleanup(&w->st);
    rs_mem_free(w->arena_mr);
    rs_ctx_destroy(w->ctx);
    free(w->msg_buf);
    pthread_mutex_destroy(&w->stats_lock);
    free(w);
}
