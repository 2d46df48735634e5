/*
 * A per-peer cache of unpacked object-region keys. Peers recycle their
 * object regions (regions.c), so the key a source sends for its next object
 * is usually one this reader unpacked before. Unpacking it afresh maps the
 * peer's region again (a shared-memory transport attaches the segment), and
 * the first touch of every page of the new mapping faults, inside the read:
 * 16384 faults for 64 MiB, several times the cost of the copy where a fault
 * costs microseconds (as under virtualization).
 * Keeping the unpacked key keeps the mapping and its page tables.
 *
 * Bounds: keys nobody uses are kept up to RS_BRCACHE_KEYS per peer and
 * cache_bytes of regions per peer (a kept mapping keeps a freed region's
 * memory alive), oldest dropped first. A key of a region the peer has since
 * freed or reused can only read bytes that fail their block checksums.
 */
#include "broadcast/rcache.h"

#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/log.h"

#define RS_BRCACHE_KEYS 8

typedef struct rs_bc_rkey {
    rs_list_t link; /* peer->rcache, most recently used last */
    rs_rkey_t *rkey;
    uint32_t refs;
    size_t len;
    uint8_t blob[];
} rs_bc_rkey_t;

/* peer->info.lock held. */
static void cache_init(rs_bc_peer_t *peer)
{
    if (peer->rcache.next == NULL) /* peers are zeroed at creation */
        rs_list_init(&peer->rcache);
}

static rs_bc_rkey_t *cache_find(rs_bc_peer_t *peer, const void *blob, size_t len)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &peer->rcache)
    {
        rs_bc_rkey_t *k = RS_CONTAINER_OF(pos, rs_bc_rkey_t, link);
        if (k->len == len && memcmp(k->blob, blob, len) == 0)
            return k;
    }
    return NULL;
}

rs_status_t rs_bc_rcache_get(rs_bcast_node_t *node, rs_bc_peer_t *peer, const void *blob,
                             size_t len, rs_rkey_t **rkey_p)
{
    pthread_mutex_lock(&peer->info.lock);
    cache_init(peer);
    peer->rcache_max = node->cfg.cache_bytes;
    rs_bc_rkey_t *k = cache_find(peer, blob, len);
    if (k != NULL) {
        k->refs++;
        rs_list_del(&k->link); /* most recently used last */
        rs_list_add_tail(&peer->rcache, &k->link);
        pthread_mutex_unlock(&peer->info.lock);
        *rkey_p = k->rkey;
        return RS_OK;
    }
    pthread_mutex_unlock(&peer->info.lock);

    k = malloc(sizeof(*k) + len);
    if (k == NULL) {
        rs_error("out of memory caching a remote key");
        return RS_ERR_NOMEM;
    }
    /* Unpacked outside the lock (a transport call); another thread may win meanwhile. */
    rs_status_t st = rs_rkey_unpack(peer->ep, blob, len, &k->rkey);
    if (st != RS_OK) {
        free(k);
        return st;
    }
    k->refs = 1;
    k->len = len;
    memcpy(k->blob, blob, len);
    pthread_mutex_lock(&peer->info.lock);
    rs_bc_rkey_t *won = cache_find(peer, blob, len);
    if (won != NULL)
        won->refs++;
    else
        rs_list_add_tail(&peer->rcache, &k->link);
    pthread_mutex_unlock(&peer->info.lock);
    if (won != NULL) {
        rs_rkey_destroy(k->rkey);
        free(k);
        k = won;
    }
    *rkey_p = k->rkey;
    return RS_OK;
}

void rs_bc_rcache_put(rs_bc_peer_t *peer, rs_rkey_t *rkey)
{
    rs_list_t *pos, *tmp, drop;
    uint32_t idle = 0;
    uint64_t idle_bytes = 0;
    int found = 0;

    rs_list_init(&drop);
    pthread_mutex_lock(&peer->info.lock);
    cache_init(peer);
    rs_list_for_each_safe(pos, tmp, &peer->rcache)
    {
        rs_bc_rkey_t *k = RS_CONTAINER_OF(pos, rs_bc_rkey_t, link);
        if (k->rkey == rkey) {
            RS_ASSERT(k->refs > 0); /* handed out by rs_bc_rcache_get */
            k->refs--;
            found = 1;
        }
        if (k->refs == 0) {
            idle++;
            idle_bytes += rs_rkey_len(k->rkey);
        }
    }
    /* Oldest unused first, until within bounds. */
    rs_list_for_each_safe(pos, tmp, &peer->rcache)
    {
        if (idle <= RS_BRCACHE_KEYS && idle_bytes <= peer->rcache_max)
            break;
        rs_bc_rkey_t *k = RS_CONTAINER_OF(pos, rs_bc_rkey_t, link);
        if (k->refs != 0)
            continue;
        idle--;
        idle_bytes -= rs_rkey_len(k->rkey);
        rs_list_del(&k->link);
        rs_list_add_tail(&drop, &k->link);
    }
    pthread_mutex_unlock(&peer->info.lock);
    if (!found) {
        rs_error("broadcast: released a remote key the cache does not hold");
        rs_rkey_destroy(rkey);
    }
    rs_list_for_each_safe(pos, tmp, &drop)
    {
        rs_bc_rkey_t *k = RS_CONTAINER_OF(pos, rs_bc_rkey_t, link);
        rs_list_del(&k->link);
        rs_rkey_destroy(k->rkey);
        free(k);
    }
}

void rs_bc_rcache_fini(rs_bc_peer_t *peer)
{
    rs_list_t *pos, *tmp;
    if (peer->rcache.next == NULL)
        return;
    rs_list_for_each_safe(pos, tmp, &peer->rcache)
    {
        rs_list_del(pos);
        free(RS_CONTAINER_OF(pos, rs_bc_rkey_t, link)); /* the context freed the key */
    }
}
