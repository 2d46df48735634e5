/*
 * The process-level client (include/rshuffle/client.h): a cache of idle
 * lanes, lent to one task at a time, and the process-wide default client.
 * The client lives until it was destroyed and every lent lane came back.
 */
#include "shuffle/client.h"
#include "shuffle/config.h"
#include "shuffle/loss.h"

#include "common/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct rs_client {
    rs_client_config_t cfg;
    pthread_mutex_t lock;
    atomic_int closed;
    uint32_t busy;  /* lanes lent */
    rs_list_t idle; /* most recently given back first */
    uint32_t n_idle;
    rs_client_stats_t stats;
    rs_loss_set_t losses; /* workers its lanes saw exit (shuffle/loss.c) */
};

rs_status_t rs_client_create(const rs_client_config_t *cfg, rs_client_t **client_p)
{
    if (client_p == NULL)
        return RS_ERR_INVALID;
    rs_client_config_t c;
    if (cfg != NULL) {
        c = *cfg;
    } else {
        rs_client_config_defaults(&c);
        rs_status_t s = rs_client_config_from_env(&c);
        if (s != RS_OK)
            return s;
    }
    if (rs_sh_client_config_check(&c) != RS_OK)
        return RS_ERR_CONFIG;
    rs_client_t *cl = calloc(1, sizeof(*cl));
    if (cl == NULL)
        return RS_ERR_NOMEM;
    cl->cfg = c;
    pthread_mutex_init(&cl->lock, NULL);
    rs_list_init(&cl->idle);
    rs_loss_init(&cl->losses);
    *client_p = cl;
    return RS_OK;
}

/* Lock held; frees the client when it is closed and nothing is lent. Returns 1 if it did. */
static int maybe_free_locked(rs_client_t *c)
{
    if (!atomic_load(&c->closed) || c->busy > 0 || c->n_idle > 0)
        return 0;
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_destroy(&c->lock);
    rs_loss_fini(&c->losses);
    free(c);
    return 1;
}

static void destroy_idle(rs_client_t *c)
{
    for (;;) {
        pthread_mutex_lock(&c->lock);
        if (rs_list_empty(&c->idle)) {
            if (!maybe_free_locked(c))
                pthread_mutex_unlock(&c->lock);
            return;
        }
        rs_lane_t *l = rs_list_first(&c->idle, rs_lane_t, link);
        rs_list_del(&l->link);
        pthread_mutex_unlock(&c->lock);
        l->destroy(l); /* without the lock: it joins threads and closes connections */
        pthread_mutex_lock(&c->lock);
        c->n_idle--;
        c->stats.lanes_idle--;
        pthread_mutex_unlock(&c->lock);
    }
}

void rs_client_destroy(rs_client_t *c)
{
    if (c == NULL)
        return;
    atomic_store(&c->closed, 1);
    destroy_idle(c);
}

rs_status_t rs_lane_take(rs_client_t *c, int kind, rs_lane_match_t match, const void *key,
                         rs_lane_t **lane_p)
{
    pthread_mutex_lock(&c->lock);
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &c->idle)
    {
        rs_lane_t *l = RS_CONTAINER_OF(pos, rs_lane_t, link);
        if (l->kind != kind || !match(l, key))
            continue;
        rs_list_del(&l->link);
        c->n_idle--;
        c->busy++;
        c->stats.lanes_idle--;
        c->stats.lanes_busy++;
        c->stats.lanes_reused++;
        pthread_mutex_unlock(&c->lock);
        *lane_p = l;
        return RS_OK;
    }
    pthread_mutex_unlock(&c->lock);
    return RS_ERR_NOT_FOUND;
}

void rs_lane_add(rs_client_t *c, rs_lane_t *lane, int kind, void (*destroy)(rs_lane_t *))
{
    lane->kind = kind;
    lane->client = c;
    lane->losses = &c->losses;
    lane->closed = &c->closed;
    lane->destroy = destroy;
    rs_list_init(&lane->link);
    pthread_mutex_lock(&c->lock);
    c->busy++;
    c->stats.lanes_made++;
    c->stats.lanes_busy++;
    pthread_mutex_unlock(&c->lock);
}

void rs_lane_give(rs_lane_t *lane, int reusable)
{
    rs_client_t *c = lane->client;
    rs_lane_t *evict = NULL;
    pthread_mutex_lock(&c->lock);
    c->busy--;
    c->stats.lanes_busy--;
    if (reusable && !atomic_load(&c->closed) && c->cfg.max_idle > 0) {
        if (c->n_idle == c->cfg.max_idle) { /* the least recently used one makes room */
            evict = RS_CONTAINER_OF(c->idle.prev, rs_lane_t, link);
            rs_list_del(&evict->link);
            c->n_idle--;
            c->stats.lanes_idle--;
        }
        rs_list_add_head(&c->idle, &lane->link);
        c->n_idle++;
        c->stats.lanes_idle++;
        lane = NULL;
    }
    c->busy++; /* held while the lanes below are destroyed without the lock */
    pthread_mutex_unlock(&c->lock);
    if (evict != NULL)
        evict->destroy(evict);
    if (lane != NULL)
        lane->destroy(lane);
    pthread_mutex_lock(&c->lock);
    c->busy--;
    if (!maybe_free_locked(c))
        pthread_mutex_unlock(&c->lock);
}

void rs_client_stats(rs_client_t *c, rs_client_stats_t *stats)
{
    if (c == NULL || stats == NULL)
        return;
    pthread_mutex_lock(&c->lock);
    *stats = c->stats;
    pthread_mutex_unlock(&c->lock);
    stats->workers_lost = atomic_load(&c->losses.epoch);
}

/* ------------------------------------------------------ the default client */

static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static rs_client_t *default_client;
static rs_client_t *forked_away; /* the parent's, in a child: never touched, still reachable */
static int default_hooks;

static void default_at_exit(void)
{
    rs_client_default_shutdown();
}

/*
 * Its contexts and engine threads belong to the parent: the child starts
 * afresh, without a transport call on them (their memory stays allocated).
 * The parent's idle lanes are kept across the fork: a child's own lanes
 * push and read with them alive (tests/shuffle/test_client_fork.c).
 */
static void default_at_fork_child(void)
{
    forked_away = default_client;
    default_client = NULL;
    pthread_mutex_init(&default_lock, NULL);
}

rs_client_t *rs_client_default(void)
{
    pthread_mutex_lock(&default_lock);
    if (default_client == NULL) {
        rs_client_config_t cfg;
        rs_client_config_defaults(&cfg);
        if (rs_client_config_from_env(&cfg) != RS_OK)
            rs_warn("client: RSHUFFLE_CLIENT_LANES ignored: the default client keeps %u lanes",
                    cfg.max_idle);
        if (rs_client_create(&cfg, &default_client) != RS_OK)
            default_client = NULL;
        if (default_client != NULL && !default_hooks) {
            default_hooks = 1;
            atexit(default_at_exit);
            pthread_atfork(NULL, NULL, default_at_fork_child);
        }
    }
    rs_client_t *c = default_client;
    pthread_mutex_unlock(&default_lock);
    return c;
}

void rs_client_default_shutdown(void)
{
    pthread_mutex_lock(&default_lock);
    rs_client_t *c = default_client;
    default_client = NULL;
    pthread_mutex_unlock(&default_lock);
    rs_client_destroy(c);
}
