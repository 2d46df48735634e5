/* Published objects: create, seal, describe, destroy, and free them. */
#include "broadcast/internal.h"
#include "broadcast/source.h"
#include "broadcast/entry.h"

#include <stdlib.h>
#include <string.h>

#include "broadcast/blocks.h"
#include "common/clock.h"
#include "common/log.h"

rs_status_t rs_bc_src_new(rs_bcast_node_t *node, size_t len, rs_bcast_t **src_p)
{
    const rs_bcast_config_t *cfg = &node->cfg;
    if ((uint64_t)len > (uint64_t)RS_BCAST_BLOCKS_MAX * cfg->block_size) {
        rs_error("broadcast: an object of %zu bytes needs more than %u blocks of %llu bytes", len,
                 RS_BCAST_BLOCKS_MAX, (unsigned long long)cfg->block_size);
        return RS_ERR_INVALID;
    }
    rs_bcast_t *src = calloc(1, sizeof(*src));
    if (src == NULL) {
        rs_error("out of memory allocating a broadcast object");
        return RS_ERR_NOMEM;
    }
    src->node = node;
    src->size = len;
    src->block_size = (uint32_t)cfg->block_size;
    src->nblocks = rs_bc_nblocks(len, src->block_size);
    src->is_inline = len <= cfg->inline_max;
    src->perm_seed = rs_bc_random64();
    src->state = RS_BSRC_OPEN;
    rs_list_init(&src->parked);
    pthread_mutex_init(&src->lock, NULL);
    src->sums = calloc(src->nblocks > 0 ? src->nblocks : 1, sizeof(uint64_t));
    if (src->sums == NULL) {
        rs_error("out of memory allocating a broadcast object");
        rs_bc_src_free_new(src);
        return RS_ERR_NOMEM;
    }
    *src_p = src;
    return RS_OK;
}

void rs_bc_src_free_new(rs_bcast_t *src)
{
    pthread_mutex_destroy(&src->lock);
    free(src->sums);
    free(src);
}

rs_status_t rs_bcast_create(rs_bcast_node_t *node, size_t len, rs_bcast_t **bc_p)
{
    if (node == NULL || bc_p == NULL)
        return RS_ERR_INVALID;
    rs_bcast_t *src;
    rs_status_t st = rs_bc_src_new(node, len, &src);
    if (st != RS_OK)
        return st;
    if (src->is_inline) {
        /* The reply is prebuilt in place: metadata, then the object at its aligned offset. */
        size_t doff = rs_bc_reply_data_off(rs_bc_reply_meta_len(src->nblocks));
        st = rs_mem_alloc(node->ctx, doff + len, RS_MEM_LOCAL, &src->mr);
        if (st != RS_OK)
            goto err_free_src;
        src->data = (uint8_t *)rs_mr_addr(src->mr) + doff;
    } else {
        st = rs_bc_region_get(node, len, &src->mr, src->rkey, &src->rkey_len);
        if (st != RS_OK)
            goto err_free_src;
        src->data = rs_mr_addr(src->mr);
    }
    pthread_mutex_lock(&node->lock);
    src->seq = node->next_seq++;
    rs_list_add_tail(&node->sources, &src->link);
    pthread_mutex_unlock(&node->lock);
    *bc_p = src;
    return RS_OK;

err_free_src:
    rs_bc_src_free_new(src);
    return st;
}

void *rs_bcast_buffer(rs_bcast_t *bc)
{
    if (bc == NULL)
        return NULL;
    return bc->state == RS_BSRC_OPEN && bc->size > 0 ? bc->data : NULL;
}

rs_status_t rs_bcast_seal(rs_bcast_t *src)
{
    if (src == NULL)
        return RS_ERR_INVALID;
    pthread_mutex_lock(&src->lock);
    if (src->state != RS_BSRC_OPEN) {
        pthread_mutex_unlock(&src->lock);
        rs_error("broadcast: rs_bcast_seal on an object already sealed or destroyed");
        return RS_ERR_STATE;
    }
    for (uint32_t i = 0; i < src->nblocks; i++)
        src->sums[i] = rs_bc_block_sum(src->data + rs_bc_block_off(i, src->block_size),
                                       rs_bc_block_len(i, src->size, src->block_size), i);
    if (src->is_inline) {
        rs_bc_reply_t hdr;
        rs_bc_reply_enc_t enc;
        memset(&hdr, 0, sizeof(hdr));
        hdr.kind = RS_BREQ_GET;
        hdr.node_id = src->node->node_id;
        hdr.seq = src->seq;
        hdr.size = src->size;
        hdr.block_size = src->block_size;
        hdr.nblocks = src->nblocks;
        hdr.flags = RS_BREPLY_F_INLINE | RS_BREPLY_F_SUMS;
        uint8_t *base = rs_mr_addr(src->mr);
        rs_bc_reply_begin(&enc, base, (size_t)(src->data - base) + src->size, &hdr);
        rs_bc_reply_put_sums(&enc, src->sums, src->nblocks);
        rs_status_t st = rs_bc_reply_finish(&enc, NULL, src->size, &src->reply_len);
        if (st != RS_OK) { /* the region was sized for exactly this */
            pthread_mutex_unlock(&src->lock);
            rs_error("broadcast: inline reply does not fit its region");
            return st;
        }
    }
    pthread_mutex_lock(&src->node->lock); /* lookups read the state under the table lock */
    src->state = RS_BSRC_SEALED;
    pthread_mutex_unlock(&src->node->lock);
    pthread_mutex_unlock(&src->lock);
    return RS_OK;
}

rs_status_t rs_bcast_publish(rs_bcast_node_t *node, const void *data, size_t len, rs_bcast_t **bc_p)
{
    rs_bcast_t *src;
    if (node == NULL || bc_p == NULL || (data == NULL && len > 0))
        return RS_ERR_INVALID;
    rs_status_t st = rs_bcast_create(node, len, &src);
    if (st != RS_OK)
        return st;
    if (len > 0)
        memcpy(rs_bcast_buffer(src), data, len);
    st = rs_bcast_seal(src);
    if (st != RS_OK) {
        rs_bcast_destroy(src);
        return st;
    }
    *bc_p = src;
    return RS_OK;
}

rs_status_t rs_bcast_descriptor(const rs_bcast_t *src, void *buf, size_t buflen, size_t *len_p)
{
    rs_bc_desc_t d;
    if (src == NULL || (buf == NULL && buflen > 0) || len_p == NULL)
        return RS_ERR_INVALID;
    if (src->state != RS_BSRC_SEALED) {
        rs_error("broadcast: a descriptor needs a sealed object");
        return RS_ERR_STATE;
    }
    memset(&d, 0, sizeof(d));
    d.node_id = src->node->node_id;
    d.seq = src->seq;
    d.size = src->size;
    d.block_size = src->block_size;
    d.nblocks = src->nblocks;
    d.flags = src->is_inline ? RS_BDESC_F_INLINE : 0;
    d.src = src->node->self.a;
    if (src->is_inline && src->size > 0 && src->size <= src->node->cfg.embed_max) {
        d.flags |= RS_BDESC_F_EMBED;
        d.embed = src->data;
        if (rs_bc_desc_len(&d) > RS_BCAST_DESC_MAX) /* a long address: the object stays out */
            d.flags &= ~(uint32_t)RS_BDESC_F_EMBED;
    }
    if (!src->is_inline && src->nblocks == 1 && !src->user_mr && src->rkey_len > 0) {
        /* One block: readers read it straight from its region, no request (fetch.c). */
        d.flags |= RS_BDESC_F_DIRECT;
        d.rkey = (rs_bc_view_t){.p = src->rkey, .len = (uint32_t)src->rkey_len};
        d.sum = src->sums[0];
        if (rs_bc_desc_len(&d) > RS_BCAST_DESC_MAX)
            d.flags &= ~(uint32_t)RS_BDESC_F_DIRECT;
    }
    size_t need = rs_bc_desc_len(&d);
    if (buflen < need) {
        rs_debug("broadcast: a descriptor of %zu bytes, a buffer of %zu", need, buflen);
        *len_p = need; /* the size to ask again with (rs_bcast_descriptor's one exception) */
        return RS_ERR_NO_SPACE;
    }
    return rs_bc_desc_encode(&d, buf, buflen, len_p);
}

void rs_bcast_source_stats(const rs_bcast_t *src, rs_bcast_stats_t *stats)
{
    if (src == NULL || stats == NULL)
        return;
    const uint64_t *from = (const uint64_t *)&src->stats;
    uint64_t *to = (uint64_t *)stats;
    for (size_t i = 0; i < sizeof(*stats) / sizeof(uint64_t); i++)
        to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

static void destroy_sent(void *arg, rs_status_t status)
{
    rs_bcast_node_t *node = arg;
    (void)status; /* best effort: a holder that missed it learns from the source */
    __atomic_fetch_sub(&node->sends, 1, __ATOMIC_RELEASE);
}

void rs_bcast_destroy(rs_bcast_t *src)
{
    if (src == NULL)
        return;
    rs_bcast_node_t *node = src->node;
    uint8_t msg[RS_BDESTROY_LEN];
    rs_bc_destroy_encode(node->node_id, src->seq, msg);

    /* Answer RS_ERR_DESTROYED from now on, and collect every reader to tell. */
    pthread_mutex_lock(&src->lock);
    pthread_mutex_lock(&node->lock);
    src->state = RS_BSRC_DESTROYED;
    pthread_mutex_unlock(&node->lock);
    /* A direct read (a one-block descriptor, fetch.c) of it must fail its checksum from now on. */
    if (!src->is_inline && !src->user_mr && src->nblocks == 1 && src->size > 0)
        src->data[0] ^= 0xff;
    uint32_t n = 0;
    rs_ep_t **eps = calloc(src->n_readers + 1u, sizeof(*eps));
    for (uint32_t i = 0; eps != NULL && i < src->n_readers; i++)
        if (!RS_BDEAD(src->readers[i]))
            eps[n++] = src->readers[i]->ep;
    pthread_mutex_unlock(&src->lock);

    /* This process's own copy (a reader here) learns it now, not over the loopback. */
    rs_bc_entry_destroyed(node, node->node_id, src->seq);

    pthread_mutex_lock(&node->lock);
    rs_list_del(&src->link);
    /* Inline objects are never read remotely; larger ones retire through the region cache. */
    src->free_after_ns = rs_now_ns();
    rs_list_add_tail(&node->retired_srcs, &src->link);
    pthread_mutex_unlock(&node->lock);

    for (uint32_t i = 0; i < n; i++) {
        __atomic_fetch_add(&node->sends, 1, __ATOMIC_ACQUIRE);
        if (rs_msg_send(eps[i], RS_BMSG_DESTROY, msg, sizeof(msg), destroy_sent, node) != RS_OK)
            __atomic_fetch_sub(&node->sends, 1, __ATOMIC_RELEASE);
    }
    free(eps);
    /* Its region back in the cache now, for the next object (else a new one, faulted in). */
    rs_bc_src_reap(node, rs_now_ns(), 0);
}
