/*
 * The shuffle worker: receives batches that pushers write into its
 * registered arena, keeps each partition in a few large extents, spills to
 * files above a high-water mark, and serves readers (one-sided reads of
 * committed extents; spilled batches staged on request). Embeddable in any
 * process; `rshuffled` is the same worker as a daemon.
 *
 * The worker owns a transport context and a thread that progresses it; all
 * its state is touched only by that thread. The calls below come from one
 * application thread (rs_worker_stats from any thread).
 */
#ifndef RSHUFFLE_WORKER_H
#define RSHUFFLE_WORKER_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/config.h>
#include <rshuffle/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_SPILL_DIR_MAX 256

typedef struct rs_worker_config {
    uint64_t mem_limit;      /* RSHUFFLE_WORKER_MEM: the registered arena, bytes (256 MiB) */
    uint32_t high_water_pct; /* RSHUFFLE_WORKER_HIGH_WATER: spill above this % (95) */
    char spill_dir[RS_SPILL_DIR_MAX]; /* RSHUFFLE_WORKER_SPILL_DIR ("/tmp") */
    uint64_t extent_min; /* RSHUFFLE_WORKER_EXTENT_MIN: first extent of a partition (64 KiB) */
    uint64_t extent_max; /* RSHUFFLE_WORKER_EXTENT_MAX: extents double up to this (8 MiB) */
    uint64_t grant_bulk; /* RSHUFFLE_WORKER_GRANT_BULK: extra space per bulk grant (1 MiB) */
    int verify; /* RSHUFFLE_WORKER_VERIFY: also check checksums on arrival (0: header bounds and
                   identity only; readers verify every frame end to end) */
    int sink;   /* RSHUFFLE_WORKER_SINK: perf only, free batches once committed (0) */
    uint32_t commit_wait_ms; /* longest wait for a commit's batches to arrive (5000) */
    uint32_t retry_ms;       /* backpressure: when a pusher should ask again (20) */
} rs_worker_config_t;

/* Fills *cfg with the defaults above. Cannot fail. */
RS_API void rs_worker_config_defaults(rs_worker_config_t *cfg);

/* Applies RSHUFFLE_WORKER_* variables; RS_ERR_CONFIG names a bad one, *cfg then unchanged. */
RS_API rs_status_t rs_worker_config_from_env(rs_worker_config_t *cfg);

typedef struct rs_worker rs_worker_t;

/*
 * Creates a worker with its own transport context (tcfg NULL: defaults and
 * environment), allocates and registers its arena and starts its thread.
 * *tcfg and *wcfg (NULL: defaults and environment) are copied.
 * Before allocating anything it checks the host: RS_ERR_CONFIG (logged with
 * the figures) when mem_limit exceeds the memory available (MemAvailable)
 * or, where the arena is shared memory (only the UCX backend with
 * RSHUFFLE_UCX_MEM=shared; the default is private memory), the free space
 * of /dev/shm, and when spill_dir
 * is missing, not a directory or does not take new files (not checked in
 * sink mode, which never spills).
 * RS_ERR_CONFIG also: a bad variable (wcfg NULL), a field outside its
 * variable's range (man/rshuffle.7: mem_limit 1 MiB .. 1 TiB, extents
 * 4 KiB .. 1 GiB, grant_bulk at most 16 MiB, high_water_pct 1..100) or
 * extent_max < extent_min, logged naming the field and its variable;
 * rs_ctx_create's errors; rs_mem_alloc's for the arena; RS_ERR_BAD_RKEY;
 * RS_ERR_NOMEM (also: the thread did not start). Nothing is left on an
 * error; *worker_p (not NULL) is set only on RS_OK.
 */
RS_API rs_status_t rs_worker_create(const rs_config_t *tcfg, const rs_worker_config_t *wcfg,
                                    rs_worker_t **worker_p);

/*
 * Accepts pushers and readers on host:port (0: any free port, see
 * rs_worker_port); host is not kept. Once per worker: RS_ERR_STATE when it
 * already listens; else rs_listen's errors. rs_worker_port: the port, 0
 * before a successful rs_worker_listen. Process-wide effects: the soft
 * descriptor limit is raised to the hard one, and SIGPIPE is ignored when
 * its action is the default. From then on, when the transport's own TCP
 * listener stops (UCX's, after an accept of its found no descriptor: no new
 * peer could ever reach the worker), the process exits with status 3
 * (logged; docs/operations.md).
 */
RS_API rs_status_t rs_worker_listen(rs_worker_t *worker, const char *host, uint16_t port);
RS_API uint16_t rs_worker_port(const rs_worker_t *worker);

/*
 * The worker's name by address blob, for rs_shuffle_desc_t.workers:
 * "blob:" and its transport context's address in hex (at most
 * RS_SHUFFLE_NAME_MAX bytes with the NUL). Unlike "host:port" it needs no
 * host a peer can reach by name and no port to agree on: what the
 * transport's address holds reaches the worker (every interface UCX found;
 * the verbs device's address). Pushers, readers and rs_shuffle_drop
 * connect by it like by host:port; a reader in the worker's own process
 * still reads its partitions in place. Needs a listening worker (the
 * job-token handshake and the in-place registry come with it):
 * RS_ERR_STATE before rs_worker_listen; RS_ERR_NO_SPACE when cap is too
 * small; RS_ERR_INVALID for NULL arguments; else rs_ctx_address's errors.
 * buf is written only on RS_OK.
 */
RS_API rs_status_t rs_worker_name(rs_worker_t *worker, char *buf, size_t cap);

typedef struct rs_worker_stats {
    uint64_t batches;       /* batches committed (notified, checked) */
    uint64_t bytes;         /* their frame bytes */
    uint64_t refused;       /* batches refused (bad range, header or checksum) */
    uint64_t spilled_bytes; /* frame bytes written to spill files */
    uint64_t backpressure;  /* grant requests answered with backpressure */
    uint64_t arena_used;    /* bytes of the arena in use now */
    uint64_t arena_peak;
    uint64_t commits;        /* map attempts committed */
    uint64_t shuffles;       /* shuffles held now */
    uint64_t stray_retires;  /* retires of grants not open (a pusher's protocol slip; ignored) */
    uint64_t spill_failures; /* spill files that could not be created or written (disk full, ...) */
    uint64_t merged_writes;  /* merged writes that arrived (one grant, one notification each) */
    uint64_t merged_batches; /* batches they carried (also counted in batches) */
    uint64_t merged_in_place; /* of those, indexed where they landed (not copied out) */
} rs_worker_stats_t;

/*
 * The worker's counters (thread-safe, from any thread), as of its last
 * commit or at most ~1 ms ago. Cannot fail.
 */
RS_API void rs_worker_stats(rs_worker_t *worker, rs_worker_stats_t *stats);

/*
 * Starts draining (decommission), from any thread; cannot fail, a second
 * call changes nothing (a peer's rs_worker_request_drain does the same). A
 * draining worker refuses new pushers (a new shuffle or a new map attempt:
 * RS_ERR_STATE at rs_pusher_open), lets the pushers already attached
 * finish and commit, and keeps serving reads of what it holds.
 * rs_worker_stats' shuffles counts what it still holds: at 0 (every
 * shuffle dropped) it can be destroyed without a reader noticing.
 */
RS_API void rs_worker_drain(rs_worker_t *worker);
/* 1 once draining (rs_worker_drain, or a peer's rs_worker_request_drain), else 0 (NULL: 0). */
RS_API int rs_worker_draining(const rs_worker_t *worker);

/* A shuffle a worker holds, as rs_worker_query reports it. */
typedef struct rs_worker_shuffle_info {
    uint32_t shuffle_id;
    uint32_t n_partitions;
    uint32_t maps_committed; /* map attempts committed */
    uint32_t replicas;       /* R its pushers gave (0: no pusher attached yet) */
    int dropped;             /* dropped, kept until its open snapshots close */
    uint32_t open_snapshots;
    uint64_t bytes;   /* frame bytes committed */
    uint64_t batches; /* batches committed */
    uint64_t spilled_bytes;
} rs_worker_shuffle_info_t;

/* One connection of a worker. */
typedef struct rs_worker_conn_info {
    int role;            /* 0 not attached yet, 1 pusher, 2 reader */
    uint32_t shuffle_id; /* the pusher's, a reader's first open snapshot's; UINT32_MAX: none */
    uint32_t map_id;     /* pusher only (else UINT32_MAX) */
    uint32_t attempt;    /* pusher only */
    uint32_t open_snapshots;
    uint32_t open_grants;
    uint64_t batches; /* pusher: batches that arrived from it */
} rs_worker_conn_info_t;

typedef struct rs_worker_info {
    rs_worker_stats_t stats; /* as of the answer (shuffles: those held) */
    uint64_t arena_len;      /* the registered arena, bytes */
    uint64_t spill_files;    /* open spill files (one per shuffle that spilled) */
    int draining;            /* rs_worker_drain was called (rshuffled: SIGTERM) */
    int truncated; /* more shuffles or connections than one message holds: the first ones */
    uint32_t n_shuffles, n_conns;
    rs_worker_shuffle_info_t *shuffles;
    rs_worker_conn_info_t *conns;
} rs_worker_info_t;

/*
 * Asks a running worker, by name ("host:port" or a "blob:" name, as in
 * rs_shuffle_desc_t.workers), for its state: one INFO request over its
 * own transport context (tcfg NULL: defaults and environment; its
 * job_token must be the worker's). Waits at most connect_timeout_ms for
 * the answer. Errors: RS_ERR_INVALID (NULL arguments, a bad name),
 * rs_ctx_create's and rs_connect's (RS_ERR_AUTH: wrong token), RS_ERR_TIMEOUT
 * (no answer in time), RS_ERR_UNREACHABLE (the connection died), the
 * worker's refusal or a decoder's status for a malformed answer, RS_ERR_NOMEM.
 * *info_p (set only on RS_OK) is the caller's: rs_worker_info_free.
 */
RS_API rs_status_t rs_worker_query(const char *worker, const rs_config_t *tcfg,
                                   rs_worker_info_t **info_p);
/*
 * The same request with the drain flag: the worker starts draining (as
 * rs_worker_drain; rshuffled then stops as after SIGTERM) and answers its
 * state, in *info_p unless info_p is NULL. Errors as rs_worker_query.
 */
RS_API rs_status_t rs_worker_request_drain(const char *worker, const rs_config_t *tcfg,
                                           rs_worker_info_t **info_p);
/* Frees what rs_worker_query returned; NULL is ignored. */
RS_API void rs_worker_info_free(rs_worker_info_t *info);

/*
 * Stops the thread, closes every endpoint, removes spill files and frees
 * everything: the shuffles it held are gone (pushers and readers still
 * connected see their connection die). NULL is ignored.
 */
RS_API void rs_worker_destroy(rs_worker_t *worker);

#ifdef __cplusplus
}
#endif
#endif
