/*
 * The commit index: the batches each partition holds, in arrival order, and
 * the maps' commits (per-partition counts) a snapshot reports.
 */
#include "worker/internal.h"

#include "common/assert.h"

#include <stdlib.h>

rs_status_t rs_wk_store_add_entry(rs_wk_store_t *st, wgrant_t *g, const rs_snap_entry_t *e)
{
    /* The frame lies inside its grant (serve.c refuses one that runs past it). */
    RS_ASSERT(e->loc >= g->off && e->len <= g->len && e->loc - g->off <= g->len - e->len);
    st->stats.batches++;
    st->stats.bytes += e->len;
    if (st->cfg.sink)
        return RS_OK;
    return rs_wk_part_add_entry(st, g->ext->part, g->ext, e);
}

rs_status_t rs_wk_part_add_entry(rs_wk_store_t *st, wpart_t *part, extent_t *ext,
                                 const rs_snap_entry_t *e)
{
    (void)st;
    if (part->n_entries == part->cap_entries) {
        if (part->cap_entries > UINT32_MAX / 2)
            return RS_ERR_NOMEM;
        /* From 4: at 20,000 partitions most hold 3 or 4 frames, and 16 faulted 4x the pages. */
        uint32_t cap = part->cap_entries ? 2 * part->cap_entries : 4;
        wentry_t *n = realloc(part->entries, cap * sizeof(*n));
        if (n == NULL)
            return RS_ERR_NOMEM;
        part->entries = n;
        part->cap_entries = cap;
    }
    part->entries[part->n_entries].e = *e;
    part->entries[part->n_entries].ext = ext;
    part->n_entries++;
    ext->n_batches++;
    return RS_OK;
}

void rs_wk_store_commit(rs_wk_store_t *st, wshuffle_t *sh, uint32_t map_id, uint32_t attempt,
                        rs_commit_entry_t *entries, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) /* sorted by partition: snapshots search them */
        RS_ASSERT(entries[i - 1].partition <= entries[i].partition);
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
