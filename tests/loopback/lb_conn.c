/* The loopback backend: memory, listeners and connections (lb_int.h). */
#include "tests/loopback/lb_int.h"

#include "common/log.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- memory */

rs_status_t lb_mem_reg(rs_ctx_t *ctx, rs_mr_t *mr, void *addr, size_t len, unsigned access)
{
    (void)access;
    lb_region_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return RS_ERR_NOMEM;
    if (addr == NULL) {
        void *p = NULL;
        if (posix_memalign(&p, 4096, len > 0 ? len : 1) != 0) {
            free(r);
            return RS_ERR_NOMEM;
        }
        memset(p, 0, len);
        addr = p;
        r->allocated = 1;
    }
    r->addr = addr;
    r->len = len;
    lb_lock();
    r->owner = lb_ctx_by_rs(ctx);
    r->id = lb.next_region++;
    rs_list_add_tail(&lb.regions, &r->link);
    lb_unlock();
    mr->addr = addr;
    mr->be = r;
    return RS_OK;
}

void lb_mem_dereg(rs_mr_t *mr)
{
    lb_region_t *r = mr->be;
    lb_lock();
    rs_list_del(&r->link);
    lb_unlock();
    if (r->allocated)
        free(r->addr);
    free(r);
}

typedef struct lb_rkey_wire {
    uint32_t magic, pad;
    uint64_t region;
} lb_rkey_wire_t;

rs_status_t lb_rkey_pack(const rs_mr_t *mr, void *buf, size_t buflen, size_t *len_p)
{
    const lb_region_t *r = mr->be;
    lb_rkey_wire_t w = {.magic = LB_RKEY_MAGIC, .region = r->id};
    if (buflen < sizeof(w))
        return RS_ERR_NO_SPACE;
    memcpy(buf, &w, sizeof(w));
    *len_p = sizeof(w);
    return RS_OK;
}

rs_status_t lb_rkey_unpack(rs_ep_t *ep, rs_rkey_t *rkey, const void *buf, size_t len)
{
    (void)ep;
    lb_rkey_wire_t w;
    if (len != sizeof(w))
        return RS_ERR_BAD_RKEY;
    memcpy(&w, buf, sizeof(w));
    if (w.magic != LB_RKEY_MAGIC || w.region == 0)
        return RS_ERR_BAD_RKEY;
    rkey->be = (void *)(uintptr_t)w.region;
    return RS_OK;
}

void lb_rkey_release(rs_rkey_t *rkey)
{
    rs_list_t *c, *e, *i;
    lb_lock();
    LB_FOR_EACH(c, &lb.ctxs)
    {
        LB_FOR_EACH(e, &RS_CONTAINER_OF(c, lb_ctx_t, link)->eps)
        {
            LB_FOR_EACH(i, &RS_CONTAINER_OF(e, lb_ep_t, link)->out)
            {
                if (RS_CONTAINER_OF(i, lb_item_t, link)->rkey == rkey)
                    lb.counts.stale_rkeys++; /* a real transport would read a freed key */
            }
        }
    }
    lb_unlock();
    rkey->be = NULL;
}

/* ------------------------------------------------------------ connections */

rs_status_t lb_listen(rs_ctx_t *ctx, rs_listener_t *l, const char *host, uint16_t port)
{
    (void)host;
    lb_lsn_t *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return RS_ERR_NOMEM;
    lb_lock();
    rs_list_t *pos;
    int used = 1;
    while (used) {
        used = 0;
        uint16_t want = port != 0 ? port : (uint16_t)lb.next_port;
        LB_FOR_EACH(pos, &lb.listeners)
        {
            used |= RS_CONTAINER_OF(pos, lb_lsn_t, link)->port == want;
        }
        if (used && port != 0) {
            lb_unlock();
            free(n);
            rs_error("loopback: port %u is taken", port);
            return RS_ERR_IO;
        }
        n->port = want;
        if (port == 0 && ++lb.next_port > 65000)
            lb.next_port = LB_PORT_FIRST;
    }
    n->owner = lb_ctx_by_rs(ctx);
    rs_list_add_tail(&lb.listeners, &n->link);
    lb_unlock();
    l->port = n->port;
    l->be = n;
    return RS_OK;
}

void lb_listener_close(rs_listener_t *l)
{
    lb_lsn_t *n = l->be;
    lb_lock();
    rs_list_del(&n->link);
    lb_unlock();
    free(n);
}

lb_ep_t *lb_ep_new(rs_ctx_t *ctx, rs_ep_t *ep)
{
    lb_ep_t *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->owner = rs_tp_ctx_be(ctx);
    e->ep = ep;
    rs_list_init(&e->out);
    ep->be = e;
    return e;
}

/* Asks server for an accept of e, or refuses e (lb_lock held). */
static rs_status_t ask_accept(lb_ep_t *e, lb_ctx_t *server)
{
    lb.counts.connects++;
    if (server == NULL || server->dead || e->owner->dead) {
        lb.counts.refused++;
        return lb_post_in(e, LB_IN_FAILED, RS_ERR_REFUSED) ? RS_OK : RS_ERR_NOMEM;
    }
    lb_item_t *it = lb_item_new(LB_IN_ACCEPT, 0);
    if (it == NULL)
        return RS_ERR_NOMEM;
    it->from = e;
    e->accept = it;
    rs_list_add_tail(&server->inbound, &it->link);
    lb_wake(server);
    return RS_OK;
}

rs_status_t lb_connect(rs_ctx_t *ctx, rs_ep_t *ep, const char *host, uint16_t port)
{
    (void)host;
    lb_ep_t *e = lb_ep_new(ctx, ep);
    if (e == NULL)
        return RS_ERR_NOMEM;
    lb_lock();
    lb_ctx_t *server = NULL;
    rs_list_t *pos;
    LB_FOR_EACH(pos, &lb.listeners)
    {
        lb_lsn_t *l = RS_CONTAINER_OF(pos, lb_lsn_t, link);
        if (l->port == port)
            server = l->owner;
    }
    rs_status_t st = ask_accept(e, server);
    if (st == RS_OK)
        rs_list_add_tail(&e->owner->eps, &e->link);
    lb_unlock();
    if (st != RS_OK) {
        ep->be = NULL;
        free(e);
    }
    return st;
}

typedef struct lb_addr_wire {
    uint32_t magic, pad;
    uint64_t id;
} lb_addr_wire_t;

rs_status_t lb_address(rs_ctx_t *ctx, void *buf, size_t buflen, size_t *len_p)
{
    lb_ctx_t *c = rs_tp_ctx_be(ctx);
    lb_addr_wire_t w = {.magic = LB_ADDR_MAGIC, .id = c->id};
    if (buflen < sizeof(w))
        return RS_ERR_NO_SPACE;
    memcpy(buf, &w, sizeof(w));
    *len_p = sizeof(w);
    return RS_OK;
}

rs_status_t lb_connect_address(rs_ctx_t *ctx, rs_ep_t *ep, const void *blob, size_t len)
{
    lb_addr_wire_t w;
    if (len != sizeof(w))
        return RS_ERR_INVALID;
    memcpy(&w, blob, sizeof(w));
    if (w.magic != LB_ADDR_MAGIC)
        return RS_ERR_INVALID;
    lb_ep_t *e = lb_ep_new(ctx, ep);
    if (e == NULL)
        return RS_ERR_NOMEM;
    lb_lock();
    lb_ctx_t *server = NULL;
    rs_list_t *pos;
    LB_FOR_EACH(pos, &lb.ctxs)
    {
        lb_ctx_t *c = RS_CONTAINER_OF(pos, lb_ctx_t, link);
        if (c->id == w.id)
            server = c;
    }
    rs_status_t st = ask_accept(e, server);
    if (st == RS_OK)
        rs_list_add_tail(&e->owner->eps, &e->link);
    lb_unlock();
    if (st != RS_OK) {
        ep->be = NULL;
        free(e);
    }
    return st;
}

void lb_ep_fail(rs_ep_t *ep)
{
    lb_ep_t *e = ep->be;
    if (e == NULL)
        return; /* an accept that found no memory for its half */
    rs_list_t failed;
    rs_list_init(&failed);
    lb_lock();
    e->failed = 1;
    if (e->accept != NULL) {
        e->accept->from = NULL;
        e->accept = NULL;
    }
    lb_unlink_peer(e, LB_IN_CLOSED, RS_OK);
    while (!rs_list_empty(&e->out)) {
        lb_item_t *it = rs_list_first(&e->out, lb_item_t, link);
        rs_list_del(&it->link);
        rs_list_add_tail(&failed, &it->link);
    }
    lb_unlock();
    rs_status_t st = ep->state == RS_EP_DEAD && ep->status != RS_OK ? ep->status : RS_ERR_CANCELED;
    while (!rs_list_empty(&failed)) {
        lb_item_t *it = rs_list_first(&failed, lb_item_t, link);
        rs_list_del(&it->link);
        rs_tp_op_complete(it->op, st);
        free(it);
    }
}

void lb_ep_close(rs_ep_t *ep)
{
    lb_ep_t *e = ep->be;
    if (e == NULL)
        return;
    lb_lock();
    if (e->accept != NULL)
        e->accept->from = NULL;
    lb_unlink_peer(e, LB_IN_CLOSED, RS_OK);
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &e->owner->inbound)
    {
        lb_item_t *it = RS_CONTAINER_OF(pos, lb_item_t, link);
        if (it->to == e) {
            rs_list_del(&it->link);
            free(it);
        }
    }
    rs_list_del(&e->link);
    lb_unlock();
    /* ep_fail ran first and emptied out; anything posted since was refused. */
    while (!rs_list_empty(&e->out)) {
        lb_item_t *it = rs_list_first(&e->out, lb_item_t, link);
        rs_list_del(&it->link);
        rs_tp_op_complete(it->op, RS_ERR_CANCELED);
        free(it);
    }
    ep->be = NULL;
    free(e);
}

void lb_accept_one(lb_ctx_t *c, lb_item_t *it)
{
    rs_ep_t *ep = c->dead ? NULL : rs_tp_ep_new_accepted(c->ctx);
    lb_ep_t *e = ep != NULL ? lb_ep_new(c->ctx, ep) : NULL;
    lb_lock();
    lb_ep_t *client = it->from;
    if (client != NULL)
        client->accept = NULL;
    if (e != NULL)
        rs_list_add_tail(&c->eps, &e->link);
    int ok = e != NULL && client != NULL && !client->owner->dead && !client->failed;
    if (ok) {
        e->peer = client;
        client->peer = e;
        lb_post_in(client, LB_IN_CONNECTED, RS_OK);
    } else if (client != NULL) {
        lb.counts.refused++;
        lb_post_in(client, LB_IN_FAILED, RS_ERR_REFUSED);
    }
    lb_unlock();
    if (ep != NULL && e == NULL)
        rs_tp_ep_failed(ep, RS_ERR_NOMEM);
    else if (ep != NULL && !ok)
        rs_tp_ep_failed(ep, RS_ERR_UNREACHABLE);
}
