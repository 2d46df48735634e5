/*
 * The fabric: registered memory, endpoints, one-sided operations, notified
 * puts, control messages and progress. One API, two backends (UCX and
 * verbs) chosen at run time by rs_config_t.transport / RSHUFFLE_TRANSPORT.
 *
 * Threading and callbacks
 *   A context is thread-safe: every call takes the context's lock. All
 *   callbacks (operation completions, messages, notifications, endpoint
 *   events) run inside rs_progress() or rs_wait() on the thread that called
 *   it (or inside the progress thread), with the lock held. A callback may
 *   post operations and send messages; it must not call rs_progress,
 *   rs_wait, rs_connect, rs_connect_address or rs_ctx_destroy (those that
 *   return a status return RS_ERR_STATE). rs_ep_close from a callback is
 *   deferred to the next progress. No callback ever runs inside the call
 *   that posted the operation.
 *
 * Errors common to the posting calls (rs_put, rs_put_notify, rs_get,
 *   rs_getv, rs_fetch_add, rs_ep_flush, rs_msg_send): RS_ERR_INVALID for a NULL
 *   endpoint or buffer or a bad argument; RS_ERR_NOMEM when no op could be
 *   allocated; RS_ERR_UNREACHABLE when the endpoint is dead;
 *   RS_ERR_CANCELED when it is closing; RS_ERR_STATE before its handshake
 *   finished. Nothing is posted and no callback runs on any error.
 *
 * Completion contract
 *   A posting call that returns RS_OK invokes its callback exactly once,
 *   later, with the operation's status. A posting call that returns an error
 *   posted nothing and never invokes the callback.
 *
 * Failure
 *   A peer that dies or becomes unreachable, or an operation outstanding for
 *   longer than peer_timeout_ms, marks the endpoint dead: every outstanding
 *   operation completes with an error status (RS_ERR_UNREACHABLE for a peer
 *   gone, RS_ERR_TIMEOUT for one silent past peer_timeout_ms), the endpoint
 *   handler is told, and every later posting
 *   call on it returns RS_ERR_UNREACHABLE.
 *
 * UCX over TCP emulates one-sided operations with messages, so the target
 * must make progress for them to complete: run rs_progress regularly or
 * start the progress thread on every context that is a target.
 *
 * UCX specifics: rs_listen/rs_connect go through rshuffle's own TCP
 * listener (the front door: a bounded hello with the job token, then the
 * listener's UCX worker address), not UCX's connection manager, so they
 * work with any UCX_TLS (shared memory alone included), as rs_connect_address
 * does. host is a numeric address (an IPv6 literal with or without
 * brackets) or a name the system resolver resolves. The backend turns on
 * UCX_POSIX_ERROR_HANDLING / UCX_SYSV_ERROR_HANDLING (unless set) because
 * every endpoint uses peer error handling. See docs/transport.md.
 */
#ifndef RSHUFFLE_TRANSPORT_H
#define RSHUFFLE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/config.h>
#include <rshuffle/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rs_ctx rs_ctx_t;           /* one fabric context (UCP worker / verbs PD+CQ) */
typedef struct rs_mr rs_mr_t;             /* a registered memory region */
typedef struct rs_rkey rs_rkey_t;         /* a peer's region, unpacked for one endpoint */
typedef struct rs_ep rs_ep_t;             /* a connection to a peer */
typedef struct rs_listener rs_listener_t; /* accepts connections on host:port */

/* Remote access rights of a region (local access is always granted), and RS_MEM_LAZY. */
enum {
    RS_MEM_LOCAL = 0,
    RS_MEM_REMOTE_READ = 1 << 0,
    RS_MEM_REMOTE_WRITE = 1 << 1,
    RS_MEM_REMOTE_ATOMIC = 1 << 2,
    RS_MEM_REMOTE_ALL = RS_MEM_REMOTE_READ | RS_MEM_REMOTE_WRITE | RS_MEM_REMOTE_ATOMIC,
    RS_MEM_LAZY = 1 << 3, /* not a right: resident at first touch (rs_mem_alloc) */
};

#define RS_RKEY_BLOB_MAX 1024 /* a packed remote-key blob never exceeds this */
#define RS_ADDR_BLOB_MAX 4096 /* a packed context address never exceeds this */
#define RS_MSG_TYPES     64   /* message types 0 .. RS_MSG_TYPES-1 belong to the user */

/* Completion of a posted operation. */
typedef void (*rs_op_cb_t)(void *arg, rs_status_t status);
/* A control message of one type; data is valid only during the call. */
typedef void (*rs_msg_cb_t)(void *arg, rs_ep_t *ep, const void *data, size_t len);
/* A notified put's 32-bit notification; the put's bytes are visible. */
typedef void (*rs_notify_cb_t)(void *arg, rs_ep_t *ep, uint32_t imm);
/*
 * Endpoint events: RS_OK when a peer connected to one of our listeners and
 * passed the job-token handshake; an error when an endpoint died.
 */
typedef void (*rs_ep_cb_t)(void *arg, rs_ep_t *ep, rs_status_t status);

/* ---------------------------------------------------------------- context */

/*
 * Creates a context on the backend cfg->transport selects (NULL cfg: the
 * defaults and environment, as rs_config_init). Starts a progress thread when
 * cfg->progress_thread is set. The context keeps a copy of *cfg.
 * RS_ERR_INVALID: NULL ctx_p; RS_ERR_CONFIG: a value of cfg (or, NULL cfg,
 * of an RSHUFFLE_* variable) out of range, or an unknown transport;
 * RS_ERR_UNSUPPORTED: the chosen backend cannot
 * run here; RS_ERR_NOMEM; RS_ERR_TRANSPORT: the backend failed to open;
 * RS_ERR_IO: the progress thread could not start; RS_ERR_STATE: UCX, in a
 * child forked while its parent had UCX contexts open (their locks may be
 * held in it: include/rshuffle/client.h). *ctx_p is set only on RS_OK.
 */
RS_API rs_status_t rs_ctx_create(const rs_config_t *cfg, rs_ctx_t **ctx_p);

/*
 * Stops the progress thread, fails every outstanding operation with
 * RS_ERR_CANCELED (callbacks run before this returns), closes endpoints and
 * listeners, and frees registered memory still held. Safe with ops in flight.
 */
RS_API void rs_ctx_destroy(rs_ctx_t *ctx);

/*
 * Replaces the receive queue that all of the context's connections share
 * with a new one. Needed after a peer on this host dies: UCX's
 * shared-memory queue delivers in order, and a sender killed between
 * reserving a slot and filling it leaves a slot that never fills, so
 * nothing after it is delivered again, from any peer. Call it with every
 * endpoint closed; registered regions, their keys and listeners stay valid,
 * and new connections go through the new queue. A no-op on verbs (each
 * queue pair has its own). RS_ERR_INVALID: NULL ctx; RS_ERR_STATE: an
 * endpoint is still open, or called from a callback; RS_ERR_TRANSPORT or
 * RS_ERR_IO: no new queue could be opened (the old one stays in use).
 */
RS_API rs_status_t rs_ctx_renew(rs_ctx_t *ctx);

/*
 * Whether rs_ctx_renew is due: 1 when one of ctx's endpoints is no longer
 * usable and its peer, a process on this host, has exited, on a backend
 * whose connections share a receive queue such a peer can leave blocked
 * (UCX); else 0, always on verbs and for NULL ctx. The caller decides
 * when to close its endpoints and renew (rs_ctx_renew wants them all
 * closed). Costs a poll of each unusable endpoint's peer.
 */
RS_API int rs_ctx_renew_due(rs_ctx_t *ctx);

/* The backend's name: "ucx" or "verbs". */
RS_API const char *rs_ctx_backend(const rs_ctx_t *ctx);

/* What a context's backend does or needs: the bits rs_ctx_caps returns. */
enum {
    /*
     * The context's connections share one receive queue, which a peer on
     * this host killed mid-send can leave blocked: rs_ctx_renew replaces it
     * and rs_ctx_renew_due says when (UCX). Without it rs_ctx_renew does
     * nothing and rs_ctx_renew_due is always 0 (verbs).
     */
    RS_CAP_RENEW = 1u << 0,
    /*
     * rs_mem_alloc takes shared memory (SysV, or a file in /dev/shm), so an
     * allocation must fit there too (UCX with RSHUFFLE_UCX_MEM=shared).
     */
    RS_CAP_MEM_SHM = 1u << 1,
    /*
     * The backend opens TCP listeners of its own besides rs_listen's (UCX's
     * tcp transport). One stops accepting for good when an accept finds no
     * descriptor free, so a long-lived listener may watch them (the worker
     * does; docs/operations.md).
     */
    RS_CAP_OWN_LISTENERS = 1u << 2,
};

/* The RS_CAP_* bits of ctx's backend, as configured for ctx; 0 for NULL ctx. */
RS_API unsigned rs_ctx_caps(const rs_ctx_t *ctx);

/* The configuration the context was created with. */
RS_API const rs_config_t *rs_ctx_config(const rs_ctx_t *ctx);

/* Makes progress without blocking; returns the number of events handled. */
RS_API unsigned rs_progress(rs_ctx_t *ctx);

/*
 * Progresses, then sleeps on the context's fd until an event arrives or
 * timeout_ms passes (-1: no limit; use with care). RS_OK if events were
 * handled, RS_ERR_TIMEOUT if none arrived, RS_ERR_STATE when called from a
 * callback.
 */
RS_API rs_status_t rs_wait(rs_ctx_t *ctx, int timeout_ms);

/*
 * The context's file descriptor for an external event loop: call
 * rs_ctx_arm; on RS_OK sleep until the fd is readable, then rs_progress; on
 * RS_ERR_BUSY events are pending, so call rs_progress first.
 */
RS_API int rs_ctx_fd(rs_ctx_t *ctx);
RS_API rs_status_t rs_ctx_arm(rs_ctx_t *ctx);

/*
 * Starts or stops a thread that progresses the context (idempotent). Start:
 * RS_ERR_IO when its wake-up fd cannot be created, RS_ERR_NOMEM when the
 * thread cannot be started; the context is unchanged then.
 */
RS_API rs_status_t rs_progress_thread_start(rs_ctx_t *ctx);
RS_API void rs_progress_thread_stop(rs_ctx_t *ctx);

/*
 * Handler for user message type (0 .. RS_MSG_TYPES-1); NULL cb removes it.
 * arg is kept by reference until the handler is replaced. RS_ERR_INVALID:
 * NULL ctx or type out of range.
 */
RS_API rs_status_t rs_set_msg_handler(rs_ctx_t *ctx, unsigned type, rs_msg_cb_t cb, void *arg);
/* Handler for notifications of notified puts targeting this context. */
RS_API void rs_set_notify_handler(rs_ctx_t *ctx, rs_notify_cb_t cb, void *arg);
/* Handler for endpoint events (accepted, died). */
RS_API void rs_set_ep_handler(rs_ctx_t *ctx, rs_ep_cb_t cb, void *arg);

/* ------------------------------------------------------- registered memory */

/*
 * Allocates len bytes of memory registered with the given RS_MEM_* access
 * (the fastest kind for the backend, e.g. shared memory on UCX posix).
 * The memory belongs to the region: rs_mem_free releases both. It is made
 * resident now, so no page fault lands inside a transfer; with RS_MEM_LAZY
 * a page becomes resident at its first touch instead, on the UCX backend's
 * private mappings (shared segments, RSHUFFLE_UCX_MEM=shared, and verbs
 * registrations are made resident either way): for memory of which only
 * part may ever be used, such as a push pool sized for its peak. Lazy
 * memory the system cannot back then fails at that touch, not here.
 * rs_mem_reg ignores it.
 * RS_ERR_INVALID: NULL ctx or mr_p, len 0 or unknown access bits;
 * RS_ERR_NOMEM; RS_ERR_STATE: the context is being destroyed;
 * RS_ERR_TRANSPORT (or the backend's mapped status) when registration fails.
 */
RS_API rs_status_t rs_mem_alloc(rs_ctx_t *ctx, size_t len, unsigned access, rs_mr_t **mr_p);

/*
 * Registers the caller's memory [addr, addr+len); the caller keeps
 * ownership and must keep it mapped until rs_mem_free. Errors as
 * rs_mem_alloc (RS_ERR_INVALID also for a NULL addr).
 */
RS_API rs_status_t rs_mem_reg(rs_ctx_t *ctx, void *addr, size_t len, unsigned access,
                              rs_mr_t **mr_p);

/* Deregisters (and frees, if rs_mem_alloc'ed) a region no operation still uses. */
RS_API void rs_mem_free(rs_mr_t *mr);

/* The region's first byte and length. */
RS_API void *rs_mr_addr(const rs_mr_t *mr);
RS_API size_t rs_mr_len(const rs_mr_t *mr);

/*
 * Packs the region's remote key (with its base and length and a checksum)
 * into buf; *len_p receives its length (<= RS_RKEY_BLOB_MAX). Send it to
 * peers in a message. RS_ERR_INVALID: NULL arguments; RS_ERR_NO_SPACE:
 * buflen is too small; RS_ERR_BAD_RKEY: the backend's key does not fit a
 * blob. *len_p is set only on RS_OK.
 */
RS_API rs_status_t rs_mr_pack_rkey(const rs_mr_t *mr, void *buf, size_t buflen, size_t *len_p);

/*
 * Unpacks a peer's remote-key blob for use on ep. RS_ERR_BAD_RKEY when the
 * blob is truncated, corrupted or from another backend; RS_ERR_INVALID:
 * NULL arguments; RS_ERR_NOMEM. The key copies what it needs from blob and
 * belongs to the caller (rs_rkey_destroy); it is valid only while ep is open.
 */
RS_API rs_status_t rs_rkey_unpack(rs_ep_t *ep, const void *blob, size_t len, rs_rkey_t **rkey_p);

/* Length of the remote region the key describes. */
RS_API uint64_t rs_rkey_len(const rs_rkey_t *rkey);

/* Releases an unpacked key (before its endpoint is closed). */
RS_API void rs_rkey_destroy(rs_rkey_t *rkey);

/* --------------------------------------------------------------- endpoints */

/*
 * Listens on host:port through the backend's connection manager (port 0:
 * pick a free one, see rs_listener_port). Accepted peers that pass the
 * handshake are reported to the endpoint handler with RS_OK; host is not
 * kept. RS_ERR_INVALID: NULL arguments; RS_ERR_STATE: the context is being
 * destroyed; RS_ERR_NOMEM; RS_ERR_TRANSPORT (or the backend's mapped status,
 * e.g. RS_ERR_UNSUPPORTED) when the backend cannot listen there.
 */
RS_API rs_status_t rs_listen(rs_ctx_t *ctx, const char *host, uint16_t port,
                             rs_listener_t **listener_p);
RS_API uint16_t rs_listener_port(const rs_listener_t *listener);
/* Stops accepting; endpoints already accepted stay open. */
RS_API void rs_listener_destroy(rs_listener_t *listener);

/*
 * Connects to host:port and completes the job-token handshake, waiting at
 * most connect_timeout_ms. RS_ERR_REFUSED: nobody listens; RS_ERR_AUTH: the
 * peer has another job token; RS_ERR_TIMEOUT: no answer in time. It
 * progresses the context, so it may not be called from a callback
 * (RS_ERR_STATE), nor may rs_connect_address. Also RS_ERR_INVALID (NULL
 * arguments), RS_ERR_UNREACHABLE (the peer died during the handshake),
 * RS_ERR_NOMEM. *ep_p is set only on RS_OK; the endpoint belongs to the
 * caller until rs_ep_close.
 */
RS_API rs_status_t rs_connect(rs_ctx_t *ctx, const char *host, uint16_t port, rs_ep_t **ep_p);

/*
 * The context's address as an opaque blob (<= RS_ADDR_BLOB_MAX) for an
 * out-of-band exchange (e.g. through mpirun); rs_connect_address connects to
 * such a blob with the same handshake and bounds as rs_connect (and its
 * errors; RS_ERR_INVALID also for a malformed blob). rs_ctx_address:
 * RS_ERR_INVALID for NULL arguments, RS_ERR_NO_SPACE when buflen is too
 * small; *len_p is set only on RS_OK.
 */
RS_API rs_status_t rs_ctx_address(rs_ctx_t *ctx, void *buf, size_t buflen, size_t *len_p);
RS_API rs_status_t rs_connect_address(rs_ctx_t *ctx, const void *blob, size_t len, rs_ep_t **ep_p);

/*
 * Closes an endpoint and frees it. Every outstanding operation's callback
 * runs before this returns: with its own status if it finished during a
 * short bounded drain (at most 500 ms or peer_timeout_ms), else with
 * RS_ERR_CANCELED. Remote keys unpacked for it become invalid. Called from
 * a callback, the close is deferred to the next progress (the endpoint is
 * then CLOSING: posting on it returns RS_ERR_CANCELED). NULL is ignored.
 */
RS_API void rs_ep_close(rs_ep_t *ep);

/*
 * RS_OK while the endpoint is usable; the error that killed it once dead;
 * RS_ERR_CANCELED while closing; RS_ERR_STATE before its handshake finished.
 */
RS_API rs_status_t rs_ep_status(const rs_ep_t *ep);

/*
 * 1 when the endpoint's peer was a process on this host (same kernel and
 * pid namespace) and it has exited, alive or dead as the endpoint may be;
 * else 0 (a peer on another host is never known to have exited).
 */
RS_API int rs_ep_peer_exited(rs_ep_t *ep);

/* Number of operations posted on ep and not yet completed. */
RS_API size_t rs_ep_outstanding(const rs_ep_t *ep);

/* One pointer of caller data per endpoint. */
RS_API void rs_ep_set_user(rs_ep_t *ep, void *user);
RS_API void *rs_ep_user(const rs_ep_t *ep);

/* ---------------------------------------------------- one-sided operations */

/*
 * Writes len bytes from src (inside the local region src_mr) to offset roff
 * of the peer's region rkey. RS_ERR_OUT_OF_RANGE, before anything is posted,
 * when [roff, roff+len) is not inside that region or src is not inside
 * src_mr; RS_ERR_INVALID when the key does not grant remote write, or
 * src_mr belongs to another context; and the posting errors above. cb may
 * be NULL. src must stay unchanged until cb runs.
 */
RS_API rs_status_t rs_put(rs_ep_t *ep, const void *src, size_t len, rs_mr_t *src_mr,
                          rs_rkey_t *rkey, uint64_t roff, rs_op_cb_t cb, void *arg);

/*
 * rs_put, then a 32-bit notification delivered to the target's notify
 * handler only once the put's bytes are visible there. cb runs when src may
 * be reused and the notification has gone out behind the data (verbs: was
 * acknowledged), or the operation failed.
 */
RS_API rs_status_t rs_put_notify(rs_ep_t *ep, const void *src, size_t len, rs_mr_t *src_mr,
                                 rs_rkey_t *rkey, uint64_t roff, uint32_t imm, rs_op_cb_t cb,
                                 void *arg);

/*
 * Reads len bytes at offset roff of the peer's region into dst (inside
 * dst_mr); dst's bytes are defined once cb runs with RS_OK. Errors as
 * rs_put (the key must grant remote read).
 */
RS_API rs_status_t rs_get(rs_ep_t *ep, void *dst, size_t len, rs_mr_t *dst_mr, rs_rkey_t *rkey,
                          uint64_t roff, rs_op_cb_t cb, void *arg);

/* One range of rs_getv: len bytes at offset roff of the peer's region, into dst. */
typedef struct rs_get_seg {
    void *dst;
    size_t len;
    uint64_t roff;
} rs_get_seg_t;

#define RS_GETV_MAX 256 /* segments of one rs_getv */

/*
 * Reads n ranges of the peer's region rkey, each into its own dst (all
 * inside dst_mr), as one operation: cb runs once, when every range is in
 * place (RS_OK) or with the status of a range that failed. n is 1 to
 * RS_GETV_MAX; seg may be reused once the call returns. Every range is
 * checked before anything is posted: RS_ERR_INVALID for n out of bounds or
 * a NULL seg, then the errors of rs_get. Same-host peers over UCX take all
 * ranges in one cross-memory call; other paths post one read per range
 * under the one callback.
 */
RS_API rs_status_t rs_getv(rs_ep_t *ep, const rs_get_seg_t *seg, unsigned n, rs_mr_t *dst_mr,
                           rs_rkey_t *rkey, rs_op_cb_t cb, void *arg);

/*
 * Atomically adds add to the 64-bit word at offset roff (8-byte aligned) of
 * the peer's region; the value before the add is stored in *old_p (caller
 * memory, need not be registered, kept by reference until cb runs) before
 * cb runs with RS_OK. RS_ERR_INVALID also when roff is not 8-byte aligned
 * or the key does not grant remote atomics; RS_ERR_OUT_OF_RANGE when the
 * word is outside the region; and the posting errors above.
 */
RS_API rs_status_t rs_fetch_add(rs_ep_t *ep, rs_rkey_t *rkey, uint64_t roff, uint64_t add,
                                uint64_t *old_p, rs_op_cb_t cb, void *arg);

/*
 * cb runs once every operation posted on ep before this call is complete
 * at the target. The posting errors above.
 */
RS_API rs_status_t rs_ep_flush(rs_ep_t *ep, rs_op_cb_t cb, void *arg);

/* ---------------------------------------------------------------- messages */

/*
 * Sends a control message of a user type; messages on one endpoint arrive in
 * the order sent. The data is copied before this returns. RS_ERR_MSG_SIZE
 * when len exceeds the context's msg_max; RS_ERR_INVALID for a type out of
 * range or NULL data with len > 0; and the posting errors above. cb (may be
 * NULL) runs once the message left (or failed).
 */
RS_API rs_status_t rs_msg_send(rs_ep_t *ep, unsigned type, const void *data, size_t len,
                               rs_op_cb_t cb, void *arg);

#ifdef __cplusplus
}
#endif
#endif
