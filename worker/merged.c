/*
 * Merged writes (docs/shuffle.md, "Merged pushes"): one grant and one
 * notification carry frames of many partitions, packed back to back at
 * 64-byte offsets from the notified offset to the end of the grant. Each
 * frame is checked as a single batch is (magic, version, lengths inside the
 * grant, ids: this shuffle, a partition of it, the pusher's map and
 * attempt), then copied into its partition's extents and indexed there, so
 * spill, snapshots and reads see an ordinary batch. A frame for which no
 * room is found (memory full and nothing to spill) stays where it arrived,
 * indexed at that offset; its merged extent then stays in memory until the
 * shuffle goes. The first frame that fails is NACKed and ends the walk:
 * it and the frames behind it count nothing.
 */
#include "worker/internal.h"

#include "common/log.h"

#include <rshuffle/codec.h>

#include <string.h>

/* Copies the frame at pos of g into its partition's extents (or keeps it there) and indexes it. */
static rs_status_t frame_place(rs_wk_store_t *st, wshuffle_t *sh, wgrant_t *g, uint64_t pos,
                               const rs_frame_t *f)
{
    rs_snap_entry_t e = {.loc = g->off + pos,
                         .len = (uint32_t)f->frame_len,
                         .map_id = f->ids.map_id,
                         .attempt = f->ids.attempt,
                         .seq = f->ids.seq};
    if (st->cfg.sink)
        return rs_wk_store_add_entry(st, g, &e); /* counted only */
    extent_t *dst;
    uint64_t off;
    if (rs_wk_store_room(st, sh, f->ids.partition, f->frame_len, &dst, &off) == RS_OK) {
        memcpy(st->arena + off, st->arena + g->off + pos, f->frame_len);
        e.loc = off;
    } else {
        dst = g->ext; /* pins the merged extent until the shuffle goes */
        st->stats.merged_in_place++;
    }
    st->stats.batches++;
    st->stats.bytes += e.len;
    return rs_wk_part_add_entry(st, &sh->parts[f->ids.partition], dst, &e);
}

void rs_wk_merged_arrived(rs_worker_t *w, wconn_t *c, wgrant_t *g, uint64_t in, uint32_t imm)
{
    rs_wk_store_t *st = &w->st;
    wshuffle_t *sh = c->sh;
    st->stats.merged_writes++;
    uint64_t pos = in;
    while (pos < g->len) {
        const uint8_t *frame = st->arena + g->off + pos;
        size_t room = (size_t)(g->len - pos);
        rs_frame_t f;
        rs_status_t s = rs_wk_frame_check(w, c, frame, room, RS_MERGED_PART, &f);
        if (s == RS_OK)
            s = frame_place(st, sh, g, pos, &f);
        if (s != RS_OK) {
            rs_warn("worker: batch of shuffle %u in a merged write (slot %u, offset %llu) "
                    "refused: %s",
                    sh->id, g->slot, (unsigned long long)pos, rs_strerror(s));
            rs_wk_store_settle(st, g, g->len - pos); /* the rest is never walked */
            rs_wk_nack(w, c, RS_MERGED_PART, imm, 0, s);
            break;
        }
        /* A repeated batch stays in the index for readers to drop, but counts once. */
        if (!rs_wk_seen(c, f.ids.seq)) {
            c->distinct++;
            wpstat_t *ps = &c->stats[f.ids.partition];
            ps->batches++;
            ps->bytes += f.frame_len;
            ps->checksum += f.checksum;
        }
        c->batches++;
        st->stats.merged_batches++;
        pos += rs_sproto_round(f.frame_len);
        /* Last: the final settle may free the merged extent (nothing of it is read after). */
        rs_wk_store_settle(st, g, f.frame_len);
    }
}
