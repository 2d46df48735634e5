/* Publishing objects and answering requests for them (the source's side). */
#include "broadcast/internal.h"

#include <stdlib.h>
#include <string.h>

#include "broadcast/blocks.h"
#include "common/clock.h"
#include "common/log.h"

#define RS_BSRC_HOLDERS_MAX 4096 /* holders registered per object */

/* A put of a reply in flight. */
typedef struct rs_bput {
    rs_bcast_node_t *node;
    rs_bcast_t *src;  /* busy reference, or NULL */
    rs_bslot_t *slot; /* staging slot, or NULL (prebuilt inline reply) */
} rs_bput_t;

static void src_unbusy(rs_bcast_node_t *node, rs_bcast_t *src)
{
    pthread_mutex_lock(&node->lock);
    src->busy--;
    pthread_mutex_unlock(&node->lock);
}

/* ------------------------------------------------------------- publishing */

rs_status_t rs_bcast_create(rs_bcast_node_t *node, size_t len, rs_bcast_t **bc_p)
{
    rs_status_t st = RS_ERR_NOMEM;

    if (node == NULL || bc_p == NULL)
        return RS_ERR_INVALID;
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
    src->nblocks = rs_bcast_nblocks(len, src->block_size);
    src->is_inline = len <= cfg->inline_max;
    src->perm_seed = rs_brandom64();
    src->state = RS_BSRC_OPEN;
    rs_list_init(&src->parked);
    pthread_mutex_init(&src->lock, NULL);
    src->sums = calloc(src->nblocks > 0 ? src->nblocks : 1, sizeof(uint64_t));
    if (src->sums == NULL) {
        rs_error("out of memory allocating a broadcast object");
        goto err_free_src;
    }
    if (src->is_inline) {
        /* The reply is prebuilt in place: metadata, then the object at its aligned offset. */
        size_t doff = rs_breply_data_off(rs_breply_meta_len(src->nblocks));
        st = rs_mem_alloc(node->ctx, doff + len, RS_MEM_LOCAL, &src->mr);
        if (st != RS_OK)
            goto err_free_src;
        src->data = (uint8_t *)rs_mr_addr(src->mr) + doff;
    } else {
        st = rs_bregion_get(node, len, &src->mr, src->rkey, &src->rkey_len);
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
    pthread_mutex_destroy(&src->lock);
    free(src->sums);
    free(src);
    return st;
}

void *rs_bcast_buffer(rs_bcast_t *bc)
{
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
        src->sums[i] = rs_bblock_sum(src->data + rs_bblock_off(i, src->block_size),
                                     rs_bblock_len(i, src->size, src->block_size), i);
    if (src->is_inline) {
        rs_breply_t hdr;
        rs_breply_enc_t enc;
        memset(&hdr, 0, sizeof(hdr));
        hdr.kind = RS_BREQ_GET;
        hdr.node_id = src->node->node_id;
        hdr.seq = src->seq;
        hdr.size = src->size;
        hdr.block_size = src->block_size;
        hdr.nblocks = src->nblocks;
        hdr.flags = RS_BREPLY_F_INLINE | RS_BREPLY_F_SUMS;
        uint8_t *base = rs_mr_addr(src->mr);
        rs_breply_begin(&enc, base, (size_t)(src->data - base) + src->size, &hdr);
        rs_breply_put_sums(&enc, src->sums, src->nblocks);
        rs_status_t st = rs_breply_finish(&enc, NULL, src->size, &src->reply_len);
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
    rs_bdesc_t d;
    if (src == NULL || buf == NULL || len_p == NULL)
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
    return rs_bdesc_encode(&d, buf, buflen, len_p);
}

void rs_bcast_source_stats(const rs_bcast_t *src, rs_bcast_stats_t *stats)
{
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
    rs_bdestroy_encode(node->node_id, src->seq, msg);

    /* Answer RS_ERR_DESTROYED from now on, and collect every reader to tell. */
    pthread_mutex_lock(&src->lock);
    pthread_mutex_lock(&node->lock);
    src->state = RS_BSRC_DESTROYED;
    pthread_mutex_unlock(&node->lock);
    uint32_t n = 0;
    rs_ep_t **eps = calloc(src->n_readers + 1u, sizeof(*eps));
    for (uint32_t i = 0; eps != NULL && i < src->n_readers; i++)
        if (!RS_BDEAD(src->readers[i]))
            eps[n++] = src->readers[i]->ep;
    pthread_mutex_unlock(&src->lock);

    /* This process's own copy (a reader here) learns it now, not over the loopback. */
    rs_bentry_destroyed(node, node->node_id, src->seq);

    pthread_mutex_lock(&node->lock);
    rs_list_del(&src->link);
    /* Inline objects are never read remotely; larger ones retire through the region cache. */
    src->free_after_ns = rs_bnow();
    rs_list_add_tail(&node->retired_srcs, &src->link);
    pthread_mutex_unlock(&node->lock);

    for (uint32_t i = 0; i < n; i++) {
        __atomic_fetch_add(&node->sends, 1, __ATOMIC_ACQUIRE);
        if (rs_msg_send(eps[i], RS_BMSG_DESTROY, msg, sizeof(msg), destroy_sent, node) != RS_OK)
            __atomic_fetch_sub(&node->sends, 1, __ATOMIC_RELEASE);
    }
    free(eps);
}

/* ------------------------------------------------------------ holders */

static void holder_free(rs_bsrc_holder_t *h)
{
    rs_baddr_release(&h->addr);
    free(h->rkey);
    free(h->bitmap);
    free(h->claims);
    free(h);
}

static int holder_find(rs_bcast_t *src, const rs_baddr_t *addr)
{
    for (uint32_t i = 0; i < src->n_holders; i++)
        if (rs_baddr_equal(&src->holders[i]->addr.a, addr))
            return (int)i;
    return -1;
}

/* The holder with this id (src->lock held). */
static rs_bsrc_holder_t *holder_by_id(rs_bcast_t *src, uint32_t id)
{
    for (uint32_t i = 0; i < src->n_holders; i++)
        if (src->holders[i]->id == id)
            return src->holders[i];
    return NULL;
}

static int holder_alive(const rs_bsrc_holder_t *h)
{
    return h->conn == NULL || !RS_BDEAD(h->conn);
}

/*
 * Where a newly registered reader starts in the shared block permutation:
 * in the middle of the longest run of blocks no active reader holds, claims
 * or starts at (src->lock held). So a newcomer lands as far as it can from
 * the blocks the others are reading now, and the share it takes from a
 * reader that has not heard of it yet is the part that reader reaches last.
 */
static uint32_t start_pick(rs_bcast_t *src)
{
    uint32_t n = src->nblocks;
    if (n < 2)
        return 0;
    if (src->perm_pos == NULL) {
        uint32_t *perm = malloc(n * sizeof(*perm));
        src->perm_pos = malloc(n * sizeof(*src->perm_pos));
        if (perm == NULL || src->perm_pos == NULL) {
            free(perm);
            free(src->perm_pos);
            src->perm_pos = NULL;
            return 0;
        }
        rs_border(src->perm_seed, 0, n, perm);
        for (uint32_t pos = 0; pos < n; pos++)
            src->perm_pos[perm[pos]] = pos;
        free(perm);
    }
    uint8_t *busy = calloc(n, 1);
    if (busy == NULL)
        return 0;
    for (uint32_t i = 0; i < src->n_holders; i++) {
        const rs_bsrc_holder_t *h = src->holders[i];
        if (!holder_alive(h))
            continue;
        if (!h->complete)
            busy[h->start] = 1;
        for (uint32_t b = 0; b < n; b++)
            if (h->complete || rs_bmap_test(h->bitmap, b) || rs_bmap_test(h->claims, b))
                busy[src->perm_pos[b]] = 1;
    }
    uint32_t start = rs_bstart_pick(busy, n);
    free(busy);
    return start;
}

/*
 * Registers a GET's requester as a holder (src->lock held). A holder already
 * known at that address is replaced under a new id: its region (and key)
 * are new.
 */
static rs_bsrc_holder_t *holder_register(rs_bcast_t *src, rs_bepinfo_t *conn, const rs_breq_t *q)
{
    int i = holder_find(src, &q->holder_addr);
    if (i >= 0) {
        holder_free(src->holders[i]);
        src->holders[i] = src->holders[--src->n_holders];
    }
    if (src->n_holders >= RS_BSRC_HOLDERS_MAX)
        return NULL;
    if (src->n_holders == src->cap_holders) {
        uint32_t cap = src->cap_holders ? 2 * src->cap_holders : 8;
        rs_bsrc_holder_t **hs = realloc(src->holders, cap * sizeof(*hs));
        if (hs == NULL)
            return NULL;
        src->holders = hs;
        src->cap_holders = cap;
    }
    rs_bsrc_holder_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->rkey = malloc(q->holder_rkey.len);
    h->bitmap = calloc(1, rs_bmap_bytes(src->nblocks) + 1);
    h->claims = calloc(1, rs_bmap_bytes(src->nblocks) + 1);
    if (h->rkey == NULL || h->bitmap == NULL || h->claims == NULL ||
        rs_baddr_copy(&h->addr, &q->holder_addr) != RS_OK) {
        free(h->rkey);
        free(h->bitmap);
        free(h->claims);
        free(h);
        return NULL;
    }
    memcpy(h->rkey, q->holder_rkey.p, q->holder_rkey.len);
    h->rkey_len = q->holder_rkey.len;
    /* ids from 1: 0 is the source */
    h->id = (uint32_t)__atomic_add_fetch(&src->stats.holders, 1, __ATOMIC_RELAXED);
    RS_BSTAT_ADD(src->node->stats.holders, 1);
    h->conn = conn;
    h->start = start_pick(src);
    src->holders[src->n_holders++] = h;
    src->version++;
    src->rversion++;
    return h;
}

/*
 * Applies an announcement to h (src->lock held); the version moves when h
 * gained blocks. gained (optional, bitmap bytes) receives the blocks h just
 * announced; returns whether there were any.
 */
static int holder_update(rs_bcast_t *src, rs_bsrc_holder_t *h, const rs_breq_t *q, uint8_t *gained)
{
    size_t nbytes = rs_bmap_bytes(src->nblocks);
    int any = 0;
    if (h->complete)
        return 0;
    if ((q->flags & RS_BREQ_F_CLAIMS) && q->nblocks == src->nblocks) {
        for (size_t i = 0; i < nbytes; i++)
            h->claims[i] |= q->claims.p[i];
    }
    if (q->flags & RS_BREQ_F_COMPLETE) {
        for (size_t i = 0; i < nbytes; i++) {
            uint8_t all = i + 1 < nbytes || src->nblocks % 8 == 0
                              ? 0xff
                              : (uint8_t)((1u << (src->nblocks % 8)) - 1);
            if (gained != NULL)
                gained[i] = (uint8_t)(all & ~h->bitmap[i]);
            h->bitmap[i] = all;
        }
        h->complete = 1;
        h->have = src->nblocks;
        src->version++;
        src->rversion++;
        return 1;
    }
    if ((q->flags & RS_BREQ_F_BITMAP) && q->nblocks == src->nblocks) {
        for (size_t i = 0; i < nbytes; i++) {
            uint8_t g = (uint8_t)(q->bitmap.p[i] & ~h->bitmap[i]);
            if (gained != NULL)
                gained[i] = g;
            h->bitmap[i] |= g;
            any |= g != 0;
        }
        if (any) {
            h->have = rs_bmap_count(h->bitmap, src->nblocks);
            src->version++;
        }
    }
    return any;
}

/* ---------------------------------------------------------------- replies */

static void put_done(void *arg, rs_status_t status)
{
    rs_bput_t *put = arg;
    if (status != RS_OK)
        rs_debug("broadcast: a reply put failed: %s", rs_strerror(status));
    if (put->slot != NULL)
        rs_bslots_put(&put->node->staging, put->slot);
    if (put->src != NULL)
        src_unbusy(put->node, put->src);
    free(put);
}

/* Writes len bytes at buf (inside mr) into the requester's reply slot, notifying req_id. */
static void reply_post(rs_bepinfo_t *info, const rs_breq_t *q, const void *buf, size_t len,
                       rs_mr_t *mr, rs_bput_t *put)
{
    rs_rkey_t *rkey;
    rs_status_t st = rs_bepinfo_rkey(info, q->reply_rkey.p, q->reply_rkey.len, &rkey);
    if (st == RS_OK)
        st = rs_put_notify(info->ep, buf, len, mr, rkey, q->reply_off, q->req_id, put_done, put);
    if (st != RS_OK) {
        rs_warn("broadcast: cannot answer request %u: %s", q->req_id, rs_strerror(st));
        put_done(put, st);
    }
}

/* Answers with only a status (destroyed, unknown, no space). */
static void reply_status(rs_bcast_node_t *node, rs_bepinfo_t *info, const rs_breq_t *q,
                         rs_status_t status)
{
    rs_bslot_t *slot;
    rs_breply_enc_t enc;
    rs_breply_t hdr;
    size_t len;
    rs_bput_t *put = calloc(1, sizeof(*put));

    if (put == NULL || rs_bslots_get(&node->staging, RS_BREPLY_MIN_LEN, &slot) != RS_OK) {
        free(put);
        return;
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.kind = q->kind;
    hdr.status = (int16_t)status;
    hdr.node_id = q->node_id;
    hdr.seq = q->seq;
    rs_breply_begin(&enc, slot->p, slot->cap, &hdr);
    rs_breply_finish(&enc, NULL, 0, &len);
    put->node = node;
    put->slot = slot;
    reply_post(info, q, slot->p, len, slot->slab->mr, put);
}

/* Lists the source, the active tickets and a random choice of holders (src->lock held). */
static void reply_lists(rs_bcast_node_t *node, rs_bcast_t *src, rs_breply_enc_t *enc,
                        uint32_t self_id, uint64_t *rng)
{
    uint32_t n = src->n_holders, listed = 0, n_active = 0;
    uint32_t *idx = malloc((n + 1u) * sizeof(*idx));
    rs_bactive_t *active = malloc((n + 1u) * sizeof(*active));
    if (idx == NULL || active == NULL) {
        free(active);
        free(idx);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const rs_bsrc_holder_t *h = src->holders[i];
        if (!h->complete && holder_alive(h)) {
            active[n_active].ticket = h->id - 1;
            active[n_active++].start = h->start;
        }
    }
    rs_breply_put_active(enc, active, n_active);
    free(active);

    rs_bholder_wire_t w;
    memset(&w, 0, sizeof(w));
    w.flags = RS_BHOLDER_F_SOURCE | RS_BHOLDER_F_COMPLETE;
    w.addr = node->self.a;
    w.rkey.p = src->rkey;
    w.rkey.len = (uint32_t)src->rkey_len;
    if (rs_breply_add_holder(enc, &w) != RS_OK)
        goto out;
    /* Partial Fisher-Yates over the holders that have something to serve. */
    for (uint32_t i = 0; i < n; i++)
        idx[i] = i;
    for (uint32_t k = 0; k < n && listed < node->cfg.holders_max; k++) {
        uint32_t j = k + rs_brand_below(rng, n - k);
        uint32_t t = idx[k];
        idx[k] = idx[j];
        idx[j] = t;
        rs_bsrc_holder_t *h = src->holders[idx[k]];
        int claims = 0;
        for (size_t i = 0; !h->complete && i < rs_bmap_bytes(src->nblocks); i++)
            claims |= (h->claims[i] & ~h->bitmap[i]) != 0;
        if (h->id == self_id || (h->have == 0 && !claims) || !holder_alive(h))
            continue; /* nothing to serve or soon to serve, or its connection to us died */
        w.id = h->id;
        w.flags = h->complete ? RS_BHOLDER_F_COMPLETE : 0;
        w.flags |= claims ? RS_BHOLDER_F_CLAIMS : 0;
        w.addr = h->addr.a;
        w.rkey.p = h->rkey;
        w.rkey.len = (uint32_t)h->rkey_len;
        w.bitmap.p = h->bitmap;
        w.bitmap.len = (uint32_t)rs_bmap_bytes(src->nblocks);
        w.claims.p = h->claims;
        w.claims.len = w.bitmap.len;
        if (rs_breply_add_holder(enc, &w) != RS_OK)
            break;
        listed++;
    }
out:
    free(idx);
}

/*
 * Builds and sends a manifest (GET) or holder update (UPDATE) for the
 * requester self_id, in a staging slot as large as the requester allows.
 * Takes a busy reference on src for the put.
 */
static void reply_manifest(rs_bcast_node_t *node, rs_bcast_t *src, rs_bepinfo_t *info,
                           const rs_breq_t *q, uint32_t self_id)
{
    rs_breply_t hdr;
    rs_breply_enc_t enc;
    size_t len = 0;
    uint64_t rng = rs_brandom64();
    size_t want =
        rs_breply_meta_len(q->kind == RS_BREQ_GET ? src->nblocks : 0) + 4 * 4096 + (16u << 10);
    size_t cap = want < q->reply_cap ? want : q->reply_cap;
    rs_bput_t *put = calloc(1, sizeof(*put));

    if (put == NULL || rs_bslots_get(&node->staging, cap, &put->slot) != RS_OK) {
        free(put);
        return;
    }
    put->node = node;
    put->src = src;
    pthread_mutex_lock(&node->lock);
    src->busy++;
    pthread_mutex_unlock(&node->lock);

    memset(&hdr, 0, sizeof(hdr));
    hdr.kind = q->kind;
    hdr.node_id = node->node_id;
    hdr.seq = src->seq;
    hdr.size = src->size;
    hdr.block_size = src->block_size;
    hdr.nblocks = src->nblocks;
    hdr.flags = q->kind == RS_BREQ_GET ? RS_BREPLY_F_SUMS : 0;
    hdr.perm_seed = src->perm_seed;
    hdr.ticket = self_id != 0 ? self_id - 1 : 0;
    /* Readers that do not share (source mode) start anywhere. */
    hdr.start = src->nblocks > 0 ? rs_brand_below(&rng, src->nblocks) : 0;
    pthread_mutex_lock(&src->lock);
    hdr.version = src->version;
    hdr.rversion = src->rversion;
    rs_bsrc_holder_t *self = self_id != 0 ? holder_by_id(src, self_id) : NULL;
    if (self != NULL)
        hdr.start = self->start;
    for (uint32_t i = 0; i < src->n_holders; i++) {
        const rs_bsrc_holder_t *h = src->holders[i];
        if (h->id != self_id && !h->complete && holder_alive(h))
            hdr.active++;
    }
    rs_breply_begin(&enc, put->slot->p, cap, &hdr);
    if (q->kind == RS_BREQ_GET)
        rs_breply_put_sums(&enc, src->sums, src->nblocks);
    reply_lists(node, src, &enc, self_id, &rng);
    rs_status_t st = rs_breply_finish(&enc, NULL, 0, &len);
    pthread_mutex_unlock(&src->lock);
    if (st != RS_OK) {
        put_done(put, st);
        reply_status(node, info, q, RS_ERR_NO_SPACE);
        return;
    }
    reply_post(info, q, put->slot->p, len, put->slot->slab->mr, put);
}

/* ---------------------------------------------------------------- long polls */

static rs_bparked_t *park_new(rs_bepinfo_t *info, const rs_breq_t *q, uint32_t self_id,
                              uint64_t deadline)
{
    rs_bparked_t *p = malloc(sizeof(*p) + q->reply_rkey.len);
    if (p == NULL)
        return NULL;
    p->info = info;
    p->req_id = q->req_id;
    p->self_id = self_id;
    p->reply_off = q->reply_off;
    p->reply_cap = q->reply_cap;
    p->deadline_ns = deadline;
    p->rkey_len = q->reply_rkey.len;
    memcpy(p->rkey, q->reply_rkey.p, q->reply_rkey.len);
    return p;
}

/* The request a parked poll stood for (views into p). */
static void park_req(const rs_bcast_t *src, const rs_bparked_t *p, rs_breq_t *q)
{
    memset(q, 0, sizeof(*q));
    q->kind = RS_BREQ_UPDATE;
    q->req_id = p->req_id;
    q->node_id = src->node->node_id;
    q->seq = src->seq;
    q->reply_off = p->reply_off;
    q->reply_cap = p->reply_cap;
    q->reply_rkey.p = p->rkey;
    q->reply_rkey.len = (uint32_t)p->rkey_len;
}

/* Whether blocks someone just announced (gained) include one the poller lacks (src->lock held). */
static int park_wants(rs_bcast_t *src, const rs_bparked_t *p, const uint8_t *gained)
{
    const rs_bsrc_holder_t *poller = holder_by_id(src, p->self_id);
    if (poller == NULL)
        return 1;
    for (size_t i = 0; i < rs_bmap_bytes(src->nblocks); i++)
        if (gained[i] & ~poller->bitmap[i])
            return 1;
    return 0;
}

/*
 * Answers the parked polls of src that are due: those whose deadline passed,
 * those gained brings news for (when given), or all (all). status != OK:
 * only that status.
 */
static void park_release(rs_bcast_node_t *node, rs_bcast_t *src, uint64_t now, int all,
                         const uint8_t *gained, rs_status_t status)
{
    rs_list_t due, *pos, *tmp;
    rs_list_init(&due);
    pthread_mutex_lock(&src->lock);
    rs_list_for_each_safe(pos, tmp, &src->parked)
    {
        rs_bparked_t *p = RS_CONTAINER_OF(pos, rs_bparked_t, link);
        if (all || now >= p->deadline_ns || (gained != NULL && park_wants(src, p, gained))) {
            rs_list_del(pos);
            rs_list_add_tail(&due, pos);
        }
    }
    pthread_mutex_unlock(&src->lock);
    rs_list_for_each_safe(pos, tmp, &due)
    {
        rs_bparked_t *p = RS_CONTAINER_OF(pos, rs_bparked_t, link);
        rs_breq_t q;
        rs_list_del(pos);
        park_req(src, p, &q);
        if (RS_BDEAD(p->info))
            ; /* nobody to answer */
        else if (status != RS_OK)
            reply_status(node, p->info, &q, status);
        else
            reply_manifest(node, src, p->info, &q, p->self_id);
        free(p);
    }
}

/* Remembers an endpoint that asked for the manifest (src->lock held). */
static void reader_note(rs_bcast_t *src, rs_bepinfo_t *info)
{
    for (uint32_t i = 0; i < src->n_readers; i++)
        if (src->readers[i] == info)
            return;
    if (src->n_readers == src->cap_readers) {
        uint32_t cap = src->cap_readers ? 2 * src->cap_readers : 8;
        rs_bepinfo_t **r = realloc(src->readers, cap * sizeof(*r));
        if (r == NULL)
            return; /* that reader then learns of a destroy from the source itself */
        src->readers = r;
        src->cap_readers = cap;
    }
    src->readers[src->n_readers++] = info;
}

/* ---------------------------------------------------------------- news */

/*
 * Tells every active reader of src (but skip_id) which readers are active
 * now, so each reads from the source only its own share. One-way.
 */
static void news_send(rs_bcast_node_t *node, rs_bcast_t *src, uint32_t skip_id)
{
    uint32_t n = 0, n_eps = 0, rversion;
    rs_bactive_t *active = NULL;
    rs_ep_t **eps = NULL;
    uint8_t *msg = NULL;
    size_t len;

    pthread_mutex_lock(&src->lock);
    active = malloc((src->n_holders + 1u) * sizeof(*active));
    eps = malloc((src->n_holders + 1u) * sizeof(*eps));
    for (uint32_t i = 0; active != NULL && eps != NULL && i < src->n_holders; i++) {
        const rs_bsrc_holder_t *h = src->holders[i];
        if (h->complete || !holder_alive(h))
            continue;
        active[n].ticket = h->id - 1;
        active[n++].start = h->start;
        if (h->id != skip_id && h->conn != NULL)
            eps[n_eps++] = h->conn->ep;
    }
    rversion = src->rversion;
    pthread_mutex_unlock(&src->lock);
    msg = malloc(node->msg_max);
    if (active == NULL || eps == NULL || msg == NULL ||
        rs_bnews_encode(node->node_id, src->seq, rversion, active, n, msg, node->msg_max, &len) !=
            RS_OK)
        n_eps = 0;
    for (uint32_t i = 0; i < n_eps; i++)
        rs_msg_send(eps[i], RS_BMSG_NEWS, msg, len, NULL, NULL); /* best effort */
    free(msg);
    free(eps);
    free(active);
}

/* ---------------------------------------------------------------- serving */

/*
 * Answers a GET for an inline object with one notified put straight from its
 * prebuilt reply (zero copy, nothing allocated but the put's small record).
 * Returns 0 when the requester's slot is too small (or out of memory).
 */
static int serve_inline(rs_bcast_node_t *node, rs_bepinfo_t *info, rs_bcast_t *src,
                        const rs_breq_t *q)
{
    rs_bput_t *put;
    if (src->reply_len > q->reply_cap || (put = calloc(1, sizeof(*put))) == NULL)
        return 0;
    RS_BSTAT_ADD(src->stats.requests_served, 1);
    RS_BSTAT_ADD(node->stats.requests_served, 1);
    pthread_mutex_lock(&src->lock);
    reader_note(src, info);
    pthread_mutex_unlock(&src->lock);
    put->node = node;
    put->src = src;
    pthread_mutex_lock(&node->lock);
    src->busy++;
    pthread_mutex_unlock(&node->lock);
    reply_post(info, q, rs_mr_addr(src->mr), src->reply_len, src->mr, put);
    return 1;
}

/* Looks the object up and takes a busy reference; the status when it is not served. */
static rs_status_t src_lookup(rs_bcast_node_t *node, const rs_breq_t *q, rs_bcast_t **src_p)
{
    rs_list_t *pos, *tmp;
    rs_status_t st = RS_ERR_NOT_FOUND;
    if (q->node_id != node->node_id) {
        rs_info("broadcast: request for an object of another node (the source restarted?)");
        return RS_ERR_NOT_FOUND;
    }
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->sources)
    {
        rs_bcast_t *src = RS_CONTAINER_OF(pos, rs_bcast_t, link);
        if (src->seq == q->seq) {
            if (src->state == RS_BSRC_SEALED) {
                src->busy++;
                *src_p = src;
                st = RS_OK;
            }
            break;
        }
    }
    /* Numbers below the next one were handed out: the object existed and is gone. */
    if (st != RS_OK && q->seq < node->next_seq && pos == &node->sources)
        st = RS_ERR_DESTROYED;
    pthread_mutex_unlock(&node->lock);
    return st;
}

static void serve_announce(rs_bcast_node_t *node, rs_bepinfo_t *info, rs_bcast_t *src,
                           const rs_breq_t *q)
{
    int complete = 0, news = 0;
    uint8_t *gained = calloc(1, rs_bmap_bytes(src->nblocks) + 1);
    pthread_mutex_lock(&src->lock);
    int i = holder_find(src, &q->holder_addr);
    if (i >= 0) {
        rs_bsrc_holder_t *h = src->holders[i];
        h->conn = info;
        complete = !h->complete && (q->flags & RS_BREQ_F_COMPLETE);
        news = holder_update(src, h, q, gained);
    }
    pthread_mutex_unlock(&src->lock);
    /* Wake the long polls of readers that lack a block just announced. */
    if (news && gained != NULL)
        park_release(node, src, 0, 0, gained, RS_OK);
    free(gained);
    RS_BSTAT_ADD(src->stats.announces, 1);
    RS_BSTAT_ADD(node->stats.announces, 1);
    if (complete) {
        /* The final announcement carries what the fetch cost (counted once). */
        RS_BSTAT_ADD(src->stats.copies_complete, 1);
        RS_BSTAT_ADD(src->stats.reported_source_reads, q->source_reads);
        RS_BSTAT_ADD(src->stats.reported_holder_reads, q->holder_reads);
        RS_BSTAT_ADD(node->stats.copies_complete, 1);
        RS_BSTAT_ADD(node->stats.reported_source_reads, q->source_reads);
        RS_BSTAT_ADD(node->stats.reported_holder_reads, q->holder_reads);
    }
}

void rs_bsrc_serve(rs_bcast_node_t *node, rs_bepinfo_t *info, const rs_breq_t *q)
{
    rs_bcast_t *src = NULL;
    rs_status_t st = src_lookup(node, q, &src);

    if (st != RS_OK) {
        if (q->kind != RS_BREQ_ANNOUNCE)
            reply_status(node, info, q, st);
        return;
    }
    uint32_t rbefore = src->rversion, self_id = 0;
    if (q->kind == RS_BREQ_ANNOUNCE) {
        serve_announce(node, info, src, q);
    } else if (q->kind == RS_BREQ_GET && src->is_inline) {
        if (!serve_inline(node, info, src, q))
            reply_status(node, info, q, RS_ERR_NO_SPACE);
    } else {
        int parked = 0;
        pthread_mutex_lock(&src->lock);
        rs_bsrc_holder_t *self = NULL;
        if (q->kind == RS_BREQ_GET)
            reader_note(src, info);
        if ((q->flags & RS_BREQ_F_HOLDER) && q->kind == RS_BREQ_GET) {
            self = holder_register(src, info, q);
        } else if (q->flags & RS_BREQ_F_HOLDER) {
            int i = holder_find(src, &q->holder_addr);
            self = i >= 0 ? src->holders[i] : NULL;
        }
        if (self != NULL) {
            self->conn = info;
            holder_update(src, self, q, NULL);
            self_id = self->id;
        }
        if ((q->flags & RS_BREQ_F_WAIT) && q->known == src->version) {
            rs_bparked_t *p = park_new(info, q, self_id, rs_bnow() + RS_MS_TO_NS(RS_BPOLL_MS));
            if (p != NULL) {
                rs_list_add_tail(&src->parked, &p->link);
                parked = 1;
            }
        }
        pthread_mutex_unlock(&src->lock);
        if (q->kind == RS_BREQ_GET) {
            RS_BSTAT_ADD(src->stats.requests_served, 1);
            RS_BSTAT_ADD(node->stats.requests_served, 1);
        } else {
            RS_BSTAT_ADD(src->stats.updates_served, 1);
            RS_BSTAT_ADD(node->stats.updates_served, 1);
        }
        if (!parked)
            reply_manifest(node, src, info, q, self_id);
    }
    /* News for the readers of this object: pushed when the reader set changed. */
    if (src->rversion != rbefore && q->kind == RS_BREQ_GET)
        news_send(node, src, self_id);
    src_unbusy(node, src);
}

int rs_bsrc_serve_fast(rs_bcast_node_t *node, rs_bepinfo_t *info, const rs_breq_t *q)
{
    rs_bcast_t *src = NULL;
    int done = 0;
    if (q->kind != RS_BREQ_GET || src_lookup(node, q, &src) != RS_OK)
        return 0; /* errors are answered by the service thread (it may allocate) */
    if (src->is_inline)
        done = serve_inline(node, info, src, q);
    src_unbusy(node, src);
    return done;
}

/* Runs f on every published object under a busy reference. */
static void sources_each(rs_bcast_node_t *node, void (*f)(rs_bcast_node_t *, rs_bcast_t *, void *),
                         void *arg)
{
    rs_list_t *pos, *tmp;
    uint32_t n = 0, cap = 16;
    rs_bcast_t **list = malloc(cap * sizeof(*list));
    if (list == NULL)
        return;
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->sources)
    {
        if (n == cap) {
            rs_bcast_t **l = realloc(list, 2 * cap * sizeof(*l));
            if (l == NULL)
                break;
            list = l;
            cap *= 2;
        }
        list[n] = RS_CONTAINER_OF(pos, rs_bcast_t, link);
        list[n++]->busy++;
    }
    pthread_mutex_unlock(&node->lock);
    for (uint32_t i = 0; i < n; i++) {
        f(node, list[i], arg);
        src_unbusy(node, list[i]);
    }
    free(list);
}

static void tick_one(rs_bcast_node_t *node, rs_bcast_t *src, void *arg)
{
    park_release(node, src, *(const uint64_t *)arg, 0, NULL, RS_OK);
}

void rs_bsrc_tick(rs_bcast_node_t *node, uint64_t now)
{
    sources_each(node, tick_one, &now);
}

static void conn_dead_one(rs_bcast_node_t *node, rs_bcast_t *src, void *arg)
{
    const rs_bepinfo_t *info = arg;
    int readers = 0;
    (void)node;
    pthread_mutex_lock(&src->lock);
    for (uint32_t i = 0; i < src->n_holders; i++) {
        if (src->holders[i]->conn == info) {
            src->version++;
            if (!src->holders[i]->complete) {
                src->rversion++;
                readers = 1;
            }
        }
    }
    pthread_mutex_unlock(&src->lock);
    if (readers)
        news_send(node, src, 0); /* its share of the blocks goes to the others */
}

void rs_bsrc_conn_dead(rs_bcast_node_t *node, rs_bepinfo_t *info)
{
    sources_each(node, conn_dead_one, info);
}

void rs_bsrc_reap(rs_bcast_node_t *node, uint64_t now, int force)
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
            park_release(node, src, 0, 1, NULL, RS_ERR_DESTROYED);
            if (src->is_inline)
                rs_mem_free(src->mr);
            else
                rs_bregion_put(node, src->mr, src->rkey, src->rkey_len);
        }
        rs_list_t *ppos, *ptmp;
        rs_list_for_each_safe(ppos, ptmp, &src->parked)
        {
            rs_list_del(ppos);
            free(RS_CONTAINER_OF(ppos, rs_bparked_t, link));
        }
        for (uint32_t i = 0; i < src->n_holders; i++)
            holder_free(src->holders[i]);
        free(src->holders);
        free(src->readers);
        free(src->perm_pos);
        free(src->sums);
        pthread_mutex_destroy(&src->lock);
        free(src);
    }
}
