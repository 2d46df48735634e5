/*
 * A bounded cache of registered object regions. Registering (and faulting
 * in) a fresh region per object costs more than moving its bytes;
 * regions of retired objects are kept for the next object of a similar size.
 * A reader still holding the old remote key can only read bytes that fail
 * their block checksum (or are the same bytes), so reuse is safe, at once.
 * A region that does not fit in the cache is unmapped only after grace_ms:
 * a read already in flight from a peer must not touch freed memory (UCX's
 * software one-sided reads copy from the address, unchecked).
 */
#include "broadcast/internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

struct rs_bc_region {
    rs_list_t link;
    rs_mr_t *mr;
    uint64_t free_ns; /* doomed: when to free it */
    size_t rkey_len;
    uint8_t rkey[RS_RKEY_BLOB_MAX];
};

/* The cached region that fits len best (wasting at most a quarter), taken out; or NULL. */
static rs_bc_region_t *cache_take(rs_bcast_node_t *node, size_t len)
{
    rs_list_t *pos, *tmp;
    rs_bc_region_t *best = NULL;
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->regions)
    {
        rs_bc_region_t *r = RS_CONTAINER_OF(pos, rs_bc_region_t, link);
        size_t have = rs_mr_len(r->mr);
        /* Best fit, wasting at most a quarter. */
        if (have >= len && have - len <= len / 4 && (best == NULL || have < rs_mr_len(best->mr)))
            best = r;
    }
    if (best != NULL) {
        rs_list_del(&best->link);
        node->region_bytes -= rs_mr_len(best->mr);
    }
    pthread_mutex_unlock(&node->lock);
    return best;
}

rs_status_t rs_bc_region_take(rs_bcast_node_t *node, size_t len, rs_mr_t **mr_p, uint8_t *rkey,
                              size_t *rkey_len)
{
    rs_bc_region_t *best = cache_take(node, len);
    if (best == NULL)
        return RS_ERR_NOT_FOUND;
    *mr_p = best->mr;
    memcpy(rkey, best->rkey, best->rkey_len);
    *rkey_len = best->rkey_len;
    free(best);
    return RS_OK;
}

rs_status_t rs_bc_region_new(rs_bcast_node_t *node, size_t len, rs_mr_t **mr_p, uint8_t *rkey,
                             size_t *rkey_len)
{
    rs_mr_t *mr;
    rs_status_t st = rs_mem_alloc(node->ctx, len, RS_MEM_REMOTE_READ, &mr);
    if (st != RS_OK)
        return st;
    st = rs_mr_pack_rkey(mr, rkey, RS_RKEY_BLOB_MAX, rkey_len);
    if (st != RS_OK) {
        rs_mem_free(mr);
        return st;
    }
    *mr_p = mr;
    return RS_OK;
}

void rs_bc_region_put(rs_bcast_node_t *node, rs_mr_t *mr, const uint8_t *rkey, size_t rkey_len)
{
    size_t len = rs_mr_len(mr);
    rs_bc_region_t *r = malloc(sizeof(*r));
    if (r == NULL) {
        rs_error("broadcast: out of memory retiring a region: leaked until the node goes");
        return;
    }
    r->mr = mr;
    r->rkey_len = rkey_len <= RS_RKEY_BLOB_MAX ? rkey_len : 0;
    memcpy(r->rkey, rkey, r->rkey_len);
    pthread_mutex_lock(&node->lock);
    if (node->region_bytes + len <= node->cfg.cache_bytes && r->rkey_len > 0) {
        rs_list_add_tail(&node->regions, &r->link);
        node->region_bytes += len;
    } else {
        r->free_ns = rs_now_ns() + RS_MS_TO_NS(node->cfg.grace_ms);
        rs_list_add_tail(&node->doomed, &r->link);
    }
    pthread_mutex_unlock(&node->lock);
}

void rs_bc_regions_tick(rs_bcast_node_t *node, uint64_t now)
{
    rs_list_t *pos, *tmp, due;
    rs_list_init(&due);
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->doomed)
    {
        if (now >= RS_CONTAINER_OF(pos, rs_bc_region_t, link)->free_ns) {
            rs_list_del(pos);
            rs_list_add_tail(&due, pos);
        }
    }
    pthread_mutex_unlock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &due)
    {
        rs_bc_region_t *r = RS_CONTAINER_OF(pos, rs_bc_region_t, link);
        rs_list_del(pos);
        rs_mem_free(r->mr);
        free(r);
    }
}

void rs_bc_regions_fini(rs_bcast_node_t *node)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &node->regions)
    {
        rs_list_del(pos);
        free(RS_CONTAINER_OF(pos, rs_bc_region_t, link)); /* the context freed the memory */
    }
    rs_list_for_each_safe(pos, tmp, &node->doomed)
    {
        rs_list_del(pos);
        free(RS_CONTAINER_OF(pos, rs_bc_region_t, link));
    }
    node->region_bytes = 0;
}
