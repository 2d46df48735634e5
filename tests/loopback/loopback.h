/*
 * The loopback transport backend: test-only, never in the library.
 *
 * Every context of the process is an endpoint host of one in-process
 * fabric: a listener takes a made-up port (from 20000 up, "host" ignored),
 * an address blob names a context, registered memory is plain memory and a
 * remote key names a region of this process. Posted operations queue on
 * their endpoint, oldest first, and the initiator's progress carries them
 * out (a put is a memcpy into the target region); messages, notifications
 * and connection events queue at the receiving context, which delivers them
 * from its progress. Delivery is therefore deterministic: first in, first
 * out per endpoint pair, and only from progress calls.
 *
 * Test binaries link rshuffle_lb (tests/loopback/CMakeLists.txt): the
 * library's objects with the backend selection replaced by lb_select.c,
 * which gives every context this backend whatever RSHUFFLE_TRANSPORT says.
 * librshuffle itself is unchanged.
 *
 * The hooks below may be called from any thread; they act on what is queued
 * from then on. Message types are the transport's (user types 0 ..
 * RS_MSG_TYPES-1).
 */
#ifndef RS_TESTS_LOOPBACK_H
#define RS_TESTS_LOOPBACK_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/transport.h>

/* The backend's name, as rs_ctx_backend reports it. */
#define RS_LB_NAME "loopback"

/*
 * Drops the next n messages of this type that any endpoint sends (the
 * sender's op completes RS_OK, nothing arrives). n = 0 cancels a drop.
 */
void rs_lb_drop(unsigned type, unsigned n);

/*
 * Rewrites the next n messages of this type that any endpoint sends, as a
 * faulty peer would: fn gets the bytes (it may change them) and returns the
 * length to deliver, at most len. fn runs with the fabric's lock held and
 * must not call the transport. n = 0 cancels.
 */
typedef size_t (*rs_lb_mangle_fn)(void *arg, unsigned char *data, size_t len);
void rs_lb_mangle(unsigned type, unsigned n, rs_lb_mangle_fn fn, void *arg);

/*
 * Holds every message of this type at its receiver (it and later messages
 * of the same endpoint pair stay queued, in order) until rs_lb_release.
 */
void rs_lb_hold(unsigned type);
void rs_lb_release(unsigned type);

/*
 * Holds the gets (rs_get, rs_getv) at the front of their endpoints' queues,
 * and the ops posted behind them, until rs_lb_release_gets: a read that
 * outlives its caller's deadline.
 */
void rs_lb_hold_gets(void);
void rs_lb_release_gets(void);

/*
 * Kills a context as a peer's process death would look: every endpoint
 * connected to it fails (RS_ERR_UNREACHABLE) at its owner's next progress,
 * operations its peers had queued towards it fail, its regions can no
 * longer be reached, new connections to its listeners are refused, and its
 * own endpoints fail too. The context itself stays valid (destroy it as
 * usual). RS_ERR_NOT_FOUND when ctx is not a loopback context.
 */
rs_status_t rs_lb_kill(rs_ctx_t *ctx);

/* The context listening on port, or NULL. */
rs_ctx_t *rs_lb_ctx_of_port(uint16_t port);

/* Counters since the process started (or rs_lb_reset). */
typedef struct rs_lb_counts {
    uint64_t sent[256];      /* messages by type, as posted */
    uint64_t delivered[256]; /* messages by type, handed to the receiver */
    uint64_t dropped[256];   /* by rs_lb_drop */
    uint64_t mangled[256];   /* by rs_lb_mangle */
    uint64_t puts, put_bytes, gets, fetch_adds, notifies;
    uint64_t connects, refused, kills;
    uint64_t stale_rkeys; /* keys destroyed while an op posted with them was queued */
} rs_lb_counts_t;
void rs_lb_counts(rs_lb_counts_t *out);

/*
 * Clears the counters, drops, rewrites and holds (queued messages stay
 * queued, and a held one is released).
 */
void rs_lb_reset(void);

#endif
