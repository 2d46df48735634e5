/*
 * Tombstones: the (node id, number) of objects destroyed lately, so a
 * descriptor that arrives after its object's destroy notice is refused.
 */
#include "broadcast/internal.h"

void rs_bc_node_tomb_add(rs_bcast_node_t *node, uint64_t node_id, uint64_t seq)
{
    uint32_t i = node->n_tombs++ % RS_BTOMBS;
    node->tombs[i][0] = node_id;
    node->tombs[i][1] = seq;
}

int rs_bc_node_tomb_has(const rs_bcast_node_t *node, uint64_t node_id, uint64_t seq)
{
    uint32_t n = node->n_tombs < RS_BTOMBS ? node->n_tombs : RS_BTOMBS;
    for (uint32_t i = 0; i < n; i++)
        if (node->tombs[i][0] == node_id && node->tombs[i][1] == seq)
            return 1;
    return 0;
}
