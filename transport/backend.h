/*
 * The contract between the generic transport layer (the transport/ sources outside
 * the backends) and a backend (transport/ucx/, transport/verbs/).
 *
 * The generic layer owns: argument checks, the context lock, the op pool,
 * outstanding-op lists and their deadlines, the remote-key blob envelope
 * (base, length, access, checksum) and range checks, the job-token
 * handshake, message-type dispatch, and the endpoint state machine.
 *
 * A backend owns: the fabric objects, moving bytes, and reporting back
 * through the rs_tp_* upcalls below. Every backend function is called with the
 * context lock held; every upcall must be made with it held too (i.e. from
 * inside a backend function, normally progress()).
 */
#ifndef RS_TRANSPORT_BACKEND_H
#define RS_TRANSPORT_BACKEND_H

#include <pthread.h>
#include <stdint.h>
#include <rshuffle/transport.h>

#include "common/list.h"

/* Internal message types, above the user's 0 .. RS_MSG_TYPES-1. Backends carry type as 8 bits. */
enum {
    RS__MSG_HELLO = 64,   /* client -> server: version, job token */
    RS__MSG_WELCOME = 65, /* server -> client: token accepted */
    RS__MSG_REJECT = 66,  /* server -> client: token refused; server then closes */
    RS__MSG_TYPE_LIMIT = 256,
};

typedef enum rs_op_kind {
    RS_OP_PUT,
    RS_OP_PUT_NOTIFY,
    RS_OP_GET,
    RS_OP_FETCH_ADD,
    RS_OP_FLUSH,
    RS_OP_MSG,
} rs_op_kind_t;

typedef struct rs_op {
    rs_list_t link; /* in ep->ops, oldest first (generic layer) */
    rs_ep_t *ep;
    rs_op_cb_t cb;
    void *arg;
    uint64_t deadline_ns;
    uint64_t *old_p; /* fetch-add: where the generic layer copies result */
    uint64_t result; /* fetch-add: the backend stores the old value here */
    rs_op_kind_t kind;
    int user_done; /* the user's callback already ran (forced completion) */
    void *be[4];   /* backend scratch (request handle, wr id, ...) */
} rs_op_t;

typedef enum rs_ep_state {
    RS_EP_CONNECTING, /* backend connection being set up */
    RS_EP_HANDSHAKE,  /* connected; HELLO sent (client) or awaited (server) */
    RS_EP_READY,      /* handshake passed: user traffic allowed */
    RS_EP_DEAD,       /* failed: status says why; only rs_ep_close is left */
    RS_EP_CLOSING,    /* rs_ep_close in progress */
} rs_ep_state_t;

struct rs_ep {
    rs_ctx_t *ctx;
    rs_list_t link; /* in ctx->eps */
    rs_list_t ops;  /* outstanding ops, oldest first */
    size_t n_ops;
    rs_list_t rkeys; /* rkeys unpacked for this endpoint */
    rs_ep_state_t state;
    rs_status_t status;    /* RS_OK until the endpoint dies */
    int accepted;          /* created by a listener (server side) */
    rs_status_t hs_result; /* client: handshake outcome, RS_ERR_BUSY while pending */
    /* client: the step a connect is at, named in its error (a backend names its own steps) */
    const char *stage;
    char peer_name[80]; /* client: "host:port" or "an address blob", for the same */
    void *user;
    void *be; /* backend private */
};

struct rs_mr {
    rs_ctx_t *ctx;
    rs_list_t link; /* in ctx->mrs */
    void *addr;
    size_t len;
    unsigned access;
    int allocated; /* rs_mem_alloc: the backend frees the memory on dereg */
    void *be;
};

struct rs_rkey {
    rs_ep_t *ep;
    rs_list_t link; /* in ep->rkeys */
    uint64_t base;  /* remote virtual address of the region's first byte */
    uint64_t len;
    unsigned access;
    void *be;
};

struct rs_listener {
    rs_ctx_t *ctx;
    rs_list_t link; /* in ctx->listeners */
    uint16_t port;
    void *be;
};

typedef struct rs_backend_ops {
    const char *name;

    /* Sets ctx->be. Fails cleanly (RS_ERR_UNSUPPORTED when no device). */
    rs_status_t (*ctx_open)(rs_ctx_t *ctx);
    /* Called after every endpoint, listener and region has been released. */
    void (*ctx_close)(rs_ctx_t *ctx);
    /* Non-blocking; returns events handled (completions, receptions, CM events). */
    unsigned (*progress)(rs_ctx_t *ctx);
    /* A pollable fd and its arm call (RS_OK: armed; RS_ERR_BUSY: progress first). */
    int (*fd)(rs_ctx_t *ctx);
    rs_status_t (*arm)(rs_ctx_t *ctx);
    /* The RS_CAP_* bits (include/rshuffle/transport.h) for ctx, as configured. */
    unsigned (*caps)(const rs_ctx_t *ctx);
    /*
     * With RS_CAP_RENEW (else never called): replaces the receive queue
     * every connection shares with a fresh one. Called with no endpoint
     * left; regions stay registered, listeners keep their ports.
     */
    rs_status_t (*renew)(rs_ctx_t *ctx);

    /* addr NULL: allocate len bytes. Sets mr->addr and mr->be. */
    rs_status_t (*mem_reg)(rs_ctx_t *ctx, rs_mr_t *mr, void *addr, size_t len, unsigned access);
    void (*mem_dereg)(rs_mr_t *mr);
    /* The backend's part of a remote-key blob (the generic layer wraps it). */
    rs_status_t (*rkey_pack)(const rs_mr_t *mr, void *buf, size_t buflen, size_t *len_p);
    rs_status_t (*rkey_unpack)(rs_ep_t *ep, rs_rkey_t *rkey, const void *buf, size_t len);
    void (*rkey_release)(rs_rkey_t *rkey);

    /* Sets l->port (the bound port when port was 0) and l->be. */
    rs_status_t (*listen)(rs_ctx_t *ctx, rs_listener_t *l, const char *host, uint16_t port);
    void (*listener_close)(rs_listener_t *l);
    /*
     * Starts connecting ep (state RS_EP_CONNECTING); later calls
     * rs_tp_ep_connected(ep) or rs_tp_ep_failed(ep, status) from progress.
     */
    rs_status_t (*connect)(rs_ctx_t *ctx, rs_ep_t *ep, const char *host, uint16_t port);
    rs_status_t (*address)(rs_ctx_t *ctx, void *buf, size_t buflen, size_t *len_p);
    rs_status_t (*connect_address)(rs_ctx_t *ctx, rs_ep_t *ep, const void *blob, size_t len);
    /*
     * ep is dead or closing: post nothing more on it and make every op still
     * outstanding on it complete (with an error status) through
     * rs_tp_op_complete, promptly (before returning, or from the next few
     * progress calls).
     */
    void (*ep_fail)(rs_ep_t *ep);
    /* Releases ep's backend resources; no op is outstanding any more. */
    void (*ep_close)(rs_ep_t *ep);

    /*
     * One-sided operations and messages. RS_OK: posted, and rs_tp_op_complete(op)
     * follows exactly once, possibly from inside this call (the generic layer
     * queues it: the user's callback still runs only from progress). An error:
     * nothing was posted and rs_tp_op_complete is never called. raddr is the
     * absolute remote address (rkey->base + offset, range already checked).
     */
    rs_status_t (*put)(rs_ep_t *ep, rs_op_t *op, const void *src, size_t len, rs_mr_t *mr,
                       rs_rkey_t *rkey, uint64_t raddr, int notify, uint32_t imm);
    rs_status_t (*get)(rs_ep_t *ep, rs_op_t *op, void *dst, size_t len, rs_mr_t *mr,
                       rs_rkey_t *rkey, uint64_t raddr);
    /*
     * Optional (NULL: one get per segment, under one op, by the generic
     * layer). n >= 1 segments, ranges checked; seg[i].roff is an offset into
     * rkey. RS_ERR_UNSUPPORTED (nothing posted): this key reads one get per
     * segment.
     */
    rs_status_t (*getv)(rs_ep_t *ep, rs_op_t *op, const rs_get_seg_t *seg, unsigned n,
                        rs_rkey_t *rkey);
    /* The old value goes to op->result. */
    rs_status_t (*fetch_add)(rs_ep_t *ep, rs_op_t *op, rs_rkey_t *rkey, uint64_t raddr,
                             uint64_t add);
    rs_status_t (*flush)(rs_ep_t *ep, rs_op_t *op);
    /* Copies data before returning. type < RS__MSG_TYPE_LIMIT, len <= msg_max. */
    rs_status_t (*msg_send)(rs_ep_t *ep, rs_op_t *op, unsigned type, const void *data, size_t len);
} rs_backend_ops_t;

/* The backends built into this library (RS_WITH_UCX, RS_WITH_VERBS). */
extern const rs_backend_ops_t rs_ucx_ops;
extern const rs_backend_ops_t rs_verbs_ops;

/* A backend's ops, or NULL when it was configured out. */
static inline const rs_backend_ops_t *rs_tp_ucx_backend(void)
{
#ifdef RS_HAVE_UCX
    return &rs_ucx_ops;
#else
    return NULL;
#endif
}

static inline const rs_backend_ops_t *rs_tp_verbs_backend(void)
{
#ifdef RS_HAVE_VERBS
    return &rs_verbs_ops;
#else
    return NULL;
#endif
}

/* ------------------------------------------- upcalls (generic layer, lock held) */

/*
 * An op the backend accepted is finished. Exactly once per op. It may have
 * been force-completed for the user already (deadline, close): then op->ep
 * is NULL and the call only recycles the op; the backend must not use
 * op->ep in completion paths without checking it.
 */
void rs_tp_op_complete(rs_op_t *op, rs_status_t status);

/* A new server-side endpoint for an incoming connection (state RS_EP_HANDSHAKE). */
rs_ep_t *rs_tp_ep_new_accepted(rs_ctx_t *ctx);

/* The backend connection of ep is up (client: the generic layer sends HELLO). */
void rs_tp_ep_connected(rs_ep_t *ep);

/* The backend saw ep die (peer gone, QP error, disconnect). */
void rs_tp_ep_failed(rs_ep_t *ep, rs_status_t status);

/* The peer closed the connection in order (its goodbye, a CM disconnect): fails
 * the endpoint as rs_tp_ep_failed(ep, RS_ERR_UNREACHABLE) does, but is no death
 * worth a log line above debug. */
void rs_tp_ep_peer_closed(rs_ep_t *ep);

/* A message arrived on ep (any type, internal ones included). */
void rs_tp_msg_recv(rs_ep_t *ep, unsigned type, const void *data, size_t len);

/* A notified put's notification arrived on ep (the data is visible). */
void rs_tp_notify_recv(rs_ep_t *ep, uint32_t imm);

/* The context's configuration and backend private pointer. */
const rs_config_t *rs_tp_ctx_cfg(const rs_ctx_t *ctx);
void *rs_tp_ctx_be(const rs_ctx_t *ctx);
void rs_tp_ctx_set_be(rs_ctx_t *ctx, void *be);

#endif
