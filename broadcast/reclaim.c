/*
 * An object region for a new object or fetch: from the region cache
 * (regions.c), else from objects retired since the service thread's last
 * timer, else from an object kept only to serve others, else newly
 * registered. It sits above entries and sources, which it reaps and evicts,
 * so the cache itself never calls back into its users.
 */
#include "broadcast/internal.h"
#include "broadcast/source.h"
#include "broadcast/entry.h"

#include "common/clock.h"

rs_status_t rs_bc_region_get(rs_bcast_node_t *node, size_t len, rs_mr_t **mr_p, uint8_t *rkey,
                             size_t *rkey_len)
{
    if (rs_bc_region_take(node, len, mr_p, rkey, rkey_len) == RS_OK)
        return RS_OK;
    /*
     * Objects retired since the service thread's last timer hold regions
     * that are free now: a fresh region costs a registration and a fault
     * per page (more than reading 1 MiB), so take theirs first.
     */
    uint64_t now = rs_now_ns();
    rs_bc_entry_reap(node, now, 0);
    rs_bc_src_reap(node, now, 0);
    if (rs_bc_region_take(node, len, mr_p, rkey, rkey_len) == RS_OK)
        return RS_OK;
    /* Then an object kept only to serve others, released by its readers. */
    if (rs_bc_entry_evict(node, len)) {
        rs_bc_entry_reap(node, rs_now_ns(), 0); /* now: it retired after `now` */
        if (rs_bc_region_take(node, len, mr_p, rkey, rkey_len) == RS_OK)
            return RS_OK;
    }
    return rs_bc_region_new(node, len, mr_p, rkey, rkey_len);
}
