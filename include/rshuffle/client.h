/*
 * The process-level shuffle client: what every task of a process shares.
 *
 * An engine runs many short tasks per process (map tasks, reduce tasks).
 * A client keeps what makes a task expensive to start: transport contexts,
 * connections to the workers (made on first use, kept open), the
 * registered push pool and push engine of a pusher, the registered read
 * buffers of a reader session. A task opened from a client (rs_pusher_open_in,
 * rs_reader_session_open_in) borrows one such set, a lane, for its life and
 * gives it back when it ends; the next task reuses it: no registration, no
 * thread start, no connection, only the attach round trips.
 *
 * A lane serves one task at a time, so tasks of different threads never
 * share a transport context: a process running T tasks at once holds T
 * push lanes (and up to T read lanes), however many tasks it runs in all.
 * Registered memory per process is therefore bounded by the peak number of
 * concurrent tasks times a lane's pool (pusher pool_bytes; reader read_max
 * per read buffer), plus max_idle lanes kept between waves (docs/shuffle.md,
 * "One client per process").
 *
 * An executor that knows its workers and thread count at start readies
 * lanes then (rs_pusher_warm_in, rs_reader_warm_in): connections made and
 * pools resident before its first tasks, which then find them idle.
 *
 * rs_pusher_open and rs_reader_session_open use a process-wide default
 * client, created on first use with rs_client_config_defaults and the
 * environment (RSHUFFLE_CLIENT_LANES), destroyed at exit (atexit) or by
 * rs_client_default_shutdown. A child made by fork() starts without one
 * (the parent's lanes are set aside there without a transport call, their
 * memory left allocated). If the parent had UCX contexts open at the fork
 * (lanes, even idle, workers, broadcast nodes), the child opens none: its
 * pushers and readers fail with RS_ERR_STATE, since UCX's locks may be
 * held in it (docs/shuffle.md, "fork()"). So a parent that forks children
 * which push or read calls rs_client_default_shutdown (and destroys its
 * other clients, workers and nodes) before fork(), or the child execs; the
 * child then makes its own default client on first use. A client made with
 * rs_client_create before a fork belongs to the parent: the child must
 * neither use nor destroy it.
 *
 * Thread safety: every function here may be called from any thread; the
 * tasks opened from a client keep their own one-thread rule.
 */
#ifndef RSHUFFLE_CLIENT_H
#define RSHUFFLE_CLIENT_H

#include <stdint.h>
#include <rshuffle/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rs_client rs_client_t;

typedef struct rs_client_config {
    /*
     * RSHUFFLE_CLIENT_LANES: idle lanes kept for later tasks (64); 0 keeps
     * none: every task makes and tears down its own (the cost of a task
     * without a client, for comparison).
     */
    uint32_t max_idle;
} rs_client_config_t;

/* Fills *cfg with the defaults above. Cannot fail; NULL is ignored. */
RS_API void rs_client_config_defaults(rs_client_config_t *cfg);

/*
 * Applies RSHUFFLE_CLIENT_LANES; RS_ERR_CONFIG names a bad value (*cfg then
 * unchanged); RS_ERR_INVALID: NULL cfg.
 */
RS_API rs_status_t rs_client_config_from_env(rs_client_config_t *cfg);

/*
 * Creates a client (nothing is connected or registered yet). cfg NULL:
 * defaults and environment; *cfg is copied. RS_ERR_INVALID: NULL client_p;
 * RS_ERR_CONFIG (cfg NULL and a bad variable, or max_idle above 65536);
 * RS_ERR_NOMEM. *client_p is set only on RS_OK.
 */
RS_API rs_status_t rs_client_create(const rs_client_config_t *cfg, rs_client_t **client_p);

/*
 * Destroys the client: its idle lanes (connections, pools, buffers) are
 * freed now. Tasks still open keep their lane, and it is freed when they
 * end; their later calls that need the client fail with RS_ERR_CANCELED
 * (rs_pusher_append, rs_pusher_swap, rs_pusher_close; rs_reader_open_in),
 * and nothing of an unclosed pusher is committed. Opening a task from a
 * destroyed client is not allowed (the pointer is dead for the caller).
 * NULL is ignored. Must not be called on the default client (see
 * rs_client_default_shutdown).
 */
RS_API void rs_client_destroy(rs_client_t *client);

/*
 * The process-wide default client, made on first use (defaults and
 * environment; a bad RSHUFFLE_CLIENT_LANES is logged and the default
 * used). NULL only when memory ran out. Thread-safe; the pointer stays
 * valid until rs_client_default_shutdown or exit.
 */
RS_API rs_client_t *rs_client_default(void);

/*
 * Destroys the default client now, as rs_client_destroy (also run at
 * exit). A later rs_client_default (or rs_pusher_open, ...) makes a new
 * one. Cannot fail; thread-safe.
 */
RS_API void rs_client_default_shutdown(void);

typedef struct rs_client_stats {
    uint64_t lanes_made;   /* lanes created: contexts, pools, engine threads */
    uint64_t lanes_reused; /* tasks served by an idle lane */
    uint64_t lanes_idle;   /* kept now */
    uint64_t lanes_busy;   /* lent to open tasks now */
    uint64_t workers_lost; /* workers of this host its lanes saw exit, each process once */
} rs_client_stats_t;

/* Fills *stats with the client's counters. Cannot fail; a NULL client or stats is ignored. */
RS_API void rs_client_stats(rs_client_t *client, rs_client_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif
