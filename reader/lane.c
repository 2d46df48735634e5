/*
 * Read lanes (include/rshuffle/client.h): a context, its registered read
 * buffers and the connections of earlier sessions, lent by the client to
 * one reader session at a time; a kept connection is attached again by the
 * next session that uses it.
 */
#include "reader/internal.h"

#include "common/log.h"
#include "shuffle/local.h"
#include "shuffle/name.h"

#include <stdlib.h>
#include <string.h>

static void rlconn_close(rlconn_t *k)
{
    if (k->ep != NULL)
        rs_ep_close(k->ep);
    free(k->addr);
    *k = (rlconn_t){0};
}

void rs_rd_lane_conns_close(rs_read_lane_t *l)
{
    for (uint32_t i = 0; i < l->n_conns; i++)
        rlconn_close(&l->conns[i]);
    l->n_conns = 0;
}

static void lane_destroy(rs_lane_t *base)
{
    rs_read_lane_t *l = (rs_read_lane_t *)base;
    rs_rd_lane_conns_close(l);
    rs_rd_reader_free(l->spare);
    for (uint32_t i = 0; i < l->n_bufs; i++)
        rs_mem_free(l->bufs[i]);
    if (l->ctx != NULL)
        rs_ctx_destroy(l->ctx);
    free(l->conns);
    free(l->bufs);
    free(l);
}

static int lane_match(const rs_lane_t *base, const void *key)
{
    const rs_read_lane_t *l = (const rs_read_lane_t *)base;
    return memcmp(&l->key, key, sizeof(l->key)) == 0;
}

typedef struct loss_walk {
    rs_read_lane_t *l;
    int hit;
    int own; /* each connection has its own receive queue: only the lost ones go */
} loss_walk_t;

static void loss_apply(void *arg, const char *addr, uint64_t epoch)
{
    loss_walk_t *lw = arg;
    rs_read_lane_t *l = lw->l;
    uint32_t i = 0;
    while (i < l->n_conns) {
        rlconn_t *k = &l->conns[i];
        if (k->ep == NULL || k->made >= epoch || (addr != NULL && strcmp(k->addr, addr) != 0)) {
            i++;
            continue;
        }
        lw->hit = 1;
        if (!lw->own) {
            i++;
            continue;
        }
        rlconn_close(k);
        l->conns[i] = l->conns[--l->n_conns];
    }
}

/*
 * Losses the client heard of (shuffle/client.h) since the lane last looked:
 * a kept connection to a worker of this host that exited may have left the
 * receive queue blocked, so every kept connection goes and the queue is
 * renewed before the session starts (one atomic load when nothing was lost).
 * Where each connection has its own queue (no RS_CAP_RENEW) only the kept
 * connections to the lost workers go.
 */
static void lane_losses(rs_read_lane_t *l)
{
    loss_walk_t lw = {.l = l, .hit = 0, .own = (rs_ctx_caps(l->ctx) & RS_CAP_RENEW) == 0};
    l->loss_seen = rs_lane_loss_walk(&l->base, l->loss_seen, loss_apply, &lw);
    if (!lw.hit || lw.own)
        return;
    rs_rd_lane_conns_close(l);
    rs_status_t st = rs_ctx_renew(l->ctx);
    if (st != RS_OK)
        rs_warn("reader: cannot renew a lane's receive queue: %s", rs_strerror(st));
    else
        rs_info("reader: a worker of this host exited: the lane's receive queue was renewed");
}

rs_status_t rs_rd_lane_key_make(const rs_reader_config_t *cfg, rs_read_lane_key_t *key_p)
{
    rs_read_lane_key_t key;
    memset(&key, 0, sizeof(key)); /* compared bytewise: padding too */
    if (cfg->transport != NULL)
        key.tcfg = *cfg->transport;
    else {
        rs_status_t st = rs_config_init(&key.tcfg);
        if (st != RS_OK)
            return st;
    }
    key.read_max = cfg->read_max;
    key.local_reads = cfg->local_reads;
    *key_p = key;
    return RS_OK;
}

rs_status_t rs_rd_lane_get(rs_client_t *c, const rs_read_lane_key_t *key, rs_read_lane_t **l_p)
{
    rs_lane_t *base;
    if (rs_lane_take(c, RS_LANE_READ, lane_match, key, &base) == RS_OK) {
        lane_losses((rs_read_lane_t *)base);
        *l_p = (rs_read_lane_t *)base;
        return RS_OK;
    }
    rs_read_lane_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return RS_ERR_NOMEM;
    l->key = *key;
    rs_status_t st = rs_ctx_create(&key->tcfg, &l->ctx);
    if (st == RS_OK)
        st = rs_rd_lane_handlers(l);
    if (st != RS_OK) {
        lane_destroy(&l->base);
        return st;
    }
    rs_lane_add(c, &l->base, RS_LANE_READ, lane_destroy);
    *l_p = l;
    return RS_OK;
}

/* The session takes the lane's kept connection to its worker c, if any. */
void rs_rd_lane_conn_lend(rs_read_lane_t *l, rconn_t *c)
{
    for (uint32_t i = 0; i < l->n_conns; i++) {
        rlconn_t *k = &l->conns[i];
        if (strcmp(k->addr, c->addr) != 0)
            continue;
        /* Lent dead or alive: a dead one whose worker exited renews the queue first. */
        if (k->ep != NULL && rs_ep_status(k->ep) != RS_OK && rs_ep_peer_exited(k->ep))
            rs_lane_loss_note(&l->base, k->addr, k->made); /* the client's other lanes hear */
        c->ep = k->ep;
        c->rkey = k->rkey;
        k->ep = NULL;
        rlconn_close(k);
        l->conns[i] = l->conns[--l->n_conns];
        return;
    }
}

/* Adds a kept connection to addr (copied); 0 when memory ran out (nothing changed). */
static int conns_add(rs_read_lane_t *l, const char *addr, rs_ep_t *ep, rs_rkey_t *rkey,
                     uint64_t made)
{
    if (l->n_conns == l->cap_conns) {
        uint32_t cap = l->cap_conns ? 2 * l->cap_conns : 8;
        rlconn_t *n = realloc(l->conns, cap * sizeof(*n));
        if (n == NULL)
            return 0;
        l->conns = n;
        l->cap_conns = cap;
    }
    char *a = strdup(addr);
    if (a == NULL)
        return 0;
    l->conns[l->n_conns++] = (rlconn_t){.addr = a, .ep = ep, .rkey = rkey, .made = made};
    return 1;
}

/*
 * Keeps c's connection in the lane for a later session; 0 if it cannot
 * (then the caller closes). One without a key is a warmed one the session
 * never attached on (a failed attach closes its connection at once).
 */
int rs_rd_lane_conn_keep(rs_read_lane_t *l, rconn_t *c)
{
    if (c->ep == NULL || rs_ep_status(c->ep) != RS_OK)
        return 0;
    if (!conns_add(l, c->addr, c->ep, c->rkey, l->loss_seen))
        return 0;
    /*
     * A worker of this process is not held by an idle lane: it may be
     * destroyed between sessions. The next session's attach looks it up again.
     */
    rs_sproto_local_release(c->local_reg);
    *c = (rconn_t){.addr = c->addr};
    return 1;
}

rs_status_t rs_rd_lane_conn_warm(rs_read_lane_t *l, const char *addr)
{
    for (uint32_t i = 0; i < l->n_conns; i++) {
        rlconn_t *k = &l->conns[i];
        if (strcmp(k->addr, addr) != 0)
            continue;
        if (k->ep != NULL && rs_ep_status(k->ep) == RS_OK)
            return RS_OK;
        /* A dead kept one goes (a session is lent the first one to addr), its loss told. */
        if (k->ep != NULL && rs_ep_peer_exited(k->ep))
            rs_lane_loss_note(&l->base, k->addr, k->made);
        rlconn_close(k);
        l->conns[i] = l->conns[--l->n_conns];
        break;
    }
    uint64_t made = rs_lane_loss_epoch(&l->base); /* a loss noted from now on concerns it */
    rs_ep_t *ep;
    rs_status_t s = rs_sproto_name_connect(l->ctx, addr, &ep);
    if (s != RS_OK)
        return s;
    if (!conns_add(l, addr, ep, NULL, made)) {
        rs_ep_close(ep);
        return RS_ERR_NOMEM;
    }
    return RS_OK;
}
