/*
 * The store's arena accounting and partition extents: data-area ranges
 * taken and given back (with the usage counters), and an extent's close
 * (its unused tail goes back) and free once nothing writes into it, no
 * batch of it is in memory and no snapshot pins it.
 */
#include "worker/internal.h"

#include <stdlib.h>

/* ----------------------------------------------------------------- arena */

void rs_wk_arena_used_update(rs_wk_store_t *st)
{
    st->stats.arena_used = st->ra.used + st->rsv.used;
    if (st->stats.arena_used > st->stats.arena_peak)
        st->stats.arena_peak = st->stats.arena_used;
}

void rs_wk_arena_put(rs_wk_store_t *st, uint64_t off, uint64_t len)
{
    if (len > 0)
        rs_range_put(&st->ra, off, len);
    rs_wk_arena_used_update(st);
}

rs_status_t rs_wk_arena_get(rs_wk_store_t *st, uint64_t len, uint64_t *off_p)
{
    rs_status_t s = rs_range_get(&st->ra, len, off_p);
    rs_wk_arena_used_update(st);
    return s;
}

/* --------------------------------------------------------------- extents */

static int hole_cmp(const void *a, const void *b)
{
    const rs_range_t *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Gives back e's range but its holes (given back when they were made). */
static void holes_skip_put(rs_wk_store_t *st, extent_t *e)
{
    qsort(e->holes, e->n_holes, sizeof(*e->holes), hole_cmp);
    uint64_t at = e->off, end = e->off + e->len;
    for (uint32_t i = 0; i < e->n_holes; i++) {
        if (e->holes[i].off > at)
            rs_range_put(&st->ra, at, e->holes[i].off - at);
        at = e->holes[i].off + e->holes[i].len;
    }
    if (end > at)
        rs_range_put(&st->ra, at, end - at);
    rs_wk_arena_used_update(st);
}

void rs_wk_extent_free(rs_wk_store_t *st, extent_t *e)
{
    wpart_t *part = e->part;
    if (part->cur == e)
        part->cur = NULL;
    rs_list_del(&e->link);
    if (e->reserve) {
        rs_range_put(&st->rsv, e->off - st->data_len, e->len);
        rs_wk_arena_used_update(st);
    } else if (e->n_holes > 0) {
        holes_skip_put(st, e);
    } else {
        rs_wk_arena_put(st, e->off, e->len);
    }
    free(e->holes);
    free(e->frames);
    free(e);
}

rs_status_t rs_wk_extent_hole(rs_wk_store_t *st, extent_t *e, uint64_t off, uint64_t len)
{
    if (e->n_holes == e->cap_holes) {
        uint32_t cap = e->cap_holes ? e->cap_holes * 2 : 4;
        rs_range_t *h = realloc(e->holes, cap * sizeof(*h));
        if (h == NULL)
            return RS_ERR_NOMEM;
        e->holes = h;
        e->cap_holes = cap;
    }
    e->holes[e->n_holes++] = (rs_range_t){.off = off, .len = len};
    rs_wk_arena_put(st, off, len);
    return RS_OK;
}

/* Stops granting from e and gives its unused tail back. */
void rs_wk_extent_close(rs_wk_store_t *st, extent_t *e)
{
    if (e->closed)
        return;
    e->closed = 1;
    if (e->part->cur == e)
        e->part->cur = NULL;
    uint64_t keep = rs_range_round(&st->ra, e->fill); /* frames packed at 8 bytes end anywhere */
    if (keep < e->len) {
        rs_wk_arena_put(st, e->off + keep, e->len - keep);
        e->len = keep;
    }
}

/* An extent nothing will write into and no batch of which is still in memory. */
void rs_wk_extent_maybe_free(rs_wk_store_t *st, extent_t *e)
{
    if (e->closed && e->live_grants == 0 && e->n_batches == 0 && e->pins == 0)
        rs_wk_extent_free(st, e);
}
