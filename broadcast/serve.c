/*
 * Answering requests for published objects: manifests (inline or not),
 * holder updates and their long polls, announcements, news of the reader set.
 */
#include "broadcast/internal.h"
#include "broadcast/source.h"

#include <stdlib.h>
#include <string.h>

#include "broadcast/blocks.h"
#include "common/clock.h"
#include "common/log.h"

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
        if (!rs_bc_src_holder_active(h))
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
            rs_bc_src_reply_status(node, info, q, st);
        return;
    }
    uint32_t rbefore = src->rversion, self_id = 0;
    if (q->kind == RS_BREQ_ANNOUNCE) {
        serve_announce(node, info, src, q);
    } else if (q->kind == RS_BREQ_GET && src->is_inline) {
        if (!rs_bc_src_reply_inline(node, info, src, q))
            rs_bc_src_reply_status(node, info, q, RS_ERR_NO_SPACE);
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
            rs_bc_parked_t *p =
                rs_bc_src_park_new(info, q, self_id, rs_now_ns() + RS_MS_TO_NS(RS_BPOLL_MS));
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
            rs_bc_src_reply_manifest(node, src, info, q, self_id);
    }
    /* News for the readers of this object: pushed when the reader set changed. */
    if (src->rversion != rbefore && q->kind == RS_BREQ_GET)
        news_send(node, src, self_id);
    rs_bc_src_unbusy(node, src);
}

int rs_bc_src_serve_fast(rs_bcast_node_t *node, rs_bc_epinfo_t *info, const rs_bc_req_t *q)
{
    rs_bcast_t *src = NULL;
    int done = 0;
    if (q->kind != RS_BREQ_GET || src_lookup(node, q, &src) != RS_OK)
        return 0; /* errors are answered by the service thread (it may allocate) */
    if (src->is_inline)
        done = rs_bc_src_reply_inline(node, info, src, q);
    rs_bc_src_unbusy(node, src);
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
        rs_bc_src_unbusy(node, list[i]);
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
