/*
 * The reduce side: reads partitions of a shuffle from the workers that hold
 * them. A session holds what partitions share: one transport context, one
 * connection per worker (made on first use) and the registered read
 * buffers; readers opened in it cost one request each. A partition's index
 * is fetched in one request; committed extents are pulled with large
 * one-sided reads (spilled batches are staged by the worker and pulled the
 * same way); every batch is verified, batches of losing map attempts and
 * repeated batches are dropped, and the result is checked against each
 * winning attempt's commit.
 *
 * Co-located: a partition held by a worker embedded in the reader's own
 * process (rs_worker_listen in this process, the descriptor naming its
 * address) is read in place: after the usual snapshot exchange with that
 * worker, its frames are verified and handed out where they lie in the
 * worker's arena (pinned by the snapshot until the reader closes), with no
 * copy. Such a worker must outlive the readers of its partitions.
 *
 * A session and its readers are used by one thread at a time (they share
 * the session's context and connections; the library starts no thread).
 *
 * Waits: every wait (an answer, a read, a worker short of memory) is
 * bounded by wait_ms (RS_ERR_TIMEOUT); a connection by connect_timeout_ms.
 */
#ifndef RSHUFFLE_READER_H
#define RSHUFFLE_READER_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/client.h>
#include <rshuffle/config.h>
#include <rshuffle/shuffle.h>
#include <rshuffle/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rs_reader rs_reader_t;
typedef struct rs_reader_session rs_reader_session_t;

typedef struct rs_reader_config {
    size_t read_max;      /* RSHUFFLE_READ_MAX: the registered buffer, its largest batch (16 MiB) */
    uint32_t wait_ms;     /* RSHUFFLE_READ_WAIT_MS: any single wait (30000) */
    int local_reads;      /* RSHUFFLE_READ_LOCAL: read a worker of this process in place (1) */
    uint32_t read_ranges; /* RSHUFFLE_READ_RANGES: a remote read's ranges at most (64) */
    const rs_config_t *transport; /* NULL: rs_config_init */
} rs_reader_config_t;

/* Fills *cfg with the defaults above (transport NULL). Cannot fail. */
RS_API void rs_reader_config_defaults(rs_reader_config_t *cfg);

/*
 * Applies the RSHUFFLE_READ_* variables named above; RS_ERR_CONFIG names a
 * bad one (RSHUFFLE_READ_MAX under 16M, one batch, among them), and *cfg
 * is then unchanged.
 */
RS_API rs_status_t rs_reader_config_from_env(rs_reader_config_t *cfg);

/*
 * Opens a session on desc (which, with its worker strings, must outlive the
 * session). attempts[m] is the winning attempt of map m (maps 0 ..
 * n_maps-1; copied). cfg NULL: defaults and environment. Connects lazily.
 * Keeps: *desc is copied shallowly: the worker strings, the placement and
 * placement_arg are used by later opens and log lines. *cfg and
 * *cfg->transport are copied. A read_max below 16 MiB (one batch) is raised
 * to 16 MiB; wait_ms 0 means 30000.
 * Errors: RS_ERR_INVALID: NULL desc or workers, n_workers 0, NULL attempts
 * with n_maps > 0; RS_ERR_CONFIG: a bad variable (cfg NULL), or after the
 * raise a field outside its variable's range (read_max above 4 GiB,
 * wait_ms above 3600000 or under 10, read_ranges outside 1 .. RS_GETV_MAX), logged naming it;
 * rs_ctx_create's errors; RS_ERR_NOMEM. *sess_p (not NULL) is set only on
 * RS_OK.
 */
RS_API rs_status_t rs_reader_session_open(const rs_shuffle_desc_t *desc, uint32_t n_maps,
                                          const uint32_t *attempts, const rs_reader_config_t *cfg,
                                          rs_reader_session_t **sess_p);

/*
 * rs_reader_session_open on client's lanes (include/rshuffle/client.h),
 * which rs_reader_session_open does on the process's default client. The
 * session borrows a read lane whose context fits its configuration
 * (cfg->transport, read_max): its registered read buffers and the
 * connections earlier sessions kept (attached again on first use by this
 * one). rs_reader_session_close gives it back; it is kept for a later
 * session only when no reader of the session is still open, and a
 * connection only when its worker sent nothing the session could not take
 * (an answer that does not decode, a range outside its arena: the worker
 * frees what that connection opened when it goes). client must
 * not be NULL; see rs_client_destroy for a client destroyed while the
 * session lives (later rs_reader_open_in: RS_ERR_CANCELED). Errors as
 * rs_reader_session_open (RS_ERR_INVALID also for a NULL client or sess_p).
 */
RS_API rs_status_t rs_reader_session_open_in(rs_client_t *client, const rs_shuffle_desc_t *desc,
                                             uint32_t n_maps, const uint32_t *attempts,
                                             const rs_reader_config_t *cfg,
                                             rs_reader_session_t **sess_p);

/* The most lanes one rs_reader_warm call makes ready. */
#define RS_READ_WARM_MAX 256u

/*
 * Makes lanes read lanes of client ready for the reduce tasks an executor
 * is about to run (the read side of rs_pusher_warm_in): each fits sessions
 * of cfg (NULL: defaults and environment), has its context made, one read
 * buffer (read_max) registered and resident, and a connection to every
 * worker of desc (only its workers are read); they are kept idle in the
 * client (at most its max_idle). They are taken together, so sessions
 * running at once each find one. A session's first attach on a warmed
 * connection brings the worker's key (one round trip, as on a new one,
 * without the connect). Optional: without it a thread's first session
 * makes its lane and connections, and its buffer faults in as reads land.
 * Errors: RS_ERR_INVALID (NULL client or desc, no workers, a NULL address,
 * lanes 0 or above RS_READ_WARM_MAX), RS_ERR_CONFIG as
 * rs_reader_session_open, rs_ctx_create's, rs_mem_alloc's and
 * rs_connect's errors, RS_ERR_NOMEM. Lanes made before an error stay.
 */
RS_API rs_status_t rs_reader_warm_in(rs_client_t *client, const rs_shuffle_desc_t *desc,
                                     const rs_reader_config_t *cfg, uint32_t lanes);

/* rs_reader_warm_in on the process's default client (RS_ERR_NOMEM when it cannot be made). */
RS_API rs_status_t rs_reader_warm(const rs_shuffle_desc_t *desc, const rs_reader_config_t *cfg,
                                  uint32_t lanes);

/*
 * Opens one partition in the session. RS_ERR_NOT_FOUND: unknown shuffle or
 * partition at the worker; RS_ERR_STATE: a winning attempt never committed
 * there (R >= 2: no live worker of the partition's ring holds it; that can
 * also come from rs_reader_next, once the workers holding the other maps
 * were read). Each open reader of a remote partition holds one read buffer
 * (read_max bytes); a reader of a local partition holds none. A session
 * reading small remote partitions keeps one more, into which it reads the
 * batches of several partitions read ahead at once (docs/shuffle.md, "Read
 * path"); only the bytes read there become resident.
 * It connects to the partition's worker if the session has no live
 * connection there (a dead one is made again: readers still open on the
 * old one then fail with RS_ERR_UNREACHABLE), takes a snapshot of the
 * partition at the worker and fetches its index. After a worker on this
 * host exited, and when no other reader of the session is open, it first
 * closes every connection and renews the session context's receive queue
 * (rs_ctx_renew: the dead worker may have blocked it mid-send). Also: RS_ERR_INVALID:
 * partition >= n_partitions, a placement out of range, a worker string that
 * is not "host:port", a map at or above the session's n_maps that committed
 * at the worker (its records would be lost: n_maps is too small), a worker
 * that holds the shuffle with another n_partitions than desc's (logged);
 * rs_connect's errors and a refused attach (RS_ERR_EXISTS: the worker holds
 * the shuffle id for another generation);
 * RS_ERR_BAD_RKEY; rs_mem_alloc's errors for the read buffer;
 * RS_ERR_BACKPRESSURE: the worker had no memory for the index within
 * wait_ms; RS_ERR_TIMEOUT; RS_ERR_UNREACHABLE (or the status that killed
 * the connection); RS_ERR_PROTOCOL: a malformed index or answer, or an
 * index the worker placed outside its arena; RS_ERR_BAD_LENGTH:
 * an indexed batch larger than read_max; RS_ERR_NO_SPACE: an index larger
 * than read_max; RS_ERR_NOMEM. *reader_p (not NULL) is set only on RS_OK.
 */
RS_API rs_status_t rs_reader_open_in(rs_reader_session_t *sess, uint32_t partition,
                                     rs_reader_t **reader_p);

/*
 * Closes the connections and frees the session; its readers must be closed
 * first (one still open is warned about and then dangles). NULL is ignored.
 */
RS_API void rs_reader_session_close(rs_reader_session_t *sess);

/*
 * One partition with a session of its own (a connection per call: prefer
 * a session for many partitions). Arguments, what is kept, and errors as
 * rs_reader_session_open and rs_reader_open_in; rs_reader_close closes the
 * session too.
 */
RS_API rs_status_t rs_reader_open(const rs_shuffle_desc_t *desc, uint32_t partition,
                                  uint32_t n_maps, const uint32_t *attempts,
                                  const rs_reader_config_t *cfg, rs_reader_t **reader_p);

/*
 * The next record: *rec_p and *len_p point into the reader's memory until the
 * next call. At the end *rec_p is NULL (and the commit counts were checked:
 * a missing or extra batch is an error, RS_ERR_CHECKSUM).
 * *rec_p points into the reader's registered read buffer or the session's
 * buffer of small partitions read together (codec none), its decode buffer, or, for a partition of
 * a worker in this process read in place (codec none), the worker's arena; it is valid until the
 * next rs_reader_next or rs_reader_close on this reader (not on other readers of the session). At
 * the end it returns RS_OK with *rec_p NULL and *len_p 0, again at every later call. Errors are
 * sticky (every later call returns the same): the frame checks of rs_frame_verify (RS_ERR_CHECKSUM,
 * RS_ERR_TRUNCATED, RS_ERR_BAD_*); RS_ERR_PROTOCOL: a batch that is not the one indexed, a
 * malformed spill reply, or batches indexed or staged outside the worker's
 * arena; RS_ERR_DECOMPRESS; RS_ERR_TRUNCATED: a record
 * overruns its batch; RS_ERR_UNREACHABLE (or the connection's status): the
 * worker or the connection was lost; RS_ERR_TIMEOUT; RS_ERR_BACKPRESSURE:
 * spilled batches could not be staged within wait_ms; a worker's refusal
 * of a staging request; RS_ERR_NOMEM. *rec_p and *len_p are written only on
 * RS_OK.
 */
RS_API rs_status_t rs_reader_next(rs_reader_t *r, const void **rec_p, uint32_t *len_p);

typedef struct rs_reader_stats {
    uint64_t records;
    uint64_t batches;         /* delivered */
    uint64_t bytes;           /* frame bytes delivered */
    uint64_t duplicates;      /* repeated batches dropped */
    uint64_t other_attempts;  /* batches of losing attempts dropped */
    uint64_t reads;           /* one-sided reads issued */
    uint64_t spill_loads;     /* staging requests for spilled batches */
    uint64_t local_batches;   /* delivered in place from a worker of this process (no copy) */
    uint64_t zero_copy_bytes; /* their frame bytes */
    uint64_t failovers;       /* R >= 2: replicas that took over after one failed mid-read */
} rs_reader_stats_t;

/* The reader's counters so far. Cannot fail. */
RS_API void rs_reader_stats(const rs_reader_t *r, rs_reader_stats_t *stats);

/*
 * Releases the worker's snapshot (a message, without waiting) and frees the
 * reader; its read buffer goes back to the session. Records it returned die
 * here. NULL is ignored. A reader from rs_reader_open closes its session.
 * The message may be held back, so that a session reading many partitions
 * sends its closes together: up to 16 per worker, sent with the session's
 * next message to that worker, at its next open or close once the oldest
 * is 1 ms old, or at rs_reader_session_close. Until then the worker keeps
 * the snapshot pinned (it does not spill those batches, and a dropped
 * shuffle is freed once its snapshots close).
 */
RS_API void rs_reader_close(rs_reader_t *r);

#ifdef __cplusplus
}
#endif
#endif
