/*
 * Grants: ranges of a partition's current extent handed to a pusher, with
 * bulk and ahead room only while memory is plentiful; a grant's extent stops
 * waiting for it once every byte it will hold arrived. A new extent is
 * carved here, spilling for it when the data area is full.
 */
#include "worker/internal.h"

#include "common/assert.h"

#include <stdlib.h>
#include <string.h>

/*
 * Is memory plentiful: len more bytes of grants within three quarters of the
 * data area and below the high-water mark? Past it grants are exactly what
 * waits: room between there and the mark is for data, not idle room.
 */
static int plenty(const rs_wk_store_t *st, uint64_t len)
{
    uint64_t mark = st->data_len / 4 * 3 < st->high_water ? st->data_len / 4 * 3 : st->high_water;
    return st->ra.used + len <= mark;
}

/*
 * Room beyond what waits now (bulk, grants ahead) while memory is plentiful
 * and such room held by all pushers stays within half of what is left below
 * the mark (a quarter of the data area at most): idle grant room must never
 * be what pushes batches out to disk, nor take the room other partitions'
 * next extents need.
 */
static int extra_ok(const rs_wk_store_t *st, uint64_t len)
{
    if (!plenty(st, len))
        return 0;
    uint64_t held = rs_wk_store_held(st);
    RS_ASSERT(held <= st->high_water); /* plenty: used is below the mark */
    uint64_t budget = (st->high_water - held) / 2;
    if (budget > st->data_len / 4)
        budget = st->data_len / 4;
    return st->open_room + len <= budget;
}

static rs_status_t extent_new(rs_wk_store_t *st, wpart_t *part, uint64_t want, uint64_t *len_p,
                              uint32_t flags, extent_t **e_p)
{
    uint64_t len = *len_p;
    uint64_t size = st->cfg.sink || !plenty(st, part->next_extent) ? len : part->next_extent;
    if (size < len)
        size = len;
    /* Whole batches of this size past the grant: a tail shorter than one is a hole no batch
     * of this partition takes, and many of them fragment the data area into spilling. */
    size = len + (size - len) / want * want;
    uint64_t off;
    rs_status_t s = rs_wk_arena_get(st, size, &off);
    if (s != RS_OK && size > len)
        s = rs_wk_arena_get(st, size = len, &off);
    if (s != RS_OK && len > want)
        s = rs_wk_arena_get(st, size = len = want, &off);
    if (s != RS_OK && (flags & RS_GRANT_AHEAD))
        return RS_ERR_BUSY; /* never spill for a grant nobody waits for yet */
    if (s != RS_OK) {
        rs_wk_store_spill(st, want);
        s = rs_wk_arena_get(st, size = len = want, &off);
    }
    if (s != RS_OK && st->spill_errno != 0)
        return RS_ERR_IO; /* full, and the disk takes nothing: waiting will not help */
    if (s != RS_OK) {
        st->stats.backpressure++;
        return RS_ERR_BACKPRESSURE;
    }
    extent_t *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        rs_wk_arena_put(st, off, size);
        return RS_ERR_NOMEM;
    }
    e->part = part;
    e->off = off;
    e->len = rs_range_round(&st->ra, size);
    rs_list_add_tail(&part->extents, &e->link);
    if (!st->cfg.sink) {
        part->cur = e;
        st->tails_made++;
        if (part->next_extent < st->cfg.extent_max)
            part->next_extent *= 2;
    }
    *len_p = len;
    *e_p = e;
    return RS_OK;
}

#define RS_PLACE_ALIGN 8 /* frames the worker places itself (merged writes' frames) */

/* ---------------------------------------------------------------- grants */

rs_status_t rs_wk_store_grant(rs_wk_store_t *st, wshuffle_t *sh, uint32_t p, uint64_t want,
                              uint32_t flags, wgrant_t **g_p)
{
    wpart_t *part = &sh->parts[p];
    want = rs_sproto_round(want);
    if (want == 0 || want > RS_GRANT_MAX)
        return RS_ERR_BAD_LENGTH;
    uint64_t len = want;
    /* Bulk room (up to four more batches) only while memory is plentiful. */
    uint64_t bulk = st->cfg.grant_bulk < 4 * want ? st->cfg.grant_bulk : 4 * want;
    if ((flags & RS_GRANT_AHEAD) && !extra_ok(st, want))
        return RS_ERR_BUSY;
    if ((flags & RS_GRANT_BULK) && extra_ok(st, want + bulk))
        len = want + bulk;
    if (len > RS_GRANT_MAX)
        len = RS_GRANT_MAX;
    len = rs_sproto_round(len);

    extent_t *e = part->cur;
    if (e != NULL) /* frames the worker placed itself are packed closer (store_room) */
        e->fill = rs_sproto_round(e->fill);
    if (e != NULL && e->len - e->fill < want)
        rs_wk_extent_close(st, e), e = NULL;
    if (e != NULL && e->len - e->fill < len)
        len = e->len - e->fill; /* the rest of this extent, at least want */
    if (e == NULL) {
        rs_status_t s = extent_new(st, part, want, &len, flags, &e);
        if (s != RS_OK)
            return s;
    }
    wgrant_t *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return RS_ERR_NOMEM;
    g->ext = e;
    g->off = e->off + e->fill;
    g->len = len;
    g->partition = p;
    g->open = len;
    st->open_room += len;
    e->fill += len;
    e->live_grants++;
    /* Aligned, at least what was asked, within one grant's bound and inside its extent. */
    RS_ASSERT(g->off % RS_SPROTO_ALIGN == 0 && len % RS_SPROTO_ALIGN == 0);
    RS_ASSERT(len >= want && len <= RS_GRANT_MAX && e->fill <= e->len);
    if (st->cfg.sink)
        e->closed = 1; /* one grant per extent: it goes as soon as the grant is released */
    *g_p = g;
    return RS_OK;
}

static void open_less(rs_wk_store_t *st, wgrant_t *g, uint64_t bytes)
{
    if (bytes > g->open)
        bytes = g->open;
    RS_ASSERT(st->open_room >= bytes); /* the sum of every grant's open bytes */
    g->open -= bytes;
    st->open_room -= bytes;
}

/* A merged grant's write landed (or never will): it no longer counts as landing. */
static void landed(rs_wk_store_t *st, const wgrant_t *g)
{
    if (g->partition == RS_MERGED_PART)
        st->landing--;
}

/* Once every byte the grant will ever hold arrived, its extent stops waiting for it. */
static void grant_maybe_release(rs_wk_store_t *st, wgrant_t *g)
{
    if (g->released || g->settled < (g->retired ? g->used : g->len))
        return;
    g->released = 1;
    open_less(st, g, g->open);
    RS_ASSERT(g->ext->live_grants > 0); /* counted when the grant was carved */
    landed(st, g);
    g->ext->live_grants--;
    rs_wk_extent_maybe_free(st, g->ext);
}

void rs_wk_store_settle(rs_wk_store_t *st, wgrant_t *g, uint64_t bytes)
{
    g->settled += rs_sproto_round(bytes);
    open_less(st, g, rs_sproto_round(bytes));
    grant_maybe_release(st, g);
}

#define HOLE_MIN 1024 /* less unused room stays with its extent */

/*
 * A retired grant gives back what it will never hold: a pusher asks for
 * what a partition took last time and uses less. The extent's last grant
 * shortens the extent's fill; any other (tasks of several lanes interleave
 * their grants in one extent) leaves a hole, given back to the data area
 * at once: held until the extent went, such holes took two workers past
 * the high-water mark at 1 GiB with 64 tasks, which spilled 174-235 MB.
 * Merged grants are used whole; sink mode frees at once.
 */
static void room_back(rs_wk_store_t *st, wgrant_t *g)
{
    if (g->released || g->used >= g->len || g->partition == RS_MERGED_PART || st->cfg.sink)
        return; /* its extent no longer waits for it (may be gone), or nothing to give */
    extent_t *e = g->ext;
    if (!e->closed && g->off + g->len == e->off + e->fill) {
        e->fill -= g->len - g->used;
        st->tails_made++; /* a tail for the next trim */
    } else if (g->len - g->used < HOLE_MIN ||
               rs_wk_extent_hole(st, e, g->off + g->used, g->len - g->used) != RS_OK)
        return;
    g->len = g->used; /* a late write past what was used is outside the grant */
}

void rs_wk_store_retire(rs_wk_store_t *st, wgrant_t *g, uint64_t used)
{
    if (g->retired)
        return;
    g->retired = 1;
    g->used = used > g->len ? g->len : rs_sproto_round(used);
    room_back(st, g);
    uint64_t still = g->used > g->settled ? g->used - g->settled : 0;
    if (g->open > still) /* what will never come is no longer open */
        open_less(st, g, g->open - still);
    grant_maybe_release(st, g);
}

void rs_wk_store_grant_free(rs_wk_store_t *st, wgrant_t *g)
{
    if (!g->released) { /* the pusher went away: nothing more will arrive */
        g->retired = 1;
        g->used = g->settled;
        room_back(st, g);
        g->released = 1;
        open_less(st, g, g->open);
        RS_ASSERT(g->ext->live_grants > 0);
        landed(st, g);
        g->ext->live_grants--;
        rs_wk_extent_maybe_free(st, g->ext);
    }
    free(g);
}

/* ---------------------------------------------------------- merged grants */

/*
 * A merged grant's room: the data area first, where its frames stay as
 * they land (merged.c); else the staging reserve, out of which they are
 * copied into their partitions' extents, as staged spills leave it. Among
 * 20,000 partitions' small extents a 256 KiB range may not be found while
 * merged writes still land and free room: then the pusher waits
 * (backpressure) rather than anything spilling; only with none landing
 * does it spill.
 */
static rs_status_t landing_get(rs_wk_store_t *st, uint64_t want, uint64_t *off_p, int *rsv_p)
{
    uint64_t off;
    *rsv_p = 0;
    if (rs_wk_arena_get(st, want, off_p) == RS_OK)
        return RS_OK;
    if (rs_range_get(&st->rsv, want, &off) == RS_OK) {
        rs_wk_arena_used_update(st);
        *off_p = st->data_len + off;
        *rsv_p = 1;
        return RS_OK;
    }
    /* Unused extent tails next: many partitions' tails fill an arena. */
    rs_wk_store_trim(st);
    rs_status_t s = rs_wk_arena_get(st, want, off_p);
    if (s != RS_OK && st->landing > 0) {
        st->stats.backpressure++;
        return RS_ERR_BACKPRESSURE;
    }
    if (s != RS_OK) {
        rs_wk_store_spill(st, want);
        s = rs_wk_arena_get(st, want, off_p);
    }
    if (s != RS_OK && st->spill_errno != 0)
        return RS_ERR_IO;
    if (s != RS_OK) {
        st->stats.backpressure++;
        return RS_ERR_BACKPRESSURE;
    }
    return RS_OK;
}

rs_status_t rs_wk_store_grant_merged(rs_wk_store_t *st, wshuffle_t *sh, uint64_t want,
                                     wgrant_t **g_p)
{
    want = rs_sproto_round(want);
    if (want == 0 || want > RS_GRANT_MAX)
        return RS_ERR_BAD_LENGTH;
    uint64_t off;
    int rsv;
    rs_status_t s = landing_get(st, want, &off, &rsv);
    if (s != RS_OK)
        return s;
    extent_t *e = calloc(1, sizeof(*e));
    wgrant_t *g = e != NULL ? calloc(1, sizeof(*g)) : NULL;
    if (g == NULL) {
        free(e);
        if (rsv)
            rs_range_put(&st->rsv, off - st->data_len, want);
        else
            rs_wk_arena_put(st, off, want);
        rs_wk_arena_used_update(st);
        return RS_ERR_NOMEM;
    }
    /* Closed from the start: it holds this one grant, and goes once no frame of it is in memory. */
    e->part = &sh->merged;
    e->off = off;
    e->len = rs_range_round(&st->ra, want);
    e->fill = want;
    e->closed = 1;
    e->live_grants = 1;
    e->reserve = rsv;
    rs_list_add_tail(&sh->merged.extents, &e->link);
    st->landing++;
    g->ext = e;
    g->off = off;
    g->len = want;
    g->partition = RS_MERGED_PART;
    g->open = want;
    st->open_room += want;
    *g_p = g;
    return RS_OK;
}

/* Room for a frame of len bytes the worker copies into partition p's extents: *e_p, *off_p. */
static rs_status_t store_room(rs_wk_store_t *st, wshuffle_t *sh, uint32_t p, uint64_t len,
                              extent_t **e_p, uint64_t *off_p)
{
    wpart_t *part = &sh->parts[p];
    /*
     * Packed at 8 bytes, not 64: with 20,000 partitions' 640-byte batches
     * the padding was 5 % of the data. Entries carry loc + len, and
     * readers parse frames at any offset (spilled ones are not padded).
     */
    uint64_t need = (len + RS_PLACE_ALIGN - 1) & ~(uint64_t)(RS_PLACE_ALIGN - 1);
    uint64_t l = rs_sproto_round(need);
    extent_t *e = part->cur;
    if (e != NULL && e->len - e->fill < need) {
        rs_wk_extent_close(st, e);
        rs_wk_extent_maybe_free(st, e);
        e = NULL;
    }
    rs_status_t s = RS_OK;
    if (e == NULL) {
        /*
         * Without spilling first: the unused tails of current extents (one
         * per partition, 20,000 partitions' worth) are given back before
         * anything goes to disk.
         */
        uint64_t want = l;
        s = extent_new(st, part, want, &l, RS_GRANT_AHEAD, &e);
        if (s == RS_ERR_BUSY) {
            rs_wk_store_trim(st);
            l = want;
            s = extent_new(st, part, want, &l, 0, &e);
        }
        if (s != RS_OK)
            return s;
    }
    *off_p = e->off + e->fill;
    e->fill += need;
    *e_p = e;
    return RS_OK;
}

rs_status_t rs_wk_store_place_merged(rs_wk_store_t *st, wshuffle_t *sh, wgrant_t *g, uint32_t p,
                                     rs_snap_entry_t *e)
{
    RS_ASSERT(g->partition == RS_MERGED_PART && p < sh->n_partitions);
    RS_ASSERT(e->loc >= g->off && e->loc + e->len <= g->off + g->len);
    wpart_t *part = &sh->parts[p];
    extent_t *dst;
    uint64_t off;
    /* In the reserve, the frame moves out so that the reserve drains (staging must find room). */
    int copied = g->ext->reserve && store_room(st, sh, p, e->len, &dst, &off) == RS_OK;
    if (copied) {
        memcpy(st->arena + off, st->arena + e->loc, e->len);
        e->loc = off;
    } else {
        dst = g->ext; /* shared by its frames' partitions until spilled or freed */
        if (dst->n_frames == dst->cap_frames) { /* room first: a frame indexed is a frame listed */
            uint32_t cap = dst->cap_frames ? 2 * dst->cap_frames : 64;
            wframe_ref_t *n = cap > dst->cap_frames ? realloc(dst->frames, cap * sizeof(*n)) : NULL;
            if (n == NULL)
                return RS_ERR_NOMEM;
            dst->frames = n;
            dst->cap_frames = cap;
        }
    }
    rs_status_t s = rs_wk_part_add_entry(st, part, dst, e);
    if (s != RS_OK)
        return s;
    if (!copied) {
        dst->frames[dst->n_frames++] = (wframe_ref_t){.part = p, .entry = part->n_entries - 1};
        part->merged_entries++;
        st->stats.merged_in_place++;
    }
    return RS_OK;
}
