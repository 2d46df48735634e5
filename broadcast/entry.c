/*
 * The reader's per-process block table: one entry per object, shared by
 * every getter in the process; its life cycle (join, retire, reap), the
 * replies the source sends it, destroy notices and dead peers.
 */
#include "broadcast/internal.h"
#include "broadcast/entry.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broadcast/blocks.h"
#include "broadcast/rcache.h"
#include "common/assert.h"
#include "common/clock.h"
#include "common/log.h"

/* ------------------------------------------------------------- creation */

static void holder_free(rs_bc_holder_t *h, int force)
{
    if (h == NULL)
        return;
    if (h->rkey != NULL && !force)
        rs_bc_rcache_put(h->peer, h->rkey);
    free(h->rkey_blob);
    free(h->bitmap);
    free(h->claims);
    rs_bc_addr_release(&h->addr);
    free(h);
}

static void entry_free(rs_bc_entry_t *e, int force)
{
    for (uint32_t i = 0; i < e->n_holders; i++)
        holder_free(e->holders[i], force);
    free(e->holders);
    if (!force) {
        if (e->direct_rkey != NULL) /* after its read: entries go once their ops are done */
            rs_bc_rcache_put(e->src_peer, e->direct_rkey);
        if (e->mr != NULL)
            rs_bc_region_put(e->node, e->mr, e->rkey, e->rkey_len);
        if (e->inline_slot != NULL)
            rs_bc_slots_put(&e->node->replies, e->inline_slot);
    }
    free(e->embed_copy);
    free(e->sums);
    free(e->blocks);
    free(e->bitmap);
    free(e->claimed);
    free(e->order);
    free(e->landed);
    free(e->active);
    rs_bc_addr_release(&e->src_addr);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

static rs_bc_entry_t *entry_new(rs_bcast_node_t *node, const rs_bc_desc_t *d)
{
    rs_bc_entry_t *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    rs_cond_init_monotonic(&e->cond);
    pthread_mutex_init(&e->lock, NULL);
    e->node = node;
    e->node_id = d->node_id;
    e->seq = d->seq;
    e->size = d->size;
    e->block_size = d->block_size;
    e->nblocks = d->nblocks;
    e->is_inline = (d->flags & RS_BDESC_F_INLINE) != 0;
    e->state = RS_BENT_FETCHING;
    e->rng = rs_bc_random64();
    size_t nb = e->nblocks > 0 ? e->nblocks : 1;
    if (rs_bc_addr_copy(&e->src_addr, &d->src) != RS_OK)
        goto err_free;
    if (!e->is_inline) {
        e->sums = calloc(nb, sizeof(*e->sums));
        e->blocks = calloc(nb, sizeof(*e->blocks));
        e->bitmap = calloc(1, rs_bc_map_bytes(e->nblocks) + 1);
        e->claimed = calloc(1, rs_bc_map_bytes(e->nblocks) + 1);
        e->order = calloc(nb, sizeof(*e->order));
        e->landed = calloc(nb, sizeof(*e->landed));
        if (e->sums == NULL || e->blocks == NULL || e->bitmap == NULL || e->claimed == NULL ||
            e->order == NULL || e->landed == NULL)
            goto err_free;
        for (uint32_t i = 0; i < e->nblocks; i++) {
            e->blocks[i].entry = e;
            e->blocks[i].index = i;
        }
    }
    if (d->flags & RS_BDESC_F_EMBED) {
        /* Checked with the whole descriptor: ready without a message. */
        e->embed_copy = malloc((size_t)d->size);
        if (e->embed_copy == NULL)
            goto err_free;
        memcpy(e->embed_copy, d->embed, (size_t)d->size);
        e->data = e->embed_copy;
        e->state = RS_BENT_READY;
        e->stats.inline_gets++;
        RS_BSTAT_ADD(node->stats.inline_gets, 1);
    }
    e->src_peer = rs_bc_peer_get(node, &d->src);
    if (e->src_peer == NULL)
        goto err_free;
    return e;

err_free:
    entry_free(e, 1);
    return NULL;
}

/*
 * Joins the entry for d if the table has one (node->lock held): RS_OK with
 * *e_p set, RS_ERR_DESTROYED for a destroyed object, RS_ERR_NOT_FOUND when
 * there is none yet.
 */
static rs_status_t table_join(rs_bcast_node_t *node, const rs_bc_desc_t *d, rs_bc_entry_t **e_p)
{
    rs_list_t *pos, *tmp;
    if (rs_bc_node_tomb_has(node, d->node_id, d->seq))
        return RS_ERR_DESTROYED;
    rs_list_for_each_safe(pos, tmp, &node->entries)
    {
        rs_bc_entry_t *e = RS_CONTAINER_OF(pos, rs_bc_entry_t, link);
        if (e->node_id == d->node_id && e->seq == d->seq) {
            e->refs++;
            *e_p = e;
            return RS_OK;
        }
    }
    return RS_ERR_NOT_FOUND;
}

rs_status_t rs_bc_entry_acquire(rs_bcast_node_t *node, const rs_bc_desc_t *d, rs_bc_entry_t **e_p,
                                int *joined)
{
    *joined = 1;
    pthread_mutex_lock(&node->lock);
    rs_status_t st = table_join(node, d, e_p);
    pthread_mutex_unlock(&node->lock);
    if (st != RS_ERR_NOT_FOUND)
        return st;
    /* Allocated outside the table lock (malloc-heavy), then looked up again. */
    rs_bc_entry_t *fresh = entry_new(node, d);
    if (fresh == NULL) {
        rs_error("out of memory allocating a broadcast fetch");
        return RS_ERR_NOMEM;
    }
    pthread_mutex_lock(&node->lock);
    st = table_join(node, d, e_p);
    if (st == RS_ERR_NOT_FOUND) {
        fresh->refs = 1;
        fresh->in_table = 1;
        rs_list_add_tail(&node->entries, &fresh->link);
        *e_p = fresh;
        *joined = 0;
        st = RS_OK;
    }
    pthread_mutex_unlock(&node->lock);
    if (*e_p != fresh)
        entry_free(fresh, 0);
    return st;
}

void rs_bc_entry_fail(rs_bc_entry_t *e, rs_status_t st)
{
    if (e->state != RS_BENT_FETCHING)
        return;
    e->state = RS_BENT_FAILED;
    e->err = st;
    pthread_cond_broadcast(&e->cond);
}

/* Keeps the newest list of active readers (e->lock held); p holds n (ticket, start) pairs. */
static void active_take(rs_bc_entry_t *e, uint32_t rversion, const uint8_t *p, uint32_t n)
{
    if (e->active != NULL && rversion <= e->rversion)
        return;
    rs_bc_active_t *a = realloc(e->active, (n + 1u) * sizeof(*a));
    if (a == NULL)
        return;
    for (uint32_t i = 0; i < n; i++)
        a[i] = rs_bc_active_at(p, i);
    e->active = a;
    e->n_active = n;
    e->rversion = rversion;
}

/* Recomputes which leading blocks of our order are ours to take from the source (e->lock held). */
static void own_update(rs_bc_entry_t *e)
{
    if (e->node->cfg.mode != RS_BCAST_TORRENT || e->nblocks < 2 || e->active == NULL)
        e->own_count = e->nblocks; /* nothing to share out */
    else
        e->own_count = rs_bc_own_count(e->ticket, e->start, e->active, e->n_active, e->nblocks);
}

/* ------------------------------------------------------------ retiring */

/*
 * Moves e from the table to the retired list (node->lock held), not yet
 * reapable: entry_abandon makes it so. Until then the service thread's reap
 * must not free it, though the caller no longer holds node->lock.
 */
static void table_retire_locked(rs_bcast_node_t *node, rs_bc_entry_t *e)
{
    e->in_table = 0;
    rs_list_del(&e->link);
    e->retire_ns = UINT64_MAX;
    rs_list_add_tail(&node->retired, &e->link);
}

/*
 * A retired entry nobody waits on: late completions change nothing. Then it
 * may be reaped, once its own ops are done; the caller touches it no more.
 */
static void entry_abandon(rs_bc_entry_t *e)
{
    rs_bcast_node_t *node = e->node;
    pthread_mutex_lock(&e->lock);
    rs_bc_entry_fail(e, RS_ERR_TIMEOUT);
    pthread_mutex_unlock(&e->lock);
    pthread_mutex_lock(&node->lock);
    e->retire_ns = rs_now_ns();
    pthread_mutex_unlock(&node->lock);
}

/*
 * Takes e out of the table when nobody references it and it has no reason to
 * stay: failed, destroyed, inline or read directly (it serves nothing: no
 * reader knows of it, and no destroy notice would reach it), its source
 * gone, or fetched in source mode. A fetch nobody waits for any more is abandoned.
 */
static void entry_maybe_retire(rs_bc_entry_t *e)
{
    rs_bcast_node_t *node = e->node;
    pthread_mutex_lock(&e->lock);
    int keep = e->state == RS_BENT_READY && !e->destroyed && !e->source_gone && !e->is_inline &&
               e->direct != RS_BDIRECT_FETCHED && node->cfg.mode == RS_BCAST_TORRENT;
    pthread_mutex_unlock(&e->lock);

    pthread_mutex_lock(&node->lock);
    int retire = e->refs == 0 && e->in_table && !keep;
    if (retire)
        table_retire_locked(node, e);
    pthread_mutex_unlock(&node->lock);
    if (retire)
        entry_abandon(e);
}

/*
 * Retires the oldest entry nobody references whose region fits len (as the
 * region cache takes one: at most a quarter larger), though it could still
 * serve other readers: a region is worth more to the get that needs it now.
 * Peers still holding its key can only read bytes that fail their block
 * checksums, and then read elsewhere. 1 if one was retired.
 */
int rs_bc_entry_evict(rs_bcast_node_t *node, size_t len)
{
    rs_list_t *pos, *tmp;
    rs_bc_entry_t *victim = NULL;
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->entries)
    {
        rs_bc_entry_t *e = RS_CONTAINER_OF(pos, rs_bc_entry_t, link);
        size_t have = e->mr != NULL ? rs_mr_len(e->mr) : 0;
        if (e->refs == 0 && e->in_table && have >= len && have - len <= len / 4) {
            victim = e;
            break;
        }
    }
    if (victim != NULL)
        table_retire_locked(node, victim);
    pthread_mutex_unlock(&node->lock);
    if (victim == NULL)
        return 0;
    entry_abandon(victim);
    return 1;
}

void rs_bc_entry_unref(rs_bc_entry_t *e)
{
    rs_bcast_node_t *node = e->node;
    pthread_mutex_lock(&node->lock);
    RS_ASSERT(e->refs > 0); /* a reference the caller holds */
    e->refs--;
    pthread_mutex_unlock(&node->lock);
    entry_maybe_retire(e);
}

void rs_bc_entry_reap(rs_bcast_node_t *node, uint64_t now, int force)
{
    rs_list_t *pos, *tmp, due;
    rs_list_init(&due);
    pthread_mutex_lock(&node->lock);
    if (force) {
        rs_list_for_each_safe(pos, tmp, &node->entries)
        {
            rs_list_del(pos);
            rs_list_add_tail(&node->retired, pos);
        }
    }
    rs_list_for_each_safe(pos, tmp, &node->retired)
    {
        rs_bc_entry_t *e = RS_CONTAINER_OF(pos, rs_bc_entry_t, link);
        if (force || now >= e->retire_ns) {
            rs_list_del(pos);
            rs_list_add_tail(&due, pos);
        }
    }
    pthread_mutex_unlock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &due)
    {
        rs_bc_entry_t *e = RS_CONTAINER_OF(pos, rs_bc_entry_t, link);
        rs_list_del(pos);
        pthread_mutex_lock(&e->lock);
        uint32_t ops = e->ops;
        pthread_mutex_unlock(&e->lock);
        if (ops > 0 && !force) { /* reads or a request still in flight: later */
            pthread_mutex_lock(&node->lock);
            rs_list_add_tail(&node->retired, pos);
            pthread_mutex_unlock(&node->lock);
            continue;
        }
        entry_free(e, force);
    }
}

/* Runs f on every entry in the table, each under a temporary reference. */
static void entries_each(rs_bcast_node_t *node, int (*match)(rs_bc_entry_t *, const void *),
                         const void *key, void (*f)(rs_bc_entry_t *, const void *))
{
    rs_list_t *pos, *tmp;
    uint32_t n = 0, cap = 16;
    rs_bc_entry_t **list = malloc(cap * sizeof(*list));
    if (list == NULL)
        return;
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->entries)
    {
        rs_bc_entry_t *e = RS_CONTAINER_OF(pos, rs_bc_entry_t, link);
        if (!match(e, key))
            continue;
        if (n == cap) {
            rs_bc_entry_t **l = realloc(list, 2 * cap * sizeof(*l));
            if (l == NULL)
                break;
            list = l;
            cap *= 2;
        }
        e->refs++;
        list[n++] = e;
    }
    pthread_mutex_unlock(&node->lock);
    for (uint32_t i = 0; i < n; i++) {
        f(list[i], key);
        rs_bc_entry_unref(list[i]);
    }
    free(list);
}

/* ----------------------------------------------------- destroy, dead peers */

typedef struct {
    uint64_t node_id, seq;
} rs_bc_obj_key_t;

static int match_obj(rs_bc_entry_t *e, const void *key)
{
    const rs_bc_obj_key_t *k = key;
    return e->node_id == k->node_id && e->seq == k->seq;
}

static void mark_destroyed(rs_bc_entry_t *e, const void *key)
{
    (void)key;
    pthread_mutex_lock(&e->lock);
    e->destroyed = 1;
    rs_bc_entry_fail(e, RS_ERR_DESTROYED);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static void apply_news(rs_bc_entry_t *e, const void *arg)
{
    const rs_bc_news_t *news = arg;
    pthread_mutex_lock(&e->lock);
    active_take(e, news->rversion, news->tickets.p, news->n_active);
    if (e->manifest == RS_BMAN_HAVE)
        own_update(e);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static int match_news(rs_bc_entry_t *e, const void *key)
{
    const rs_bc_news_t *news = key;
    return e->node_id == news->node_id && e->seq == news->seq;
}

void rs_bc_entry_news(rs_bcast_node_t *node, const rs_bc_news_t *news)
{
    entries_each(node, match_news, news, apply_news);
}

void rs_bc_entry_destroyed(rs_bcast_node_t *node, uint64_t node_id, uint64_t seq)
{
    rs_bc_obj_key_t k = {node_id, seq};
    pthread_mutex_lock(&node->lock);
    rs_bc_node_tomb_add(node, node_id, seq);
    pthread_mutex_unlock(&node->lock);
    entries_each(node, match_obj, &k, mark_destroyed);
}

static int match_any(rs_bc_entry_t *e, const void *key)
{
    (void)e;
    (void)key;
    return 1;
}

static void mark_peer_dead(rs_bc_entry_t *e, const void *key)
{
    const rs_bc_peer_t *peer = key;
    pthread_mutex_lock(&e->lock);
    for (uint32_t i = 0; i < e->n_holders; i++)
        if (e->holders[i]->peer == peer)
            e->holders[i]->bad = 1;
    if (e->src_peer == peer)
        e->source_gone = 1; /* a fetch goes on from the other holders it knows */
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

void rs_bc_entry_peer_dead(rs_bcast_node_t *node, rs_bc_peer_t *peer)
{
    entries_each(node, match_any, peer, mark_peer_dead);
}

/* --------------------------------------------------------------- replies */

static rs_bc_holder_t *holder_new(const rs_bc_holder_wire_t *w, uint32_t nblocks)
{
    rs_bc_holder_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->id = w->id;
    h->is_source = (w->flags & RS_BHOLDER_F_SOURCE) != 0;
    h->complete = (w->flags & RS_BHOLDER_F_COMPLETE) != 0;
    h->rkey_blob = malloc(w->rkey.len);
    if (!h->complete)
        h->bitmap = calloc(1, rs_bc_map_bytes(nblocks) + 1);
    if (h->rkey_blob == NULL || (!h->complete && h->bitmap == NULL) ||
        rs_bc_addr_copy(&h->addr, &w->addr) != RS_OK) {
        holder_free(h, 1);
        return NULL;
    }
    memcpy(h->rkey_blob, w->rkey.p, w->rkey.len);
    h->rkey_len = w->rkey.len;
    if (!h->complete)
        memcpy(h->bitmap, w->bitmap.p, w->bitmap.len);
    if (w->claims.len > 0 && (h->claims = malloc(w->claims.len)) != NULL)
        memcpy(h->claims, w->claims.p, w->claims.len);
    return h;
}

static int holders_push(rs_bc_entry_t *e, rs_bc_holder_t *h)
{
    if (e->n_holders == e->cap_holders) {
        uint32_t cap = e->cap_holders ? 2 * e->cap_holders : 8;
        rs_bc_holder_t **hs = realloc(e->holders, cap * sizeof(*hs));
        if (hs == NULL)
            return 0;
        e->holders = hs;
        e->cap_holders = cap;
    }
    e->holders[e->n_holders++] = h;
    return 1;
}

/* Folds the reply's holders into the entry (e->lock held; source key unpacked already). */
static rs_status_t merge_holders(rs_bc_entry_t *e, const rs_bc_reply_t *r, rs_rkey_t **src_rkey)
{
    rs_bc_holder_wire_t w;
    size_t off = 0;
    while (rs_bc_reply_next_holder(r, &off, &w)) {
        if (w.flags & RS_BHOLDER_F_SOURCE) {
            if (e->n_holders > 0)
                continue;
            rs_bc_holder_t *h = holder_new(&w, e->nblocks);
            if (h == NULL || !holders_push(e, h)) {
                holder_free(h, 1);
                return RS_ERR_NOMEM;
            }
            h->peer = e->src_peer;
            h->rkey = *src_rkey;
            *src_rkey = NULL;
            continue;
        }
        if (e->n_holders == 0)
            return RS_ERR_PROTOCOL; /* the source comes first */
        if (rs_bc_addr_equal(&w.addr, &e->node->self.a))
            continue;
        rs_bc_holder_t *h = NULL;
        for (uint32_t i = 1; i < e->n_holders && h == NULL; i++)
            if (e->holders[i]->id == w.id)
                h = e->holders[i];
        if (h == NULL) {
            h = holder_new(&w, e->nblocks);
            if (h == NULL || !holders_push(e, h)) {
                holder_free(h, 1);
                return RS_ERR_NOMEM;
            }
            continue;
        }
        if (w.flags & RS_BHOLDER_F_COMPLETE) {
            h->complete = 1;
        } else if (h->bitmap != NULL) {
            for (uint32_t i = 0; i < w.bitmap.len; i++)
                h->bitmap[i] |= w.bitmap.p[i];
        }
        if (w.claims.len > 0 && h->claims == NULL)
            h->claims = calloc(1, w.claims.len);
        for (uint32_t i = 0; h->claims != NULL && i < w.claims.len; i++)
            h->claims[i] |= w.claims.p[i];
    }
    return e->n_holders > 0 ? RS_OK : RS_ERR_PROTOCOL;
}

/* The source's part of a GET reply: its region key, unpacked on the source endpoint. */
static rs_status_t source_key(rs_bc_entry_t *e, const rs_bc_reply_t *r, rs_rkey_t **rkey_p)
{
    rs_bc_holder_wire_t w;
    size_t off = 0;
    while (rs_bc_reply_next_holder(r, &off, &w)) {
        if (!(w.flags & RS_BHOLDER_F_SOURCE))
            continue;
        return rs_bc_rcache_get(e->node, e->src_peer, w.rkey.p, w.rkey.len, rkey_p);
    }
    return RS_ERR_PROTOCOL;
}

/* The reply describes the object the descriptor named. */
static rs_status_t reply_check(const rs_bc_entry_t *e, const rs_bc_reply_t *r, uint8_t kind)
{
    if (r->kind != kind || r->node_id != e->node_id || r->seq != e->seq)
        return RS_ERR_PROTOCOL;
    if (r->status != 0)
        return RS_OK;
    if (r->size != e->size || r->block_size != e->block_size || r->nblocks != e->nblocks)
        return RS_ERR_PROTOCOL;
    int is_inline = (r->flags & RS_BREPLY_F_INLINE) != 0;
    if (kind == RS_BREQ_GET && (is_inline != e->is_inline || !(r->flags & RS_BREPLY_F_SUMS)))
        return RS_ERR_PROTOCOL;
    if (kind == RS_BREQ_UPDATE && r->flags != 0)
        return RS_ERR_PROTOCOL;
    return RS_OK;
}

/* Verifies an inline object against its block checksums. */
static int inline_verify(const rs_bc_reply_t *r)
{
    for (uint32_t i = 0; i < r->nblocks; i++) {
        uint64_t off = rs_bc_block_off(i, r->block_size);
        if (rs_bc_block_sum(r->data.p + off, rs_bc_block_len(i, r->size, r->block_size), i) !=
            rs_bc_reply_sum(r, i))
            return 0;
    }
    return 1;
}

/* Applies a decoded, checked, successful reply (e->lock held). Returns 1 to keep the slot. */
static int reply_apply(rs_bc_entry_t *e, const rs_bc_reply_t *r, rs_bc_slot_t *slot,
                       rs_rkey_t **src_rkey)
{
    rs_bcast_node_t *node = e->node;
    rs_status_t st;
    if (r->kind == RS_BREQ_GET || r->version != e->version) {
        /* News: what others fetch is worth waiting for again. */
        e->progress_ns = rs_now_ns();
        e->src_open = 0;
    }
    e->version = r->version;
    if (r->kind == RS_BREQ_GET && e->is_inline) {
        if (!inline_verify(r)) {
            rs_error("broadcast: inline object %llu failed its checksum",
                     (unsigned long long)e->seq);
            rs_bc_entry_fail(e, RS_ERR_CHECKSUM);
            e->stats.checksum_failures++;
            RS_BSTAT_ADD(node->stats.checksum_failures, 1);
            return 0;
        }
        e->data = slot->p + (r->data.p - slot->p);
        e->inline_slot = slot;
        e->state = RS_BENT_READY;
        e->stats.inline_gets++;
        RS_BSTAT_ADD(node->stats.inline_gets, 1);
        return 1;
    }
    if (r->kind == RS_BREQ_GET) {
        for (uint32_t i = 0; i < e->nblocks; i++)
            e->sums[i] = rs_bc_reply_sum(r, i);
        e->ticket = r->ticket;
        e->start = r->start;
        rs_bc_order(r->perm_seed, r->start, e->nblocks, e->order);
    }
    active_take(e, r->rversion, r->tickets.p, r->n_active);
    own_update(e);
    st = merge_holders(e, r, src_rkey);
    if (st != RS_OK) {
        if (r->kind == RS_BREQ_GET)
            rs_bc_entry_fail(e, st);
        return 0;
    }
    if (r->kind == RS_BREQ_GET)
        e->manifest = RS_BMAN_HAVE;
    return 0;
}

void rs_bc_entry_reply(rs_bcast_node_t *node, rs_bc_pending_t *pend, rs_status_t status)
{
    rs_bc_entry_t *e = pend->entry;
    rs_bc_reply_t r;
    rs_rkey_t *src_rkey = NULL;
    int keep = 0;

    memset(&r, 0, sizeof(r));
    if (status == RS_OK) {
        status = rs_bc_reply_decode(pend->slot->p, pend->slot->cap, &r);
        if (status == RS_OK)
            status = reply_check(e, &r, pend->kind);
        if (status != RS_OK)
            rs_warn("broadcast: bad reply to request %u: %s", pend->req_id, rs_strerror(status));
        else if (r.status == 0 && pend->kind == RS_BREQ_GET && !e->is_inline)
            status = source_key(e, &r, &src_rkey);
    }

    pthread_mutex_lock(&e->lock);
    e->ops--;
    e->req_inflight = 0;
    if (status != RS_OK) {
        /* No usable answer: a manifest is fatal, an update just loses the source. */
        if (pend->kind == RS_BREQ_GET)
            rs_bc_entry_fail(e, status);
        else if (e->n_holders > 0)
            e->holders[0]->bad = 1;
    } else if (r.status != 0) {
        if (r.status == RS_ERR_DESTROYED)
            e->destroyed = 1;
        if (pend->kind == RS_BREQ_GET || r.status == RS_ERR_DESTROYED)
            rs_bc_entry_fail(e, (rs_status_t)r.status);
    } else {
        keep = reply_apply(e, &r, pend->slot, &src_rkey);
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);

    if (src_rkey != NULL)
        rs_bc_rcache_put(e->src_peer, src_rkey);
    if (status == RS_ERR_TIMEOUT || status == RS_ERR_UNREACHABLE || status == RS_ERR_CANCELED) {
        /* A put may still land in the slot: never reuse it. */
        pthread_mutex_lock(&node->lock);
        rs_list_add_tail(&node->lost_slots, &pend->slot->link);
        pthread_mutex_unlock(&node->lock);
    } else if (!keep) {
        rs_bc_slots_put(&node->replies, pend->slot);
    }
    if (status == RS_OK && r.status == RS_ERR_DESTROYED) {
        pthread_mutex_lock(&node->lock);
        rs_bc_node_tomb_add(node, e->node_id, e->seq);
        pthread_mutex_unlock(&node->lock);
    }
    free(pend);
    rs_bc_entry_unref(e); /* the request's reference */
}
