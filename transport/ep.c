/*
 * The endpoint state machine: CONNECTING -> HANDSHAKE -> READY, and DEAD or
 * CLOSING from any state (their lifetime below it: eplife.c; deadlines and
 * reaping, run by progress: epscan.c).
 */
#include "transport/internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rs_ep_t *rs_tp_ep_new_accepted(rs_ctx_t *ctx)
{
    if (ctx->destroying)
        return NULL;
    rs_ep_t *ep = rs_tp_ep_alloc(ctx);
    if (ep == NULL)
        return NULL;
    ep->state = RS_EP_HANDSHAKE;
    ep->accepted = 1;
    /* A peer that never says HELLO is dropped after the connect timeout. */
    RS_EP_PRIV(ep)->reap_ns = rs_now_coarse_ns() + RS_MS_TO_NS(ctx->cfg.connect_timeout_ms);
    return ep;
}

void rs_tp_ep_connected(rs_ep_t *ep)
{
    if (ep->state != RS_EP_CONNECTING)
        return;
    ep->state = RS_EP_HANDSHAKE;
    ep->stage = "handshake";
    rs_tp_hs_start_client(ep);
}

void rs_tp_ep_failed(rs_ep_t *ep, rs_status_t status)
{
    rs_tp_ep_kill(ep, status);
}

void rs_tp_ep_peer_closed(rs_ep_t *ep)
{
    RS_EP_PRIV(ep)->peer_closed = 1;
    rs_tp_ep_kill(ep, RS_ERR_UNREACHABLE);
}

rs_status_t rs_tp_ep_connect_wait(rs_ep_t *ep, const char *peer, rs_ep_t **ep_p)
{
    rs_ctx_t *ctx = ep->ctx;
    uint64_t end = rs_now_ns() + RS_MS_TO_NS(ctx->cfg.connect_timeout_ms);
    rs_status_t st;

    /* The lock is not held here: the progress thread may run meanwhile. */
    for (;;) {
        rs_tp_lock(ctx);
        st = ep->hs_result;
        rs_tp_unlock(ctx);
        if (st != RS_ERR_BUSY)
            break;
        uint64_t now = rs_now_ns();
        if (now >= end) {
            st = RS_ERR_TIMEOUT;
            break;
        }
        uint64_t left_ms = (end - now + 999999) / 1000000;
        rs_wait(ctx, left_ms > 10 ? 10 : (int)left_ms);
    }

    rs_tp_lock(ctx);
    if (st == RS_OK && ep->state == RS_EP_READY) {
        rs_ep_priv_t *p = RS_EP_PRIV(ep);
        p->told = 1;
        /* Messages that came with the WELCOME go out from the next progress. */
        if (!rs_list_empty(&p->early)) {
            rs_list_add_tail(&ctx->early_eps, &p->early_link);
            rs_tp_thread_kick(ctx);
        }
        *ep_p = ep;
    } else {
        if (st == RS_OK)
            st = ep->status != RS_OK ? ep->status : RS_ERR_UNREACHABLE;
        if (st == RS_ERR_TIMEOUT)
            rs_error("connect to %s: no handshake within %u ms (at %s)", peer,
                     ctx->cfg.connect_timeout_ms, ep->stage);
        else if (st == RS_ERR_AUTH)
            rs_error("connect to %s: the peer refused our job token", peer);
        else
            rs_error("connect to %s failed at %s: %s", peer, ep->stage, rs_strerror(st));
        /* Nothing of a failed connect is worth draining: cut it. */
        if (ep->state != RS_EP_DEAD) {
            ep->state = RS_EP_DEAD;
            ep->status = st;
        }
        rs_tp_ep_destroy(ep, RS_ERR_CANCELED, rs_tp_close_deadline(ctx));
        rs_tp_ops_drain(ctx);
    }
    rs_tp_unlock(ctx);
    return st;
}

static rs_status_t connect_check(rs_ctx_t *ctx)
{
    if (ctx->in_cb > 0 || ctx->in_progress > 0) {
        rs_error("rs_connect called from a transport callback (it must progress)");
        return RS_ERR_STATE;
    }
    if (ctx->destroying)
        return RS_ERR_STATE;
    return RS_OK;
}

/* Where to connect: a host and port, or (host == NULL) an address blob. */
typedef struct {
    const char *host;
    uint16_t port;
    const void *blob;
    size_t len;
} connect_target_t;

static rs_status_t connect_to(rs_ctx_t *ctx, const connect_target_t *to, rs_ep_t **ep_p)
{
    rs_tp_lock(ctx);
    rs_status_t st = connect_check(ctx);
    if (st != RS_OK) {
        rs_tp_unlock(ctx);
        return st;
    }
    rs_ep_t *ep = rs_tp_ep_alloc(ctx);
    if (ep == NULL) {
        rs_tp_unlock(ctx);
        return RS_ERR_NOMEM;
    }
    RS_EP_PRIV(ep)->hs_client = 1;
    ep->stage = "connect";
    if (to->host != NULL) {
        snprintf(ep->peer_name, sizeof(ep->peer_name), "%s:%u", to->host, to->port);
        st = ctx->be_ops->connect(ctx, ep, to->host, to->port);
    } else {
        snprintf(ep->peer_name, sizeof(ep->peer_name), "an address blob (%zu bytes)", to->len);
        st = ctx->be_ops->connect_address(ctx, ep, to->blob, to->len);
    }
    if (st != RS_OK) {
        rs_error("connect to %s failed at %s: %s", ep->peer_name, ep->stage, rs_strerror(st));
        rs_tp_ep_free(ep);
        rs_tp_unlock(ctx);
        return st;
    }
    rs_tp_unlock(ctx);
    char peer[160];
    if (to->host != NULL)
        snprintf(peer, sizeof(peer), strchr(to->host, ':') != NULL ? "[%s]:%u" : "%s:%u", to->host,
                 to->port);
    else
        snprintf(peer, sizeof(peer), "an address blob of %zu bytes", to->len);
    return rs_tp_ep_connect_wait(ep, peer, ep_p);
}

rs_status_t rs_connect(rs_ctx_t *ctx, const char *host, uint16_t port, rs_ep_t **ep_p)
{
    if (ctx == NULL || host == NULL || ep_p == NULL || port == 0) {
        rs_error("rs_connect: invalid argument");
        return RS_ERR_INVALID;
    }
    return connect_to(ctx, &(connect_target_t){.host = host, .port = port}, ep_p);
}

rs_status_t rs_connect_address(rs_ctx_t *ctx, const void *blob, size_t len, rs_ep_t **ep_p)
{
    if (ctx == NULL || blob == NULL || ep_p == NULL || len == 0 || len > RS_ADDR_BLOB_MAX) {
        rs_error("rs_connect_address: invalid argument");
        return RS_ERR_INVALID;
    }
    return connect_to(ctx, &(connect_target_t){.blob = blob, .len = len}, ep_p);
}

rs_status_t rs_ctx_address(rs_ctx_t *ctx, void *buf, size_t buflen, size_t *len_p)
{
    if (ctx == NULL || buf == NULL || len_p == NULL)
        return RS_ERR_INVALID;
    rs_tp_lock(ctx);
    rs_status_t st = ctx->be_ops->address(ctx, buf, buflen, len_p);
    rs_tp_unlock(ctx);
    return st;
}

void rs_ep_close(rs_ep_t *ep)
{
    if (ep == NULL)
        return;
    rs_ctx_t *ctx = ep->ctx;
    rs_tp_lock(ctx);
    if (RS_EP_PRIV(ep)->reap) {
        rs_tp_unlock(ctx);
        return; /* already being closed */
    }
    if (ctx->in_cb > 0 || ctx->in_progress > 0) {
        /* Inside a callback we cannot wait for the backend: close later. */
        rs_warn("rs_ep_close called from a transport callback: deferred");
        RS_EP_PRIV(ep)->told = 0;
        if (ep->state != RS_EP_DEAD)
            ep->state = RS_EP_CLOSING;
        rs_tp_ep_mark_reap(ep);
        rs_tp_unlock(ctx);
        return;
    }
    rs_tp_ep_destroy(ep, RS_ERR_CANCELED, rs_tp_close_deadline(ctx));
    rs_tp_ops_drain(ctx);
    rs_tp_unlock(ctx);
}

rs_status_t rs_ep_status(const rs_ep_t *ep)
{
    if (ep == NULL)
        return RS_ERR_INVALID;
    rs_ep_state_t state = ep->state;
    if (state == RS_EP_READY)
        return RS_OK;
    if (state == RS_EP_DEAD)
        return ep->status;
    return state == RS_EP_CLOSING ? RS_ERR_CANCELED : RS_ERR_STATE;
}

int rs_ep_peer_exited(rs_ep_t *ep)
{
    if (ep == NULL)
        return 0;
    rs_tp_lock(ep->ctx);
    int exited = rs_tp_peer_exited(ep);
    rs_tp_unlock(ep->ctx);
    return exited;
}

size_t rs_ep_outstanding(const rs_ep_t *ep)
{
    if (ep == NULL)
        return 0;
    return ep->n_ops;
}

void rs_ep_set_user(rs_ep_t *ep, void *user)
{
    if (ep == NULL)
        return;
    ep->user = user;
}

void *rs_ep_user(const rs_ep_t *ep)
{
    if (ep == NULL)
        return NULL;
    return ep->user;
}
