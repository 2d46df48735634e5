/*
 * The source's registry of an object's holders: registration (with the start
 * it picks for each reader), announcements, and who to tell of a destroy.
 */
#include "broadcast/internal.h"
#include "broadcast/source.h"

#include <stdlib.h>
#include <string.h>

#include "broadcast/blocks.h"

#define RS_BSRC_HOLDERS_MAX 4096 /* holders registered per object */

void rs_bc_src_holder_free(rs_bc_src_holder_t *h)
{
    rs_bc_addr_release(&h->addr);
    free(h->rkey);
    free(h->bitmap);
    free(h->claims);
    free(h);
}

int rs_bc_src_holder_find(rs_bcast_t *src, const rs_bc_addr_t *addr)
{
    for (uint32_t i = 0; i < src->n_holders; i++)
        if (rs_bc_addr_equal(&src->holders[i]->addr.a, addr))
            return (int)i;
    return -1;
}

/* The holder with this id (src->lock held). */
rs_bc_src_holder_t *rs_bc_src_holder_by_id(rs_bcast_t *src, uint32_t id)
{
    for (uint32_t i = 0; i < src->n_holders; i++)
        if (src->holders[i]->id == id)
            return src->holders[i];
    return NULL;
}

int rs_bc_src_holder_alive(const rs_bc_src_holder_t *h)
{
    return h->conn == NULL || !RS_BDEAD(h->conn);
}

int rs_bc_src_holder_active(const rs_bc_src_holder_t *h)
{
    return !h->complete && rs_bc_src_holder_alive(h);
}

/*
 * Where a newly registered reader starts in the shared block permutation:
 * in the middle of the longest run of blocks no active reader holds, claims
 * or starts at (src->lock held). So a newcomer lands as far as it can from
 * the blocks the others are reading now, and the share it takes from a
 * reader that has not heard of it yet is the part that reader reaches last.
 */
static uint32_t start_pick(rs_bcast_t *src)
{
    uint32_t n = src->nblocks;
    if (n < 2)
        return 0;
    if (src->perm_pos == NULL) {
        uint32_t *perm = malloc(n * sizeof(*perm));
        src->perm_pos = malloc(n * sizeof(*src->perm_pos));
        if (perm == NULL || src->perm_pos == NULL) {
            free(perm);
            free(src->perm_pos);
            src->perm_pos = NULL;
            return 0;
        }
        rs_bc_order(src->perm_seed, 0, n, perm);
        for (uint32_t pos = 0; pos < n; pos++)
            src->perm_pos[perm[pos]] = pos;
        free(perm);
    }
    uint8_t *busy = calloc(n, 1);
    if (busy == NULL)
        return 0;
    for (uint32_t i = 0; i < src->n_holders; i++) {
        const rs_bc_src_holder_t *h = src->holders[i];
        if (!rs_bc_src_holder_alive(h))
            continue;
        if (!h->complete)
            busy[h->start] = 1;
        for (uint32_t b = 0; b < n; b++)
            if (h->complete || rs_bc_map_test(h->bitmap, b) || rs_bc_map_test(h->claims, b))
                busy[src->perm_pos[b]] = 1;
    }
    uint32_t start = rs_bc_start_pick(busy, n);
    free(busy);
    return start;
}

/*
 * Registers a GET's requester as a holder (src->lock held). A holder already
 * known at that address is replaced under a new id: its region (and key)
 * are new.
 */
rs_bc_src_holder_t *rs_bc_src_holder_register(rs_bcast_t *src, rs_bc_epinfo_t *conn,
                                              const rs_bc_req_t *q)
{
    int i = rs_bc_src_holder_find(src, &q->holder_addr);
    if (i >= 0) {
        rs_bc_src_holder_free(src->holders[i]);
        src->holders[i] = src->holders[--src->n_holders];
    }
    if (src->n_holders >= RS_BSRC_HOLDERS_MAX)
        return NULL;
    if (src->n_holders == src->cap_holders) {
        uint32_t cap = src->cap_holders ? 2 * src->cap_holders : 8;
        rs_bc_src_holder_t **hs = realloc(src->holders, cap * sizeof(*hs));
        if (hs == NULL)
            return NULL;
        src->holders = hs;
        src->cap_holders = cap;
    }
    rs_bc_src_holder_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->rkey = malloc(q->holder_rkey.len);
    h->bitmap = calloc(1, rs_bc_map_bytes(src->nblocks) + 1);
    h->claims = calloc(1, rs_bc_map_bytes(src->nblocks) + 1);
    if (h->rkey == NULL || h->bitmap == NULL || h->claims == NULL ||
        rs_bc_addr_copy(&h->addr, &q->holder_addr) != RS_OK) {
        free(h->rkey);
        free(h->bitmap);
        free(h->claims);
        free(h);
        return NULL;
    }
    memcpy(h->rkey, q->holder_rkey.p, q->holder_rkey.len);
    h->rkey_len = q->holder_rkey.len;
    /* ids from 1: 0 is the source */
    h->id = (uint32_t)__atomic_add_fetch(&src->stats.holders, 1, __ATOMIC_RELAXED);
    RS_BSTAT_ADD(src->node->stats.holders, 1);
    h->conn = conn;
    h->start = start_pick(src);
    src->holders[src->n_holders++] = h;
    src->version++;
    src->rversion++;
    return h;
}

/*
 * Applies an announcement to h (src->lock held); the version moves when h
 * gained blocks. gained (optional, bitmap bytes) receives the blocks h just
 * announced; returns whether there were any.
 */
int rs_bc_src_holder_update(rs_bcast_t *src, rs_bc_src_holder_t *h, const rs_bc_req_t *q,
                            uint8_t *gained)
{
    size_t nbytes = rs_bc_map_bytes(src->nblocks);
    int any = 0;
    if (h->complete)
        return 0;
    if ((q->flags & RS_BREQ_F_CLAIMS) && q->nblocks == src->nblocks) {
        for (size_t i = 0; i < nbytes; i++)
            h->claims[i] |= q->claims.p[i];
    }
    if (q->flags & RS_BREQ_F_COMPLETE) {
        for (size_t i = 0; i < nbytes; i++) {
            uint8_t all = i + 1 < nbytes || src->nblocks % 8 == 0
                              ? 0xff
                              : (uint8_t)((1u << (src->nblocks % 8)) - 1);
            if (gained != NULL)
                gained[i] = (uint8_t)(all & ~h->bitmap[i]);
            h->bitmap[i] = all;
        }
        h->complete = 1;
        h->have = src->nblocks;
        src->version++;
        src->rversion++;
        return 1;
    }
    if ((q->flags & RS_BREQ_F_BITMAP) && q->nblocks == src->nblocks) {
        for (size_t i = 0; i < nbytes; i++) {
            uint8_t g = (uint8_t)(q->bitmap.p[i] & ~h->bitmap[i]);
            if (gained != NULL)
                gained[i] = g;
            h->bitmap[i] |= g;
            any |= g != 0;
        }
        if (any) {
            h->have = rs_bc_map_count(h->bitmap, src->nblocks);
            src->version++;
        }
    }
    return any;
}

/* Remembers an endpoint that asked for the manifest (src->lock held). */
void rs_bc_src_reader_note(rs_bcast_t *src, rs_bc_epinfo_t *info)
{
    for (uint32_t i = 0; i < src->n_readers; i++)
        if (src->readers[i] == info)
            return;
    if (src->n_readers == src->cap_readers) {
        uint32_t cap = src->cap_readers ? 2 * src->cap_readers : 8;
        rs_bc_epinfo_t **r = realloc(src->readers, cap * sizeof(*r));
        if (r == NULL)
            return; /* that reader then learns of a destroy from the source itself */
        src->readers = r;
        src->cap_readers = cap;
    }
    src->readers[src->n_readers++] = info;
}
