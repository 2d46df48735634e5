/*
 * Parked long polls: an UPDATE that waits (at most RS_BPOLL_MS) for the
 * object's version to move, answered when an announcement brings a block
 * the poller lacks, when its time is up, or when the object goes.
 */
#include "broadcast/internal.h"
#include "broadcast/source.h"

#include <stdlib.h>
#include <string.h>

#include "broadcast/blocks.h"

rs_bc_parked_t *rs_bc_src_park_new(rs_bc_epinfo_t *info, const rs_bc_req_t *q, uint32_t self_id,
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
            rs_bc_src_reply_status(node, p->info, &q, status);
        else
            rs_bc_src_reply_manifest(node, src, p->info, &q, p->self_id);
        free(p);
    }
}
