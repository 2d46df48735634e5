/*
 * The map side of a shuffle.
 *
 * Push buffers are registered memory carved from one slab per push lane (a
 * pusher borrows a lane of its client for its life: include/rshuffle/client.h):
 * the buffer a writer fills is the buffer the NIC reads. A full buffer moves to
 * the push engine (a thread) through a bounded queue, either by swap (the
 * caller's buffer is handed over and an idle buffer of the same length comes
 * back: no copy) or by copy. Whoever owns a buffer is the only one touching
 * it: the writer until it hands the buffer over, then the engine until the
 * bytes reached the worker.
 *
 * The pieces are usable on their own: rs_pushq is the pool plus queue with a
 * caller-supplied consumer (perf drivers, engines with their own transport);
 * rs_pusher is the full map side that writes batches into workers.
 *
 * A pusher and a push queue have one writer thread: append, swap, copy and
 * close are not to be called concurrently on one object.
 *
 * No spare core is assumed: when the engine thread sleeps, the writer runs
 * the engine's round itself inside the calls that hand a buffer over or
 * wait for one (one round at a time: whoever holds the driver token).
 *
 * Waits: every wait of a writer call is bounded by the object's wait_ms
 * (RS_ERR_TIMEOUT). A pusher's failure (a worker gone, a refused batch,
 * backpressure beyond backpressure_ms, a wait that ran out) is sticky: the
 * first one is returned by every later append, swap and close.
 */
#ifndef RSHUFFLE_PUSHER_H
#define RSHUFFLE_PUSHER_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/client.h>
#include <rshuffle/codec.h>
#include <rshuffle/config.h>
#include <rshuffle/shuffle.h>
#include <rshuffle/status.h>
#include <rshuffle/transport.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ push buffers */

/*
 * A push buffer: len bytes at data for the caller's records. Header room for
 * the batch frame sits before data (part of the same registered block), so
 * codec none seals the frame in place and writes the buffer itself.
 */
typedef struct rs_pbuf {
    uint8_t *data;
    size_t len; /* fixed for the buffer's life */
} rs_pbuf_t;

#define RS_PBUF_HEAD_ROOM 64 /* bytes reserved before data (>= the frame header) */

/* ------------------------------------------------- pool + hand-off queue */

typedef struct rs_pushq rs_pushq_t;

/*
 * The consumer of full buffers, run in submission order, one call at a
 * time: on the queue's engine thread, or on the writer's thread inside
 * rs_pushq_buf_get, rs_pushq_swap or rs_pushq_copy when the engine thread
 * sleeps (see above). So it must not call the writer's functions on q nor
 * wait for the writer. It owns buf (used bytes of records, used may be 0)
 * until it passes it to rs_pushq_release, now or later, from any thread.
 */
typedef void (*rs_pushq_fn_t)(void *arg, rs_pushq_t *q, uint32_t partition, rs_pbuf_t *buf,
                              size_t used);

typedef struct rs_pushq_config {
    size_t buf_len;       /* length of pooled buffers (64 KiB) */
    size_t slab_bytes;    /* the one slab buffers are carved from: the memory bound (16 buffers) */
    uint32_t queue_depth; /* full buffers queued for the engine at most (8) */
    uint32_t wait_ms;     /* longest wait for an idle buffer or a queue slot (30000) */
    rs_ctx_t *ctx;        /* slab registered on ctx (rs_mem_alloc); NULL: plain memory */
} rs_pushq_config_t;

/* Fills *cfg with the defaults above (ctx NULL). Cannot fail. */
RS_API void rs_pushq_config_defaults(rs_pushq_config_t *cfg);

/*
 * Creates the pool (one slab allocation) and starts the engine thread.
 * *cfg is copied; cfg->ctx is kept by reference (the slab is registered on
 * it) and must outlive the queue. fn and arg are kept for the queue's life.
 * RS_ERR_INVALID: NULL cfg or fn, buf_len or queue_depth 0, slab_bytes
 * smaller than one buffer; RS_ERR_NOMEM (also: the thread did not start);
 * RS_ERR_IO: no eventfd; with a ctx, rs_mem_alloc's errors. Nothing is left
 * on an error; *q_p (not NULL) is set only on RS_OK.
 */
RS_API rs_status_t rs_pushq_create(const rs_pushq_config_t *cfg, rs_pushq_fn_t fn, void *arg,
                                   rs_pushq_t **q_p);

/*
 * A buffer of len bytes for the writer: an idle one of exactly that length,
 * else a new one carved from the slab (waiting at most wait_ms for room,
 * running the consumer meanwhile if the engine thread sleeps). The buffer
 * is the writer's until it hands it over or puts it back; its memory lives
 * until rs_pushq_destroy. RS_ERR_INVALID: len 0; RS_ERR_NO_SPACE: len can
 * never fit the slab; RS_ERR_TIMEOUT: no room within wait_ms; RS_ERR_NOMEM.
 * *buf_p is set only on RS_OK.
 */
RS_API rs_status_t rs_pushq_buf_get(rs_pushq_t *q, size_t len, rs_pbuf_t **buf_p);

/*
 * Gives back a buffer of this queue that the writer holds and will not
 * submit; it stays idle for a later get of the same length. Cannot fail.
 */
RS_API void rs_pushq_buf_put(rs_pushq_t *q, rs_pbuf_t *buf);

/*
 * Hands full (used bytes) to the engine and returns in *fresh_p an idle
 * buffer of full's length (never one of another length, never full). On
 * RS_OK the writer must not touch full afterwards. On an error nothing was
 * handed over: full is still the writer's and *fresh_p is not written.
 * RS_ERR_INVALID: NULL full or fresh_p, used > full->len; the errors of
 * rs_pushq_buf_get for the fresh buffer; RS_ERR_TIMEOUT: no queue slot
 * within wait_ms. May run the consumer on this thread.
 */
RS_API rs_status_t rs_pushq_swap(rs_pushq_t *q, uint32_t partition, rs_pbuf_t *full, size_t used,
                                 rs_pbuf_t **fresh_p);

/*
 * Copies len bytes of src into an idle pooled buffer of max(len, buf_len)
 * bytes and hands that to the engine; src may be reused on return. Errors
 * as rs_pushq_swap (RS_ERR_NO_SPACE: len can never fit the slab); nothing
 * is handed over on an error. May run the consumer on this thread.
 */
RS_API rs_status_t rs_pushq_copy(rs_pushq_t *q, uint32_t partition, const void *src, size_t len);

/*
 * The consumer is done with buf, a buffer it was handed: it becomes idle
 * for the writer. Once per buffer, from any thread; cannot fail.
 */
RS_API void rs_pushq_release(rs_pushq_t *q, rs_pbuf_t *buf);

/*
 * Waits (at most timeout_ms) until every handed-over buffer was released:
 * RS_OK, or RS_ERR_TIMEOUT. Writer thread; it does not run the consumer
 * itself (the engine thread wakes at least every 20 ms), except while the
 * engine thread is parked (as the library parks its own queues between
 * map tasks).
 */
RS_API rs_status_t rs_pushq_drain(rs_pushq_t *q, uint32_t timeout_ms);

/*
 * Stops the engine and frees the pool and its slab: buffers still queued
 * never reach the consumer, and every rs_pbuf_t of the queue (the writer's
 * and those the consumer still holds) dies here, so drain first. NULL is
 * ignored. No other call on q may run or follow.
 */
RS_API void rs_pushq_destroy(rs_pushq_t *q);

/* ------------------------------------------------------------- the pusher */

typedef struct rs_pusher rs_pusher_t;

typedef struct rs_pusher_config {
    rs_codec_t codec;         /* RSHUFFLE_CODEC: none|lz4|snappy (none) */
    size_t buf_len;           /* RSHUFFLE_PUSH_BUF: a full push buffer, bytes (256 KiB) */
    size_t min_buf;           /* first buffer of a partition; doubles up to buf_len (4 KiB);
                                 smaller when pool_bytes / 2 / P is (many partitions); a
                                 task after another of its shuffle on the same client
                                 lane starts at 1.5x what that one sent (docs/shuffle.md) */
    size_t pool_bytes;        /* RSHUFFLE_PUSH_POOL: the registered slab, bytes (32 MiB) */
    uint32_t queue_depth;     /* full buffers queued for the engine (16) */
    uint64_t max_inflight;    /* RSHUFFLE_PUSH_INFLIGHT: bytes in flight per worker (4 MiB) */
    uint32_t wait_ms;         /* RSHUFFLE_PUSH_WAIT_MS: every wait of append/swap/close (30000) */
    uint32_t backpressure_ms; /* RSHUFFLE_PUSH_BACKPRESSURE_MS: then RS_ERR_BACKPRESSURE (30000) */
    const rs_config_t *transport; /* NULL: rs_config_init */
    size_t merge_below; /* RSHUFFLE_PUSH_MERGE_BELOW: batches of fewer frame bytes bound for one
                           worker travel together, one write (one grant) for many partitions'
                           batches (32 KiB; 0: never; docs/shuffle.md "Merged pushes") */
    size_t pool_max;    /* RSHUFFLE_PUSH_POOL_MAX: with many partitions a task's pool doubles
                           past pool_bytes, up to this, until every partition's buffer holds
                           16 KiB (128 MiB: from 1,025 partitions 64 MiB, from 2,049 128 MiB);
                           pool_bytes or less: never (docs/shuffle.md) */
    size_t hot_bytes;   /* RSHUFFLE_PUSH_HOT: a partition's buffer grows to hot_bytes / P at
                           most, not below 16 KiB, so that all partitions' buffers stay in
                           cache while records land in them (3 MiB: 192 KiB at 16
                           partitions, 16 KiB from 192; 0: no bound; docs/shuffle.md
                           "Buffers that stay in cache") */
} rs_pusher_config_t;

/* Fills *cfg with the defaults above (transport NULL). Cannot fail. */
RS_API void rs_pusher_config_defaults(rs_pusher_config_t *cfg);

/*
 * Applies the RSHUFFLE_* variables named above; RS_ERR_CONFIG names a bad
 * one, and *cfg is then unchanged.
 */
RS_API rs_status_t rs_pusher_config_from_env(rs_pusher_config_t *cfg);

/*
 * Opens the map side of one attempt of one map task on the process's
 * default client (rs_pusher_open_in with rs_client_default()): attaches to
 * every worker of desc (registering the shuffle there), over the client's
 * connections, pool and push engine (made on first use). cfg NULL:
 * defaults and environment.
 *
 * Keeps: *cfg is copied (cfg->transport is read only here). *desc is copied
 * shallowly: desc->workers and its strings are kept by reference and read
 * again later (log lines of the engine, also on error paths and while
 * rs_pusher_destroy closes connections), so they must outlive the pusher.
 * The placement is called only here (placement_arg is not kept).
 *
 * Waits: connects (those the lane lacks), worker after worker, each bounded
 * by the transport's connect_timeout_ms; then the attach answers, all
 * asked at once, bounded by connect_timeout_ms after the last send. Every
 * state a handler can see meanwhile is valid: a worker lost while open
 * waits for another fails the open (R = 1) or is left out (R >= 2).
 *
 * Replication (desc->replicas, rs_shuffle_replicas): each batch is written
 * to its partition's R replicas. With R >= 2 a worker that cannot be
 * reached here is left out (a warning) as long as every partition keeps
 * a replica; one lost later (dead, or silent for peer_timeout_ms) likewise.
 *
 * Errors: RS_ERR_INVALID: NULL desc or workers, n_partitions or n_workers
 * 0, a replication factor above 3 or above n_workers, a placement out of
 * range, a worker string that is not "host:port", or
 * a worker that refused the attach (it holds the shuffle with another
 * n_partitions); RS_ERR_EXISTS: a worker has (map_id, attempt) of this
 * shuffle open by another pusher or committed already (a second pusher of
 * one attempt would mix its batches with the first's: open another
 * attempt); RS_ERR_CONFIG: a bad variable (cfg NULL, or RSHUFFLE_REPLICAS),
 * a field outside its variable's range (man/rshuffle.7: buf_len 1 KiB ..
 * 16 MiB - RS_FRAME_HEADER_SIZE, max_inflight at least 4 KiB, wait_ms and
 * backpressure_ms 10 .. 3600000, codec not an rs_codec_t), min_buf 0, or
 * pool_bytes < 4 * (buf_len + RS_PBUF_HEAD_ROOM), logged naming the field
 * and its variable; rs_ctx_create's errors;
 * rs_connect's (RS_ERR_REFUSED, RS_ERR_AUTH, RS_ERR_TIMEOUT,
 * RS_ERR_UNREACHABLE); RS_ERR_TIMEOUT: a worker did not answer the attach;
 * RS_ERR_NOMEM; rs_mem_alloc's for the pool; RS_ERR_IO. Everything opened
 * is closed again on an error; *pusher_p (not NULL) is set only on RS_OK.
 * RS_ERR_EXISTS: a worker holds the shuffle id for another generation
 * (rs_shuffle_desc_t.generation).
 */
RS_API rs_status_t rs_pusher_open(const rs_shuffle_desc_t *desc, uint32_t map_id, uint32_t attempt,
                                  const rs_pusher_config_t *cfg, rs_pusher_t **pusher_p);

/*
 * rs_pusher_open on client's lanes (include/rshuffle/client.h), which
 * rs_pusher_open does on the process's default client. The pusher borrows
 * a lane whose context and pool fit its configuration (cfg->transport,
 * buf_len, pool_bytes, queue_depth), an idle one if the client has one,
 * else a new one, and gives it back at rs_pusher_close (or
 * rs_pusher_destroy when not closed). A warm lane costs no registration,
 * no thread start and no connection: the open sends one attach per worker
 * (all at once) and waits for the answers. Connections the attempt leaves
 * unfit (a worker lost, refused, silent or garbled, a commit refused) are
 * closed and made again by a later task.
 *
 * client must not be NULL and must outlive the pusher's open call; see
 * rs_client_destroy for a client destroyed while the pusher lives. Errors
 * as rs_pusher_open (RS_ERR_INVALID also for a NULL client or pusher_p).
 * With R = 1, a worker lost while open waits for another's answer fails
 * the open with that loss's status.
 */
RS_API rs_status_t rs_pusher_open_in(rs_client_t *client, const rs_shuffle_desc_t *desc,
                                     uint32_t map_id, uint32_t attempt,
                                     const rs_pusher_config_t *cfg, rs_pusher_t **pusher_p);

/* The most lanes one rs_pusher_warm call makes ready. */
#define RS_PUSH_WARM_MAX 256u

/*
 * Makes lanes push lanes of client ready for the map tasks an executor is
 * about to run, as MPI_Init and a first touch of its buffers are paid before
 * an MPI code's exchange: each lane fits tasks of desc's partition count
 * and cfg (NULL: defaults and environment), is connected to every worker
 * of desc and has its whole pool (pool_bytes, grown for many partitions)
 * resident, with a task's per-partition state for desc's partitions,
 * workers and replicas (kept by the lane between tasks). They are taken
 * together, so lanes tasks running at once each find one (one per thread
 * that will push), then kept idle in the client (at most its max_idle).
 * Only desc's partition count, workers and replicas are read: a later
 * task of any shuffle of that shape borrows them. Optional:
 * without it the first task of each thread makes its lane and the pool
 * becomes resident as its appends reach it. Errors: RS_ERR_INVALID (NULL
 * client or desc, no partitions, no workers, a NULL address, lanes 0 or
 * above RS_PUSH_WARM_MAX), rs_pusher_open's configuration and connection
 * errors, RS_ERR_NOMEM. Lanes made before an error stay in the client.
 */
RS_API rs_status_t rs_pusher_warm_in(rs_client_t *client, const rs_shuffle_desc_t *desc,
                                     const rs_pusher_config_t *cfg, uint32_t lanes);

/* rs_pusher_warm_in on the process's default client (RS_ERR_NOMEM when it cannot be made). */
RS_API rs_status_t rs_pusher_warm(const rs_shuffle_desc_t *desc, const rs_pusher_config_t *cfg,
                                  uint32_t lanes);

/*
 * The largest record a pusher takes, bytes: its batch (frame header +
 * record header + record) must fit one grant of a worker (16 MiB), whatever
 * the codec (a batch that would not shrink is sent uncompressed).
 */
#define RS_PUSH_RECORD_MAX ((16u << 20) - 48u - 4u)

/*
 * Appends one record (framed as in shuffle.h) to the partition's current
 * registered buffer: the only copy of its bytes (rec is not kept). A full
 * buffer goes to the engine. A partition's buffers start small and double
 * up to buf_len. Waiting for a buffer it runs the engine itself when the
 * engine thread sleeps, or pushes the fullest partly filled buffer.
 * Errors: the pusher's sticky error; RS_ERR_STATE after rs_pusher_close;
 * RS_ERR_INVALID, before anything is pushed: partition >= n_partitions,
 * NULL rec with len > 0, a record longer than RS_PUSH_RECORD_MAX or whose
 * buffer (len + 68 bytes) does not fit the pool (pool_bytes) (the pusher
 * stays usable); RS_ERR_TIMEOUT: no buffer or queue slot within wait_ms;
 * RS_ERR_NOMEM. On an error the record was not appended.
 */
RS_API rs_status_t rs_pusher_append(rs_pusher_t *p, uint32_t partition, const void *rec,
                                    uint32_t len);

/*
 * rs_pusher_append without the copy, for a caller that builds its records
 * (a serializer): takes room for one record of len bytes in the
 * partition's current registered buffer and sets *rec_p to those len
 * bytes, which the caller writes in place. The record counts as appended
 * now: its bytes must be written before the next call on p (that call may
 * hand the buffer on), and they are not checked. Errors as
 * rs_pusher_append (RS_ERR_INVALID also for a NULL rec_p); on an error
 * *rec_p is not written and nothing was appended.
 */
RS_API rs_status_t rs_pusher_reserve(rs_pusher_t *p, uint32_t partition, uint32_t len,
                                     void **rec_p);

/*
 * A registered buffer of len bytes for rs_pusher_swap (len <= the pool),
 * the writer's until swapped or put back; it dies with the pusher.
 * RS_ERR_INVALID: NULL p or buf_p, len 0 or len + RS_FRAME_HEADER_SIZE
 * over 16 MiB; RS_ERR_STATE after rs_pusher_close; then as rs_pushq_buf_get (RS_ERR_NO_SPACE,
 * RS_ERR_TIMEOUT, RS_ERR_NOMEM), and the pusher's sticky error while it waits. *buf_p is set only
 * on RS_OK.
 */
RS_API rs_status_t rs_pusher_buf_get(rs_pusher_t *p, size_t len, rs_pbuf_t **buf_p);

/*
 * Gives back a buffer the writer holds (from rs_pusher_buf_get or a swap)
 * that will not be swapped. Cannot fail.
 */
RS_API void rs_pusher_buf_put(rs_pusher_t *p, rs_pbuf_t *buf);

/*
 * Hands a buffer of framed records (used bytes) to the engine as one batch
 * of partition, and returns an idle buffer of the same length in *fresh_p.
 * full must be the writer's buffer of this pusher (rs_pusher_buf_get or an
 * earlier swap). With codec none the frame is sealed (checksummed) here, on
 * the caller's thread. A used of 0 pushes nothing. The records are not
 * checked: a malformed one fails the reader (RS_ERR_TRUNCATED).
 * On RS_OK full belongs to the engine: the writer must not touch it. On an
 * error nothing was handed over: full is still the writer's (retry it or
 * put it back; its header room may have been written) and *fresh_p is not
 * written. Errors: the pusher's sticky error; RS_ERR_INVALID: partition >=
 * n_partitions, NULL full or fresh_p, used > full->len; as rs_pusher_buf_get
 * for the fresh buffer; RS_ERR_TIMEOUT: no queue slot within wait_ms;
 * RS_ERR_STATE after rs_pusher_close.
 */
RS_API rs_status_t rs_pusher_swap(rs_pusher_t *p, uint32_t partition, rs_pbuf_t *full, size_t used,
                                  rs_pbuf_t **fresh_p);

typedef struct rs_pusher_stats {
    uint64_t records;   /* appended */
    uint64_t batches;   /* pushed (retries not counted) */
    uint64_t raw_bytes; /* payload bytes before the codec */
    uint64_t bytes;     /* frame bytes written */
    uint64_t grant_requests;
    uint64_t backpressure;   /* grant answers that said "full" */
    uint64_t reclaimed;      /* unused grants given back because a worker was short */
    uint64_t workers_lost;   /* R >= 2: workers that died or went silent, carried on without */
    uint64_t merged_writes;  /* merged writes posted (one grant and one notification each) */
    uint64_t merged_batches; /* batch sends they carried (one per replica) */
} rs_pusher_stats_t;

/*
 * Map commit: flushes every partition, waits (bounded) for every write to
 * complete, sends per-partition counts to every worker and waits for their
 * answers. The first error of the pusher's life is returned (a worker that
 * died: RS_ERR_UNREACHABLE, over TCP too; over shared memory a worker
 * killed mid-send may leave RS_ERR_TIMEOUT after peer_timeout_ms, as a
 * silent one does; backpressure beyond the bound:
 * RS_ERR_BACKPRESSURE; a worker full whose spill failed (disk full), for
 * 2 s: RS_ERR_IO; a worker that answers nothing for the transport's
 * peer_timeout_ms: RS_ERR_TIMEOUT; a refused batch: its reason; an answer
 * of a worker's that cannot be taken, a grant outside its arena included:
 * RS_ERR_PROTOCOL, RS_ERR_TRUNCATED, RS_ERR_BAD_LENGTH or
 * RS_ERR_BAD_VERSION, its connection not kept for a later task), else
 * RS_ERR_TIMEOUT when the writes and commits are not done within wait_ms,
 * else a worker's refusal of the commit (RS_ERR_TIMEOUT: its batches did not
 * all arrive in its commit_wait_ms; RS_ERR_CHECKSUM / RS_ERR_PROTOCOL: they
 * do not match the counts; RS_ERR_NOT_FOUND: the shuffle was dropped). It
 * runs the engine on this thread while there is work, then sleeps. stats
 * (may be NULL) is filled in either case with what was done: records
 * appended, batches framed and handed to the writes, grant requests sent.
 * Whatever it returns, only rs_pusher_destroy may follow: close gives the
 * lane back (buffers the writer still holds from rs_pusher_buf_get die
 * here). RS_ERR_CANCELED: the pusher's client was destroyed (nothing was
 * committed); RS_ERR_STATE: closed already; RS_ERR_INVALID: NULL p
 * (nothing to close: not ignored, as a void close would).
 *
 * With R >= 2 replicas a worker lost on the way (dead, or silent for
 * peer_timeout_ms) is not an error while every partition keeps a live
 * replica: RS_OK then means every batch was written to, and its commit
 * accepted by, every replica of its partition that was not lost, and each
 * partition has at least one (stats->workers_lost counts the others). A
 * partition whose replicas are all lost fails with the last loss's status.
 */
RS_API rs_status_t rs_pusher_close(rs_pusher_t *p, rs_pusher_stats_t *stats);

/*
 * Frees the pusher (closed or not: an unclosed attempt is simply never
 * committed; this is the abort of an attempt, and it disturbs neither the
 * client nor other tasks). An unclosed pusher gives its lane back here:
 * connections the attempt leaves unfit are closed (writes in flight are
 * canceled), and the lane is kept for the next task only when nothing of
 * the attempt stays in it (else it is torn down). Every buffer of the
 * pusher dies here at the latest. NULL is ignored. desc->workers must still
 * be valid.
 */
RS_API void rs_pusher_destroy(rs_pusher_t *p);

/*
 * Asks every worker of desc to free a shuffle's storage (after its reads).
 * tcfg NULL: defaults and environment (copied). Opens a context of its own
 * and asks the workers one after the other, each bounded by
 * connect_timeout_ms for the connect and again for the answer. Every worker
 * is asked even after a failure; the first error is returned:
 * rs_ctx_create's, RS_ERR_INVALID for a worker string that is not
 * "host:port", rs_connect's, RS_ERR_NOT_FOUND when a worker does not hold
 * the shuffle, RS_ERR_TIMEOUT when one does not answer (also when its
 * connection died). desc (not NULL) and its strings are read only during
 * the call.
 */
RS_API rs_status_t rs_shuffle_drop(const rs_shuffle_desc_t *desc, const rs_config_t *tcfg);

#ifdef __cplusplus
}
#endif
#endif
