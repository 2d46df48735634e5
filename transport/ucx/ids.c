/*
 * UCX backend: connection ids. Every connection has an id (slot index and a
 * 12-bit generation) that peers name in message headers; a stale id of a
 * reused slot never matches. Used by conn.c (allocation) and by recv.c and
 * amrma.c (lookup), so the message paths need not call into conn.c.
 */
#include "transport/ucx/ucx.h"

#include <stdlib.h>

#define RS_UCX_ID_BITS 20
#define RS_UCX_ID_MASK ((1u << RS_UCX_ID_BITS) - 1)

/* ------------------------------------------------------------ connection ids */

static int ids_grow(rs_ucx_ctx_t *uc)
{
    uint32_t n = uc->nslots ? uc->nslots * 2 : 64;
    if (n > RS_UCX_ID_MASK + 1)
        return -1;
    rs_ucx_ep_t **slots = realloc(uc->slots, n * sizeof(*slots));
    if (slots == NULL)
        return -1;
    uc->slots = slots;
    uint16_t *gens = realloc(uc->gens, n * sizeof(*gens));
    if (gens == NULL)
        return -1;
    uc->gens = gens;
    uint32_t *free_ids = realloc(uc->free_ids, n * sizeof(*free_ids));
    if (free_ids == NULL)
        return -1;
    uc->free_ids = free_ids;
    for (uint32_t i = n; i-- > uc->nslots;) {
        uc->slots[i] = NULL;
        uc->gens[i] = 1;
        uc->free_ids[uc->nfree++] = i;
    }
    uc->nslots = n;
    return 0;
}

int rs_ucx_id_alloc(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep)
{
    if (uc->nfree == 0 && ids_grow(uc) != 0)
        return -1;
    uint32_t idx = uc->free_ids[--uc->nfree];
    uc->slots[idx] = uep;
    /* Never 0: 0 means "unknown" in headers. */
    uep->id = ((uint32_t)uc->gens[idx] << RS_UCX_ID_BITS) | idx;
    return 0;
}

void rs_ucx_id_free(rs_ucx_ctx_t *uc, rs_ucx_ep_t *uep)
{
    uint32_t idx = uep->id & RS_UCX_ID_MASK;
    if (uep->id == 0 || idx >= uc->nslots || uc->slots[idx] != uep)
        return;
    uc->slots[idx] = NULL;
    uc->gens[idx] = (uint16_t)(uc->gens[idx] % 0xfff + 1); /* 12 bits, never 0 */
    uc->free_ids[uc->nfree++] = idx;
    uep->id = 0;
}

rs_ucx_ep_t *rs_ucx_ep_lookup(rs_ucx_ctx_t *uc, uint32_t id)
{
    uint32_t idx = id & RS_UCX_ID_MASK;
    if (idx >= uc->nslots)
        return NULL;
    rs_ucx_ep_t *uep = uc->slots[idx];
    return uep != NULL && uep->id == id ? uep : NULL;
}
