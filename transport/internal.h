/*
 * Private state of the generic transport layer (not seen by backends, which
 * know only backend.h).
 */
#ifndef RS_TRANSPORT_INTERNAL_H
#define RS_TRANSPORT_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "transport/backend.h"

/* An op as the generic layer allocates it; backends see only .op. */
typedef struct rs_op_priv {
    rs_op_t op;
    rs_ctx_t *ctx;
    rs_status_t status;   /* the status the user's callback receives */
    unsigned be_done : 1; /* the backend reported completion */
    unsigned orphan : 1;  /* callback ran before the backend finished */
} rs_op_priv_t;

/* Who a process is, sent in the handshake (peer_alive.c). */
typedef struct rs_proc_id {
    uint32_t pid;
    uint32_t reserved;
    uint64_t pidns;   /* inode of /proc/self/ns/pid */
    char boot_id[40]; /* /proc/sys/kernel/random/boot_id */
} rs_proc_id_t;

/* An endpoint as the generic layer allocates it; backends see only .ep. */
/* A message or notification that arrived before rs_connect returned its ep. */
typedef struct rs_early {
    rs_list_t link;
    int notify;
    unsigned type;
    uint32_t imm;
    size_t len;
    unsigned char data[];
} rs_early_t;

typedef struct rs_ep_priv {
    rs_ep_t ep;
    rs_list_t early;      /* rs_early_t, oldest first */
    rs_list_t early_link; /* in ctx->early_eps once the user knows the ep */
    uint64_t reap_ns;     /* accepted, not handed to the user: close at this time (0: never) */
    unsigned told : 1;    /* the user knows the endpoint (connect returned it, or accept event) */
    unsigned reap : 1;    /* close it from progress (internal endpoints, deferred closes) */
    unsigned hs_client : 1;
    unsigned be_failed : 1;   /* backend ep_fail was called (once only) */
    unsigned peer_gone : 1;   /* the peer's process exited */
    unsigned peer_closed : 1; /* the peer closed it in order: not logged as a death */
    int peer_pidfd;           /* the peer's process, when it runs on this host; else -1 */
} rs_ep_priv_t;

#define RS_EP_PRIV(e) ((rs_ep_priv_t *)(e))
#define RS_OP_PRIV(o) ((rs_op_priv_t *)(o))

typedef struct rs_msg_handler {
    rs_msg_cb_t cb;
    void *arg;
} rs_msg_handler_t;

struct rs_ctx {
    pthread_mutex_t lock; /* recursive: callbacks may post */
    const rs_backend_ops_t *be_ops;
    void *be;
    rs_config_t cfg;

    rs_list_t eps;       /* every endpoint, user-visible or not */
    rs_list_t mrs;       /* registered regions */
    rs_list_t listeners; /* listeners */

    rs_list_t done;      /* completed ops whose callback has not run yet */
    rs_list_t op_free;   /* op pool */
    rs_list_t op_chunks; /* allocations backing the pool */
    size_t n_ops_live;

    uint64_t timeout_ns;     /* peer_timeout_ms */
    uint64_t scan_period_ns; /* how often progress checks deadlines */
    uint64_t next_scan_ns;
    unsigned n_reap;     /* endpoints flagged reap */
    rs_list_t early_eps; /* known endpoints with early messages to deliver */

    rs_msg_handler_t msg_handlers[RS_MSG_TYPES];
    rs_notify_cb_t notify_cb;
    void *notify_arg;
    rs_ep_cb_t ep_cb;
    void *ep_arg;

    int in_cb;       /* depth of user callbacks running on the lock owner */
    int in_progress; /* backend progress running: no nested progress */
    int destroying;

    /* progress thread */
    pthread_t thread;
    int thread_running;
    int thread_wake_fd;  /* eventfd: wakes the thread to stop */
    int thread_stop;     /* atomic */
    int thread_sleeping; /* the thread sleeps on the fd (lock held to change) */
};

static inline void rs_tp_lock(rs_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
}

static inline void rs_tp_unlock(rs_ctx_t *ctx)
{
    pthread_mutex_unlock(&ctx->lock);
}

/* RS_OK when user traffic may be posted on ep (lock held). */
static inline rs_status_t rs_tp_ep_check_ready(const rs_ep_t *ep)
{
    switch (ep->state) {
        case RS_EP_READY:
            return RS_OK;
        case RS_EP_DEAD:
            return RS_ERR_UNREACHABLE;
        case RS_EP_CLOSING:
            return RS_ERR_CANCELED;
        default:
            return RS_ERR_STATE;
    }
}

/* Backend selection (select.c). */
rs_status_t rs_tp_select_backend(const rs_config_t *cfg, const rs_backend_ops_t **ops_p);
int rs_tp_rdma_device_active(void);

/* Op pool and completion (op.c). */
rs_op_t *rs_tp_op_alloc(rs_ctx_t *ctx, rs_ep_t *ep, rs_op_kind_t kind, rs_op_cb_t cb, void *arg);
/* Undo rs_tp_op_alloc + attach for an op the backend refused. */
void rs_tp_op_unpost(rs_op_t *op);
/* Completes op now for the user (status), whatever the backend does later. */
void rs_tp_op_force(rs_op_t *op, rs_status_t status);
/* Runs the callbacks of completed ops; returns how many. */
unsigned rs_tp_ops_drain(rs_ctx_t *ctx);
void rs_tp_ops_pool_free(rs_ctx_t *ctx);

/* Endpoints (ep.c). */
rs_ep_t *rs_tp_ep_alloc(rs_ctx_t *ctx);
void rs_tp_ep_free(rs_ep_t *ep);
/* Marks an endpoint nobody was told of for the next reap. */
void rs_tp_ep_mark_reap(rs_ep_t *ep);
/* Calls the backend's ep_fail once per endpoint. */
void rs_tp_ep_be_fail(rs_ep_t *ep);
/* Marks ep dead with status, tells the backend and (if known) the user. */
void rs_tp_ep_kill(rs_ep_t *ep, rs_status_t status);
/*
 * Fails, drains (until end, rs_now_ns) and releases ep. Lock held, not
 * inside backend progress. rs_tp_close_deadline gives the usual end.
 */
void rs_tp_ep_destroy(rs_ep_t *ep, rs_status_t cancel_status, uint64_t end);
uint64_t rs_tp_close_deadline(const rs_ctx_t *ctx);
/* Deadline scan and deferred closes, from progress. */
unsigned rs_tp_eps_scan(rs_ctx_t *ctx, uint64_t now);
unsigned rs_tp_eps_reap(rs_ctx_t *ctx);
/* Waits for the client handshake of ep (peer: its address, for log lines); closes ep on failure. */
rs_status_t rs_tp_ep_connect_wait(rs_ep_t *ep, const char *peer, rs_ep_t **ep_p);

/* Early messages (msg.c): queue one, deliver those of known endpoints. */
int rs_tp_early_queue(rs_ep_t *ep, int notify, unsigned type, uint32_t imm, const void *data,
                      size_t len);
unsigned rs_tp_early_deliver(rs_ctx_t *ctx);

/* Liveness of peers on this host (peer_alive.c). */
void rs_tp_proc_identity(rs_proc_id_t *id);
void rs_tp_peer_watch(rs_ep_t *ep, const rs_proc_id_t *peer);
int rs_tp_peer_exited(rs_ep_t *ep);
void rs_tp_peer_unwatch(rs_ep_t *ep);

/* Handshake (handshake.c). */
void rs_tp_hs_start_client(rs_ep_t *ep);
void rs_tp_hs_recv(rs_ep_t *ep, unsigned type, const void *data, size_t len);
/*
 * Decodes a HELLO, WELCOME or REJECT from a peer: 1 with the token it
 * carries (*token_p points into data) and the sender's identity, or 0 when
 * the header, version or exact length is wrong. Peer bytes: the fuzz
 * target fuzz_handshake calls it directly.
 */
int rs_tp_hs_parse(const void *data, size_t len, const char **token_p, uint16_t *token_len_p,
                   rs_proc_id_t *id_p);

/* Progress (progress.c): one round with the lock held. */
unsigned rs_tp_progress_locked(rs_ctx_t *ctx);
/* Wakes the progress thread (a completion is queued): a write to its eventfd. */
static inline void rs_tp_thread_wake(rs_ctx_t *ctx)
{
    ctx->thread_sleeping = 0;
    uint64_t one = 1;
    ssize_t unused = write(ctx->thread_wake_fd, &one, sizeof(one));
    (void)unused;
}
/* Reports an endpoint event to the context's endpoint handler, if any. */
void rs_tp_ep_tell_user(rs_ep_t *ep, rs_status_t status);
/* Work for progress was queued (lock held): wakes the progress thread if it sleeps. */
static inline void rs_tp_thread_kick(rs_ctx_t *ctx)
{
    if (ctx->thread_sleeping)
        rs_tp_thread_wake(ctx);
}

/* Message posting used by the handshake: like rs_msg_send, any type. */
rs_status_t rs_tp_msg_post(rs_ep_t *ep, unsigned type, const void *data, size_t len, rs_op_cb_t cb,
                           void *arg);

#endif
