/* Unpacked remote keys of peers' object regions, cached across objects (rcache.c). */
#ifndef RS_BROADCAST_RCACHE_H
#define RS_BROADCAST_RCACHE_H

#include <stddef.h>

#include "broadcast/internal.h"

/*
 * The unpacked key for blob on peer's endpoint, shared and counted: from the
 * cache when the peer sent the same blob before (its region came from its
 * region cache), else unpacked now. Release it with rs_bc_rcache_put. Callable
 * from transport callbacks (as rs_rkey_unpack is).
 */
rs_status_t rs_bc_rcache_get(rs_bcast_node_t *node, rs_bc_peer_t *peer, const void *blob,
                             size_t len, rs_rkey_t **rkey_p);

/* Drops a reference taken by rs_bc_rcache_get; unused keys beyond the cache's bounds go. */
void rs_bc_rcache_put(rs_bc_peer_t *peer, rs_rkey_t *rkey);

/* Frees the cache's structures once the context (which frees the keys) is destroyed. */
void rs_bc_rcache_fini(rs_bc_peer_t *peer);

#endif
