/*
 * A getter's fetch (fetch.c), in three parts below it: planning the next
 * steps under the entry's lock (plan.c), requests to the source
 * (fetchreq.c), and the direct read of a one-block object (direct.c).
 */
#ifndef RS_BROADCAST_FETCH_H
#define RS_BROADCAST_FETCH_H

#include <stddef.h>

#include "broadcast/internal.h"
#include "broadcast/entry.h"

#define RS_BREADS_BATCH 32 /* reads planned per round */

typedef struct rs_bc_act {
    int send_get;
    int send_update;   /* a long poll for news about other holders */
    int send_announce; /* blocks verified since the last announcement (bitmap below) */
    int send_complete; /* the final announcement */
    int verify;
    uint32_t vblock;
    rs_bc_holder_t *prepare;
    uint32_t n_reads;
    uint32_t rblock[RS_BREADS_BATCH];
    rs_bc_holder_t *rholder[RS_BREADS_BATCH];
    uint8_t *bitmap; /* snapshot for an update */
} rs_bc_act_t;

static inline int rs_bc_act_empty(const rs_bc_act_t *a)
{
    return !a->send_get && !a->send_update && !a->send_announce && !a->send_complete &&
           !a->verify && a->prepare == NULL && a->n_reads == 0;
}

static inline void rs_bc_stat_add(rs_bc_entry_t *e, size_t field_off, uint64_t v)
{
    /* Entry counters under e->lock by the callers that hold it; node totals atomically. */
    RS_BSTAT_ADD(*(uint64_t *)((char *)&e->node->stats + field_off), v);
}

#define ESTAT(e, field, v)                                           \
    do {                                                             \
        (e)->stats.field += (v);                                     \
        rs_bc_stat_add((e), offsetof(rs_bcast_stats_t, field), (v)); \
    } while (0)

/* Decides this getter's next steps into a (e->lock held). */
void rs_bc_fetch_plan(rs_bc_entry_t *e, rs_bc_act_t *a);

/* Requests (fetchreq.c). The manifest request; its error fails the fetch. */
rs_status_t rs_bc_fetch_send_get(rs_bc_entry_t *e);
/* A long poll for news about other holders. */
void rs_bc_fetch_send_update(rs_bc_entry_t *e);
/* An announcement of the blocks in bitmap (verified, then claimed); NULL: the final one. */
void rs_bc_fetch_send_announce(rs_bc_entry_t *e, const uint8_t *bitmap);

/*
 * A one-block object whose descriptor carries its region's key and checksum
 * (RS_BDESC_F_DIRECT): read the block straight from the source, no request,
 * and check it. 1: the entry is READY. 0: not tried or it failed (the source
 * destroyed the object and its region was reused or poisoned, the read
 * failed): the caller fetches as usual, which also tells a destroyed object.
 */
int rs_bc_fetch_direct(rs_bc_entry_t *e, const rs_bc_desc_t *d, uint64_t deadline);

#endif
