/* The loopback backend's shared state, hooks and contexts (lb_int.h). */
#include "tests/loopback/lb_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

lb_fabric_t lb = {.lock = PTHREAD_MUTEX_INITIALIZER};

void lb_lock(void)
{
    pthread_mutex_lock(&lb.lock);
    if (!lb.init) {
        lb.init = 1;
        rs_list_init(&lb.ctxs);
        rs_list_init(&lb.regions);
        rs_list_init(&lb.listeners);
        lb.next_id = 1;
        lb.next_region = 1;
        lb.next_port = LB_PORT_FIRST;
    }
}

void lb_unlock(void)
{
    pthread_mutex_unlock(&lb.lock);
}

void lb_wake(lb_ctx_t *c)
{
    uint64_t one = 1;
    ssize_t unused = write(c->efd, &one, sizeof(one));
    (void)unused;
}

lb_item_t *lb_item_new(lb_kind_t kind, size_t data_len)
{
    lb_item_t *it = calloc(1, sizeof(*it) + data_len);
    if (it != NULL)
        it->kind = kind;
    return it;
}

/* Queues an inbound event for endpoint to (lb_lock held); false when out of memory. */
int lb_post_in(lb_ep_t *to, lb_kind_t kind, rs_status_t status)
{
    lb_item_t *it = lb_item_new(kind, 0);
    if (it == NULL)
        return 0;
    it->to = to;
    it->status = status;
    rs_list_add_tail(&to->owner->inbound, &it->link);
    lb_wake(to->owner);
    return 1;
}

/* Unlinks a and its peer; the peer hears kind (lb_lock held). */
void lb_unlink_peer(lb_ep_t *a, lb_kind_t kind, rs_status_t status)
{
    lb_ep_t *b = a->peer;
    if (b == NULL)
        return;
    a->peer = NULL;
    b->peer = NULL;
    lb_post_in(b, kind, status);
}

lb_ctx_t *lb_ctx_by_rs(const rs_ctx_t *ctx)
{
    rs_list_t *pos;
    LB_FOR_EACH(pos, &lb.ctxs)
    {
        lb_ctx_t *c = RS_CONTAINER_OF(pos, lb_ctx_t, link);
        if (c->ctx == ctx)
            return c;
    }
    return NULL;
}

lb_region_t *lb_region_by_id(uint64_t id)
{
    rs_list_t *pos;
    LB_FOR_EACH(pos, &lb.regions)
    {
        lb_region_t *r = RS_CONTAINER_OF(pos, lb_region_t, link);
        if (r->id == id)
            return r;
    }
    return NULL;
}

/* ------------------------------------------------------------------ hooks */

void rs_lb_drop(unsigned type, unsigned n)
{
    lb_lock();
    lb.drop[type & 255] = n;
    lb_unlock();
}

void rs_lb_mangle(unsigned type, unsigned n, rs_lb_mangle_fn fn, void *arg)
{
    lb_lock();
    lb.mangle[type & 255] = fn != NULL ? n : 0;
    lb.mangle_fn[type & 255] = fn;
    lb.mangle_arg[type & 255] = arg;
    lb_unlock();
}

void rs_lb_hold(unsigned type)
{
    lb_lock();
    lb.hold[type & 255] = 1;
    lb_unlock();
}

void lb_wake_all(void)
{
    rs_list_t *pos;
    LB_FOR_EACH(pos, &lb.ctxs)
    {
        lb_wake(RS_CONTAINER_OF(pos, lb_ctx_t, link));
    }
}

void rs_lb_release(unsigned type)
{
    lb_lock();
    lb.hold[type & 255] = 0;
    lb_wake_all();
    lb_unlock();
}

void rs_lb_hold_gets(void)
{
    lb_lock();
    lb.hold_gets = 1;
    lb_unlock();
}

void rs_lb_release_gets(void)
{
    lb_lock();
    lb.hold_gets = 0;
    lb_wake_all();
    lb_unlock();
}

rs_status_t rs_lb_kill(rs_ctx_t *ctx)
{
    lb_lock();
    lb_ctx_t *c = lb_ctx_by_rs(ctx);
    if (c == NULL) {
        lb_unlock();
        return RS_ERR_NOT_FOUND;
    }
    c->dead = 1;
    lb.counts.kills++;
    /* What was on its way to it is lost; clients waiting for its accept are refused. */
    while (!rs_list_empty(&c->inbound)) {
        lb_item_t *it = rs_list_first(&c->inbound, lb_item_t, link);
        rs_list_del(&it->link);
        if (it->kind == LB_IN_ACCEPT && it->from != NULL) {
            it->from->accept = NULL;
            lb_post_in(it->from, LB_IN_FAILED, RS_ERR_REFUSED);
        }
        free(it);
    }
    rs_list_t *pos;
    LB_FOR_EACH(pos, &c->eps)
    {
        lb_ep_t *e = RS_CONTAINER_OF(pos, lb_ep_t, link);
        lb_unlink_peer(e, LB_IN_FAILED, RS_ERR_UNREACHABLE);
        lb_post_in(e, LB_IN_FAILED, RS_ERR_UNREACHABLE);
    }
    lb_wake(c);
    lb_unlock();
    return RS_OK;
}

rs_ctx_t *rs_lb_ctx_of_port(uint16_t port)
{
    rs_ctx_t *ctx = NULL;
    lb_lock();
    rs_list_t *pos;
    LB_FOR_EACH(pos, &lb.listeners)
    {
        lb_lsn_t *l = RS_CONTAINER_OF(pos, lb_lsn_t, link);
        if (l->port == port)
            ctx = l->owner->ctx;
    }
    lb_unlock();
    return ctx;
}

void rs_lb_counts(rs_lb_counts_t *out)
{
    lb_lock();
    *out = lb.counts;
    lb_unlock();
}

void rs_lb_reset(void)
{
    lb_lock();
    memset(&lb.counts, 0, sizeof(lb.counts));
    memset(lb.drop, 0, sizeof(lb.drop));
    memset(lb.mangle, 0, sizeof(lb.mangle));
    memset(lb.hold, 0, sizeof(lb.hold));
    lb.hold_gets = 0;
    lb_wake_all();
    lb_unlock();
}

/* --------------------------------------------------------------- context */

rs_status_t lb_ctx_open(rs_ctx_t *ctx)
{
    lb_ctx_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return RS_ERR_NOMEM;
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->efd < 0) {
        free(c);
        return RS_ERR_IO;
    }
    c->ctx = ctx;
    rs_list_init(&c->inbound);
    rs_list_init(&c->eps);
    lb_lock();
    c->id = lb.next_id++;
    rs_list_add_tail(&lb.ctxs, &c->link);
    lb_unlock();
    rs_tp_ctx_set_be(ctx, c);
    return RS_OK;
}

void lb_ctx_close(rs_ctx_t *ctx)
{
    lb_ctx_t *c = rs_tp_ctx_be(ctx);
    lb_lock();
    rs_list_del(&c->link);
    while (!rs_list_empty(&c->inbound)) {
        lb_item_t *it = rs_list_first(&c->inbound, lb_item_t, link);
        rs_list_del(&it->link);
        if (it->kind == LB_IN_ACCEPT && it->from != NULL) {
            it->from->accept = NULL;
            lb_post_in(it->from, LB_IN_FAILED, RS_ERR_REFUSED);
        }
        free(it);
    }
    lb_unlock();
    close(c->efd);
    free(c);
}

int lb_fd(rs_ctx_t *ctx)
{
    return ((lb_ctx_t *)rs_tp_ctx_be(ctx))->efd;
}

/* Something progress would handle now (lb_lock held). */
static int pending(lb_ctx_t *c)
{
    rs_list_t *pos;
    LB_FOR_EACH(pos, &c->eps)
    {
        if (!rs_list_empty(&RS_CONTAINER_OF(pos, lb_ep_t, link)->out))
            return 1;
    }
    return lb_next_in(c) != NULL;
}

rs_status_t lb_arm(rs_ctx_t *ctx)
{
    lb_ctx_t *c = rs_tp_ctx_be(ctx);
    lb_lock();
    int busy = pending(c);
    lb_unlock();
    return busy ? RS_ERR_BUSY : RS_OK;
}

/* The next inbound event that may be delivered (still queued); NULL when none (lb_lock held). */
lb_item_t *lb_next_in(lb_ctx_t *c)
{
    lb_ep_t *blocked[16];
    unsigned n_blocked = 0;
    rs_list_t *pos;
    LB_FOR_EACH(pos, &c->inbound)
    {
        lb_item_t *it = RS_CONTAINER_OF(pos, lb_item_t, link);
        int skip = 0;
        for (unsigned i = 0; i < n_blocked && !skip; i++)
            skip = blocked[i] == it->to;
        if (!skip && it->kind == LB_IN_MSG && lb.hold[it->type & 255]) {
            if (n_blocked == 16)
                return NULL; /* many pairs held: wait for a release */
            blocked[n_blocked++] = it->to;
            skip = 1;
        }
        if (!skip)
            return it;
    }
    return NULL;
}
