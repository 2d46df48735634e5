/*
 * Private state of the UCX backend, shared by its files:
 *   ctx.c    ops table, UCP context and worker, progress
 *   worker.c opening and closing a UCX worker (the context's, a connection's own)
 *   own.c    RSHUFFLE_UCX_QUEUE=local|own: a connection's own worker
 *   accept.c an accepted connection's own worker, before its CONN
 *   conn.c   listeners, connections, endpoint ids, teardown
 *   recv.c   the active-message handler (dispatch by header)
 *   amhdr.c  the active-message headers: packing, strict decoding
 *   am.c     sending messages and connection control messages
 *   rma.c    one-sided ops on UCX RMA (falls back to amrma.c)
 *   amrma.c  one-sided ops emulated over active messages
 *   mem.c    memory registration and remote keys
 *   req.c    status mapping and request outcomes, used by all
 *
 * Every active message carries a header (amhdr.h) naming the receiver's
 * connection id, so the receiver finds its rs_ep_t without relying on UCX
 * reply endpoints (endpoints created from a worker address have no accept
 * event on the server). Connection setup:
 *   host:port  the front door (front.c): a TCP socket of ours, where the
 *              client sends a bounded hello with its job token and the
 *              listener answers with its worker address (a client of this
 *              host: a worker opened for its connection, conn.c); then as
 *              address.
 *              UCX never parses a byte from the listener's port.
 *   address    client ucp_ep (worker address) --CONN + client address-->
 *              server creates a reverse ucp_ep to the client
 *   then       server --CONN_ACK (its id)--> client: the client is connected
 *              and the generic layer starts the job-token handshake.
 */
#ifndef RS_TRANSPORT_UCX_H
#define RS_TRANSPORT_UCX_H

#include <stdint.h>
#include <sys/types.h>
#include <ucp/api/ucp.h>

#include "transport/backend.h"
#include "transport/ucx/amhdr.h"
#include "transport/ucx/config.h"

#define RS_UCX_AM_ID     0x5253 /* the one AM id rshuffle uses */
#define RS_UCX_MEMFD_MAX 64     /* regions per context in memfds; later ones are private */

typedef struct rs_ucx_pending rs_ucx_pending_t;

typedef struct rs_ucx_front rs_ucx_front_t;

/* A UCX worker with what the context keeps of it (worker.c). */
typedef struct rs_ucx_worker {
    ucp_worker_h worker;
    ucp_address_t *addr;
    unsigned char *blob; /* addr.c: what peers get */
    size_t blob_len;
    int efd;
    int armed;      /* own.c: armed, idle, skipped until its efd fires */
    rs_list_t link; /* own.c: in uc->own_dead until destroyed */
} rs_ucx_worker_t;

typedef struct rs_ucx_ep {
    rs_ctx_t *ctx;
    rs_ucx_front_t *front; /* client: its front-door socket, before UCX is used */
    rs_ep_t *ep;           /* NULL once the generic layer released it */
    ucp_ep_h uep;
    uint32_t id, peer_id;
    unsigned fail_pending : 1;  /* on pending list: report failure */
    unsigned bye : 1;           /* the failure is the peer's goodbye: an orderly close */
    unsigned ucp_failed : 1;    /* UCX reported an error on uep */
    unsigned close_pending : 1; /* force-close uep after worker progress */
    unsigned released : 1;      /* the generic layer is done with it (zombie) */
    unsigned used_amrma : 1;    /* emulated one-sided messages were sent on it */
    ucs_status_t fail_status;
    unsigned ctl_inflight;      /* control AMs (headers live here) and drain flushes */
    rs_list_t pend_link;        /* ctx pending list (failure reports) */
    rs_list_t wait_link;        /* zombie list once released */
    rs_list_t close_link;       /* ctx close list */
    rs_ucx_hdr_wire_t conn_hdr; /* CONN or CONN_ACK, packed */
    rs_ucx_hdr_wire_t bye_hdr;  /* BYE, packed (kind byte 0: not sent) */
    rs_ucx_worker_t *own;       /* own.c: the connection's own receive queue, or NULL */
    rs_list_t own_link;         /* uc->owns while it has one */
    rs_list_t accept_link;      /* uc->accept_waits: its own worker waits for the CONN */
    uint64_t accept_by_ns;      /* ... until this time, then it goes */
} rs_ucx_ep_t;

/* A CONN received inside worker progress, handled right after it. */
typedef struct rs_ucx_conn_req {
    rs_list_t link;
    uint32_t src_id;
    uint32_t accept_id; /* the accept waiting on the worker it arrived on (0: the context's) */
    size_t addr_len;
    unsigned char addr[];
} rs_ucx_conn_req_t;

typedef struct rs_ucx_ctx {
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_address_t *ucp_addr; /* the worker's full address (UCX's, released with it) */
    unsigned char *addr;     /* what peers get: addr.c's blob (place key, full, net only) */
    size_t addr_len;
    uint64_t place_key; /* addr.c: kernel, namespaces and /dev/shm; 0 unknown */
    int efd;
    int wait_fd;   /* epoll of efd and front_ep: what rs_ctx_fd returns */
    int front_ep;  /* epoll of the front door's sockets */
    int in_worker; /* inside ucp_worker_progress: defer endpoint teardown */
    int notify_flush;
    rs_ucx_queue_t queue; /* RSHUFFLE_UCX_QUEUE: which client connections get a worker (own.c) */
    ucp_am_recv_callback_t am_cb; /* the AM handler every worker of the context gets */
    rs_list_t owns;               /* rs_ucx_ep_t with a worker of their own */
    rs_list_t own_dead;           /* rs_ucx_worker_t to destroy outside worker progress */
    int own_ep;                   /* epoll of the own workers' efds (in wait_fd), or -1 */
    unsigned own_n;               /* own workers open */
    unsigned own_armed;           /* of them armed and skipped by progress */
    unsigned own_rounds;          /* progress rounds since the last arm */
    uint64_t own_seen;            /* coarse time every own worker was last progressed */
    struct epoll_event *own_evs;  /* own_n entries: what own_ep reports */
    rs_list_t accept_waits;       /* rs_ucx_ep_t: an accept's own worker before its CONN */
    unsigned accept_waits_n;
    uint32_t am_accept_id; /* the AM in hand arrived on this accept's own worker (0: none) */

    rs_ucx_ep_t **slots; /* connection id -> endpoint */
    uint16_t *gens;
    uint32_t nslots, nfree;
    uint32_t *free_ids;

    rs_list_t pending;   /* endpoints with a failure to report */
    rs_list_t conn_reqs; /* rs_ucx_conn_req_t */
    rs_list_t closes;    /* endpoints to force-close after worker progress */
    rs_list_t zombies;   /* released endpoints whose control AMs are in flight */

    rs_list_t front_socks; /* rs_ucx_front_t: every open front-door socket */
    rs_list_t front_dead;  /* closed ones, freed after the current event batch */
    unsigned front_n;      /* open front-door sockets (listeners included) */
    unsigned front_hellos; /* accepted connections whose hello is not done */
    uint64_t front_seen;   /* coarse time of the last front-door poll */
    int front_kick;        /* arm saw front-door sockets ready: poll them next */
    uint64_t front_log_ns; /* last refusal logged (rate limit) */
    unsigned front_quiet;  /* refusals not logged since */

    /* The front door's descriptor bound (front.c). */
    unsigned front_admitted;    /* clients let in whose UCX connection did not arrive yet */
    uint64_t front_admit_ns;    /* the last one let in (they expire together) */
    uint64_t front_busy_log_ns; /* last refusal for descriptors logged (rate limit) */
    unsigned front_busy_quiet;  /* such refusals not logged since */
    uint64_t front_emfile_ns;   /* last failed accept logged (rate limit) */

    size_t req_size;    /* ucp request size, for requests we allocate */
    rs_list_t amo_reqs; /* free request buffers for fetch-add (see rma.c) */

    int native_remote; /* the context has an RDMA transport (native remote RMA) */
    int mem_shared;    /* RSHUFFLE_UCX_MEM=shared: UCX allocates segments same-host peers map */
    int mem_attach;    /* RSHUFFLE_UCX_MEM=attach: regions are never mapped by peers */
    uint64_t map_max;  /* largest region peers may map (RSHUFFLE_UCX_MAP_MAX; see ctx.c) */
    int mem_huge;      /* RSHUFFLE_UCX_HUGE: private regions of 2 MiB or more advised for THP */
    unsigned memfd_n;  /* registered regions in memfds (each holds a descriptor) */
    uint64_t host_key; /* this kernel and pid namespace (rkey blobs carry it) */
    int force_am;      /* RSHUFFLE_UCX_RMA=am|ucx|auto: 1 am, -1 ucx, 0 auto */
    rs_list_t regions; /* rs_ucx_mr_t: what emulated one-sided ops may touch */
    rs_ucx_pending_t **pend;
    uint32_t *pend_free;
    uint32_t pend_n, pend_nfree;
} rs_ucx_ctx_t;

typedef struct rs_ucx_mr {
    rs_list_t link; /* in uc->regions */
    uint64_t base, len;
    unsigned access;
    ucp_mem_h memh;
    void *rkey_buf; /* host key (8 bytes) and pid (4), little-endian, then UCX's packed key */
    size_t rkey_len;
    void *owned; /* our own mapping behind the region (munmap at dereg), or NULL */
    size_t owned_len;
    int memfd;      /* behind `owned` when same-host peers may map it (attach_map.c), or -1 */
    uint64_t token; /* the region's liveness word (in its trailer page) while registered */
} rs_ucx_mr_t;

/* An unpacked remote key. */
typedef struct rs_ucx_rkey {
    ucp_rkey_h rk;
    int am;           /* one-sided ops go as our own AMs (amrma.c) */
    pid_t attach_pid; /* put and get by cross-memory attach into this process (attach.c), or 0 */
    int own_process;  /* attach_pid is this process (known at unpack: getpid is a system call) */
    /* The owner's memfd, mapped here once pages are reused (attach_map.c). */
    int32_t map_fd;     /* its number in the owner, or -1: never mapped */
    int map_state;      /* 0 not tried, 1 mapped, -1 refused or gone (attach only) */
    uint64_t map_token; /* the liveness word's value while the region is registered */
    uint64_t base, len; /* the region, as the key says */
    uint8_t *map;       /* mapping of the region and its trailer page, or NULL */
    size_t map_len;
    uint64_t *seen;      /* a bit per page this key wrote or read, allocated on first use */
    uint64_t checked_ns; /* last time the owner process was checked alive */
} rs_ucx_rkey_t;

static inline rs_ucx_ctx_t *rs_ucx_ctx(const rs_ctx_t *ctx)
{
    return (rs_ucx_ctx_t *)rs_tp_ctx_be(ctx);
}

/* The worker uep's messages and one-sided ops go through. */
static inline ucp_worker_h rs_ucx_uep_worker(const rs_ucx_ep_t *uep)
{
    return uep->own != NULL ? uep->own->worker : rs_ucx_ctx(uep->ctx)->worker;
}

/* req.c */
rs_status_t rs_ucx_status(ucs_status_t status);

/*
 * fork.c: a context about to open (RS_OK, counted) or refused in a child
 * forked while its parent had contexts open (RS_ERR_STATE, logged);
 * rs_ucx_fork_close uncounts one that closes.
 */
rs_status_t rs_ucx_fork_open(void);
void rs_ucx_fork_close(void);

/*
 * worker.c: opens a UCX worker of uc's context with its wakeup fd, address
 * blob and uc->am_cb as its AM handler (arg ctx). RS_ERR_TRANSPORT or
 * RS_ERR_NOMEM (logged); *w is written only on success.
 */
rs_status_t rs_ucx_worker_open(rs_ctx_t *ctx, rs_ucx_ctx_t *uc, rs_ucx_worker_t *w);
/* Sets w's AM handler (cb with arg): RS_OK or RS_ERR_TRANSPORT (logged). */
rs_status_t rs_ucx_worker_set_am(const rs_ucx_worker_t *w, ucp_am_recv_callback_t cb, void *arg);
/* Destroys w's worker (its endpoints with it) and frees its address. */
void rs_ucx_worker_close(const rs_ucx_worker_t *w);

/*
 * own.c: with RSHUFFLE_UCX_QUEUE=local (a peer of this host, local != 0)
 * or own (every peer) a client connection (an accepted one too:
 * rs_ucx_accept_own_open) gets a worker of its own, so a
 * peer of this host killed mid-send blocks only its own connection's
 * shared-memory queue. rs_ucx_own_open gives uep one (a no-op otherwise):
 * RS_ERR_TRANSPORT, RS_ERR_NOMEM, RS_ERR_IO, then uep has none. rs_ucx_own_close hands uep's worker
 * to be destroyed by the next rs_ucx_own_progress outside worker progress; close_all destroys every
 * one (context teardown, before its own worker goes).
 */
rs_status_t rs_ucx_own_open(rs_ucx_ep_t *uep, int local);
void rs_ucx_own_close(rs_ucx_ep_t *uep);
/*
 * Progresses the own workers that may have work: an idle one armed by rs_ucx_own_arm is skipped
 * until its efd fires, its connection has ops or control messages in flight, or the coarse clock
 * ticks (then every one is progressed once: UCX's timers, a peer's death, are seen).
 */
unsigned rs_ucx_own_progress(rs_ucx_ctx_t *uc);
/* Arms every own worker not armed yet: UCS_OK, UCS_ERR_BUSY (events ready) or an error. */
ucs_status_t rs_ucx_own_arm(rs_ucx_ctx_t *uc);
void rs_ucx_own_close_all(rs_ucx_ctx_t *uc);

/* Request parameters of an eager active message whose completion runs cb(user_data). */
static inline ucp_request_param_t rs_ucx_am_param(ucp_send_nbx_callback_t cb, void *user_data,
                                                  unsigned flags)
{
    return (ucp_request_param_t){
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
        .flags = UCP_AM_SEND_FLAG_EAGER | flags,
        .cb.send = cb,
        .user_data = user_data,
    };
}

/* Request parameters of a one-sided op's request whose completion runs cb(op). */
static inline ucp_request_param_t rs_ucx_op_param(rs_op_t *op, ucp_send_nbx_callback_t cb)
{
    return (ucp_request_param_t){
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = cb,
        .user_data = op,
    };
}

/* Completion callback of an rs_op_t's request (user_data: the op). */
void rs_ucx_op_done_cb(void *request, ucs_status_t status, void *user_data);

/*
 * The outcome of posting op's single request: done at once (op completes
 * now), in flight (its callback completes it), or failed (logged as what).
 */
rs_status_t rs_ucx_post_result(rs_op_t *op, ucs_status_ptr_t req, const char *what);
/* Logs a failed post (what) and maps its status: RS_ERR_NOMEM or RS_ERR_UNREACHABLE. */
rs_status_t rs_ucx_post_error(ucs_status_ptr_t req, const char *what);

/* ids.c: connection ids (slot + generation); lookup NULL for unknown or stale ids. */
int rs_ucx_id_alloc(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep);
void rs_ucx_id_free(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep);
rs_ucx_ep_t *rs_ucx_ep_lookup(rs_ucx_ctx_t *uc, uint32_t id);

/* uep.c: a UCX endpoint's own life, below conn.c and front.c. */
/* A new endpoint with a connection id (NULL: out of memory or ids, logged). */
rs_ucx_ep_t *rs_ucx_uep_new(rs_ctx_t *ctx);
void rs_ucx_uep_free(rs_ucx_ep_t *uep);
/* Takes uep off the accepts waiting for their CONN (accept.c), if it is one. */
void rs_ucx_uep_accept_unwait(rs_ucx_ep_t *uep);
/*
 * Nobody but in-flight control AMs (whose headers live in uep) holds uep any
 * more: frees it now, or when the last of them completes.
 */
void rs_ucx_uep_release(rs_ucx_ep_t *uep);
/* Closes uep's ucp endpoint at once (a BYE first to a healthy peer); no-op without one. */
void rs_ucx_uep_force_close(rs_ucx_ep_t *uep);
/* The peer is dead (status says how): reported as such from the next progress call. */
void rs_ucx_ep_mark_failed(rs_ucx_ep_t *uep, ucs_status_t status);
/* Sets p's error handling: a peer failure marks uep failed. */
void rs_ucx_ep_params(ucp_ep_params_t *p, rs_ucx_ep_t *uep);
/*
 * The UCX address to connect by in a peer's blob (addr.c); a bare UCX
 * address as it is. *local_p (may be NULL): the peer may be reached over
 * shared memory (its full address, or a bare one).
 */
const ucp_address_t *rs_ucx_peer_address(const rs_ucx_ctx_t *uc, const void *blob, size_t len,
                                         int *local_p);
/*
 * Connects uep (linked to its ep) to a worker address and sends CONN.
 * On failure uep has no ucp endpoint; the caller still owns uep.
 */
rs_status_t rs_ucx_connect_uep(rs_ucx_ep_t *uep, const void *addr, size_t len);
/* A control AM of uep completed (the request callback of rs_ucx_send_ctl). */
void rs_ucx_ctl_done(rs_ucx_ep_t *uep);
void rs_ucx_ctl_done_cb(void *request, ucs_status_t status, void *user_data);
/* Sends a control AM (CONN, CONN_ACK, BYE) whose header lives in uep (ctl_inflight counts it). */
rs_status_t rs_ucx_send_ctl(rs_ucx_ep_t *uep, rs_ucx_hdr_wire_t *hdr, const void *data, size_t len,
                            unsigned flags);

/* conn.c */
rs_status_t rs_ucx_connect(rs_ctx_t *ctx, rs_ep_t *ep, const char *host, uint16_t port);
rs_status_t rs_ucx_connect_address(rs_ctx_t *ctx, rs_ep_t *ep, const void *blob, size_t len);
void rs_ucx_ep_fail(rs_ep_t *ep);
void rs_ucx_ep_close(rs_ep_t *ep);
/* After worker progress: connection requests, failures, deferred closes. */
unsigned rs_ucx_conn_progress(rs_ctx_t *ctx);
/* Context teardown, before and after the worker is destroyed. */
void rs_ucx_conn_cleanup(rs_ctx_t *ctx, int worker_gone);
/*
 * accept.c, for the front door (front.c) and a client whose hello carried place_key: when the
 * client will use shared memory (RSHUFFLE_UCX_QUEUE=local; every client with own) an accept-side
 * endpoint with a worker of its own waits for the client's CONN there until connect_timeout_ms;
 * *blob_p and *len_p are that worker's address blob, to answer with (it lives as long as the
 * endpoint). RS_ERR_EXISTS: no worker of its own (shared, another host, too many waiting): answer
 * with the context's. Other errors: as rs_ucx_own_open's.
 */
rs_status_t rs_ucx_accept_own_open(rs_ctx_t *ctx, uint64_t place_key, const unsigned char **blob_p,
                                   size_t *len_p);
/* Frees the accepts whose CONN did not come by now (outside worker progress). */
void rs_ucx_accept_expire(rs_ctx_t *ctx, uint64_t now_ns);
/* accept.c, for conn.c: the accept waiting on its own worker for a CONN, taken off the waiting
 * list; NULL if it is gone (expired) or taken (a second CONN on that worker). */
rs_ucx_ep_t *rs_ucx_accept_claim(rs_ucx_ctx_t *uc, uint32_t accept_id);
void rs_ucx_on_conn(rs_ctx_t *ctx, const rs_ucx_hdr_t *hdr, const void *data, size_t len,
                    const ucp_am_recv_param_t *param);
void rs_ucx_on_conn_ack(rs_ctx_t *ctx, const rs_ucx_hdr_t *hdr);
void rs_ucx_on_bye(rs_ctx_t *ctx, const rs_ucx_hdr_t *hdr);

/* front.c: the front door (our own TCP listener and its client side). */
rs_status_t rs_ucx_front_open(rs_ucx_ctx_t *uc);
void rs_ucx_front_close_all(rs_ucx_ctx_t *uc);
rs_status_t rs_ucx_listen(rs_ctx_t *ctx, rs_listener_t *l, const char *host, uint16_t port);
void rs_ucx_listener_close(rs_listener_t *l);
/* Starts the client side for uep (not yet a ucp endpoint). */
rs_status_t rs_ucx_front_connect(rs_ucx_ep_t *uep, const char *host, uint16_t port);
/* Closes uep's front-door socket, if any. */
void rs_ucx_front_drop_ep(rs_ucx_ep_t *uep);
/* 1 when a front-door socket has something ready (no syscall without sockets). */
int rs_ucx_front_ready(rs_ucx_ctx_t *uc);
/*
 * A client's UCX connection arrived (conn.c): it no longer counts as let in
 * ahead. Returns 1 when descriptors are so short that it must be refused.
 */
int rs_ucx_front_conn_arrived(rs_ctx_t *ctx);
/* Logs (rate-limited) a connection refused because descriptors are short. */
void rs_ucx_front_conn_refused(rs_ctx_t *ctx);
/* Handles what the front door's sockets have ready, and deadlines. */
unsigned rs_ucx_front_progress(rs_ctx_t *ctx);

/* addr.c: the address blob. This process's place key (0: unknown). */
uint64_t rs_ucx_place_key(void);
/* Packs both addresses (net_len 0: none) into a new blob: RS_ERR_NO_SPACE, RS_ERR_NOMEM. */
rs_status_t rs_ucx_addr_pack(uint64_t place_key, const void *full, size_t full_len, const void *net,
                             size_t net_len, unsigned char **blob_p, size_t *len_p);
/*
 * The UCX address in blob to connect by: the full one where the blob's
 * place key is ours, else the network-only one (the full one if it has
 * none). RS_ERR_BAD_MAGIC: not such a blob (a bare UCX address);
 * RS_ERR_BAD_VERSION, RS_ERR_BAD_LENGTH. *addr_p points into blob; *full_p
 * (may be NULL) says whether it is the full one (shared memory may be used).
 */
rs_status_t rs_ucx_addr_pick(uint64_t place_key, const void *blob, size_t len, const void **addr_p,
                             int *full_p);

/* recv.c */
ucs_status_t rs_ucx_am_recv(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param);

/* am.c */
rs_status_t rs_ucx_msg_send(rs_ep_t *ep, rs_op_t *op, unsigned type, const void *data, size_t len);

/* log.c: UCX's log lines through rshuffle's log (once per process). */
void rs_ucx_log_route(void);

/* mem.c */
rs_status_t rs_ucx_mem_reg(rs_ctx_t *ctx, rs_mr_t *mr, void *addr, size_t len, unsigned access);
void rs_ucx_mem_dereg(rs_mr_t *mr);
rs_status_t rs_ucx_rkey_pack(const rs_mr_t *mr, void *buf, size_t buflen, size_t *len_p);
rs_status_t rs_ucx_rkey_unpack(rs_ep_t *ep, rs_rkey_t *rkey, const void *buf, size_t len);
void rs_ucx_rkey_release(rs_rkey_t *rkey);
int rs_ucx_mem_alloc_shm(const rs_ctx_t *ctx);

/* amrma.c */
rs_status_t rs_ucx_amrma_put(rs_ucx_ep_t *uep, rs_op_t *op, const void *src, size_t len,
                             uint64_t raddr, int notify, uint32_t imm);
rs_status_t rs_ucx_amrma_get(rs_ucx_ep_t *uep, rs_op_t *op, void *dst, size_t len, uint64_t raddr);
rs_status_t rs_ucx_amrma_fetch_add(rs_ucx_ep_t *uep, rs_op_t *op, uint64_t raddr, uint64_t add);
rs_status_t rs_ucx_amrma_flush(rs_ucx_ep_t *uep, rs_op_t *op);
void rs_ucx_amrma_recv(rs_ctx_t *ctx, const rs_ucx_rma_hdr_t *h, const void *data, size_t len);
/* uep can get no more answers: its waiting requests fail. */
void rs_ucx_amrma_ep_failed(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep);
void rs_ucx_amrma_free(rs_ucx_ctx_t *uc);

/* rma.c */
rs_status_t rs_ucx_put(rs_ep_t *ep, rs_op_t *op, const void *src, size_t len, rs_mr_t *mr,
                       rs_rkey_t *rkey, uint64_t raddr, int notify, uint32_t imm);
rs_status_t rs_ucx_get(rs_ep_t *ep, rs_op_t *op, void *dst, size_t len, rs_mr_t *mr,
                       rs_rkey_t *rkey, uint64_t raddr);
/* Same-host keys read whole by cross-memory attach; others RS_ERR_UNSUPPORTED. */
rs_status_t rs_ucx_getv(rs_ep_t *ep, rs_op_t *op, const rs_get_seg_t *seg, unsigned n,
                        rs_rkey_t *rkey);
rs_status_t rs_ucx_fetch_add(rs_ep_t *ep, rs_op_t *op, rs_rkey_t *rkey, uint64_t raddr,
                             uint64_t add);
rs_status_t rs_ucx_flush(rs_ep_t *ep, rs_op_t *op);
/* Frees the fetch-add request buffers (after the worker is gone). */
void rs_ucx_amo_reqs_free(rs_ucx_ctx_t *uc);

/* notify.c: notified puts (put, ordering, then the notification message). */
/* A notified put of len bytes at raddr under rk: rs_ucx_put's contract. */
rs_status_t rs_ucx_notify_put(rs_ucx_ep_t *uep, rs_ucx_ctx_t *uc, rs_op_t *op, const void *src,
                              size_t len, uint64_t raddr, ucp_rkey_h rk, uint32_t imm);
/* Sends the notification of a notified put (header in op->be). */
void rs_ucx_send_notify(rs_op_t *op);
/* One part of a multi-request op finished (put + notify). */
void rs_ucx_op_part_done(rs_op_t *op, ucs_status_t status);
/* A notified put whose data is already in place: posts the notification alone. */
void rs_ucx_notify_alone(rs_ucx_ep_t *uep, rs_op_t *op, uint32_t imm);

/* attach.c: put and get by cross-memory attach (k->attach_pid != 0); rs_ucx_put's contract. */
rs_status_t rs_ucx_attach_put(rs_ucx_ep_t *uep, rs_op_t *op, rs_ucx_rkey_t *k, const void *src,
                              size_t len, uint64_t raddr, int notify, uint32_t imm);
rs_status_t rs_ucx_attach_get(rs_ucx_ep_t *uep, rs_op_t *op, rs_ucx_rkey_t *k, void *dst,
                              size_t len, uint64_t raddr);
/* n segments at base + seg[i].roff; RS_ERR_UNSUPPORTED (nothing read): attach is refused. */
rs_status_t rs_ucx_attach_getv(rs_ucx_ep_t *uep, rs_op_t *op, rs_ucx_rkey_t *k,
                               const rs_get_seg_t *seg, unsigned n, uint64_t base);

/*
 * attach_map.c: regions same-host peers map once they reuse them.
 * rs_ucx_map_create backs umr->owned with a sealed memfd of len bytes and a
 * trailer page holding umr->token (RS_ERR_UNSUPPORTED: no memfd here, use
 * private memory; RS_ERR_NOMEM); rs_ucx_map_retire clears the token and
 * closes the memfd (before the owner unmaps). rs_ucx_map_init_key and
 * rs_ucx_map_release set up and undo a key's side. rs_ucx_map_reuse: the
 * local address of [raddr, raddr + len) when the op should go through our
 * mapping, else NULL with *st_p RS_OK (attach) or the op's error.
 */
rs_status_t rs_ucx_map_create(rs_ucx_mr_t *umr, size_t len);
/* The largest region rs_mem_alloc puts in a memfd: configured (RSHUFFLE_UCX_MAP_MAX), or 0 for the
 * default. */
uint64_t rs_ucx_map_max(uint64_t configured);
void rs_ucx_map_retire(rs_ucx_mr_t *umr);
void rs_ucx_map_init_key(rs_ucx_rkey_t *k, const rs_rkey_t *rkey, uint32_t fd, uint64_t token);
void rs_ucx_map_release(rs_ucx_rkey_t *k);
void *rs_ucx_map_reuse(rs_ucx_ep_t *uep, rs_ucx_rkey_t *k, uint64_t raddr, size_t len,
                       rs_status_t *st_p);

#endif
