/* The direct read of a one-block object straight from its source (RS_BDESC_F_DIRECT). */
#include "broadcast/fetch.h"
#include "broadcast/entry.h"

#include <sched.h>
#include <string.h>

#include "broadcast/blocks.h"
#include "broadcast/rcache.h"
#include "common/clock.h"

static void direct_done(void *arg, rs_status_t status)
{
    rs_bc_entry_t *e = arg;
    pthread_mutex_lock(&e->lock);
    e->ops--;
    if (e->direct == RS_BDIRECT_READING) { /* else the getter gave up on it */
        e->direct_status = status;
        e->direct = RS_BDIRECT_LANDED;
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

/* Waits (driving the transport, bounded by deadline) for the direct read; e->lock held. */
static void direct_wait(rs_bc_entry_t *e, uint64_t deadline)
{
    while (e->direct == RS_BDIRECT_READING && rs_now_ns() < deadline) {
        pthread_mutex_unlock(&e->lock);
        if (rs_progress(e->node->ctx) == 0)
            sched_yield(); /* the peer's kernel copy, or its answer, may need this core */
        pthread_mutex_lock(&e->lock);
    }
}

/* The entry owns mr (and its packed key) from now on: freed with it (e->lock held). */
static void entry_take_region(rs_bc_entry_t *e, rs_mr_t *mr, const uint8_t *rk, size_t rk_len)
{
    e->mr = mr;
    memcpy(e->rkey, rk, rk_len);
    e->rkey_len = rk_len;
}

int rs_bc_fetch_direct(rs_bc_entry_t *e, const rs_bc_desc_t *d, uint64_t deadline)
{
    rs_bcast_node_t *node = e->node;
    int connected = 0, ok = 0;
    rs_rkey_t *rkey = NULL;
    pthread_mutex_lock(&e->lock);
    if (e->state != RS_BENT_FETCHING || rs_bc_direct_busy(e->direct) ||
        e->manifest == RS_BMAN_HAVE || e->req_inflight || e->mr != NULL || e->ops > 0) {
        pthread_mutex_unlock(&e->lock);
        return 0;
    }
    e->direct = RS_BDIRECT_READING;
    pthread_mutex_unlock(&e->lock);

    rs_mr_t *mr = NULL;
    uint8_t rk[RS_RKEY_BLOB_MAX];
    size_t rk_len = 0;
    if (rs_bc_peer_connect(node, e->src_peer, &connected) != RS_OK ||
        rs_bc_region_get(node, e->size, &mr, rk, &rk_len) != RS_OK)
        goto out;
    if (rs_bc_rcache_get(node, e->src_peer, d->rkey.p, d->rkey.len, &rkey) != RS_OK)
        goto out_region;
    pthread_mutex_lock(&e->lock);
    e->ops++;
    pthread_mutex_unlock(&e->lock);
    if (rs_get(e->src_peer->ep, rs_mr_addr(mr), e->size, mr, rkey, 0, direct_done, e) != RS_OK) {
        pthread_mutex_lock(&e->lock);
        e->ops--;
        pthread_mutex_unlock(&e->lock);
        goto out_rkey;
    }
    pthread_mutex_lock(&e->lock);
    direct_wait(e, deadline);
    int landed = e->direct == RS_BDIRECT_LANDED && e->direct_status == RS_OK;
    if (e->direct == RS_BDIRECT_READING) {
        /* In flight at the deadline: the read still writes the region and
         * uses the key, so the entry keeps both past its ops (entry_free). */
        entry_take_region(e, mr, rk, rk_len);
        e->direct_rkey = rkey;
        mr = NULL;
        rkey = NULL;
    }
    pthread_mutex_unlock(&e->lock);
    ok = landed && rs_bc_block_sum(rs_mr_addr(mr), e->size, 0) == d->sum;
out_rkey:
    if (rkey != NULL)
        rs_bc_rcache_put(e->src_peer, rkey);
out_region:
    pthread_mutex_lock(&e->lock);
    if (ok) {
        entry_take_region(e, mr, rk, rk_len);
        e->data = rs_mr_addr(mr);
        e->state = RS_BENT_READY;
        if (connected)
            ESTAT(e, connects, 1);
        ESTAT(e, reads, 1);
        ESTAT(e, source_reads, 1);
        ESTAT(e, bytes_read, e->size);
        mr = NULL;
    }
    pthread_mutex_unlock(&e->lock);
    if (mr != NULL)
        rs_bc_region_put(node, mr, rk, rk_len);
out:
    pthread_mutex_lock(&e->lock);
    e->direct = ok ? RS_BDIRECT_FETCHED : RS_BDIRECT_NONE;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return ok;
}
