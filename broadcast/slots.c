/* Registered reply and staging slots carved from slabs (see internal.h). */
#include "broadcast/internal.h"

#include <stdlib.h>

#include "common/assert.h"
#include "common/log.h"

void rs_bc_slots_init(rs_bc_slots_t *s, rs_ctx_t *ctx, unsigned access, size_t slot_size,
                      uint32_t per_slab)
{
    pthread_mutex_init(&s->lock, NULL);
    s->ctx = ctx;
    s->access = access;
    s->slot_size = (slot_size + 63) & ~(size_t)63;
    s->per_slab = per_slab;
    rs_list_init(&s->free);
    rs_list_init(&s->big_free);
    rs_list_init(&s->slabs);
}

/* Registers a slab of n slots of size bytes and puts them on a free list. */
static rs_status_t slab_add(rs_bc_slots_t *s, size_t size, uint32_t n, int big)
{
    rs_bc_slab_t *slab = calloc(1, sizeof(*slab));
    rs_status_t st = RS_ERR_NOMEM;

    if (slab == NULL || (slab->slots = calloc(n, sizeof(rs_bc_slot_t))) == NULL) {
        rs_error("out of memory allocating broadcast slots");
        goto err_free_slab;
    }
    st = rs_mem_alloc(s->ctx, size * n, s->access, &slab->mr);
    if (st != RS_OK)
        goto err_free_slab;
    if (s->access != RS_MEM_LOCAL) {
        st = rs_mr_pack_rkey(slab->mr, slab->rkey, sizeof(slab->rkey), &slab->rkey_len);
        if (st != RS_OK)
            goto err_free_mr;
    }
    uint8_t *base = rs_mr_addr(slab->mr);
    pthread_mutex_lock(&s->lock);
    rs_list_add_tail(&s->slabs, &slab->link);
    for (uint32_t i = 0; i < n; i++) {
        rs_bc_slot_t *slot = &slab->slots[i];
        slot->slab = slab;
        slot->p = base + size * i;
        slot->cap = size;
        slot->off = size * i;
        slot->big = big;
        rs_list_add_tail(big ? &s->big_free : &s->free, &slot->link);
    }
    pthread_mutex_unlock(&s->lock);
    return RS_OK;

err_free_mr:
    rs_mem_free(slab->mr);
err_free_slab:
    if (slab != NULL)
        free(slab->slots);
    free(slab);
    return st;
}

/* A free slot of at least need bytes, or NULL (s->lock held). */
static rs_bc_slot_t *slot_take(rs_bc_slots_t *s, size_t need)
{
    rs_list_t *pos, *tmp;
    if (need <= s->slot_size) {
        if (rs_list_empty(&s->free))
            return NULL;
        rs_bc_slot_t *slot = rs_list_first(&s->free, rs_bc_slot_t, link);
        rs_list_del(&slot->link);
        return slot;
    }
    rs_list_for_each_safe(pos, tmp, &s->big_free)
    {
        rs_bc_slot_t *slot = RS_CONTAINER_OF(pos, rs_bc_slot_t, link);
        if (slot->cap >= need) {
            rs_list_del(&slot->link);
            return slot;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- stash */

/*
 * Slots reserved for one request served inside a transport callback
 * (servecb.c): there rs_bc_slots_get must not register memory, so it hands
 * out only these.
 */
#define RS_BSTASH_MAX 16 /* slots one request may need (1 + long polls it releases) */

typedef struct rs_bc_stash {
    rs_bc_slots_t *slots; /* non-NULL while this thread serves from a callback */
    uint32_t n;
    rs_bc_slot_t *slot[RS_BSTASH_MAX];
} rs_bc_stash_t;

static __thread rs_bc_stash_t stash;

int rs_bc_slots_stash_fill(rs_bc_slots_t *s, uint32_t n, size_t cap)
{
    RS_ASSERT(stash.slots == NULL || stash.slots == s);
    if (n > RS_BSTASH_MAX - stash.n)
        return 0;
    uint32_t first = stash.n;
    for (uint32_t i = 0; i < n; i++) {
        if (rs_bc_slots_try(s, cap, &stash.slot[stash.n]) != RS_OK) {
            while (stash.n > first)
                rs_bc_slots_put(s, stash.slot[--stash.n]);
            if (stash.n == 0)
                stash.slots = NULL;
            return 0;
        }
        stash.n++;
    }
    stash.slots = s;
    return 1;
}

void rs_bc_slots_stash_return(void)
{
    for (uint32_t i = 0; i < stash.n; i++)
        rs_bc_slots_put(stash.slots, stash.slot[i]);
    stash.n = 0;
    stash.slots = NULL;
}

/*
 * 1 and *slot_p when this thread serves a request from a callback and
 * reserved a slot that fits s and need; -1 when it serves from a callback
 * but reserved none that fits (the caller must not register memory: fail);
 * 0 when this thread is not serving from a callback.
 */
static int stash_take(rs_bc_slots_t *s, size_t need, rs_bc_slot_t **slot_p)
{
    if (stash.slots == NULL)
        return 0;
    for (uint32_t i = 0; stash.slots == s && i < stash.n; i++) {
        if (stash.slot[i]->cap >= need) {
            *slot_p = stash.slot[i];
            stash.slot[i] = stash.slot[--stash.n];
            return 1;
        }
    }
    rs_warn("broadcast: a reply in a transport callback found no reserved slot: dropped");
    return -1;
}

rs_status_t rs_bc_slots_get(rs_bc_slots_t *s, size_t need, rs_bc_slot_t **slot_p)
{
    int stashed = stash_take(s, need, slot_p); /* serving in a callback */
    if (stashed != 0)
        return stashed > 0 ? RS_OK : RS_ERR_BUSY;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        rs_bc_slot_t *slot = slot_take(s, need);
        pthread_mutex_unlock(&s->lock);
        if (slot != NULL) {
            *slot_p = slot;
            return RS_OK;
        }
        /* Registration happens outside the lock; another thread may take the new slots. */
        rs_status_t st = need <= s->slot_size ? slab_add(s, s->slot_size, s->per_slab, 0)
                                              : slab_add(s, (need + 4095) & ~(size_t)4095, 1, 1);
        if (st != RS_OK)
            return st;
    }
}

rs_status_t rs_bc_slots_try(rs_bc_slots_t *s, size_t need, rs_bc_slot_t **slot_p)
{
    pthread_mutex_lock(&s->lock);
    rs_bc_slot_t *slot = slot_take(s, need);
    pthread_mutex_unlock(&s->lock);
    if (slot == NULL)
        return RS_ERR_BUSY;
    *slot_p = slot;
    return RS_OK;
}

void rs_bc_slots_put(rs_bc_slots_t *s, rs_bc_slot_t *slot)
{
    pthread_mutex_lock(&s->lock);
    rs_list_add_head(slot->big ? &s->big_free : &s->free, &slot->link);
    pthread_mutex_unlock(&s->lock);
}

void rs_bc_slots_fini(rs_bc_slots_t *s)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &s->slabs)
    {
        rs_bc_slab_t *slab = RS_CONTAINER_OF(pos, rs_bc_slab_t, link);
        rs_list_del(&slab->link);
        free(slab->slots);
        free(slab);
    }
    pthread_mutex_destroy(&s->lock);
}
