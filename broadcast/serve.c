/*
 * Answering requests for published objects: manifests (inline or not),
 * holder updates and their long polls, announcements, news of the reader set.
 */
#include "broadcast/internal.h"

#include <stdlib.h>
#include <string.h>

#include "broadcast/blocks.h"
#include "common/clock.h"
#include "common/log.h"

/* A put of a reply in flight. */
typedef struct rs_bc_put {
    rs_bcast_node_t *node;
    rs_bcast_t *src;    /* busy reference, or NULL */
    rs_bc_slot_t *slot; /* staging slot, or NULL (prebuilt inline reply) */
} rs_bc_put_t;

static void src_unbusy(rs_bcast_node_t *node, rs_bcast_t *src)
{
    pthread_mutex_lock(&node->lock);
    src->busy--;
    pthread_mutex_unlock(&node->lock);
}

/* ---------------------------------------------------------------- replies */

static void put_done(void *arg, rs_status_t status)
{
    rs_bc_put_t *put = arg;
    if (status != RS_OK)
        rs_debug("broadcast: a reply put failed: %s", rs_strerror(status));
    if (put->slot != NULL)
        rs_bc_slots_put(&put->node->staging, put->slot);
    if (put->src != NULL)
        src_unbusy(put->node, put->src);
    free(put);
}

/* Writes len bytes at buf (inside mr) into the requester's reply slot, notifying req_id. */
static void reply_post(rs_bc_epinfo_t *info, const rs_bc_req_t *q, const void *buf, size_t len,
                       rs_mr_t *mr, rs_bc_put_t *put)
{
    rs_rkey_t *rkey;
    rs_status_t st = rs_bc_epinfo_rkey(info, q->reply_rkey.p, q->reply_rkey.len, &rkey);
    if (st == RS_OK)
        st = rs_put_notify(info->ep, buf, len, mr, rkey, q->reply_off, q->req_id, put_done, put);
    if (st != RS_OK) {
        rs_warn("broadcast: cannot answer request %u: %s", q->req_id, rs_strerror(st));
        put_done(put, st);
    }
}

/* Answers with only a status (destroyed, unknown, no space). */
static void reply_status(rs_bcast_node_t *node, rs_bc_epinfo_t *info, const rs_bc_req_t *q,
                         rs_status_t status)
{
    rs_bc_slot_t *slot;
    rs_bc_reply_enc_t enc;
    rs_bc_reply_t hdr;
    size_t len;
    rs_bc_put_t *put = calloc(1, sizeof(*put));

    if (put == NULL || rs_bc_slots_get(&node->staging, RS_BREPLY_MIN_LEN, &slot) != RS_OK) {
        free(put);
        return;
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.kind = q->kind;
    hdr.status = (int16_t)status;
    hdr.node_id = q->node_id;
    hdr.seq = q->seq;
    rs_bc_reply_begin(&enc, slot->p, slot->cap, &hdr);
    rs_bc_reply_finish(&enc, NULL, 0, &len);
    put->node = node;
    put->slot = slot;
    reply_post(info, q, slot->p, len, slot->slab->mr, put);
}

/* An active reader: still fetching, and its connection to us alive. */
static int holder_active(const rs_bc_src_holder_t *h)
{
    return !h->complete && rs_bc_src_holder_alive(h);
}

/* Lists the source, the active tickets and a random choice of holders (src->lock held). */
static void reply_lists(rs_bcast_node_t *node, rs_bcast_t *src, rs_bc_reply_enc_t *enc,
                        uint32_t self_id, uint64_t *rng)
{
    uint32_t n = src->n_holders, listed = 0, n_active = 0;
    uint32_t *idx = malloc((n + 1u) * sizeof(*idx));
    rs_bc_active_t *active = malloc((n + 1u) * sizeof(*active));
    if (idx == NULL || active == NULL) {
        free(active);
        free(idx);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const rs_bc_src_holder_t *h = src->holders[i];
        if (holder_active(h)) {
            active[n_active].ticket = h->id - 1;
            active[n_active++].start = h->start;
        }
    }
    rs_bc_reply_put_active(enc, active, n_active);
    free(active);

    rs_bc_holder_wire_t w;
    memset(&w, 0, sizeof(w));
    w.flags = RS_BHOLDER_F_SOURCE | RS_BHOLDER_F_COMPLETE;
    w.addr = node->self.a;
    w.rkey.p = src->rkey;
    w.rkey.len = (uint32_t)src->rkey_len;
    if (rs_bc_reply_add_holder(enc, &w) != RS_OK)
        goto out;
    /* Partial Fisher-Yates over the holders that have something to serve. */
    for (uint32_t i = 0; i < n; i++)
        idx[i] = i;
    for (uint32_t k = 0; k < n && listed < node->cfg.holders_max; k++) {
        uint32_t j = k + rs_bc_rand_below(rng, n - k);
        uint32_t t = idx[k];
        idx[k] = idx[j];
        idx[j] = t;
        rs_bc_src_holder_t *h = src->holders[idx[k]];
        int claims = 0;
        for (size_t i = 0; !h->complete && i < rs_bc_map_bytes(src->nblocks); i++)
            claims |= (h->claims[i] & ~h->bitmap[i]) != 0;
        if (h->id == self_id || (h->have == 0 && !claims) || !rs_bc_src_holder_alive(h))
            continue; /* nothing to serve or soon to serve, or its connection to us died */
        w.id = h->id;
        w.flags = h->complete ? RS_BHOLDER_F_COMPLETE : 0;
        w.flags |= claims ? RS_BHOLDER_F_CLAIMS : 0;
        w.addr = h->addr.a;
        w.rkey.p = h->rkey;
        w.rkey.len = (uint32_t)h->rkey_len;
        w.bitmap.p = h->bitmap;
        w.bitmap.len = (uint32_t)rs_bc_map_bytes(src->nblocks);
        w.claims.p = h->claims;
        w.claims.len = w.bitmap.len;
        if (rs_bc_reply_add_holder(enc, &w) != RS_OK)
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
static void reply_manifest(rs_bcast_node_t *node, rs_bcast_t *src, rs_bc_epinfo_t *info,
                           const rs_bc_req_t *q, uint32_t self_id)
{
    rs_bc_reply_t hdr;
    rs_bc_reply_enc_t enc;
    size_t len = 0;
    uint64_t rng = rs_bc_random64();
    size_t want = rs_bc_reply_meta_len(q->kind == RS_BREQ_GET ? src->nblocks : 0) +
                  RS_BREPLY_ACTIVE_BUDGET + RS_BREPLY_HOLDER_BUDGET;
    size_t cap = want < q->reply_cap ? want : q->reply_cap;
    rs_bc_put_t *put = calloc(1, sizeof(*put));

    if (put == NULL || rs_bc_slots_get(&node->staging, cap, &put->slot) != RS_OK) {
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
    hdr.start = src->nblocks > 0 ? rs_bc_rand_below(&rng, src->nblocks) : 0;
    pthread_mutex_lock(&src->lock);
    hdr.version = src->version;
    hdr.rversion = src->rversion;
    rs_bc_src_holder_t *self = self_id != 0 ? rs_bc_src_holder_by_id(src, self_id) : NULL;
    if (self != NULL)
        hdr.start = self->start;
    for (uint32_t i = 0; i < src->n_holders; i++) {
        const rs_bc_src_holder_t *h = src->holders[i];
        if (h->id != self_id && holder_active(h))
            hdr.active++;
    }
    rs_bc_reply_begin(&enc, put->slot->p, cap, &hdr);
    if (q->kind == RS_BREQ_GET)
        rs_bc_reply_put_sums(&enc, src->sums, src->nblocks);
    reply_lists(node, src, &enc, self_id, &rng);
    rs_status_t st = rs_bc_reply_finish(&enc, NULL, 0, &len);
    pthread_mutex_unlock(&src->lock);
    if (st != RS_OK) {
        put_done(put, st);
        reply_status(node, info, q, RS_ERR_NO_SPACE);
        return;
    }
    reply_post(info, q, put->slot->p, len, put->slot->slab->mr, put);
}

/* ---------------------------------------------------------------- long polls */

static rs_bc_parked_t *park_new(rs_bc_epinfo_t *info, const rs_bc_req_t *q, uint32_t self_id,
                                uint64_t deadline)
{
    rs_bc_parked_t *p = malloc(sizeof(*p) + q->reply_rkey.len);
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
static void park_req(const rs_bcast_t *src, const rs_bc_parked_t *p, rs_bc_req_t *q)
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
static int park_wants(rs_bcast_t *src, const rs_bc_parked_t *p, const uint8_t *gained)
{
    const rs_bc_src_holder_t *poller = rs_bc_src_holder_by_id(src, p->self_id);
    if (poller == NULL)
        return 1;
    for (size_t i = 0; i < rs_bc_map_bytes(src->nblocks); i++)
        if (gained[i] & ~poller->bitmap[i])
            return 1;
    return 0;
}

/*
 * Answers the parked polls of src that are due: those whose deadline passed,
 * those gained brings news for (when given), or all (all). status != OK:
 * only that status.
 */
void rs_bc_src_park_release(rs_bcast_node_t *node, rs_bcast_t *src, uint64_t now, int all,
                            const uint8_t *gained, rs_status_t status)
{
    rs_list_t due, *pos, *tmp;
    rs_list_init(&due);
    pthread_mutex_lock(&src->lock);
    rs_list_for_each_safe(pos, tmp, &src->parked)
    {
        rs_bc_parked_t *p = RS_CONTAINER_OF(pos, rs_bc_parked_t, link);
        if (all || now >= p->deadline_ns || (gained != NULL && park_wants(src, p, gained))) {
            rs_list_del(pos);
            rs_list_add_tail(&due, pos);
        }
    }
    pthread_mutex_unlock(&src->lock);
    rs_list_for_each_safe(pos, tmp, &due)
    {
        rs_bc_parked_t *p = RS_CONTAINER_OF(pos, rs_bc_parked_t, link);
        rs_bc_req_t q;
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

/* ---------------------------------------------------------------- news */

/*
 * Tells every active reader of src (but skip_id) which readers are active
 * now, so each reads from the source only its own share. One-way.
 */
static void news_send(rs_bcast_node_t *node, rs_bcast_t *src, uint32_t skip_id)
{
    uint32_t n = 0, n_eps = 0, rversion;
    rs_bc_active_t *active = NULL;
    rs_ep_t **eps = NULL;
    uint8_t *msg = NULL;
    size_t len;

    pthread_mutex_lock(&src->lock);
    active = malloc((src->n_holders + 1u) * sizeof(*active));
    eps = malloc((src->n_holders + 1u) * sizeof(*eps));
    for (uint32_t i = 0; active != NULL && eps != NULL && i < src->n_holders; i++) {
        const rs_bc_src_holder_t *h = src->holders[i];
        if (!holder_active(h))
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
        rs_bc_news_encode(node->node_id, src->seq, rversion, active, n, msg, node->msg_max, &len) !=
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
static int serve_inline(rs_bcast_node_t *node, rs_bc_epinfo_t *info, rs_bcast_t *src,
                        const rs_bc_req_t *q)
{
    rs_bc_put_t *put;
    if (src->reply_len > q->reply_cap || (put = calloc(1, sizeof(*put))) == NULL)
        return 0;
    RS_BSTAT_ADD(src->stats.requests_served, 1);
    RS_BSTAT_ADD(node->stats.requests_served, 1);
    pthread_mutex_lock(&src->lock);
    rs_bc_src_reader_note(src, info);
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
static rs_status_t src_lookup(rs_bcast_node_t *node, const rs_bc_req_t *q, rs_bcast_t **src_p)
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

static void serve_announce(rs_bcast_node_t *node, rs_bc_epinfo_t *info, rs_bcast_t *src,
                           const rs_bc_req_t *q)
{
    int complete = 0, news = 0;
    uint8_t *gained = calloc(1, rs_bc_map_bytes(src->nblocks) + 1);
    pthread_mutex_lock(&src->lock);
    int i = rs_bc_src_holder_find(src, &q->holder_addr);
    if (i >= 0) {
        rs_bc_src_holder_t *h = src->holders[i];
        h->conn = info;
        complete = !h->complete && (q->flags & RS_BREQ_F_COMPLETE);
        news = rs_bc_src_holder_update(src, h, q, gained);
    }
    pthread_mutex_unlock(&src->lock);
    /* Wake the long polls of readers that lack a block just announced. */
    if (news && gained != NULL)
        rs_bc_src_park_release(node, src, 0, 0, gained, RS_OK);
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

void rs_bc_src_serve(rs_bcast_node_t *node, rs_bc_epinfo_t *info, const rs_bc_req_t *q)
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
        rs_bc_src_holder_t *self = NULL;
        if (q->kind == RS_BREQ_GET)
            rs_bc_src_reader_note(src, info);
        if ((q->flags & RS_BREQ_F_HOLDER) && q->kind == RS_BREQ_GET) {
            self = rs_bc_src_holder_register(src, info, q);
        } else if (q->flags & RS_BREQ_F_HOLDER) {
            int i = rs_bc_src_holder_find(src, &q->holder_addr);
            self = i >= 0 ? src->holders[i] : NULL;
        }
        if (self != NULL) {
            self->conn = info;
            rs_bc_src_holder_update(src, self, q, NULL);
            self_id = self->id;
        }
        if ((q->flags & RS_BREQ_F_WAIT) && q->known == src->version) {
            rs_bc_parked_t *p = park_new(info, q, self_id, rs_now_ns() + RS_MS_TO_NS(RS_BPOLL_MS));
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

int rs_bc_src_serve_fast(rs_bcast_node_t *node, rs_bc_epinfo_t *info, const rs_bc_req_t *q)
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
    rs_bc_src_park_release(node, src, *(const uint64_t *)arg, 0, NULL, RS_OK);
}

void rs_bc_src_tick(rs_bcast_node_t *node, uint64_t now)
{
    sources_each(node, tick_one, &now);
}

static void conn_dead_one(rs_bcast_node_t *node, rs_bcast_t *src, void *arg)
{
    const rs_bc_epinfo_t *info = arg;
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

void rs_bc_src_conn_dead(rs_bcast_node_t *node, rs_bc_epinfo_t *info)
{
    sources_each(node, conn_dead_one, info);
}
