/*
 * Snapshots: a partition's index (its commits and entries) frozen for a
 * reader, with the extents it names pinned in memory, and spilled batches
 * staged back into the arena for a read. Indexes and stages take room from
 * the staging reserve first, then from the data area.
 */
#include "worker/internal.h"

#include "common/assert.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Room for an index or a stage: the reserve first, then the data area (spilling for it). */
static rs_status_t space_get(rs_wk_store_t *st, uint64_t len, wspace_t *sp)
{
    uint64_t off;
    if (rs_range_get(&st->rsv, len, &off) == RS_OK) {
        *sp = (wspace_t){
            .off = st->data_len + off, .len = rs_range_round(&st->rsv, len), .reserve = 1};
        rs_wk_arena_used_update(st);
        return RS_OK;
    }
    rs_status_t s = rs_wk_arena_get(st, len, &off);
    if (s != RS_OK) {
        rs_wk_store_spill(st, len);
        s = rs_wk_arena_get(st, len, &off);
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
    rs_wk_arena_used_update(st);
}

/* The longest space space_get could hand out now without spilling. */
static uint64_t space_largest(rs_wk_store_t *st)
{
    uint64_t a = rs_range_largest(&st->rsv), b = rs_range_largest(&st->ra);
    return a > b ? a : b;
}

/* ------------------------------------------------------------- snapshots */

#define SNAP_PIN_WALK 64 /* more entries than this: the extents are counted for the pins */

static void snap_free(rs_wk_store_t *st, wsnap_t *snap)
{
    for (uint32_t i = 0; i < snap->n_pinned; i++) {
        extent_t *e = snap->pinned[i];
        RS_ASSERT(e->pins > 0); /* pinned by this snapshot */
        e->pins--;
        rs_wk_extent_maybe_free(st, e);
    }
    space_put(st, &snap->index);
    space_put(st, &snap->stage);
    free(snap); /* entries and pinned lie in the same block */
}

static uint32_t commits_count(wshuffle_t *sh)
{
    uint32_t n = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &sh->commits) n++;
    return n;
}

/*
 * Writes the snapshot into buf (len bytes, its exact length): header, the
 * shuffle's n_commits commits (this partition's counts) and its entries.
 */
static void snap_build(wshuffle_t *sh, uint32_t p, uint32_t n_commits, const wsnap_t *snap,
                       uint8_t *buf, size_t len)
{
    rs_snap_hdr_t h = {.n_commits = n_commits, .n_entries = snap->n_entries, .partition = p};
    size_t got;
    rs_status_t s = rs_sproto_snap_encode(&h, buf, len, &got);
    RS_ASSERT(s == RS_OK && got == len);
    (void)s;
    uint32_t k = 0;
    rs_list_t *pos, *tmp;
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
            x.flags = RS_SNAP_C_HOLDER; /* listed, 0 batches too: R >= 2 readers need to know */
            x.batches = c->entries[lo].batches;
            x.bytes = c->entries[lo].bytes;
            x.checksum = c->entries[lo].checksum;
        }
        rs_sproto_snap_commit_put(buf, len, k++, &x);
    }
    for (uint32_t i = 0; i < snap->n_entries; i++)
        rs_sproto_snap_entry_put(buf, len, n_commits, i, &snap->entries[i]);
}

rs_status_t rs_wk_store_snap_open(rs_wk_store_t *st, wshuffle_t *sh, uint32_t p, void *inline_buf,
                                  size_t inline_max, wsnap_t **snap_p, size_t *index_len_p)
{
    wpart_t *part = &sh->parts[p];
    uint32_t n_commits = commits_count(sh), n_ent = (uint32_t)part->n_entries;
    /* Taken even if the open fails: it marks the merged extents pinned below. */
    uint32_t id = st->next_snap++;
    if (st->next_snap == 0)
        st->next_snap = 1; /* 0 marks a merged extent no snapshot pinned */
    size_t len = rs_sproto_snap_len(n_commits, n_ent);
    /*
     * Every extent pinned holds one of the entries at least. A few entries
     * (20,000 partitions' case) bound the pins without walking the extents
     * twice, a cache miss per extent each time.
     */
    size_t n_ext = n_ent;
    rs_list_t *pos, *tmp;
    if (n_ext > SNAP_PIN_WALK) {
        n_ext = part->merged_entries; /* each in a merged extent at most once pinned */
        rs_list_for_each_safe(pos, tmp, &part->extents) n_ext++;
    }
    /* One block: the snapshot, its entries (8-byte aligned after it), the extents it pins. */
    size_t ent_at = (sizeof(wsnap_t) + 7) & ~(size_t)7;
    size_t pin_at = ent_at + (size_t)n_ent * sizeof(rs_snap_entry_t);
    wsnap_t *snap = malloc(pin_at + n_ext * sizeof(extent_t *));
    if (snap == NULL)
        return RS_ERR_NOMEM;
    *snap = (wsnap_t){.sh = sh, .n_entries = n_ent};
    snap->entries = (rs_snap_entry_t *)((uint8_t *)snap + ent_at);
    snap->pinned = (extent_t **)((uint8_t *)snap + pin_at);
    for (uint32_t i = 0; i < n_ent; i++)
        snap->entries[i] = part->entries[i].e;
    /* Pinned before anything below may spill: the entries keep their arena offsets. */
    rs_list_for_each_safe(pos, tmp, &part->extents)
    {
        extent_t *e = RS_CONTAINER_OF(pos, extent_t, link);
        if (e->n_batches > 0) {
            RS_ASSERT(snap->n_pinned < n_ext); /* each pinned extent holds an entry */
            e->pins++;
            snap->pinned[snap->n_pinned++] = e;
        }
    }
    /* Merged extents shared with other partitions: each once, marked with this snapshot's id. */
    for (uint32_t i = 0; part->merged_entries > 0 && i < n_ent; i++) {
        extent_t *e = part->entries[i].ext;
        if (e == NULL || e->part != &sh->merged || e->pin_snap == id)
            continue;
        RS_ASSERT(snap->n_pinned < n_ext);
        e->pin_snap = id;
        e->pins++;
        snap->pinned[snap->n_pinned++] = e;
    }
    sh->open_snaps++;
    uint8_t *dst = inline_buf;
    if (len > inline_max) {
        rs_status_t s = space_get(st, len, &snap->index);
        if (s != RS_OK) {
            st->stats.backpressure++;
            sh->open_snaps--;
            snap_free(st, snap);
            return s;
        }
        dst = st->arena + snap->index.off;
        snap->index_bytes = len;
    }
    /* From the entries copied above: a spill for the index's room moved none of them. */
    snap_build(sh, p, n_commits, snap, dst, len);
    snap->id = id;
    *snap_p = snap;
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

void rs_wk_store_snap_close(rs_wk_store_t *st, wsnap_t *snap)
{
    wshuffle_t *sh = snap->sh;
    snap_free(st, snap);
    sh->open_snaps--;
    rs_wk_shuffle_maybe_free(st, sh);
}
