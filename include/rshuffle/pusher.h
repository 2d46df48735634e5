/*
 * The map side of a shuffle.
 *
 * Push buffers are registered memory carved from one slab per pusher: the
 * buffer a writer fills is the buffer the NIC reads. A full buffer moves to
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
 */
#ifndef RSHUFFLE_PUSHER_H
#define RSHUFFLE_PUSHER_H

#include <stddef.h>
#include <stdint.h>
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
 * The consumer of full buffers, run on the queue's engine thread in
 * submission order. It owns buf (used bytes of records) until it passes it
 * to rs_pushq_release, from that thread, now or later.
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

/* Fills *cfg with the defaults above. */
RS_API void rs_pushq_config_defaults(rs_pushq_config_t *cfg);

/* Creates the pool (one slab allocation) and starts the engine thread. */
RS_API rs_status_t rs_pushq_create(const rs_pushq_config_t *cfg, rs_pushq_fn_t fn, void *arg,
                                   rs_pushq_t **q_p);

/*
 * A buffer of len bytes for the writer: an idle one of exactly that length,
 * else a new one carved from the slab (waiting at most wait_ms for room).
 */
RS_API rs_status_t rs_pushq_buf_get(rs_pushq_t *q, size_t len, rs_pbuf_t **buf_p);

/* Gives back a buffer the writer holds and will not submit. */
RS_API void rs_pushq_buf_put(rs_pushq_t *q, rs_pbuf_t *buf);

/*
 * Hands full (used bytes) to the engine and returns in *fresh_p an idle
 * buffer of full's length (never one of another length). The writer must not
 * touch full afterwards.
 */
RS_API rs_status_t rs_pushq_swap(rs_pushq_t *q, uint32_t partition, rs_pbuf_t *full, size_t used,
                                 rs_pbuf_t **fresh_p);

/* Copies len bytes of src into an idle pooled buffer and hands that to the engine. */
RS_API rs_status_t rs_pushq_copy(rs_pushq_t *q, uint32_t partition, const void *src, size_t len);

/* The consumer is done with buf: it becomes idle. */
RS_API void rs_pushq_release(rs_pushq_t *q, rs_pbuf_t *buf);

/* Waits (at most timeout_ms) until every handed-over buffer was released. */
RS_API rs_status_t rs_pushq_drain(rs_pushq_t *q, uint32_t timeout_ms);

/* Stops the engine (buffers still queued are released unconsumed) and frees the pool. */
RS_API void rs_pushq_destroy(rs_pushq_t *q);

/* ------------------------------------------------------------- the pusher */

typedef struct rs_pusher rs_pusher_t;

typedef struct rs_pusher_config {
    rs_codec_t codec;         /* RSHUFFLE_CODEC: none|lz4|snappy (none) */
    size_t buf_len;           /* RSHUFFLE_PUSH_BUF: a full push buffer, bytes (256 KiB) */
    size_t min_buf;           /* first buffer of a partition; doubles up to buf_len (4 KiB);
                                 smaller when pool_bytes / 2 / P is (many partitions) */
    size_t pool_bytes;        /* RSHUFFLE_PUSH_POOL: the registered slab, bytes (32 MiB) */
    uint32_t queue_depth;     /* full buffers queued for the engine (16) */
    uint64_t max_inflight;    /* RSHUFFLE_PUSH_INFLIGHT: bytes in flight per worker (4 MiB) */
    uint32_t wait_ms;         /* RSHUFFLE_PUSH_WAIT_MS: every wait of append/swap/close (30000) */
    uint32_t backpressure_ms; /* RSHUFFLE_PUSH_BACKPRESSURE_MS: then RS_ERR_BACKPRESSURE (30000) */
    const rs_config_t *transport; /* NULL: rs_config_init */
} rs_pusher_config_t;

/* Fills *cfg with the defaults above. */
RS_API void rs_pusher_config_defaults(rs_pusher_config_t *cfg);

/* Applies the RSHUFFLE_* variables named above; RS_ERR_CONFIG names a bad one. */
RS_API rs_status_t rs_pusher_config_from_env(rs_pusher_config_t *cfg);

/*
 * Opens the map side of one attempt of one map task: connects to every
 * worker of desc (registering the shuffle there), carves the pool and starts
 * the push engine. cfg NULL: defaults and environment.
 */
RS_API rs_status_t rs_pusher_open(const rs_shuffle_desc_t *desc, uint32_t map_id, uint32_t attempt,
                                  const rs_pusher_config_t *cfg, rs_pusher_t **pusher_p);

/*
 * The largest record a pusher takes, bytes: its batch (frame header +
 * record header + record) must fit one grant of a worker (16 MiB), whatever
 * the codec (a batch that would not shrink is sent uncompressed).
 */
#define RS_PUSH_RECORD_MAX ((16u << 20) - 48u - 4u)

/*
 * Appends one record (framed as in shuffle.h) to the partition's current
 * registered buffer: the only copy of its bytes. A full buffer goes to the
 * engine. A partition's buffers start small and double up to buf_len.
 * RS_ERR_INVALID, before anything is pushed, for a record longer than
 * RS_PUSH_RECORD_MAX or whose buffer (len + 68 bytes) does not fit the pool
 * (pool_bytes); the pusher stays usable.
 */
RS_API rs_status_t rs_pusher_append(rs_pusher_t *p, uint32_t partition, const void *rec,
                                    uint32_t len);

/* A registered buffer of len bytes for rs_pusher_swap (len <= the pool). */
RS_API rs_status_t rs_pusher_buf_get(rs_pusher_t *p, size_t len, rs_pbuf_t **buf_p);

/* Gives back a buffer from rs_pusher_buf_get that will not be swapped. */
RS_API void rs_pusher_buf_put(rs_pusher_t *p, rs_pbuf_t *buf);

/*
 * Hands a buffer of framed records (used bytes) to the engine as one batch
 * of partition, and returns an idle buffer of the same length in *fresh_p.
 */
RS_API rs_status_t rs_pusher_swap(rs_pusher_t *p, uint32_t partition, rs_pbuf_t *full, size_t used,
                                  rs_pbuf_t **fresh_p);

typedef struct rs_pusher_stats {
    uint64_t records;   /* appended */
    uint64_t batches;   /* pushed (retries not counted) */
    uint64_t raw_bytes; /* payload bytes before the codec */
    uint64_t bytes;     /* frame bytes written */
    uint64_t grant_requests;
    uint64_t backpressure; /* grant answers that said "full" */
    uint64_t reclaimed;    /* unused grants given back because a worker was short */
} rs_pusher_stats_t;

/*
 * Map commit: flushes every partition, waits (bounded) for every write to
 * complete, sends per-partition counts to every worker and waits for their
 * answers. The first error of the pusher's life is returned (a worker that
 * died: RS_ERR_UNREACHABLE / RS_ERR_TIMEOUT; backpressure beyond the bound:
 * RS_ERR_BACKPRESSURE; a worker that answers nothing for the transport's
 * peer_timeout_ms: RS_ERR_TIMEOUT; a refused batch: its reason). stats
 * (may be NULL) is filled in either case with what was done: records
 * appended, batches framed and handed to the writes, grant requests sent;
 * after a failure the engine is stopped and the pusher can only be destroyed.
 */
RS_API rs_status_t rs_pusher_close(rs_pusher_t *p, rs_pusher_stats_t *stats);

/* Frees the pusher (closed or not: an unclosed attempt is simply never committed). */
RS_API void rs_pusher_destroy(rs_pusher_t *p);

/*
 * Asks every worker of desc to free a shuffle's storage (after its reads).
 * tcfg NULL: defaults and environment.
 */
RS_API rs_status_t rs_shuffle_drop(const rs_shuffle_desc_t *desc, const rs_config_t *tcfg);

#ifdef __cplusplus
}
#endif
#endif
