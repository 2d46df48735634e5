/* A getter's requests to the source: manifest, long-poll update, announcements. */
#include "broadcast/fetch.h"
#include "broadcast/entry.h"

#include <stdlib.h>
#include <string.h>

#include "broadcast/blocks.h"
#include "common/clock.h"
#include "common/log.h"

/* Encodes q into a new message for the source (*msg_p: free it). */
static rs_status_t req_encode(const rs_bcast_node_t *node, const rs_bc_req_t *q, uint8_t **msg_p,
                              size_t *len_p)
{
    size_t len = rs_bc_req_len(q);
    if (len > node->msg_max)
        return RS_ERR_MSG_SIZE;
    uint8_t *msg = malloc(len);
    if (msg == NULL)
        return RS_ERR_NOMEM;
    rs_status_t st = rs_bc_req_encode(q, msg, len, len_p);
    if (st != RS_OK) {
        free(msg);
        return st;
    }
    *msg_p = msg;
    return RS_OK;
}

/* Sends a request whose reply lands in a fresh slot of need bytes (getter thread). */
static rs_status_t request_send(rs_bc_entry_t *e, rs_bc_req_t *q, size_t need)
{
    rs_bcast_node_t *node = e->node;
    rs_bc_pending_t *pend = calloc(1, sizeof(*pend));
    rs_bc_slot_t *slot = NULL;
    uint8_t *msg = NULL;
    size_t len;
    rs_status_t st = RS_ERR_NOMEM;

    if (pend == NULL)
        goto err_free;
    st = rs_bc_slots_get(&node->replies, need, &slot);
    if (st != RS_OK)
        goto err_free;
    q->req_id = rs_bc_node_req_id(node);
    q->reply_off = slot->off;
    q->reply_cap = (uint32_t)(slot->cap < UINT32_MAX ? slot->cap : UINT32_MAX);
    q->reply_rkey.p = slot->slab->rkey;
    q->reply_rkey.len = (uint32_t)slot->slab->rkey_len;
    st = req_encode(node, q, &msg, &len);
    if (st != RS_OK)
        goto err_put_slot;

    pend->req_id = q->req_id;
    pend->kind = q->kind;
    pend->entry = e;
    pend->slot = slot;
    pend->peer = e->src_peer;
    /* A long poll may rest at the source for RS_BPOLL_MS before its answer leaves. */
    pend->deadline_ns = rs_now_ns() + RS_MS_TO_NS(node->peer_timeout_ms) +
                        ((q->flags & RS_BREQ_F_WAIT) ? RS_MS_TO_NS(RS_BPOLL_MS) : 0);
    pthread_mutex_lock(&e->lock);
    ESTAT(e, round_trips, 1);
    pthread_mutex_unlock(&e->lock);
    pthread_mutex_lock(&node->lock);
    e->refs++; /* the request's reference, dropped with its reply */
    rs_list_add_tail(&node->pending, &pend->link);
    pthread_mutex_unlock(&node->lock);

    st = rs_msg_send(e->src_peer->ep, RS_BMSG_REQ, msg, len, NULL, NULL);
    if (st != RS_OK) {
        /* The reply cannot come; unless a dead-peer sweep took the record already. */
        int mine = 0;
        pthread_mutex_lock(&node->lock);
        rs_list_t *pos, *tmp;
        rs_list_for_each_safe(pos, tmp, &node->pending)
        {
            if (pos == &pend->link) {
                rs_list_del(pos);
                e->refs--;
                mine = 1;
                break;
            }
        }
        pthread_mutex_unlock(&node->lock);
        if (!mine) {
            free(msg);
            return RS_OK; /* the dead-peer sweep took the record: its error answers it */
        }
        goto err_put_slot;
    }
    free(msg);
    return RS_OK;

err_put_slot:
    rs_bc_slots_put(&node->replies, slot);
err_free:
    free(msg);
    free(pend);
    return st;
}

/* A request about entry e; as a holder, it names us and the key to our copy. */
static void req_init(rs_bc_entry_t *e, rs_bc_req_t *q, uint8_t kind, uint16_t flags)
{
    memset(q, 0, sizeof(*q));
    q->kind = kind;
    q->flags = flags;
    q->nblocks = e->nblocks;
    q->node_id = e->node_id;
    q->seq = e->seq;
    if (flags & RS_BREQ_F_HOLDER) {
        q->holder_addr = e->node->self.a;
        q->holder_rkey.p = e->rkey;
        q->holder_rkey.len = (uint32_t)e->rkey_len;
    }
}

/* The first request: the manifest (or the whole inline object). */
rs_status_t rs_bc_fetch_send_get(rs_bc_entry_t *e)
{
    rs_bcast_node_t *node = e->node;
    int connected = 0, holder = 0;
    rs_bc_req_t q;
    size_t need;

    rs_status_t st = rs_bc_peer_connect(node, e->src_peer, &connected);
    if (st != RS_OK)
        return st;
    if (!e->is_inline) {
        /* A direct read that outlived its getter left its region (done now, see plan.c). */
        if (e->mr == NULL)
            st = rs_bc_region_get(node, e->size, &e->mr, e->rkey, &e->rkey_len);
        if (st != RS_OK)
            return st;
        e->data = rs_mr_addr(e->mr);
        holder = node->cfg.mode == RS_BCAST_TORRENT;
    }
    req_init(e, &q, RS_BREQ_GET, holder ? RS_BREQ_F_HOLDER : 0);
    need = e->is_inline ? rs_bc_reply_data_off(rs_bc_reply_meta_len(e->nblocks)) + e->size
                        : rs_bc_reply_meta_len(e->nblocks) + RS_BREPLY_HOLDER_BUDGET;
    pthread_mutex_lock(&e->lock);
    if (connected)
        ESTAT(e, connects, 1);
    e->ops++;
    e->req_inflight = 1;
    pthread_mutex_unlock(&e->lock);
    st = request_send(e, &q, need);
    if (st != RS_OK) {
        pthread_mutex_lock(&e->lock);
        e->ops--;
        e->req_inflight = 0;
        pthread_mutex_unlock(&e->lock);
    }
    return st;
}

/* A long poll: the holders the source knows, once they changed since our last reply. */
void rs_bc_fetch_send_update(rs_bc_entry_t *e)
{
    rs_bc_req_t q;
    req_init(e, &q, RS_BREQ_UPDATE, RS_BREQ_F_HOLDER | RS_BREQ_F_WAIT);
    pthread_mutex_lock(&e->lock);
    q.known = e->version;
    e->ops++;
    pthread_mutex_unlock(&e->lock);
    rs_status_t st = request_send(
        e, &q, rs_bc_reply_meta_len(0) + RS_BREPLY_ACTIVE_BUDGET + RS_BREPLY_HOLDER_BUDGET);
    if (st != RS_OK) {
        /* No news can come: stop waiting for it and take what is missing from the source. */
        pthread_mutex_lock(&e->lock);
        e->ops--;
        e->req_inflight = 0;
        e->src_open = 1;
        pthread_mutex_unlock(&e->lock);
    }
}

/*
 * A one-way announcement: the blocks we hold (bitmap), or that we hold them
 * all (bitmap NULL) with what the fetch cost. Best effort: a lost one only
 * means fewer readers learn about this copy.
 */
void rs_bc_fetch_send_announce(rs_bc_entry_t *e, const uint8_t *bitmap)
{
    rs_bcast_node_t *node = e->node;
    rs_bc_req_t q;
    uint8_t *msg = NULL;
    size_t len;
    req_init(e, &q, RS_BREQ_ANNOUNCE,
             RS_BREQ_F_HOLDER |
                 (bitmap != NULL ? RS_BREQ_F_BITMAP | RS_BREQ_F_CLAIMS : RS_BREQ_F_COMPLETE));
    q.bitmap.p = bitmap;
    q.bitmap.len = (uint32_t)rs_bc_map_bytes(e->nblocks);
    q.claims.p = bitmap != NULL ? bitmap + q.bitmap.len : NULL;
    q.claims.len = q.bitmap.len;
    pthread_mutex_lock(&e->lock);
    q.source_reads = (uint32_t)e->stats.source_reads;
    q.holder_reads = (uint32_t)e->stats.holder_reads;
    pthread_mutex_unlock(&e->lock);
    if (req_encode(node, &q, &msg, &len) != RS_OK)
        return;
    rs_status_t st = rs_msg_send(e->src_peer->ep, RS_BMSG_REQ, msg, len, NULL, NULL);
    free(msg);
    if (st != RS_OK)
        return;
    pthread_mutex_lock(&e->lock);
    ESTAT(e, messages, 1);
    pthread_mutex_unlock(&e->lock);
}
