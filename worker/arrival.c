/*
 * What a batch's arrival does to its pusher's connection, for single and
 * merged writes alike (serve.c, merged.c): the NACK of a refused batch,
 * the bit that counts a batch once, a grant slot given back.
 */
#include "worker/internal.h"

#include "common/log.h"
#include "shuffle/proto.h"

#include <stdlib.h>
#include <string.h>

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
