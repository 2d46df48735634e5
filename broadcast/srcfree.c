/*
 * Freeing retired objects: once their grace passed and nothing uses them,
 * their long polls are answered, their region goes back to the cache.
 */
#include "broadcast/internal.h"
#include "broadcast/source.h"

#include <stdlib.h>

void rs_bc_src_reap(rs_bcast_node_t *node, uint64_t now, int force)
{
    rs_list_t *pos, *tmp, done;
    rs_list_init(&done);
    pthread_mutex_lock(&node->lock);
    if (force) {
        /* Objects never destroyed by the user die with the node. */
        rs_list_for_each_safe(pos, tmp, &node->sources)
        {
            rs_list_del(pos);
            rs_list_add_tail(&node->retired_srcs, pos);
        }
    }
    rs_list_for_each_safe(pos, tmp, &node->retired_srcs)
    {
        rs_bcast_t *src = RS_CONTAINER_OF(pos, rs_bcast_t, link);
        if (force || (now >= src->free_after_ns && src->busy == 0)) {
            rs_list_del(pos);
            rs_list_add_tail(&done, pos);
        }
    }
    pthread_mutex_unlock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &done)
    {
        rs_bcast_t *src = RS_CONTAINER_OF(pos, rs_bcast_t, link);
        rs_list_del(pos);
        if (!force) {
            rs_bc_src_park_release(node, src, 0, 1, NULL, RS_ERR_DESTROYED);
            if (src->is_inline)
                rs_mem_free(src->mr);
            else if (!src->user_mr)
                rs_bc_region_put(node, src->mr, src->rkey, src->rkey_len);
        }
        rs_list_t *ppos, *ptmp;
        rs_list_for_each_safe(ppos, ptmp, &src->parked)
        {
            rs_list_del(ppos);
            free(RS_CONTAINER_OF(ppos, rs_bc_parked_t, link));
        }
        for (uint32_t i = 0; i < src->n_holders; i++)
            rs_bc_src_holder_free(src->holders[i]);
        free(src->holders);
        free(src->readers);
        free(src->perm_pos);
        free(src->sums);
        pthread_mutex_destroy(&src->lock);
        free(src);
    }
}
