/*
 * The worker's storage: one registered arena, split into a data area carved
 * into partition extents by a first-fit range allocator, and a small
 * staging reserve for snapshot indexes and staged spills (so a reader can
 * always make progress, however full or fragmented the data area is). This
 * file sets the store up and keeps its shuffles: attach, detach, drop and
 * free. Extents are in worker/extents.c, grants in worker/grants.c, the
 * commit index in worker/commits.c, spilling in worker/spill.c, snapshots in
 * worker/snapshots.c.
 */
#include "worker/internal.h"

#include "common/log.h"

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
    /* A sixteenth of the arena (128 KiB .. 16 MiB) is kept for staging; sink mode needs none. */
    uint64_t rsv = cfg->sink ? 0 : len / 16;
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
    /* Cache-line aligned: a partition's hot fields are one line (internal.h). */
    size_t parts_len = ((size_t)n_partitions * sizeof(*sh->parts) + 63) & ~(size_t)63;
    sh->parts = aligned_alloc(64, parts_len);
    if (sh->parts == NULL) {
        free(sh);
        return RS_ERR_NOMEM;
    }
    memset(sh->parts, 0, parts_len);
    sh->id = shuffle_id;
    sh->n_partitions = n_partitions;
    sh->spill_fd = -1;
    sh->merged.sh = sh;
    rs_list_init(&sh->merged.extents);
    rs_list_init(&sh->commits);
    /*
     * First extents sized to the shuffle: all partitions' first extents fit
     * half the data area (100,000 partitions of 64 KiB would need 6.4 GB
     * for a few bytes each); they double from there as before. Half, not a
     * quarter: at 20,000 partitions a quarter's extents held 1.6 KB, two
     * or three 640-byte frames, so most frames carved and closed an extent
     * (a quarter of the worker's samples); the room a current extent
     * leaves unused goes back before anything spills.
     */
    uint64_t first = st->cfg.extent_min, share = (st->data_len / 2 / n_partitions) & ~63ull;
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

static void shuffle_free(rs_wk_store_t *st, wshuffle_t *sh)
{
    for (uint32_t p = 0; p < sh->n_partitions; p++) {
        wpart_t *part = &sh->parts[p];
        rs_list_t *pos, *tmp;
        rs_list_for_each_safe(pos, tmp, &part->extents)
            rs_wk_extent_free(st, RS_CONTAINER_OF(pos, extent_t, link));
        free(part->entries);
    }
    rs_list_t *mpos, *mtmp;
    rs_list_for_each_safe(mpos, mtmp, &sh->merged.extents)
        rs_wk_extent_free(st, RS_CONTAINER_OF(mpos, extent_t, link));
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

void rs_wk_shuffle_maybe_free(rs_wk_store_t *st, wshuffle_t *sh)
{
    if (sh->dropped && sh->open_snaps == 0 && sh->pushers == 0)
        shuffle_free(st, sh);
}

void rs_wk_store_pusher_detach(rs_wk_store_t *st, wshuffle_t *sh)
{
    sh->pushers--;
    rs_wk_shuffle_maybe_free(st, sh);
}

void rs_wk_store_drop(rs_wk_store_t *st, wshuffle_t *sh)
{
    sh->dropped = 1;
    rs_wk_shuffle_maybe_free(st, sh);
}

void rs_wk_store_cleanup(rs_wk_store_t *st)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &st->shuffles)
        shuffle_free(st, RS_CONTAINER_OF(pos, wshuffle_t, link));
    rs_range_alloc_cleanup(&st->ra);
    rs_range_alloc_cleanup(&st->rsv);
}
