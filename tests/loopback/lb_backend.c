/*
 * The loopback transport backend (tests/loopback/loopback.h): every context
 * of this process on one in-process fabric.
 *
 * Locking: the transport calls every backend function with the context's
 * lock held; the fabric's shared state (contexts, listeners, regions, the
 * queues, hooks and counters) is under lb_lock, taken after a context lock
 * and never held across an upcall (rs_tp_*), which may run user callbacks
 * that post again.
 *
 * Queues: an endpoint's posted ops (out), carried out by its own context's
 * progress, oldest first; a context's inbound events (messages,
 * notifications, accepts, connection outcomes), delivered by its progress,
 * oldest first (held messages and what follows them on the same endpoint
 * pair wait).
 */
#include "tests/loopback/lb_backend.h"
#include "tests/loopback/loopback.h"

#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Events handled by one progress call at most (a context connected to itself can ping-pong). */
#define LB_PROGRESS_MAX 4096
#define LB_PORT_FIRST   20000
#define LB_RKEY_MAGIC   0x4b52424cu /* "LBRK" */
#define LB_ADDR_MAGIC   0x4441424cu /* "LBAD" */

/* Walks a list that the body does not change. */
#define LB_FOR_EACH(pos, head) for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

typedef enum lb_kind {
    /* posted on an endpoint (out) */
    LB_MSG,
    LB_PUT,
    LB_GET,
    LB_FADD,
    LB_FLUSH,
    /* inbound at a context */
    LB_IN_MSG,
    LB_IN_NOTIFY,
    LB_IN_ACCEPT,
    LB_IN_CONNECTED,
    LB_IN_FAILED,
    LB_IN_CLOSED,
} lb_kind_t;

typedef struct lb_ctx lb_ctx_t;
typedef struct lb_ep lb_ep_t;

typedef struct lb_item {
    rs_list_t link;
    lb_kind_t kind;
    rs_op_t *op;
    lb_ep_t *to;   /* inbound: the receiving endpoint (NULL for an accept) */
    lb_ep_t *from; /* accept: the connecting endpoint (NULL once it went away) */
    unsigned type;
    int notify;
    uint32_t imm;
    rs_status_t status;
    void *local;
    uint64_t raddr, region, add;
    size_t len;
    unsigned char data[];
} lb_item_t;

struct lb_ctx {
    rs_list_t link; /* in lb.ctxs */
    rs_ctx_t *ctx;
    uint64_t id;
    int efd;
    int dead;
    rs_list_t inbound; /* lb_item_t */
    rs_list_t eps;     /* lb_ep_t */
};

struct lb_ep {
    rs_list_t link; /* in owner->eps */
    lb_ctx_t *owner;
    rs_ep_t *ep;
    lb_ep_t *peer;
    lb_item_t *accept; /* our connect request, while the server has not taken it */
    rs_list_t out;     /* lb_item_t, oldest first */
    int failed;
};

typedef struct lb_region {
    rs_list_t link;
    uint64_t id;
    lb_ctx_t *owner;
    unsigned char *addr;
    size_t len;
    int allocated;
} lb_region_t;

typedef struct lb_lsn {
    rs_list_t link;
    lb_ctx_t *owner;
    uint16_t port;
} lb_lsn_t;

static struct {
    pthread_mutex_t lock;
    int init;
    rs_list_t ctxs, regions, listeners;
    uint64_t next_id, next_region;
    unsigned next_port;
    unsigned drop[256];
    unsigned char hold[256];
    rs_lb_counts_t counts;
} lb = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void lb_lock(void)
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

static void lb_unlock(void)
{
    pthread_mutex_unlock(&lb.lock);
}

static void wake(lb_ctx_t *c)
{
    uint64_t one = 1;
    ssize_t unused = write(c->efd, &one, sizeof(one));
    (void)unused;
}

static lb_item_t *item_new(lb_kind_t kind, size_t data_len)
{
    lb_item_t *it = calloc(1, sizeof(*it) + data_len);
    if (it != NULL)
        it->kind = kind;
    return it;
}

/* Queues an inbound event for endpoint to (lb_lock held); false when out of memory. */
static int post_in(lb_ep_t *to, lb_kind_t kind, rs_status_t status)
{
    lb_item_t *it = item_new(kind, 0);
    if (it == NULL)
        return 0;
    it->to = to;
    it->status = status;
    rs_list_add_tail(&to->owner->inbound, &it->link);
    wake(to->owner);
    return 1;
}

/* Unlinks a and its peer; the peer hears kind (lb_lock held). */
static void unlink_peer(lb_ep_t *a, lb_kind_t kind, rs_status_t status)
{
    lb_ep_t *b = a->peer;
    if (b == NULL)
        return;
    a->peer = NULL;
    b->peer = NULL;
    post_in(b, kind, status);
}

static lb_ctx_t *ctx_by_rs(const rs_ctx_t *ctx)
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

static lb_region_t *region_by_id(uint64_t id)
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

void rs_lb_hold(unsigned type)
{
    lb_lock();
    lb.hold[type & 255] = 1;
    lb_unlock();
}

static void wake_all(void)
{
    rs_list_t *pos;
    LB_FOR_EACH(pos, &lb.ctxs)
    {
        wake(RS_CONTAINER_OF(pos, lb_ctx_t, link));
    }
}

void rs_lb_release(unsigned type)
{
    lb_lock();
    lb.hold[type & 255] = 0;
    wake_all();
    lb_unlock();
}

rs_status_t rs_lb_kill(rs_ctx_t *ctx)
{
    lb_lock();
    lb_ctx_t *c = ctx_by_rs(ctx);
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
            post_in(it->from, LB_IN_FAILED, RS_ERR_REFUSED);
        }
        free(it);
    }
    rs_list_t *pos;
    LB_FOR_EACH(pos, &c->eps)
    {
        lb_ep_t *e = RS_CONTAINER_OF(pos, lb_ep_t, link);
        unlink_peer(e, LB_IN_FAILED, RS_ERR_UNREACHABLE);
        post_in(e, LB_IN_FAILED, RS_ERR_UNREACHABLE);
    }
    wake(c);
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
    memset(lb.hold, 0, sizeof(lb.hold));
    wake_all();
    lb_unlock();
}

/* --------------------------------------------------------------- context */

static rs_status_t lb_ctx_open(rs_ctx_t *ctx)
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

static void lb_ctx_close(rs_ctx_t *ctx)
{
    lb_ctx_t *c = rs_tp_ctx_be(ctx);
    lb_lock();
    rs_list_del(&c->link);
    while (!rs_list_empty(&c->inbound)) {
        lb_item_t *it = rs_list_first(&c->inbound, lb_item_t, link);
        rs_list_del(&it->link);
        if (it->kind == LB_IN_ACCEPT && it->from != NULL) {
            it->from->accept = NULL;
            post_in(it->from, LB_IN_FAILED, RS_ERR_REFUSED);
        }
        free(it);
    }
    lb_unlock();
    close(c->efd);
    free(c);
}

static int lb_fd(rs_ctx_t *ctx)
{
    return ((lb_ctx_t *)rs_tp_ctx_be(ctx))->efd;
}

static lb_item_t *next_in(lb_ctx_t *c);

/* Something progress would handle now (lb_lock held). */
static int pending(lb_ctx_t *c)
{
    rs_list_t *pos;
    LB_FOR_EACH(pos, &c->eps)
    {
        if (!rs_list_empty(&RS_CONTAINER_OF(pos, lb_ep_t, link)->out))
            return 1;
    }
    return next_in(c) != NULL;
}

static rs_status_t lb_arm(rs_ctx_t *ctx)
{
    lb_ctx_t *c = rs_tp_ctx_be(ctx);
    lb_lock();
    int busy = pending(c);
    lb_unlock();
    return busy ? RS_ERR_BUSY : RS_OK;
}

/* ---------------------------------------------------------------- memory */

static rs_status_t lb_mem_reg(rs_ctx_t *ctx, rs_mr_t *mr, void *addr, size_t len, unsigned access)
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
    r->owner = ctx_by_rs(ctx);
    r->id = lb.next_region++;
    rs_list_add_tail(&lb.regions, &r->link);
    lb_unlock();
    mr->addr = addr;
    mr->be = r;
    return RS_OK;
}

static void lb_mem_dereg(rs_mr_t *mr)
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

static rs_status_t lb_rkey_pack(const rs_mr_t *mr, void *buf, size_t buflen, size_t *len_p)
{
    const lb_region_t *r = mr->be;
    lb_rkey_wire_t w = {.magic = LB_RKEY_MAGIC, .region = r->id};
    if (buflen < sizeof(w))
        return RS_ERR_NO_SPACE;
    memcpy(buf, &w, sizeof(w));
    *len_p = sizeof(w);
    return RS_OK;
}

static rs_status_t lb_rkey_unpack(rs_ep_t *ep, rs_rkey_t *rkey, const void *buf, size_t len)
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

static void lb_rkey_release(rs_rkey_t *rkey)
{
    rkey->be = NULL;
}

/* ------------------------------------------------------------ connections */

static rs_status_t lb_listen(rs_ctx_t *ctx, rs_listener_t *l, const char *host, uint16_t port)
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
    n->owner = ctx_by_rs(ctx);
    rs_list_add_tail(&lb.listeners, &n->link);
    lb_unlock();
    l->port = n->port;
    l->be = n;
    return RS_OK;
}

static void lb_listener_close(rs_listener_t *l)
{
    lb_lsn_t *n = l->be;
    lb_lock();
    rs_list_del(&n->link);
    lb_unlock();
    free(n);
}

static lb_ep_t *ep_new(rs_ctx_t *ctx, rs_ep_t *ep)
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
        return post_in(e, LB_IN_FAILED, RS_ERR_REFUSED) ? RS_OK : RS_ERR_NOMEM;
    }
    lb_item_t *it = item_new(LB_IN_ACCEPT, 0);
    if (it == NULL)
        return RS_ERR_NOMEM;
    it->from = e;
    e->accept = it;
    rs_list_add_tail(&server->inbound, &it->link);
    wake(server);
    return RS_OK;
}

static rs_status_t lb_connect(rs_ctx_t *ctx, rs_ep_t *ep, const char *host, uint16_t port)
{
    (void)host;
    lb_ep_t *e = ep_new(ctx, ep);
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

static rs_status_t lb_address(rs_ctx_t *ctx, void *buf, size_t buflen, size_t *len_p)
{
    lb_ctx_t *c = rs_tp_ctx_be(ctx);
    lb_addr_wire_t w = {.magic = LB_ADDR_MAGIC, .id = c->id};
    if (buflen < sizeof(w))
        return RS_ERR_NO_SPACE;
    memcpy(buf, &w, sizeof(w));
    *len_p = sizeof(w);
    return RS_OK;
}

static rs_status_t lb_connect_address(rs_ctx_t *ctx, rs_ep_t *ep, const void *blob, size_t len)
{
    lb_addr_wire_t w;
    if (len != sizeof(w))
        return RS_ERR_INVALID;
    memcpy(&w, blob, sizeof(w));
    if (w.magic != LB_ADDR_MAGIC)
        return RS_ERR_INVALID;
    lb_ep_t *e = ep_new(ctx, ep);
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

static void lb_ep_fail(rs_ep_t *ep)
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
    unlink_peer(e, LB_IN_CLOSED, RS_OK);
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

static void lb_ep_close(rs_ep_t *ep)
{
    lb_ep_t *e = ep->be;
    if (e == NULL)
        return;
    lb_lock();
    if (e->accept != NULL)
        e->accept->from = NULL;
    unlink_peer(e, LB_IN_CLOSED, RS_OK);
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

/* -------------------------------------------------------------------- ops */

static rs_status_t post_out(rs_ep_t *ep, lb_item_t *it, rs_op_t *op)
{
    lb_ep_t *e = ep->be;
    it->op = op;
    lb_lock();
    if (e->failed) {
        lb_unlock();
        free(it);
        return RS_ERR_UNREACHABLE;
    }
    if (it->kind == LB_MSG)
        lb.counts.sent[it->type & 255]++;
    rs_list_add_tail(&e->out, &it->link);
    wake(e->owner);
    lb_unlock();
    return RS_OK;
}

static rs_status_t lb_put(rs_ep_t *ep, rs_op_t *op, const void *src, size_t len, rs_mr_t *mr,
                          rs_rkey_t *rkey, uint64_t raddr, int notify, uint32_t imm)
{
    (void)mr;
    lb_item_t *it = item_new(LB_PUT, 0);
    if (it == NULL)
        return RS_ERR_NOMEM;
    it->local = (void *)(uintptr_t)src;
    it->len = len;
    it->raddr = raddr;
    it->region = (uint64_t)(uintptr_t)rkey->be;
    it->notify = notify;
    it->imm = imm;
    return post_out(ep, it, op);
}

static rs_status_t lb_get(rs_ep_t *ep, rs_op_t *op, void *dst, size_t len, rs_mr_t *mr,
                          rs_rkey_t *rkey, uint64_t raddr)
{
    (void)mr;
    lb_item_t *it = item_new(LB_GET, 0);
    if (it == NULL)
        return RS_ERR_NOMEM;
    it->local = dst;
    it->len = len;
    it->raddr = raddr;
    it->region = (uint64_t)(uintptr_t)rkey->be;
    return post_out(ep, it, op);
}

static rs_status_t lb_fetch_add(rs_ep_t *ep, rs_op_t *op, rs_rkey_t *rkey, uint64_t raddr,
                                uint64_t add)
{
    lb_item_t *it = item_new(LB_FADD, 0);
    if (it == NULL)
        return RS_ERR_NOMEM;
    it->len = sizeof(uint64_t);
    it->raddr = raddr;
    it->add = add;
    it->region = (uint64_t)(uintptr_t)rkey->be;
    return post_out(ep, it, op);
}

static rs_status_t lb_flush(rs_ep_t *ep, rs_op_t *op)
{
    lb_item_t *it = item_new(LB_FLUSH, 0);
    if (it == NULL)
        return RS_ERR_NOMEM;
    return post_out(ep, it, op);
}

static rs_status_t lb_msg_send(rs_ep_t *ep, rs_op_t *op, unsigned type, const void *data,
                               size_t len)
{
    lb_item_t *it = item_new(LB_MSG, len);
    if (it == NULL)
        return RS_ERR_NOMEM;
    it->type = type;
    it->len = len;
    if (len > 0)
        memcpy(it->data, data, len);
    return post_out(ep, it, op);
}

/* ---------------------------------------------------------------- progress */

/* The target bytes of a one-sided op, or NULL (lb_lock held). */
static unsigned char *target(const lb_item_t *it, rs_status_t *st)
{
    lb_region_t *r = region_by_id(it->region);
    if (r == NULL || r->owner == NULL || r->owner->dead) {
        *st = RS_ERR_UNREACHABLE;
        return NULL;
    }
    uintptr_t base = (uintptr_t)r->addr;
    if (it->raddr < base || it->len > r->len || it->raddr - base > r->len - it->len) {
        *st = RS_ERR_OUT_OF_RANGE;
        return NULL;
    }
    return (unsigned char *)(uintptr_t)it->raddr;
}

/*
 * Carries out it, the first op posted on e (lb_lock held; it is unlinked).
 * Returns it when the caller completes its op and frees it, NULL when it
 * moved to the peer's inbound queue (a message: its op completes here).
 */
static lb_item_t *carry_out(lb_ep_t *e, lb_item_t *it, rs_status_t *st)
{
    lb_ep_t *peer = e->peer;
    *st = RS_OK;
    if (e->owner->dead || peer == NULL || peer->owner->dead) {
        *st = RS_ERR_UNREACHABLE;
        return it;
    }
    unsigned char *p;
    switch (it->kind) {
        case LB_MSG:
            if (lb.drop[it->type & 255] > 0) {
                lb.drop[it->type & 255]--;
                lb.counts.dropped[it->type & 255]++;
                return it;
            }
            it->kind = LB_IN_MSG;
            it->to = peer;
            rs_list_add_tail(&peer->owner->inbound, &it->link);
            wake(peer->owner);
            return NULL;
        case LB_PUT:
            if ((p = target(it, st)) == NULL)
                return it;
            memcpy(p, it->local, it->len);
            lb.counts.puts++;
            lb.counts.put_bytes += it->len;
            if (it->notify) {
                lb.counts.notifies++;
                lb_item_t *n = item_new(LB_IN_NOTIFY, 0);
                if (n == NULL) {
                    *st = RS_ERR_NOMEM;
                    return it;
                }
                n->to = peer;
                n->imm = it->imm;
                rs_list_add_tail(&peer->owner->inbound, &n->link);
                wake(peer->owner);
            }
            return it;
        case LB_GET:
            if ((p = target(it, st)) == NULL)
                return it;
            memcpy(it->local, p, it->len);
            lb.counts.gets++;
            return it;
        case LB_FADD:
            if ((p = target(it, st)) == NULL)
                return it;
            if (((uintptr_t)p & 7) != 0) {
                *st = RS_ERR_INVALID;
                return it;
            }
            it->op->result = __atomic_fetch_add((uint64_t *)(void *)p, it->add, __ATOMIC_SEQ_CST);
            lb.counts.fetch_adds++;
            return it;
        default:
            return it; /* flush: everything before it on e is done */
    }
}

/* One posted op of c's endpoints carried out; 0 when none is left. */
static unsigned progress_out(lb_ctx_t *c)
{
    lb_lock();
    lb_item_t *it = NULL;
    lb_ep_t *e = NULL;
    rs_list_t *pos;
    LB_FOR_EACH(pos, &c->eps)
    {
        e = RS_CONTAINER_OF(pos, lb_ep_t, link);
        if (!rs_list_empty(&e->out)) {
            it = rs_list_first(&e->out, lb_item_t, link);
            break;
        }
    }
    if (it == NULL) {
        lb_unlock();
        return 0;
    }
    rs_list_del(&it->link);
    /* Round robin: the endpoint goes to the end of the list. */
    rs_list_del(&e->link);
    rs_list_add_tail(&c->eps, &e->link);
    rs_op_t *op = it->op;
    rs_status_t st;
    lb_item_t *done = carry_out(e, it, &st);
    lb_unlock();
    rs_tp_op_complete(op, st);
    free(done);
    return 1;
}

/* The next inbound event that may be delivered (still queued); NULL when none (lb_lock held). */
static lb_item_t *next_in(lb_ctx_t *c)
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

static void accept_one(lb_ctx_t *c, lb_item_t *it)
{
    rs_ep_t *ep = c->dead ? NULL : rs_tp_ep_new_accepted(c->ctx);
    lb_ep_t *e = ep != NULL ? ep_new(c->ctx, ep) : NULL;
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
        post_in(client, LB_IN_CONNECTED, RS_OK);
    } else if (client != NULL) {
        lb.counts.refused++;
        post_in(client, LB_IN_FAILED, RS_ERR_REFUSED);
    }
    lb_unlock();
    if (ep != NULL && e == NULL)
        rs_tp_ep_failed(ep, RS_ERR_NOMEM);
    else if (ep != NULL && !ok)
        rs_tp_ep_failed(ep, RS_ERR_UNREACHABLE);
}

/* One inbound event of c delivered; 0 when none is deliverable. */
static unsigned progress_in(lb_ctx_t *c)
{
    lb_lock();
    lb_item_t *it = next_in(c);
    if (it != NULL)
        rs_list_del(&it->link);
    if (it != NULL && it->kind == LB_IN_MSG)
        lb.counts.delivered[it->type & 255]++;
    lb_unlock();
    if (it == NULL)
        return 0;
    rs_ep_t *ep = it->to != NULL ? it->to->ep : NULL;
    switch (it->kind) {
        case LB_IN_ACCEPT:
            accept_one(c, it);
            break;
        case LB_IN_CONNECTED:
            rs_tp_ep_connected(ep);
            break;
        case LB_IN_FAILED:
            rs_tp_ep_failed(ep, it->status);
            break;
        case LB_IN_CLOSED:
            rs_tp_ep_peer_closed(ep);
            break;
        case LB_IN_MSG:
            if (!it->to->failed)
                rs_tp_msg_recv(ep, it->type, it->data, it->len);
            break;
        case LB_IN_NOTIFY:
            if (!it->to->failed)
                rs_tp_notify_recv(ep, it->imm);
            break;
        default:
            break;
    }
    free(it);
    return 1;
}

static unsigned lb_progress(rs_ctx_t *ctx)
{
    lb_ctx_t *c = rs_tp_ctx_be(ctx);
    uint64_t v;
    ssize_t unused = read(c->efd, &v, sizeof(v));
    (void)unused;
    unsigned n = 0, k;
    do {
        k = progress_out(c);
        k += progress_in(c);
        n += k;
    } while (k > 0 && n < LB_PROGRESS_MAX);
    if (k > 0)
        wake(c); /* more to do: the next progress call does it */
    return n;
}

const rs_backend_ops_t rs_lb_ops = {
    .name = RS_LB_NAME,
    .ctx_open = lb_ctx_open,
    .ctx_close = lb_ctx_close,
    .progress = lb_progress,
    .fd = lb_fd,
    .arm = lb_arm,
    .mem_reg = lb_mem_reg,
    .mem_dereg = lb_mem_dereg,
    .rkey_pack = lb_rkey_pack,
    .rkey_unpack = lb_rkey_unpack,
    .rkey_release = lb_rkey_release,
    .listen = lb_listen,
    .listener_close = lb_listener_close,
    .connect = lb_connect,
    .address = lb_address,
    .connect_address = lb_connect_address,
    .ep_fail = lb_ep_fail,
    .ep_close = lb_ep_close,
    .put = lb_put,
    .get = lb_get,
    .fetch_add = lb_fetch_add,
    .flush = lb_flush,
    .msg_send = lb_msg_send,
};
