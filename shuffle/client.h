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

enum { RS_LANE_PUSH = 1, RS_LANE_READ = 2 };

typedef struct rs_lane {
    rs_list_t link; /* idle list */
    int kind;
    rs_client_t *client;
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

/* Was the lane's client destroyed? (its task's calls then fail: RS_ERR_CANCELED) */
int rs_lane_client_closed(const rs_lane_t *lane);

#endif
