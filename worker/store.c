/*
 * The worker's storage: one registered arena, split into a data area carved
 * into partition extents by a first-fit range allocator, and a small
 * staging reserve for snapshot indexes and staged spills (so a reader can
 * always make progress, however full or fragmented the data area is).
 * Grants are carved from a partition's current extent; committed batches
 * are indexed per partition; settled extents that no open snapshot pins are
 * spilled to (already unlinked) files above the high-water mark.
 */
#include "worker/internal.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RESERVE_MIN ((uint64_t)128 << 10)
#define RESERVE_MAX ((uint64_t)16 << 20)

rs_status_t rs_wk_store_init(rs_wk_store_t *st, const rs_worker_config_t *cfg, uint8_t *arena,
                             uint64_t len)
{
    memset(st, 0, sizeof(*st));
    st->cfg = *cfg;
    st->arena = arena;
    st->arena_len = len;
    /* An eighth of the arena (128 KiB .. 16 MiB) is kept for staging; sink mode needs none. */
    uint64_t rsv = cfg->sink ? 0 : len / 8;
    if (!cfg->sink && rsv < RESERVE_MIN)
        rsv = RESERVE_MIN;
    if (rsv > RESERVE_MAX)
        rsv = RESERVE_MAX;
    rsv &= ~(uint64_t)(RS_SPROTO_ALIGN - 1);
    if (rsv >= len / 2)
        rsv = (len / 4) & ~(uint64_t)(RS_SPROTO_ALIGN - 1);
    st->data_len = (len - rsv) & ~(uint64_t)(RS_SPROTO_ALIGN - 1);
    st->high_water = st->data_len / 100 * cfg->high_water_pct;
    /* Many small extents in a small arena: settled ones can then be spilled early. */
    if (st->cfg.extent_max > st->data_len / 16)
        st->cfg.extent_max =
            st->data_len / 16 > st->cfg.extent_min ? st->data_len / 16 : st->cfg.extent_min;
    if (st->cfg.grant_bulk > st->cfg.extent_max)
        st->cfg.grant_bulk = st->cfg.extent_max;
    rs_list_init(&st->shuffles);
    st->next_snap = 1;
    rs_status_t s = rs_range_alloc_init(&st->ra, st->data_len, RS_SPROTO_ALIGN);
    if (s != RS_OK)
        return s;
    s = rs_range_alloc_init(&st->rsv, len - st->data_len, RS_SPROTO_ALIGN);
    if (s != RS_OK)
        rs_range_alloc_cleanup(&st->ra);
    return s;
}

wshuffle_t *rs_wk_store_find(rs_wk_store_t *st, uint32_t shuffle_id)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &st->shuffles)
    {
        wshuffle_t *sh = RS_CONTAINER_OF(pos, wshuffle_t, link);
        if (sh->id == shuffle_id && !sh->dropped)
            return sh;
    }
    return NULL;
}

#define EXTENT_FIRST_MIN 256 /* smallest first extent of a partition, bytes */

rs_status_t rs_wk_store_attach(rs_wk_store_t *st, uint32_t shuffle_id, uint32_t n_partitions,
                               wshuffle_t **sh_p)
{
    wshuffle_t *sh = rs_wk_store_find(st, shuffle_id);
    if (sh != NULL) {
        if (sh->n_partitions != n_partitions) {
            rs_warn("worker: shuffle %u has %u partitions, a pusher says %u", shuffle_id,
                    sh->n_partitions, n_partitions);
            return RS_ERR_INVALID;
        }
        *sh_p = sh;
        return RS_OK;
    }
    if (n_partitions == 0 || n_partitions > (1u << 24))
        return RS_ERR_INVALID;
    sh = calloc(1, sizeof(*sh));
    if (sh == NULL)
        return RS_ERR_NOMEM;
    sh->parts = calloc(n_partitions, sizeof(*sh->parts));
    if (sh->parts == NULL) {
        free(sh);
        return RS_ERR_NOMEM;
    }
    sh->id = shuffle_id;
    sh->n_partitions = n_partitions;
    sh->spill_fd = -1;
    rs_list_init(&sh->commits);
    /*
     * First extents sized to the shuffle: all partitions' first extents fit
     * a quarter of the data area (100,000 partitions of 64 KiB would need
     * 6.4 GB for a few bytes each); they double from there as before.
     */
    uint64_t first = st->cfg.extent_min, share = (st->data_len / 4 / n_partitions) & ~63ull;
    if (share < first)
        first = share > EXTENT_FIRST_MIN ? share : EXTENT_FIRST_MIN;
    for (uint32_t p = 0; p < n_partitions; p++) {
        sh->parts[p].sh = sh;
        sh->parts[p].next_extent = first;
        rs_list_init(&sh->parts[p].extents);
    }
    rs_list_add_tail(&st->shuffles, &sh->link);
    st->stats.shuffles++;
    *sh_p = sh;
    return RS_OK;
}

/* ----------------------------------------------------------------- arena */

static void used_update(rs_wk_store_t *st)
{
    st->stats.arena_used = st->ra.used + st->rsv.used;
    if (st->stats.arena_used > st->stats.arena_peak)
        st->stats.arena_peak = st->stats.arena_used;
}

static void arena_put(rs_wk_store_t *st, uint64_t off, uint64_t len)
{
    if (len > 0)
        rs_range_put(&st->ra, off, len);
    used_update(st);
}

static rs_status_t arena_get(rs_wk_store_t *st, uint64_t len, uint64_t *off_p)
{
    rs_status_t s = rs_range_get(&st->ra, len, off_p);
    used_update(st);
    return s;
}

/* Room for an index or a stage: the reserve first, then the data area (spilling for it). */
static rs_status_t space_get(rs_wk_store_t *st, uint64_t len, wspace_t *sp)
{
    uint64_t off;
    if (rs_range_get(&st->rsv, len, &off) == RS_OK) {
        *sp = (wspace_t){
            .off = st->data_len + off, .len = rs_range_round(&st->rsv, len), .reserve = 1};
        used_update(st);
        return RS_OK;
    }
    rs_status_t s = arena_get(st, len, &off);
    if (s != RS_OK) {
        rs_wk_store_spill(st, len);
        s = arena_get(st, len, &off);
    }
    if (s != RS_OK)
        return RS_ERR_BACKPRESSURE;
    *sp = (wspace_t){.off = off, .len = rs_range_round(&st->ra, len), .reserve = 0};
    return RS_OK;
}

static void space_put(rs_wk_store_t *st, wspace_t *sp)
{
    if (sp->len == 0)
        return;
    if (sp->reserve)
        rs_range_put(&st->rsv, sp->off - st->data_len, sp->len);
    else
        rs_range_put(&st->ra, sp->off, sp->len);
    sp->len = 0;
    used_update(st);
}

/* The longest space space_get could hand out now without spilling. */
static uint64_t space_largest(rs_wk_store_t *st)
{
    uint64_t a = rs_range_largest(&st->rsv), b = rs_range_largest(&st->ra);
    return a > b ? a : b;
}

/* --------------------------------------------------------------- extents */

static void extent_free(rs_wk_store_t *st, extent_t *e)
{
    wpart_t *part = e->part;
    if (part->cur == e)
        part->cur = NULL;
    rs_list_del(&e->link);
    arena_put(st, e->off, e->len);
    free(e);
}

/* Stops granting from e and gives its unused tail back. */
static void extent_close(rs_wk_store_t *st, extent_t *e)
{
    if (e->closed)
        return;
    e->closed = 1;
    if (e->part->cur == e)
        e->part->cur = NULL;
    if (e->fill < e->len) {
        arena_put(st, e->off + e->fill, e->len - e->fill);
        e->len = e->fill;
    }
}

/* An extent nothing will write into and no batch of which is still in memory. */
static void extent_maybe_free(rs_wk_store_t *st, extent_t *e)
{
    if (e->closed && e->live_grants == 0 && e->n_batches == 0 && e->pins == 0)
        extent_free(st, e);
}

/* Is there room for len more bytes of grants below the high-water mark? */
static int plenty(const rs_wk_store_t *st, uint64_t len)
{
    return st->ra.used + len <= st->high_water;
}

/*
 * Room beyond what waits now (bulk, grants ahead) while memory is plentiful
 * and such room held by all pushers stays within a quarter of the data area:
 * idle grant room must never be what pushes batches out to disk.
 */
static int extra_ok(const rs_wk_store_t *st, uint64_t len)
{
    return plenty(st, len) && st->open_room + len <= st->data_len / 4;
}

static rs_status_t extent_new(rs_wk_store_t *st, wpart_t *part, uint64_t want, uint64_t *len_p,
                              uint32_t flags, extent_t **e_p)
{
    uint64_t len = *len_p;
    uint64_t size = st->cfg.sink || !plenty(st, part->next_extent) ? len : part->next_extent;
    if (size < len)
        size = len;
    uint64_t off;
    rs_status_t s = arena_get(st, size, &off);
    if (s != RS_OK && size > len)
        s = arena_get(st, size = len, &off);
    if (s != RS_OK && len > want)
        s = arena_get(st, size = len = want, &off);
    if (s != RS_OK && (flags & RS_GRANT_AHEAD))
        return RS_ERR_BUSY; /* never spill for a grant nobody waits for yet */
    if (s != RS_OK) {
        rs_wk_store_spill(st, want);
        s = arena_get(st, size = len = want, &off);
    }
    if (s != RS_OK) {
        st->stats.backpressure++;
        return RS_ERR_BACKPRESSURE;
    }
    extent_t *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        arena_put(st, off, size);
        return RS_ERR_NOMEM;
    }
    e->part = part;
    e->off = off;
    e->len = rs_range_round(&st->ra, size);
    rs_list_add_tail(&part->extents, &e->link);
    if (!st->cfg.sink) {
        part->cur = e;
        if (part->next_extent < st->cfg.extent_max)
            part->next_extent *= 2;
    }
    *len_p = len;
    *e_p = e;
    return RS_OK;
}

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
    if (e != NULL && e->len - e->fill < want)
        extent_close(st, e), e = NULL;
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
    if (st->cfg.sink)
        e->closed = 1; /* one grant per extent: it goes as soon as the grant is released */
    *g_p = g;
    return RS_OK;
}

static void open_less(rs_wk_store_t *st, wgrant_t *g, uint64_t bytes)
{
    if (bytes > g->open)
        bytes = g->open;
    g->open -= bytes;
    st->open_room -= bytes;
}

/* Once every byte the grant will ever hold arrived, its extent stops waiting for it. */
static void grant_maybe_release(rs_wk_store_t *st, wgrant_t *g)
{
    if (g->released || g->settled < (g->retired ? g->used : g->len))
        return;
    g->released = 1;
    open_less(st, g, g->open);
    g->ext->live_grants--;
    extent_maybe_free(st, g->ext);
}

void rs_wk_store_settle(rs_wk_store_t *st, wgrant_t *g, uint64_t bytes)
{
    g->settled += rs_sproto_round(bytes);
    open_less(st, g, rs_sproto_round(bytes));
    grant_maybe_release(st, g);
}

void rs_wk_store_retire(rs_wk_store_t *st, wgrant_t *g, uint64_t used)
{
    if (g->retired)
        return;
    g->retired = 1;
    g->used = used > g->len ? g->len : rs_sproto_round(used);
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
        g->released = 1;
        open_less(st, g, g->open);
        g->ext->live_grants--;
        extent_maybe_free(st, g->ext);
    }
    free(g);
}

rs_status_t rs_wk_store_add_entry(rs_wk_store_t *st, wgrant_t *g, const rs_snap_entry_t *e)
{
    st->stats.batches++;
    st->stats.bytes += e->len;
    if (st->cfg.sink)
        return RS_OK;
    wpart_t *part = g->ext->part;
    if (part->n_entries == part->cap_entries) {
        size_t cap = part->cap_entries ? 2 * part->cap_entries : 16;
        wentry_t *n = realloc(part->entries, cap * sizeof(*n));
        if (n == NULL)
            return RS_ERR_NOMEM;
        part->entries = n;
        part->cap_entries = cap;
    }
    part->entries[part->n_entries].e = *e;
    part->entries[part->n_entries].ext = g->ext;
    part->n_entries++;
    g->ext->n_batches++;
    return RS_OK;
}

void rs_wk_store_commit(rs_wk_store_t *st, wshuffle_t *sh, uint32_t map_id, uint32_t attempt,
                        rs_commit_entry_t *entries, uint32_t n)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &sh->commits)
    {
        wcommit_t *c = RS_CONTAINER_OF(pos, wcommit_t, link);
        if (c->map_id == map_id && c->attempt == attempt) { /* a repeated commit replaces */
            rs_list_del(&c->link);
            free(c->entries);
            free(c);
        }
    }
    wcommit_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        free(entries);
        return;
    }
    c->map_id = map_id;
    c->attempt = attempt;
    c->entries = entries;
    c->n = n;
    rs_list_add_tail(&sh->commits, &c->link);
    st->stats.commits++;
}

/* ---------------------------------------------------------------- spill */

/* One append-only file per shuffle: its partitions' batches by offset (a file per partition
 * made 1,009 files for a 1,009-partition shuffle, and creating them cost more than writing). */
static rs_status_t spill_open(rs_wk_store_t *st, wshuffle_t *sh)
{
    if (sh->spill_fd >= 0)
        return RS_OK;
    char path[RS_SPILL_DIR_MAX + 64];
    snprintf(path, sizeof(path), "%s/rshuffle-%d-%u.XXXXXX", st->cfg.spill_dir, (int)getpid(),
             sh->id);
    int fd = mkstemp(path);
    if (fd < 0) {
        if (!st->spill_broken)
            rs_error("worker: cannot create a spill file in %s: %s", st->cfg.spill_dir,
                     strerror(errno));
        st->spill_broken = 1;
        return RS_ERR_IO;
    }
    unlink(path); /* the data lives as long as the descriptor: nothing left after a crash */
    sh->spill_fd = fd;
    return RS_OK;
}

static rs_status_t write_all(rs_wk_store_t *st, int fd, const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (!st->spill_broken)
                rs_error("worker: spill write failed: %s", n < 0 ? strerror(errno) : "short write");
            st->spill_broken = 1;
            return RS_ERR_IO;
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return RS_OK;
}

/*
 * Writes the committed batches of a settled, unpinned extent to its
 * partition's file and frees it. The entries move to the file only once
 * all of them are written, so a failed write leaves the extent as it was.
 */
static rs_status_t spill_extent(rs_wk_store_t *st, extent_t *e)
{
    wpart_t *part = e->part;
    wshuffle_t *sh = part->sh;
    if (e->n_batches > 0) {
        rs_status_t s = spill_open(st, sh);
        if (s != RS_OK)
            return s;
        uint64_t at = sh->spill_len;
        for (size_t i = 0; i < part->n_entries; i++) {
            wentry_t *we = &part->entries[i];
            if (we->ext != e)
                continue;
            s = write_all(st, sh->spill_fd, st->arena + we->e.loc, we->e.len, at);
            if (s != RS_OK)
                return s;
            at += we->e.len;
        }
        for (size_t i = 0; i < part->n_entries; i++) {
            wentry_t *we = &part->entries[i];
            if (we->ext != e)
                continue;
            we->e.loc = sh->spill_len;
            we->e.flags |= RS_SNAP_SPILLED;
            we->ext = NULL;
            sh->spill_len += we->e.len;
            st->stats.spilled_bytes += we->e.len;
            e->n_batches--;
        }
    }
    extent_close(st, e);
    extent_free(st, e);
    return RS_OK;
}

static int spill_done(const rs_wk_store_t *st, uint64_t need)
{
    return st->ra.used <= st->high_water && rs_range_largest(&st->ra) >= need;
}

/* Gives back the unused tails of partitions' current extents (no I/O). */
static void trim(rs_wk_store_t *st)
{
    rs_list_t *spos, *stmp;
    rs_list_for_each_safe(spos, stmp, &st->shuffles)
    {
        wshuffle_t *sh = RS_CONTAINER_OF(spos, wshuffle_t, link);
        for (uint32_t p = 0; p < sh->n_partitions; p++) {
            extent_t *e = sh->parts[p].cur;
            if (e != NULL && e->fill < e->len) {
                extent_close(st, e);
                extent_maybe_free(st, e);
            }
        }
    }
}

void rs_wk_store_spill(rs_wk_store_t *st, uint64_t need)
{
    if (st->cfg.sink || spill_done(st, need))
        return;
    trim(st);
    rs_list_t *spos, *stmp;
    rs_list_for_each_safe(spos, stmp, &st->shuffles)
    {
        wshuffle_t *sh = RS_CONTAINER_OF(spos, wshuffle_t, link);
        for (uint32_t p = 0; p < sh->n_partitions; p++) {
            wpart_t *part = &sh->parts[p];
            rs_list_t *pos, *tmp;
            rs_list_for_each_safe(pos, tmp, &part->extents)
            {
                if (spill_done(st, need))
                    return;
                extent_t *e = RS_CONTAINER_OF(pos, extent_t, link);
                /* Live grants still receive; pinned batches are being read at their offsets. */
                if (e->live_grants > 0 || e->pins > 0)
                    continue;
                if (spill_extent(st, e) != RS_OK)
                    return;
            }
        }
    }
}

/* ------------------------------------------------------------- snapshots */

static void snap_free(rs_wk_store_t *st, wsnap_t *snap)
{
    for (uint32_t i = 0; i < snap->n_pinned; i++) {
        extent_t *e = snap->pinned[i];
        e->pins--;
        extent_maybe_free(st, e);
    }
    space_put(st, &snap->index);
    space_put(st, &snap->stage);
    free(snap->pinned);
    free(snap->entries);
    free(snap);
}

/* Header, the shuffle's commits (this partition's counts) and the partition's entries. */
static rs_status_t snap_build(wshuffle_t *sh, uint32_t p, uint8_t **buf_p, size_t *len_p)
{
    wpart_t *part = &sh->parts[p];
    uint32_t n_commits = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &sh->commits) n_commits++;
    size_t len = rs_sproto_snap_len(n_commits, (uint32_t)part->n_entries);
    uint8_t *buf = malloc(len);
    if (buf == NULL)
        return RS_ERR_NOMEM;
    rs_snap_hdr_t h = {
        .n_commits = n_commits, .n_entries = (uint32_t)part->n_entries, .partition = p};
    rs_sproto_snap_encode(&h, buf, len, &len);
    uint32_t k = 0;
    rs_list_for_each_safe(pos, tmp, &sh->commits)
    {
        wcommit_t *c = RS_CONTAINER_OF(pos, wcommit_t, link);
        rs_snap_commit_t x = {.map_id = c->map_id, .attempt = c->attempt};
        /* Entries are sorted by partition: a read of one of 100,000 partitions must not scan all.
         */
        uint32_t lo = 0, hi = c->n;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (c->entries[mid].partition < p)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < c->n && c->entries[lo].partition == p) {
            x.batches = c->entries[lo].batches;
            x.bytes = c->entries[lo].bytes;
            x.checksum = c->entries[lo].checksum;
        }
        rs_sproto_snap_commit_put(buf, len, k++, &x);
    }
    for (size_t i = 0; i < part->n_entries; i++)
        rs_sproto_snap_entry_put(buf, len, n_commits, (uint32_t)i, &part->entries[i].e);
    *buf_p = buf;
    *len_p = len;
    return RS_OK;
}

rs_status_t rs_wk_store_snap_open(rs_wk_store_t *st, wshuffle_t *sh, uint32_t p, size_t inline_max,
                                  wsnap_t **snap_p, void **index_p, size_t *index_len_p)
{
    wpart_t *part = &sh->parts[p];
    uint8_t *buf;
    size_t len;
    rs_status_t s = snap_build(sh, p, &buf, &len);
    if (s != RS_OK)
        return s;
    wsnap_t *snap = calloc(1, sizeof(*snap));
    uint32_t n_ext = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &part->extents) n_ext++;
    if (snap != NULL) {
        snap->entries = malloc((part->n_entries ? part->n_entries : 1) * sizeof(rs_snap_entry_t));
        snap->pinned = malloc((n_ext ? n_ext : 1) * sizeof(extent_t *));
    }
    if (snap == NULL || snap->entries == NULL || snap->pinned == NULL) {
        if (snap != NULL) {
            free(snap->entries);
            free(snap->pinned);
            free(snap);
        }
        free(buf);
        return RS_ERR_NOMEM;
    }
    for (size_t i = 0; i < part->n_entries; i++)
        snap->entries[i] = part->entries[i].e;
    snap->n_entries = (uint32_t)part->n_entries;
    snap->sh = sh;
    /* Pinned before anything below may spill: the entries keep their arena offsets. */
    rs_list_for_each_safe(pos, tmp, &part->extents)
    {
        extent_t *e = RS_CONTAINER_OF(pos, extent_t, link);
        if (e->n_batches > 0) {
            e->pins++;
            snap->pinned[snap->n_pinned++] = e;
        }
    }
    sh->open_snaps++;
    if (len > inline_max) {
        s = space_get(st, len, &snap->index);
        if (s != RS_OK) {
            st->stats.backpressure++;
            sh->open_snaps--;
            snap_free(st, snap);
            free(buf);
            return s;
        }
        memcpy(st->arena + snap->index.off, buf, len);
        snap->index_bytes = len;
    }
    snap->id = st->next_snap++;
    *snap_p = snap;
    *index_p = buf;
    *index_len_p = len;
    return RS_OK;
}

static rs_status_t read_all(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rs_error("worker: spill read failed: %s", n < 0 ? strerror(errno) : "end of file");
            return RS_ERR_IO;
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return RS_OK;
}

rs_status_t rs_wk_store_stage(rs_wk_store_t *st, wsnap_t *snap, uint32_t first, uint32_t n,
                              uint32_t *staged_p)
{
    wshuffle_t *sh = snap->sh;
    if (n == 0 || first > snap->n_entries || n > snap->n_entries - first)
        return RS_ERR_OUT_OF_RANGE;
    uint64_t total = 0;
    for (uint32_t i = first; i < first + n; i++) {
        const rs_snap_entry_t *e = &snap->entries[i];
        if (!(e->flags & RS_SNAP_SPILLED) || e->loc + e->len > sh->spill_len)
            return RS_ERR_OUT_OF_RANGE;
        total += rs_sproto_round(e->len);
    }
    if (total > RS_STAGE_MAX && n > 1)
        return RS_ERR_BAD_LENGTH; /* readers ask for at most this much at once */
    space_put(st, &snap->stage);
    if (space_get(st, total, &snap->stage) != RS_OK) {
        /* Stage the leading frames that fit the largest free range. */
        uint64_t room = space_largest(st), fit = 0;
        uint32_t k = 0;
        while (k < n && fit + rs_sproto_round(snap->entries[first + k].len) <= room)
            fit += rs_sproto_round(snap->entries[first + k++].len);
        if (k == 0 || space_get(st, fit, &snap->stage) != RS_OK) {
            st->stats.backpressure++;
            return RS_ERR_BACKPRESSURE;
        }
        n = k;
    }
    uint64_t at = snap->stage.off;
    for (uint32_t i = first; i < first + n; i++) {
        const rs_snap_entry_t *e = &snap->entries[i];
        rs_status_t s = read_all(sh->spill_fd, st->arena + at, e->len, e->loc);
        if (s != RS_OK) {
            space_put(st, &snap->stage);
            return s;
        }
        at += rs_sproto_round(e->len);
    }
    *staged_p = n;
    return RS_OK;
}

static void shuffle_free(rs_wk_store_t *st, wshuffle_t *sh)
{
    for (uint32_t p = 0; p < sh->n_partitions; p++) {
        wpart_t *part = &sh->parts[p];
        rs_list_t *pos, *tmp;
        rs_list_for_each_safe(pos, tmp, &part->extents)
            extent_free(st, RS_CONTAINER_OF(pos, extent_t, link));
        free(part->entries);
    }
    if (sh->spill_fd >= 0)
        close(sh->spill_fd);
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &sh->commits)
    {
        wcommit_t *c = RS_CONTAINER_OF(pos, wcommit_t, link);
        free(c->entries);
        free(c);
    }
    rs_list_del(&sh->link);
    free(sh->parts);
    free(sh);
    st->stats.shuffles--;
}

static void shuffle_maybe_free(rs_wk_store_t *st, wshuffle_t *sh)
{
    if (sh->dropped && sh->open_snaps == 0 && sh->pushers == 0)
        shuffle_free(st, sh);
}

void rs_wk_store_snap_close(rs_wk_store_t *st, wsnap_t *snap)
{
    wshuffle_t *sh = snap->sh;
    snap_free(st, snap);
    sh->open_snaps--;
    shuffle_maybe_free(st, sh);
}

void rs_wk_store_pusher_detach(rs_wk_store_t *st, wshuffle_t *sh)
{
    sh->pushers--;
    shuffle_maybe_free(st, sh);
}

void rs_wk_store_drop(rs_wk_store_t *st, wshuffle_t *sh)
{
    sh->dropped = 1;
    shuffle_maybe_free(st, sh);
}

void rs_wk_store_cleanup(rs_wk_store_t *st)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &st->shuffles)
        shuffle_free(st, RS_CONTAINER_OF(pos, wshuffle_t, link));
    rs_range_alloc_cleanup(&st->ra);
    rs_range_alloc_cleanup(&st->rsv);
}
