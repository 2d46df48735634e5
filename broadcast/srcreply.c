/*
 * A source's replies: manifests and holder updates built in staging slots,
 * status replies, and an inline object's prebuilt reply, each put straight
 * into the requester's reply slot.
 */
#include "broadcast/internal.h"
#include "broadcast/source.h"

#include <stdlib.h>
#include <string.h>

#include "broadcast/blocks.h"
#include "common/log.h"

/* A put of a reply in flight. */
typedef struct rs_bc_put {
    rs_bcast_node_t *node;
    rs_bcast_t *src;    /* busy reference, or NULL */
    rs_bc_slot_t *slot; /* staging slot, or NULL (prebuilt inline reply) */
} rs_bc_put_t;

void rs_bc_src_unbusy(rs_bcast_node_t *node, rs_bcast_t *src)
{
    pthread_mutex_lock(&node->lock);
    src->busy--;
    pthread_mutex_unlock(&node->lock);
}

static void put_done(void *arg, rs_status_t status)
{
    rs_bc_put_t *put = arg;
    if (status != RS_OK)
        rs_debug("broadcast: a reply put failed: %s", rs_strerror(status));
    if (put->slot != NULL)
        rs_bc_slots_put(&put->node->staging, put->slot);
    if (put->src != NULL)
        rs_bc_src_unbusy(put->node, put->src);
    free(put);
}

/* Writes len bytes at buf (inside mr) into the requester's reply slot, notifying req_id. */
static void reply_post(rs_bc_epinfo_t *info, const rs_bc_req_t *q, const void *buf, size_t len,
                       rs_mr_t *mr, rs_bc_put_t *put)
{
    rs_rkey_t *rkey;
    rs_status_t st = rs_bc_epinfo_rkey(info, q->reply_rkey.p, q->reply_rkey.len, &rkey);
    if (st == RS_OK)
        st = rs_put_notify(info->ep, buf, len, mr, rkey, q->reply_off, q->req_id, put_done, put);
    if (st != RS_OK) {
        rs_warn("broadcast: cannot answer request %u: %s", q->req_id, rs_strerror(st));
        put_done(put, st);
    }
}

void rs_bc_src_reply_status(rs_bcast_node_t *node, rs_bc_epinfo_t *info, const rs_bc_req_t *q,
                            rs_status_t status)
{
    rs_bc_slot_t *slot;
    rs_bc_reply_enc_t enc;
    rs_bc_reply_t hdr;
    size_t len;
    rs_bc_put_t *put = calloc(1, sizeof(*put));

    if (put == NULL || rs_bc_slots_get(&node->staging, RS_BREPLY_MIN_LEN, &slot) != RS_OK) {
        free(put);
        return;
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.kind = q->kind;
    hdr.status = (int16_t)status;
    hdr.node_id = q->node_id;
    hdr.seq = q->seq;
    rs_bc_reply_begin(&enc, slot->p, slot->cap, &hdr);
    rs_bc_reply_finish(&enc, NULL, 0, &len);
    put->node = node;
    put->slot = slot;
    reply_post(info, q, slot->p, len, slot->slab->mr, put);
}

/* Lists the source, the active tickets and a random choice of holders (src->lock held). */
static void reply_lists(rs_bcast_node_t *node, rs_bcast_t *src, rs_bc_reply_enc_t *enc,
                        uint32_t self_id, uint64_t *rng)
{
    uint32_t n = src->n_holders, listed = 0, n_active = 0;
    uint32_t *idx = malloc((n + 1u) * sizeof(*idx));
    rs_bc_active_t *active = malloc((n + 1u) * sizeof(*active));
    if (idx == NULL || active == NULL) {
        free(active);
        free(idx);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const rs_bc_src_holder_t *h = src->holders[i];
        if (rs_bc_src_holder_active(h)) {
            active[n_active].ticket = h->id - 1;
            active[n_active++].start = h->start;
        }
    }
    rs_bc_reply_put_active(enc, active, n_active);
    free(active);

    rs_bc_holder_wire_t w;
    memset(&w, 0, sizeof(w));
    w.flags = RS_BHOLDER_F_SOURCE | RS_BHOLDER_F_COMPLETE;
    w.addr = node->self.a;
    w.rkey.p = src->rkey;
    w.rkey.len = (uint32_t)src->rkey_len;
    if (rs_bc_reply_add_holder(enc, &w) != RS_OK)
        goto out;
    /* Partial Fisher-Yates over the holders that have something to serve. */
    for (uint32_t i = 0; i < n; i++)
        idx[i] = i;
    for (uint32_t k = 0; k < n && listed < node->cfg.holders_max; k++) {
        uint32_t j = k + rs_bc_rand_below(rng, n - k);
        uint32_t t = idx[k];
        idx[k] = idx[j];
        idx[j] = t;
        rs_bc_src_holder_t *h = src->holders[idx[k]];
        int claims = 0;
        for (size_t i = 0; !h->complete && i < rs_bc_map_bytes(src->nblocks); i++)
            claims |= (h->claims[i] & ~h->bitmap[i]) != 0;
        if (h->id == self_id || (h->have == 0 && !claims) || !rs_bc_src_holder_alive(h))
            continue; /* nothing to serve or soon to serve, or its connection to us died */
        w.id = h->id;
        w.flags = h->complete ? RS_BHOLDER_F_COMPLETE : 0;
        w.flags |= claims ? RS_BHOLDER_F_CLAIMS : 0;
        w.addr = h->addr.a;
        w.rkey.p = h->rkey;
        w.rkey.len = (uint32_t)h->rkey_len;
        w.bitmap.p = h->bitmap;
        w.bitmap.len = (uint32_t)rs_bc_map_bytes(src->nblocks);
        w.claims.p = h->claims;
        w.claims.len = w.bitmap.len;
        if (rs_bc_reply_add_holder(enc, &w) != RS_OK)
            break;
        listed++;
    }
out:
    free(idx);
}

void rs_bc_src_reply_manifest(rs_bcast_node_t *node, rs_bcast_t *src, rs_bc_epinfo_t *info,
                              const rs_bc_req_t *q, uint32_t self_id)
{
    rs_bc_reply_t hdr;
    rs_bc_reply_enc_t enc;
    size_t len = 0;
    uint64_t rng = rs_bc_random64();
    size_t want = rs_bc_reply_meta_len(q->kind == RS_BREQ_GET ? src->nblocks : 0) +
                  RS_BREPLY_ACTIVE_BUDGET + RS_BREPLY_HOLDER_BUDGET;
    size_t cap = want < q->reply_cap ? want : q->reply_cap;
    rs_bc_put_t *put = calloc(1, sizeof(*put));

    if (put == NULL || rs_bc_slots_get(&node->staging, cap, &put->slot) != RS_OK) {
        free(put);
        return;
    }
    put->node = node;
    put->src = src;
    pthread_mutex_lock(&node->lock);
    src->busy++;
    pthread_mutex_unlock(&node->lock);

    memset(&hdr, 0, sizeof(hdr));
    hdr.kind = q->kind;
    hdr.node_id = node->node_id;
    hdr.seq = src->seq;
    hdr.size = src->size;
    hdr.block_size = src->block_size;
    hdr.nblocks = src->nblocks;
    hdr.flags = q->kind == RS_BREQ_GET ? RS_BREPLY_F_SUMS : 0;
    hdr.perm_seed = src->perm_seed;
    hdr.ticket = self_id != 0 ? self_id - 1 : 0;
    /* Readers that do not share (source mode) start anywhere. */
    hdr.start = src->nblocks > 0 ? rs_bc_rand_below(&rng, src->nblocks) : 0;
    pthread_mutex_lock(&src->lock);
    hdr.version = src->version;
    hdr.rversion = src->rversion;
    rs_bc_src_holder_t *self = self_id != 0 ? rs_bc_src_holder_by_id(src, self_id) : NULL;
    if (self != NULL)
        hdr.start = self->start;
    for (uint32_t i = 0; i < src->n_holders; i++) {
        const rs_bc_src_holder_t *h = src->holders[i];
        if (h->id != self_id && rs_bc_src_holder_active(h))
            hdr.active++;
    }
    rs_bc_reply_begin(&enc, put->slot->p, cap, &hdr);
    if (q->kind == RS_BREQ_GET)
        rs_bc_reply_put_sums(&enc, src->sums, src->nblocks);
    reply_lists(node, src, &enc, self_id, &rng);
    rs_status_t st = rs_bc_reply_finish(&enc, NULL, 0, &len);
    pthread_mutex_unlock(&src->lock);
    if (st != RS_OK) {
        put_done(put, st);
        rs_bc_src_reply_status(node, info, q, RS_ERR_NO_SPACE);
        return;
    }
    reply_post(info, q, put->slot->p, len, put->slot->slab->mr, put);
}

int rs_bc_src_reply_inline(rs_bcast_node_t *node, rs_bc_epinfo_t *info, rs_bcast_t *src,
                           const rs_bc_req_t *q)
{
    rs_bc_put_t *put;
    if (src->reply_len > q->reply_cap || (put = calloc(1, sizeof(*put))) == NULL)
        return 0;
    RS_BSTAT_ADD(src->stats.requests_served, 1);
    RS_BSTAT_ADD(node->stats.requests_served, 1);
    pthread_mutex_lock(&src->lock);
    rs_bc_src_reader_note(src, info);
    pthread_mutex_unlock(&src->lock);
    put->node = node;
    put->src = src;
    pthread_mutex_lock(&node->lock);
    src->busy++;
    pthread_mutex_unlock(&node->lock);
    reply_post(info, q, rs_mr_addr(src->mr), src->reply_len, src->mr, put);
    return 1;
}
