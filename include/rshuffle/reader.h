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
 * A session and its readers are used by one thread at a time.
 */
#ifndef RSHUFFLE_READER_H
#define RSHUFFLE_READER_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/config.h>
#include <rshuffle/shuffle.h>
#include <rshuffle/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rs_reader rs_reader_t;
typedef struct rs_reader_session rs_reader_session_t;

typedef struct rs_reader_config {
    size_t read_max;  /* RSHUFFLE_READ_MAX: bytes per read, the registered buffer (16 MiB) */
    uint32_t wait_ms; /* RSHUFFLE_READ_WAIT_MS: any single wait (30000) */
    int local_reads;  /* RSHUFFLE_READ_LOCAL: read a worker of this process in place (1) */
    const rs_config_t *transport; /* NULL: rs_config_init */
} rs_reader_config_t;

/* Fills *cfg with the defaults above. */
RS_API void rs_reader_config_defaults(rs_reader_config_t *cfg);

/* Applies the RSHUFFLE_READ_* variables named above; RS_ERR_CONFIG names a bad one. */
RS_API rs_status_t rs_reader_config_from_env(rs_reader_config_t *cfg);

/*
 * Opens a session on desc (which, with its worker strings, must outlive the
 * session). attempts[m] is the winning attempt of map m (maps 0 ..
 * n_maps-1; copied). cfg NULL: defaults and environment. Connects lazily.
 */
RS_API rs_status_t rs_reader_session_open(const rs_shuffle_desc_t *desc, uint32_t n_maps,
                                          const uint32_t *attempts, const rs_reader_config_t *cfg,
                                          rs_reader_session_t **sess_p);

/*
 * Opens one partition in the session. RS_ERR_NOT_FOUND: unknown shuffle or
 * partition at the worker; RS_ERR_STATE: a winning attempt never committed
 * there. Each open reader of a remote partition holds one read buffer
 * (read_max bytes); a reader of a local partition holds none.
 */
RS_API rs_status_t rs_reader_open_in(rs_reader_session_t *sess, uint32_t partition,
                                     rs_reader_t **reader_p);

/* Closes the connections and frees the session; its readers must be closed first. */
RS_API void rs_reader_session_close(rs_reader_session_t *sess);

/*
 * One partition with a session of its own (a connection per call: prefer
 * a session for many partitions). Arguments and errors as above.
 */
RS_API rs_status_t rs_reader_open(const rs_shuffle_desc_t *desc, uint32_t partition,
                                  uint32_t n_maps, const uint32_t *attempts,
                                  const rs_reader_config_t *cfg, rs_reader_t **reader_p);

/*
 * The next record: *rec_p and *len_p point into the reader's memory (for a
 * local partition, uncompressed: into the worker's arena) until the next call. At the end *rec_p is
 * NULL (and the commit counts were checked: a missing or extra batch is an error, RS_ERR_CHECKSUM).
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
} rs_reader_stats_t;

/* The reader's counters so far. */
RS_API void rs_reader_stats(const rs_reader_t *r, rs_reader_stats_t *stats);

/* Releases the worker's snapshot (without waiting) and frees the reader. */
RS_API void rs_reader_close(rs_reader_t *r);

#ifdef __cplusplus
}
#endif
#endif
