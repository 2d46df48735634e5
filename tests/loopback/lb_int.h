/*
 * Internals of the loopback backend (tests/loopback/loopback.h), shared by
 * its three files: lb_fabric.c (the shared state, its lock, the hooks, the
 * contexts), lb_conn.c (memory, listeners, connections) and lb_ops.c
 * (posted operations, progress, the ops table).
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
#ifndef RS_TESTS_LB_INT_H
#define RS_TESTS_LB_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/loopback/lb_backend.h"
#include "tests/loopback/loopback.h"

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
    LB_GETV, /* data: n (len) rs_get_seg_t, roff made absolute */
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
    const rs_rkey_t *rkey; /* a one-sided op's key, as posted (rs_lb_counts: stale_rkeys) */
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

typedef struct lb_fabric {
    pthread_mutex_t lock;
    int init;
    rs_list_t ctxs, regions, listeners;
    uint64_t next_id, next_region;
    unsigned next_port;
    unsigned drop[256];
    unsigned mangle[256]; /* rs_lb_mangle: messages left to rewrite, with what */
    rs_lb_mangle_fn mangle_fn[256];
    void *mangle_arg[256];
    unsigned char hold[256];
    int hold_gets; /* rs_lb_hold_gets */
    rs_lb_counts_t counts;
} lb_fabric_t;

extern lb_fabric_t lb;

/* lb_fabric.c: the lock (set up on first use) and helpers, all but the lock's with it held. */
void lb_lock(void);
void lb_unlock(void);
void lb_wake(lb_ctx_t *c);
void lb_wake_all(void);
lb_item_t *lb_item_new(lb_kind_t kind, size_t data_len);
/* Queues an inbound event for endpoint to; 0 when out of memory. */
int lb_post_in(lb_ep_t *to, lb_kind_t kind, rs_status_t status);
/* Unlinks a and its peer; the peer hears kind. */
void lb_unlink_peer(lb_ep_t *a, lb_kind_t kind, rs_status_t status);
lb_ctx_t *lb_ctx_by_rs(const rs_ctx_t *ctx);
lb_region_t *lb_region_by_id(uint64_t id);
/* The next inbound event of c that may be delivered (still queued), or NULL. */
lb_item_t *lb_next_in(lb_ctx_t *c);

rs_status_t lb_ctx_open(rs_ctx_t *ctx);
void lb_ctx_close(rs_ctx_t *ctx);
int lb_fd(rs_ctx_t *ctx);
rs_status_t lb_arm(rs_ctx_t *ctx);

/* lb_conn.c */
lb_ep_t *lb_ep_new(rs_ctx_t *ctx, rs_ep_t *ep);
/* Delivers an accept request (from c's progress, lb_lock not held). */
void lb_accept_one(lb_ctx_t *c, lb_item_t *it);
rs_status_t lb_mem_reg(rs_ctx_t *ctx, rs_mr_t *mr, void *addr, size_t len, unsigned access);
void lb_mem_dereg(rs_mr_t *mr);
rs_status_t lb_rkey_pack(const rs_mr_t *mr, void *buf, size_t buflen, size_t *len_p);
rs_status_t lb_rkey_unpack(rs_ep_t *ep, rs_rkey_t *rkey, const void *buf, size_t len);
void lb_rkey_release(rs_rkey_t *rkey);
rs_status_t lb_listen(rs_ctx_t *ctx, rs_listener_t *l, const char *host, uint16_t port);
void lb_listener_close(rs_listener_t *l);
rs_status_t lb_connect(rs_ctx_t *ctx, rs_ep_t *ep, const char *host, uint16_t port);
rs_status_t lb_address(rs_ctx_t *ctx, void *buf, size_t buflen, size_t *len_p);
rs_status_t lb_connect_address(rs_ctx_t *ctx, rs_ep_t *ep, const void *blob, size_t len);
void lb_ep_fail(rs_ep_t *ep);
void lb_ep_close(rs_ep_t *ep);

#endif
