/*
 * The client's lane cache (include/rshuffle/client.h): idle lanes by kind
 * and key, lent to one task at a time. Lanes themselves (what a pusher or
 * a reader session keeps) are defined by pusher/ and reader/, which embed
 * rs_lane_t first and give the client their destructor.
 */
#ifndef RS_SHUFFLE_CLIENT_H
#define RS_SHUFFLE_CLIENT_H

#include <rshuffle/client.h>

#include "common/list.h"

#include <stdatomic.h>
#include <stdint.h>

enum { RS_LANE_PUSH = 1, RS_LANE_READ = 2 };

typedef struct rs_lane {
    rs_list_t link; /* idle list */
    int kind;
    rs_client_t *client;
    struct rs_loss_set *losses;            /* the client's (shuffle/loss.h) */
    const atomic_int *closed;              /* the client's: set once it is destroyed */
    void (*destroy)(struct rs_lane *lane); /* frees the lane (called without the client's lock) */
} rs_lane_t;

/* Does an idle lane fit a task with this key? */
typedef int (*rs_lane_match_t)(const rs_lane_t *lane, const void *key);

/*
 * An idle lane of kind that matches key, now the caller's: RS_OK,
 * RS_ERR_NOT_FOUND (none: make one and rs_lane_add it).
 */
rs_status_t rs_lane_take(rs_client_t *c, int kind, rs_lane_match_t match, const void *key,
                         rs_lane_t **lane_p);

/* A lane the caller made, lent to it from now on (counted as busy). */
void rs_lane_add(rs_client_t *c, rs_lane_t *lane, int kind, void (*destroy)(rs_lane_t *));

/*
 * The task is done with lane: kept idle when reusable (the client lives
 * and keeps fewer than max_idle), else destroyed. The lane must not be
 * touched afterwards.
 */
void rs_lane_give(rs_lane_t *lane, int reusable);

/*
 * Was the lane's client destroyed? (its task's calls then fail:
 * RS_ERR_CANCELED). Inline: appends and reads check it per record.
 */
static inline int rs_lane_client_closed(const rs_lane_t *lane)
{
    return atomic_load_explicit(lane->closed, memory_order_acquire);
}

/*
 * Workers lost, told once to every lane of a client (shuffle/loss.c). A
 * lane that finds a worker of this host exited (its connection dead, the
 * peer's process gone) notes its address; every loss gets the next value
 * of the client's loss epoch. Each lane remembers the epoch it has seen
 * and, when the client's is newer (one atomic load: no lock on a task's
 * path), walks the losses it has not seen. A connection is made at an
 * epoch: a loss noted later concerns it, one noted earlier is another
 * process at that address (a worker restarted on its port).
 */
typedef void (*rs_lane_loss_fn)(void *arg, const char *addr, uint64_t epoch);

/* The client's loss epoch now (0: nothing lost yet). */
uint64_t rs_lane_loss_epoch(const rs_lane_t *lane);

/*
 * Notes that the worker at addr, connected to at epoch made, exited. Once
 * per process: a loss of addr noted after made already says it (another
 * lane saw it first), and nothing changes.
 */
void rs_lane_loss_note(rs_lane_t *lane, const char *addr, uint64_t made);

/*
 * Calls fn for each loss noted after epoch seen, oldest first, and returns
 * the epoch now. When losses older than the client keeps (its last 64) were
 * missed, fn is called once with a NULL addr: treat every connection as lost.
 */
uint64_t rs_lane_loss_walk(rs_lane_t *lane, uint64_t seen, rs_lane_loss_fn fn, void *arg);

#endif
