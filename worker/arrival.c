/*
 * What a batch's arrival does to its pusher's connection, for single and
 * merged writes alike (serve.c, merged.c): the frame's checks, the NACK of
 * a refused batch, the bit that counts a batch once, a grant slot given
 * back.
 */
#include "worker/internal.h"

#include "common/log.h"
#include "shuffle/proto.h"

#include <stdlib.h>
#include <string.h>

rs_status_t rs_wk_frame_check(const rs_worker_t *w, const wconn_t *c, const uint8_t *frame,
                              size_t room, uint32_t partition, rs_frame_t *f)
{
    rs_status_t s =
        w->st.cfg.verify ? rs_frame_verify(frame, room, f) : rs_frame_parse(frame, room, f);
    if (s == RS_OK && f->frame_len > room)
        s = RS_ERR_BAD_LENGTH;
    int part_ok = partition == RS_MERGED_PART ? f->ids.partition < c->sh->n_partitions
                                              : f->ids.partition == partition;
    if (s == RS_OK && (f->ids.shuffle_id != c->sh->id || !part_ok || f->ids.map_id != c->map_id ||
                       f->ids.attempt != c->attempt || f->ids.seq >= RS_SEQ_MAX))
        s = RS_ERR_PROTOCOL;
    return s;
}

void rs_wk_nack(rs_worker_t *w, wconn_t *c, uint32_t partition, uint32_t imm, uint64_t seq,
                rs_status_t status)
{
    w->st.stats.refused++;
    rs_smsg_nack_t n = {.status = status, .partition = partition, .imm = imm, .seq = seq};
    uint8_t buf[RS_SPROTO_NACK_LEN];
    size_t len;
    if (rs_sproto_nack_encode(&n, buf, sizeof(buf), &len) == RS_OK)
        rs_msg_send(c->ep, RS_SMSG_NACK, buf, len, NULL, NULL);
}

/* Marks seq as arrived; returns whether it had arrived before. */
int rs_wk_seen(wconn_t *c, uint64_t seq)
{
    if (seq >= c->seen_bits) {
        uint64_t bits = c->seen_bits ? c->seen_bits : 4096;
        while (bits <= seq)
            bits *= 2;
        uint8_t *n = realloc(c->seen, bits / 8);
        if (n == NULL)
            return 0;
        memset(n + c->seen_bits / 8, 0, (bits - c->seen_bits) / 8);
        c->seen = n;
        c->seen_bits = bits;
    }
    int was = (c->seen[seq / 8] >> (seq % 8)) & 1;
    c->seen[seq / 8] |= (uint8_t)(1u << (seq % 8));
    return was;
}

void rs_wk_slot_maybe_free(rs_worker_t *w, wconn_t *c, wgrant_t *g)
{
    if (!g->retired || !g->released)
        return;
    c->slots[g->slot] = NULL;
    c->free_slots[c->n_free++] = g->slot;
    rs_wk_store_grant_free(&w->st, g);
}
