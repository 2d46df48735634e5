/*
 * rs_bcast_get: the fetch loop every getter of an object runs. Under the
 * entry's lock a getter plans (claims blocks to read or verify, a holder to
 * connect to, a request to send), then unlocks and does it; completions
 * (from the service thread) only move block states and wake getters. So
 * concurrent getters of one object split its work per block, and getters of
 * different objects never share a lock around a fetch.
 */
#include "broadcast/internal.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "broadcast/blocks.h"
#include "broadcast/getwait.h"
#include "broadcast/rcache.h"
#include "common/clock.h"
#include "common/log.h"

#define RS_BREADS_BATCH 32 /* reads planned per round */

typedef struct rs_bc_act {
    int send_get;
    int send_update;   /* a long poll for news about other holders */
    int send_announce; /* blocks verified since the last announcement (bitmap below) */
    int send_complete; /* the final announcement */
    int verify;
    uint32_t vblock;
    rs_bc_holder_t *prepare;
    uint32_t n_reads;
    uint32_t rblock[RS_BREADS_BATCH];
    rs_bc_holder_t *rholder[RS_BREADS_BATCH];
    uint8_t *bitmap; /* snapshot for an update */
} rs_bc_act_t;

static int act_empty(const rs_bc_act_t *a)
{
    return !a->send_get && !a->send_update && !a->send_announce && !a->send_complete &&
           !a->verify && a->prepare == NULL && a->n_reads == 0;
}

static void stat_add(rs_bc_entry_t *e, size_t field_off, uint64_t v)
{
    /* Entry counters under e->lock by the callers that hold it; node totals atomically. */
    RS_BSTAT_ADD(*(uint64_t *)((char *)&e->node->stats + field_off), v);
}

#define ESTAT(e, field, v)                                     \
    do {                                                       \
        (e)->stats.field += (v);                               \
        stat_add((e), offsetof(rs_bcast_stats_t, field), (v)); \
    } while (0)

/* ------------------------------------------------------------ completions */

static void read_done(void *arg, rs_status_t status)
{
    rs_bc_block_t *b = arg;
    rs_bc_entry_t *e = b->entry;
    pthread_mutex_lock(&e->lock);
    rs_bc_holder_t *h = e->holders[b->holder];
    rs_bc_peer_t *peer = h->peer; /* outlives e, which may be freed once ops reaches 0 */
    e->ops--;
    e->reads_inflight--;
    if (h->is_source)
        e->source_inflight--;
    if (status == RS_OK) {
        uint64_t now = rs_now_ns(), took = now - b->posted_ns;
        b->state = RS_BLK_LANDED;
        e->progress_ns = now;
        e->read_ns = e->read_ns == 0 ? took : (3 * e->read_ns + took) / 4;
        e->landed[e->n_landed++] = b->index;
        ESTAT(e, bytes_read, rs_bc_block_len(b->index, e->size, e->block_size));
    } else {
        b->state = RS_BLK_MISSING;
        h->bad = 1;
        e->last_err = status;
        ESTAT(e, read_failures, 1);
        rs_debug("broadcast: read of block %u failed: %s", b->index, rs_strerror(status));
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    rs_bc_peer_put_read(peer);
}

/* -------------------------------------------------------------- planning */

/* A holder (not the source) that can serve block b now: prepared, good, below its cap. */
static int holder_can_serve(rs_bc_entry_t *e, rs_bc_holder_t *h, uint32_t b, rs_bc_act_t *a,
                            int *any)
{
    if (h->bad || !(h->complete || rs_bc_map_test(h->bitmap, b)))
        return 0;
    *any = 1;
    if (h->rkey == NULL) {
        if (!h->preparing && a->prepare == NULL) {
            h->preparing = 1;
            a->prepare = h;
        }
        return 0;
    }
    return __atomic_load_n(&h->peer->reads, __ATOMIC_RELAXED) < e->node->cfg.reads_per_ep;
}

/* Another good holder is reading block b from the source: it will serve it soon. */
static int claimed_elsewhere(const rs_bc_entry_t *e, uint32_t b)
{
    for (uint32_t i = 1; i < e->n_holders; i++) {
        const rs_bc_holder_t *h = e->holders[i];
        if (!h->bad && !h->complete && h->claims != NULL && rs_bc_map_test(h->claims, b))
            return 1;
    }
    return 0;
}

/*
 * Chooses reads (e->lock held): blocks in the entry's order; for each a
 * random holder that has it and a free read slot. The source serves a block
 * only when no other holder can, and only the blocks this reader owns (the
 * first own_count of its order) unless patience ran out: the others are
 * being fetched by the readers that own them, and come from them soon.
 */
static void plan_reads(rs_bc_entry_t *e, rs_bc_act_t *a)
{
    const rs_bcast_config_t *cfg = &e->node->cfg;
    rs_bc_holder_t *src = e->holders[0];
    int torrent = cfg->mode == RS_BCAST_TORRENT;
    uint32_t src_cap = torrent ? cfg->source_reads : cfg->reads_per_ep;
    uint64_t now = rs_now_ns();

    e->waiting = 0;
    for (uint32_t k = 0; k < e->nblocks && a->n_reads < RS_BREADS_BATCH; k++) {
        uint32_t bi = e->order[k];
        rs_bc_block_t *b = &e->blocks[bi];
        if (b->state != RS_BLK_MISSING)
            continue;
        int any = 0;
        uint32_t chosen = 0, seen = 0;
        for (uint32_t i = 1; torrent && i < e->n_holders; i++) {
            if (holder_can_serve(e, e->holders[i], bi, a, &any) &&
                rs_bc_rand_below(&e->rng, ++seen) == 0)
                chosen = i;
        }
        if (!src->bad)
            any = 1;
        if (seen == 0) {
            if (!any) {
                /* Nobody left who has it: the source is gone or failed, so no new holders. */
                rs_bc_entry_fail(e, e->last_err != RS_OK ? e->last_err : RS_ERR_UNREACHABLE);
                return;
            }
            if (src->bad)
                continue; /* a holder being prepared has it */
            /* Ours, unless another reader already reads it from the source. */
            int owned = !torrent || (k < e->own_count && !claimed_elsewhere(e, bi));
            if (!owned && !e->src_open) {
                e->waiting = 1; /* its owner (or claimer) fetches it */
                continue;
            }
            if (e->source_inflight >= src_cap)
                continue;
            if (!owned) {
                /* One block per expired patience: the owner may only be slow. */
                e->src_open = 0;
                e->progress_ns = now;
            }
            chosen = 0;
        }
        rs_bc_holder_t *h = e->holders[chosen];
        if (!rs_bc_peer_take_read(e->node, h->peer))
            continue;
        b->state = RS_BLK_READING;
        b->holder = chosen;
        b->posted_ns = now;
        e->ops++;
        e->reads_inflight++;
        if (chosen == 0) {
            e->source_inflight++;
            if (torrent && e->nblocks > 1) { /* claim it, so others wait instead of duplicating */
                rs_bc_map_set(e->claimed, bi);
                e->announce_due = 1;
            }
        }
        a->rblock[a->n_reads] = bi;
        a->rholder[a->n_reads++] = h;
    }
}

/* Snapshots of the held and claimed bitmaps, back to back (e->lock held); NULL: no memory. */
static uint8_t *bitmap_copy(const rs_bc_entry_t *e)
{
    size_t n = rs_bc_map_bytes(e->nblocks);
    uint8_t *m = malloc(2 * n + 1);
    if (m != NULL) {
        memcpy(m, e->bitmap, n);
        memcpy(m + n, e->claimed, n);
    }
    return m;
}

/* Decides this getter's next steps (e->lock held). */
static void plan(rs_bc_entry_t *e, rs_bc_act_t *a)
{
    const rs_bcast_config_t *cfg = &e->node->cfg;
    int torrent = cfg->mode == RS_BCAST_TORRENT;
    memset(a, 0, sizeof(*a));
    if (!e->requested) {
        e->requested = 1;
        a->send_get = 1;
        return;
    }
    if (!e->have_manifest)
        return;
    if (e->n_landed > 0) {
        a->verify = 1;
        a->vblock = e->landed[--e->n_landed];
        e->blocks[a->vblock].state = RS_BLK_VERIFYING;
    }
    plan_reads(e, a);
    if (e->state != RS_BENT_FETCHING || !torrent)
        return;
    /* Announce what we verified, batched: one message per round, off the read path. */
    if (e->announce_due && e->n_done < e->nblocks && !e->source_gone) {
        a->bitmap = bitmap_copy(e);
        if (a->bitmap != NULL) {
            a->send_announce = 1;
            e->announce_due = 0;
        }
    }
    if (!e->waiting)
        return;
    /* Waiting for others' blocks: poll the source for news, bounded by our patience. */
    if (!e->req_inflight && !e->source_gone && !e->holders[0]->bad) {
        a->send_update = 1;
        e->req_inflight = 1;
    }
    uint64_t patience = RS_MS_TO_NS(cfg->patience_ms);
    if (patience < 4 * e->read_ns)
        patience = 4 * e->read_ns; /* a loaded machine: blocks take longer to come */
    if (e->reads_inflight == 0 && e->n_landed == 0 && !a->verify &&
        rs_now_ns() - e->progress_ns >= patience) {
        e->src_open = 1; /* nobody delivered in time: take one block from the source */
        ESTAT(e, source_fallbacks, 1);
        rs_debug("broadcast: patience ran out on object %llu (%u of %u blocks here)",
                 (unsigned long long)e->seq, e->n_done, e->nblocks);
        plan_reads(e, a);
    }
}

/* ------------------------------------------------------------- requests */

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
static rs_status_t send_get(rs_bc_entry_t *e)
{
    rs_bcast_node_t *node = e->node;
    int connected = 0, holder = 0;
    rs_bc_req_t q;
    size_t need;

    rs_status_t st = rs_bc_peer_connect(node, e->src_peer, &connected);
    if (st != RS_OK)
        return st;
    if (!e->is_inline) {
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
static void send_update(rs_bc_entry_t *e)
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
static void send_announce(rs_bc_entry_t *e, const uint8_t *bitmap)
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

/* -------------------------------------------------------------- executing */

/* Connects to a holder and unpacks its key; a holder that cannot be prepared is bad. */
static void prepare_holder(rs_bc_entry_t *e, rs_bc_holder_t *h)
{
    rs_bcast_node_t *node = e->node;
    rs_rkey_t *rkey = NULL;
    int connected = 0;
    rs_status_t st = RS_OK;

    if (h->peer == NULL) {
        h->peer = rs_bc_peer_get(node, &h->addr.a);
        if (h->peer == NULL)
            st = RS_ERR_NOMEM;
    }
    if (st == RS_OK)
        st = rs_bc_peer_connect(node, h->peer, &connected);
    if (st == RS_OK)
        st = rs_bc_rcache_get(node, h->peer, h->rkey_blob, h->rkey_len, &rkey);
    pthread_mutex_lock(&e->lock);
    h->preparing = 0;
    h->rkey = rkey;
    if (st != RS_OK) {
        h->bad = 1;
        e->last_err = st;
    }
    if (connected)
        ESTAT(e, connects, 1);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static void post_read(rs_bc_entry_t *e, uint32_t bi, rs_bc_holder_t *h)
{
    uint64_t off = rs_bc_block_off(bi, e->block_size);
    uint32_t len = rs_bc_block_len(bi, e->size, e->block_size);
    rs_status_t st =
        rs_get(h->peer->ep, e->data + off, len, e->mr, h->rkey, off, read_done, &e->blocks[bi]);
    pthread_mutex_lock(&e->lock);
    if (st == RS_OK) {
        ESTAT(e, reads, 1);
        if (h->is_source)
            ESTAT(e, source_reads, 1);
        else
            ESTAT(e, holder_reads, 1);
        pthread_mutex_unlock(&e->lock);
        return;
    }
    e->blocks[bi].state = RS_BLK_MISSING;
    e->ops--;
    e->reads_inflight--;
    if (h->is_source)
        e->source_inflight--;
    h->bad = 1;
    e->last_err = st;
    pthread_mutex_unlock(&e->lock);
    rs_bc_peer_put_read(h->peer);
    rs_warn("broadcast: cannot read block %u: %s", bi, rs_strerror(st));
}

/* Checksums a landed block; returns 1 when the entry just completed. */
static int verify_block(rs_bc_entry_t *e, uint32_t bi)
{
    uint64_t off = rs_bc_block_off(bi, e->block_size);
    uint32_t len = rs_bc_block_len(bi, e->size, e->block_size);
    uint64_t sum = rs_bc_block_sum(e->data + off, len, bi);
    int completed = 0;

    pthread_mutex_lock(&e->lock);
    rs_bc_block_t *b = &e->blocks[bi];
    rs_bc_holder_t *h = e->holders[b->holder];
    if (sum == e->sums[bi]) {
        b->state = RS_BLK_DONE;
        rs_bc_map_set(e->bitmap, bi);
        e->n_done++;
        e->announce_due = 1;
#ifdef RS_FAULT_INJECTION
        if (e->node->fault_corrupt && len > 0) /* this copy now serves bad bytes */
            e->data[off + len / 2] ^= 0x5a;
#endif
        if (e->n_done == e->nblocks && e->state == RS_BENT_FETCHING) {
            e->state = RS_BENT_READY;
            completed = 1;
        }
    } else {
        b->state = RS_BLK_MISSING;
        ESTAT(e, checksum_failures, 1);
        e->last_err = RS_ERR_CHECKSUM;
        /* A holder serving bad bytes is dropped; the source gets a second chance. */
        if (!h->is_source || ++b->source_fails >= 2)
            h->bad = 1;
        rs_warn("broadcast: block %u of object %llu failed its checksum (from %s)", bi,
                (unsigned long long)e->seq, h->is_source ? "the source" : "a holder");
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return completed;
}

static void execute(rs_bc_entry_t *e, rs_bc_act_t *a)
{
    if (a->send_get) {
        rs_status_t st = send_get(e);
        if (st != RS_OK) {
            pthread_mutex_lock(&e->lock);
            rs_bc_entry_fail(e, st);
            pthread_mutex_unlock(&e->lock);
        }
        return;
    }
    if (a->send_announce) /* first: claims should reach the source before our reads end */
        send_announce(e, a->bitmap);
    for (uint32_t i = 0; i < a->n_reads; i++) {
#ifdef RS_FAULT_INJECTION
        if (e->node->fault_slow) /* a slow reader: failures land mid-fetch */
            usleep(20 * 1000);
#endif
        post_read(e, a->rblock[i], a->rholder[i]);
    }
    if (a->verify && verify_block(e, a->vblock) && e->node->cfg.mode == RS_BCAST_TORRENT)
        a->send_complete = 1;
    if (a->send_complete)
        send_announce(e, NULL);
    if (a->send_update)
        send_update(e);
    if (a->prepare != NULL)
        prepare_holder(e, a->prepare);
    free(a->bitmap);
}

/* Runs the fetch until it ends or the deadline passes. */
static void direct_done(void *arg, rs_status_t status)
{
    rs_bc_entry_t *e = arg;
    pthread_mutex_lock(&e->lock);
    e->ops--;
    e->direct_status = status;
    e->direct_done = 1;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

/* Waits (driving the transport, bounded by deadline) for the direct read; e->lock held. */
static void direct_wait(rs_bc_entry_t *e, uint64_t deadline)
{
    while (!e->direct_done && rs_now_ns() < deadline) {
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

/*
 * A one-block object whose descriptor carries its region's key and checksum
 * (RS_BDESC_F_DIRECT): read the block straight from the source, no request,
 * and check it. 1: the entry is READY. 0: not tried or it failed (the source
 * destroyed the object and its region was reused or poisoned, the read
 * failed): the caller fetches as usual, which also tells a destroyed object.
 */
static int try_direct(rs_bc_entry_t *e, const rs_bc_desc_t *d, uint64_t deadline)
{
    rs_bcast_node_t *node = e->node;
    int connected = 0, ok = 0;
    rs_rkey_t *rkey = NULL;
    pthread_mutex_lock(&e->lock);
    if (e->state != RS_BENT_FETCHING || e->direct_busy || e->have_manifest || e->req_inflight ||
        e->mr != NULL || e->ops > 0) {
        pthread_mutex_unlock(&e->lock);
        return 0;
    }
    e->direct_busy = 1;
    e->direct_done = 0;
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
    int landed = e->direct_done && e->direct_status == RS_OK;
    if (!e->direct_done) { /* in flight at the deadline: the entry keeps the region past its ops */
        entry_take_region(e, mr, rk, rk_len);
        mr = NULL;
    }
    pthread_mutex_unlock(&e->lock);
    ok = landed && rs_bc_block_sum(rs_mr_addr(mr), e->size, 0) == d->sum;
out_rkey:
    rs_bc_rcache_put(e->src_peer, rkey);
out_region:
    pthread_mutex_lock(&e->lock);
    if (ok) {
        entry_take_region(e, mr, rk, rk_len);
        e->data = rs_mr_addr(mr);
        e->state = RS_BENT_READY;
        e->direct = 1;
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
    e->direct_busy = 0;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return ok;
}

static rs_status_t fetch_run(rs_bc_entry_t *e, uint64_t deadline)
{
    rs_status_t st;
    rs_bc_act_t a;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        if (e->direct_busy) { /* another getter reads it straight from the source */
            struct timespec ts = rs_ns_to_timespec(deadline);
            if (pthread_cond_timedwait(&e->cond, &e->lock, &ts) == ETIMEDOUT &&
                rs_now_ns() >= deadline) {
                st = RS_ERR_TIMEOUT;
                break;
            }
            continue;
        }
        if (e->state == RS_BENT_READY) {
            st = e->destroyed ? RS_ERR_DESTROYED : RS_OK;
            break;
        }
        if (e->state == RS_BENT_FAILED) {
            st = e->err;
            break;
        }
        uint64_t now = rs_now_ns();
        if (now >= deadline) {
            st = RS_ERR_TIMEOUT;
            break;
        }
        plan(e, &a);
        if (!act_empty(&a)) {
            pthread_mutex_unlock(&e->lock);
            execute(e, &a);
            pthread_mutex_lock(&e->lock);
            continue;
        }
        /* Wake for the deadline and for patience (waiting readers re-plan when it runs out). */
        uint64_t until = now + RS_MS_TO_NS(e->node->cfg.patience_ms + 1u);
        if (until > now + RS_MS_TO_NS(100))
            until = now + RS_MS_TO_NS(100);
        if (until > deadline)
            until = deadline;
        rs_bc_entry_wait(e, until); /* drives the transport while an answer is due */
    }
    pthread_mutex_unlock(&e->lock);
    return st;
}

/* ------------------------------------------------------------ public API */

rs_status_t rs_bcast_get(rs_bcast_node_t *node, const void *desc, size_t desc_len,
                         rs_bcast_ref_t **ref_p)
{
    rs_bc_desc_t d;
    rs_bc_entry_t *e;
    int joined;

    if (node == NULL || ref_p == NULL || desc == NULL)
        return RS_ERR_INVALID;
    uint64_t deadline = rs_now_ns() + RS_MS_TO_NS(node->cfg.timeout_ms);
    rs_status_t st = rs_bc_desc_decode(desc, desc_len, &d);
    if (st != RS_OK) {
        rs_error("broadcast: invalid descriptor of %zu bytes: %s", desc_len, rs_strerror(st));
        return st;
    }
    rs_bcast_ref_t *ref = malloc(sizeof(*ref));
    if (ref == NULL) {
        rs_error("out of memory allocating a broadcast reference");
        return RS_ERR_NOMEM;
    }
    st = rs_bc_entry_acquire(node, &d, &e, &joined);
    if (st != RS_OK) {
        free(ref);
        return st;
    }
    if ((d.flags & RS_BDESC_F_DIRECT) && !joined)
        try_direct(e, &d, deadline);
    st = fetch_run(e, deadline);
    if (st != RS_OK) {
        rs_bc_entry_unref(e);
        free(ref);
        if (st != RS_ERR_DESTROYED)
            rs_warn("broadcast: get of object %llu failed: %s", (unsigned long long)d.seq,
                    rs_strerror(st));
        return st;
    }
    pthread_mutex_lock(&e->lock);
    ESTAT(e, gets, 1);
    if (joined)
        ESTAT(e, joins, 1);
    pthread_mutex_unlock(&e->lock);
    ref->entry = e;
    *ref_p = ref;
    return RS_OK;
}

const void *rs_bcast_ref_data(const rs_bcast_ref_t *ref)
{
    if (ref == NULL)
        return NULL;
    return ref->entry->data;
}

size_t rs_bcast_ref_len(const rs_bcast_ref_t *ref)
{
    if (ref == NULL)
        return 0;
    return (size_t)ref->entry->size;
}

void rs_bcast_ref_stats(const rs_bcast_ref_t *ref, rs_bcast_stats_t *stats)
{
    if (ref == NULL || stats == NULL)
        return;
    rs_bc_entry_t *e = ref->entry;
    pthread_mutex_lock(&e->lock);
    *stats = e->stats;
    pthread_mutex_unlock(&e->lock);
}

void rs_bcast_release(rs_bcast_ref_t *ref)
{
    if (ref == NULL)
        return;
    rs_bc_entry_unref(ref->entry);
    free(ref);
}
