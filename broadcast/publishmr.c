/*
 * rs_bcast_publish_mr: an object the caller already holds in registered
 * memory is served from that memory. rs_bcast_publish would copy it into a
 * region of the node's (one more pass over every byte, and a region of the
 * object's size taken from the cache or registered); here the only pass at
 * publish is the checksums, computed once for every reader.
 */
#include "broadcast/internal.h"
#include "broadcast/source.h"

#include <stdint.h>
#include <stdlib.h>

#include "broadcast/blocks.h"
#include "common/log.h"

rs_ctx_t *rs_bcast_node_context(rs_bcast_node_t *node)
{
    return node != NULL ? node->ctx : NULL;
}

rs_status_t rs_bcast_publish_mr(rs_bcast_node_t *node, rs_mr_t *mr, size_t len, rs_bcast_t **bc_p)
{
    if (node == NULL || mr == NULL || bc_p == NULL || len > rs_mr_len(mr))
        return RS_ERR_INVALID;
    const rs_bcast_config_t *cfg = &node->cfg;
    if (len <= cfg->inline_max) /* it rides in the prebuilt reply: one small copy */
        return rs_bcast_publish(node, rs_mr_addr(mr), len, bc_p);
    rs_bcast_t *src;
    rs_status_t st = rs_bc_src_new(node, len, &src);
    if (st != RS_OK)
        return st;
    src->mr = mr;
    src->user_mr = 1;
    src->data = rs_mr_addr(mr);
    st = rs_mr_pack_rkey(mr, src->rkey, sizeof(src->rkey), &src->rkey_len);
    if (st != RS_OK) {
        rs_error("broadcast: cannot publish a region whose key does not pack: %s", rs_strerror(st));
        goto err_free_src;
    }
    pthread_mutex_lock(&node->lock);
    src->seq = node->next_seq++;
    rs_list_add_tail(&node->sources, &src->link);
    pthread_mutex_unlock(&node->lock);
    st = rs_bcast_seal(src); /* the checksums, once */
    if (st != RS_OK) {
        rs_bcast_destroy(src);
        return st;
    }
    *bc_p = src;
    return RS_OK;

err_free_src:
    rs_bc_src_free_new(src);
    return st;
}
