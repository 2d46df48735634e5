/*
 * Planning a getter's next steps under the entry's lock: which blocks to read
 * from which holder, which landed block to verify, a holder to connect to,
 * an announcement or long poll to send, and when patience runs out.
 */
#include "broadcast/fetch.h"
#include "broadcast/entry.h"

#include <stdlib.h>
#include <string.h>

#include "broadcast/blocks.h"
#include "common/clock.h"
#include "common/log.h"

/* A holder (not the source) that can serve block b now: prepared, good, below its cap. */
static int holder_can_serve(rs_bc_entry_t *e, rs_bc_holder_t *h, uint32_t b, rs_bc_act_t *a,
                            int *any)
{
    if (h->bad || !(h->complete || rs_bc_map_test(h->bitmap, b)))
        return 0;
    *any = 1;
    if (h->rkey == NULL) {
        if (!h->preparing && a->prepare == NULL) {
            h->preparing = 1;
            a->prepare = h;
        }
        return 0;
    }
    return __atomic_load_n(&h->peer->reads, __ATOMIC_RELAXED) < e->node->cfg.reads_per_ep;
}

/* Another good holder is reading block b from the source: it will serve it soon. */
static int claimed_elsewhere(const rs_bc_entry_t *e, uint32_t b)
{
    for (uint32_t i = 1; i < e->n_holders; i++) {
        const rs_bc_holder_t *h = e->holders[i];
        if (!h->bad && !h->complete && h->claims != NULL && rs_bc_map_test(h->claims, b))
            return 1;
    }
    return 0;
}

/*
 * Chooses reads (e->lock held): blocks in the entry's order; for each a
 * random holder that has it and a free read slot. The source serves a block
 * only when no other holder can, and only the blocks this reader owns (the
 * first own_count of its order) unless patience ran out: the others are
 * being fetched by the readers that own them, and come from them soon.
 */
static void plan_reads(rs_bc_entry_t *e, rs_bc_act_t *a)
{
    const rs_bcast_config_t *cfg = &e->node->cfg;
    rs_bc_holder_t *src = e->holders[0];
    int torrent = cfg->mode == RS_BCAST_TORRENT;
    uint32_t src_cap = torrent ? cfg->source_reads : cfg->reads_per_ep;
    uint64_t now = rs_now_ns();

    e->waiting = 0;
    for (uint32_t k = 0; k < e->nblocks && a->n_reads < RS_BREADS_BATCH; k++) {
        uint32_t bi = e->order[k];
        rs_bc_block_t *b = &e->blocks[bi];
        if (b->state != RS_BLK_MISSING)
            continue;
        int any = 0;
        uint32_t chosen = 0, seen = 0;
        for (uint32_t i = 1; torrent && i < e->n_holders; i++) {
            if (holder_can_serve(e, e->holders[i], bi, a, &any) &&
                rs_bc_rand_below(&e->rng, ++seen) == 0)
                chosen = i;
        }
        if (!src->bad)
            any = 1;
        if (seen == 0) {
            if (!any) {
                /* Nobody left who has it: the source is gone or failed, so no new holders. */
                rs_bc_entry_fail(e, e->last_err != RS_OK ? e->last_err : RS_ERR_UNREACHABLE);
                return;
            }
            if (src->bad)
                continue; /* a holder being prepared has it */
            /* Ours, unless another reader already reads it from the source. */
            int owned = !torrent || (k < e->own_count && !claimed_elsewhere(e, bi));
            if (!owned && !e->src_open) {
                e->waiting = 1; /* its owner (or claimer) fetches it */
                continue;
            }
            if (e->source_inflight >= src_cap)
                continue;
            if (!owned) {
                /* One block per expired patience: the owner may only be slow. */
                e->src_open = 0;
                e->progress_ns = now;
            }
            chosen = 0;
        }
        rs_bc_holder_t *h = e->holders[chosen];
        if (!rs_bc_peer_take_read(e->node, h->peer))
            continue;
        b->state = RS_BLK_READING;
        b->holder = chosen;
        b->posted_ns = now;
        e->ops++;
        e->reads_inflight++;
        if (chosen == 0) {
            e->source_inflight++;
            if (torrent && e->nblocks > 1) { /* claim it, so others wait instead of duplicating */
                rs_bc_map_set(e->claimed, bi);
                e->announce_due = 1;
            }
        }
        a->rblock[a->n_reads] = bi;
        a->rholder[a->n_reads++] = h;
    }
}

/* Snapshots of the held and claimed bitmaps, back to back (e->lock held); NULL: no memory. */
static uint8_t *bitmap_copy(const rs_bc_entry_t *e)
{
    size_t n = rs_bc_map_bytes(e->nblocks);
    uint8_t *m = malloc(2 * n + 1);
    if (m != NULL) {
        memcpy(m, e->bitmap, n);
        memcpy(m + n, e->claimed, n);
    }
    return m;
}

void rs_bc_fetch_plan(rs_bc_entry_t *e, rs_bc_act_t *a)
{
    const rs_bcast_config_t *cfg = &e->node->cfg;
    int torrent = cfg->mode == RS_BCAST_TORRENT;
    memset(a, 0, sizeof(*a));
    if (e->manifest == RS_BMAN_NONE) {
        if (e->direct_rkey != NULL && e->ops > 0)
            return; /* a direct read that outlived its getter still writes the region */
        e->manifest = RS_BMAN_ASKED;
        a->send_get = 1;
        return;
    }
    if (e->manifest != RS_BMAN_HAVE)
        return;
    if (e->n_landed > 0) {
        a->verify = 1;
        a->vblock = e->landed[--e->n_landed];
        e->blocks[a->vblock].state = RS_BLK_VERIFYING;
    }
    plan_reads(e, a);
    if (e->state != RS_BENT_FETCHING || !torrent)
        return;
    /* Announce what we verified, batched: one message per round, off the read path. */
    if (e->announce_due && e->n_done < e->nblocks && !e->source_gone) {
        a->bitmap = bitmap_copy(e);
        if (a->bitmap != NULL) {
            a->send_announce = 1;
            e->announce_due = 0;
        }
    }
    if (!e->waiting)
        return;
    /* Waiting for others' blocks: poll the source for news, bounded by our patience. */
    if (!e->req_inflight && !e->source_gone && !e->holders[0]->bad) {
        a->send_update = 1;
        e->req_inflight = 1;
    }
    uint64_t patience = RS_MS_TO_NS(cfg->patience_ms);
    if (patience < 4 * e->read_ns)
        patience = 4 * e->read_ns; /* a loaded machine: blocks take longer to come */
    if (e->reads_inflight == 0 && e->n_landed == 0 && !a->verify &&
        rs_now_ns() - e->progress_ns >= patience) {
        e->src_open = 1; /* nobody delivered in time: take one block from the source */
        ESTAT(e, source_fallbacks, 1);
        rs_debug("broadcast: patience ran out on object %llu (%u of %u blocks here)",
                 (unsigned long long)e->seq, e->n_done, e->nblocks);
        plan_reads(e, a);
    }
}
