/*
 * Push lanes: a transport context, the registered pool with its engine
 * thread, and the connections to the workers, lent by the client to one
 * pusher at a time (include/rshuffle/client.h). The engine's hooks run the
 * current pusher's engine; between tasks they only keep the context
 * progressing.
 */
#include "pusher/internal.h"

#include "pusher/config.h"

#include "common/log.h"
#include "shuffle/name.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

static rs_status_t lane_take(void *arg, rs_pushq_t *q, rs_pbuf_int_t *b)
{
    rs_push_lane_t *l = arg;
    rs_pusher_t *p = atomic_load_explicit(&l->p, memory_order_relaxed);
    if (p == NULL) { /* cannot happen: a lane is given back with nothing queued */
        rs_pushq_release(q, &b->pub);
        return RS_OK;
    }
    return rs_push_engine_take(p, q, b);
}

static unsigned lane_poll(void *arg)
{
    rs_push_lane_t *l = arg;
    rs_pusher_t *p = atomic_load_explicit(&l->p, memory_order_relaxed);
    return p != NULL ? rs_push_engine_poll(p) : rs_progress(l->ctx);
}

/* A timed retry (backpressure) is caught by the engine's bounded sleep. */
static int lane_arm(void *arg)
{
    rs_push_lane_t *l = arg;
    return rs_ctx_arm(l->ctx) == RS_OK ? 0 : 1;
}

static void lane_destroy(rs_lane_t *base)
{
    rs_push_lane_t *l = (rs_push_lane_t *)base;
    /* Order: no engine thread, then endpoints (their canceled writes release buffers into the
     * pool), then the pool's registered slab, then the context. */
    if (l->q != NULL)
        rs_push_q_stop(l->q);
    for (uint32_t i = 0; i < l->n_conns; i++)
        rs_push_conn_drop(l->conns[i], 0);
    rs_pushq_destroy(l->q);
    if (l->ctx != NULL)
        rs_ctx_destroy(l->ctx);
    for (uint32_t i = 0; i < l->n_conns; i++) {
        free(l->conns[i]->addr);
        free(l->conns[i]);
    }
    free(l->conns);
    free(l->hint);
    free(l->arrays);
    free(l);
}

static int lane_match(const rs_lane_t *base, const void *key)
{
    const rs_push_lane_t *l = (const rs_push_lane_t *)base;
    return memcmp(&l->key, key, sizeof(l->key)) == 0;
}

static rs_status_t lane_make(const rs_push_lane_key_t *key, rs_push_lane_t **l_p)
{
    rs_push_lane_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return RS_ERR_NOMEM;
    l->key = *key;
    rs_status_t s = rs_ctx_create(&key->tcfg, &l->ctx);
    if (s == RS_OK)
        s = rs_push_install_handlers(l);
    if (s == RS_OK) {
        rs_pushq_config_t qc = {.buf_len = key->buf_len,
                                .slab_bytes = key->pool_bytes,
                                .queue_depth = key->queue_depth,
                                .wait_ms = 30000,
                                .ctx = l->ctx};
        rs_pushq_hooks_t hooks = {.take = lane_take,
                                  .poll = lane_poll,
                                  .arm = lane_arm,
                                  .fd = rs_ctx_fd(l->ctx),
                                  .arg = l};
        s = rs_push_q_create(&qc, &hooks, &l->q);
    }
    if (s != RS_OK) {
        lane_destroy(&l->base);
        return s;
    }
    *l_p = l;
    return RS_OK;
}

rs_status_t rs_push_lane_key_make(const rs_pusher_config_t *cfg, uint32_t n_partitions,
                                  rs_pusher_config_t *cfg_p, rs_push_lane_key_t *key_p)
{
    rs_pusher_config_t c;
    rs_push_lane_key_t key;
    rs_status_t s;
    if (cfg != NULL) {
        c = *cfg;
    } else {
        rs_pusher_config_defaults(&c);
        if ((s = rs_pusher_config_from_env(&c)) != RS_OK)
            return s;
    }
    if ((s = rs_push_config_check(&c)) != RS_OK)
        return s;
    c.pool_bytes = rs_push_pool_for(&c, n_partitions);
    memset(&key, 0, sizeof(key)); /* compared bytewise: padding too */
    if (c.transport != NULL)
        key.tcfg = *c.transport;
    else if ((s = rs_config_init(&key.tcfg)) != RS_OK)
        return s;
    c.transport = NULL; /* read only here */
    key.buf_len = c.buf_len;
    key.pool_bytes = c.pool_bytes;
    key.queue_depth = c.queue_depth ? c.queue_depth : 16;
    *cfg_p = c;
    *key_p = key;
    return RS_OK;
}

rs_status_t rs_push_lane_get(rs_client_t *c, const rs_push_lane_key_t *key, rs_push_lane_t **l_p)
{
    rs_lane_t *base;
    if (rs_lane_take(c, RS_LANE_PUSH, lane_match, key, &base) == RS_OK) {
        *l_p = (rs_push_lane_t *)base;
        return RS_OK;
    }
    rs_push_lane_t *l;
    rs_status_t s = lane_make(key, &l);
    if (s != RS_OK)
        return s;
    rs_lane_add(c, &l->base, RS_LANE_PUSH, lane_destroy);
    *l_p = l;
    return RS_OK;
}

rs_status_t rs_push_lane_conn(rs_push_lane_t *l, const char *addr, rs_push_conn_t **conn_p)
{
    rs_push_conn_t *c = NULL;
    for (uint32_t i = 0; i < l->n_conns && c == NULL; i++)
        if (strcmp(l->conns[i]->addr, addr) == 0)
            c = l->conns[i];
    if (c == NULL) {
        if (l->n_conns == l->cap_conns) {
            uint32_t cap = l->cap_conns ? 2 * l->cap_conns : 8;
            rs_push_conn_t **n = realloc(l->conns, cap * sizeof(*n));
            if (n == NULL)
                return RS_ERR_NOMEM;
            l->conns = n;
            l->cap_conns = cap;
        }
        c = calloc(1, sizeof(*c));
        if (c == NULL || (c->addr = strdup(addr)) == NULL) {
            free(c);
            return RS_ERR_NOMEM;
        }
        c->lane = l;
        l->conns[l->n_conns++] = c;
    }
    if (c->ep != NULL && rs_ep_status(c->ep) != RS_OK)
        rs_push_lane_conn_close(c); /* the worker went away since: connect again */
    if (c->ep == NULL) {
        c->made = rs_lane_loss_epoch(&l->base); /* a loss noted from now on concerns this one */
        rs_status_t s = rs_sproto_name_connect(l->ctx, addr, &c->ep);
        if (s != RS_OK) {
            c->ep = NULL;
            return s;
        }
    }
    *conn_p = c;
    return RS_OK;
}

typedef struct loss_walk {
    rs_push_lane_t *l;
    int renew;
} loss_walk_t;

/* A loss another lane (or this one) noted: a connection made before it goes. */
static void loss_apply(void *arg, const char *addr, uint64_t epoch)
{
    loss_walk_t *lw = arg;
    for (uint32_t i = 0; i < lw->l->n_conns; i++) {
        rs_push_conn_t *c = lw->l->conns[i];
        if (c->ep == NULL || c->made >= epoch || (addr != NULL && strcmp(c->addr, addr) != 0))
            continue;
        rs_push_conn_drop(c, 0);
        lw->renew = 1; /* it may have been sending into this lane's queue when it died */
    }
}

void rs_push_lane_check(rs_push_lane_t *l)
{
    loss_walk_t lw = {.l = l, .renew = 0};
    for (uint32_t i = 0; i < l->n_conns; i++) {
        rs_push_conn_t *c = l->conns[i];
        if (c->ep != NULL && rs_ep_status(c->ep) != RS_OK)
            rs_push_conn_drop(c, 1);
        lw.renew |= c->exited; /* also one an earlier task closed */
    }
    /* The client's losses this lane has not seen: one atomic load when there are none. */
    l->loss_seen = rs_lane_loss_walk(&l->base, l->loss_seen, loss_apply, &lw);
    if (!lw.renew)
        return;
    /*
     * A worker of this host exited: killed mid-send, it may have left the
     * context's shared-memory receive queue blocked for every worker
     * (docs/shuffle.md, "A killed process and shared memory"). The lane
     * renews it once, for every later task: all its connections go.
     */
    int shared = (rs_ctx_caps(l->ctx) & RS_CAP_RENEW) != 0; /* else each has its own queue */
    for (uint32_t i = 0; i < l->n_conns; i++) {
        if (shared)
            rs_push_conn_drop(l->conns[i], 0);
        l->conns[i]->exited = 0;
    }
    if (!shared)
        return; /* the dead one's connection went above; the others' queues are their own */
    rs_status_t s = rs_ctx_renew(l->ctx);
    if (s != RS_OK)
        rs_warn("pusher: cannot renew a lane's receive queue: %s", rs_strerror(s));
    else
        rs_info("pusher: a worker of this host exited: the lane's receive queue was renewed");
}

void rs_push_lane_hold(rs_push_lane_t *l)
{
    rs_push_q_park(l->q);
    while (rs_push_q_hold(l->q) != 0)
        sched_yield(); /* a round takes microseconds */
}

void rs_push_lane_unhold(rs_push_lane_t *l)
{
    rs_push_q_unhold(l->q);
}
