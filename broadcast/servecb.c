/*
 * Serving requests in the transport callback. A request queued to the
 * service thread costs two thread hops before its answer leaves (the
 * progress thread wakes to run the callback, then the service thread wakes
 * to serve): on a machine without a spare core, context switches on every
 * reader's critical path (the manifest of a multi-block object, the long
 * polls an announcement answers). A callback may post and send but must not
 * register memory (rs_mem_alloc takes the context lock the callback holds),
 * and serving needs registered staging slots for its replies. So the
 * callback first reserves, without registering, every slot the request can
 * need (slots.c keeps them in this thread's stash); only then does it serve.
 * When the slots are not free (the first requests of a node, a burst), the
 * request goes to the service thread as before, which registers more.
 */
#include "broadcast/servecb.h"
#include "broadcast/source.h"

#include <string.h>

#include "broadcast/blocks.h"
#include "common/log.h"

/* The object's geometry and how many long polls are parked on it; 0 when not served here. */
static int src_peek(rs_bcast_node_t *node, const rs_bc_req_t *q, uint32_t *nblocks,
                    uint32_t *parked)
{
    rs_list_t *pos, *tmp;
    rs_bcast_t *found = NULL;
    if (q->node_id != node->node_id)
        return 0;
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->sources)
    {
        rs_bcast_t *src = RS_CONTAINER_OF(pos, rs_bcast_t, link);
        if (src->seq == q->seq) {
            if (src->state == RS_BSRC_SEALED && !src->is_inline) {
                src->busy++; /* kept while we look */
                found = src;
            }
            break;
        }
    }
    pthread_mutex_unlock(&node->lock);
    if (found == NULL)
        return 0; /* errors and inline objects: answered elsewhere */
    pthread_mutex_lock(&found->lock);
    uint32_t n = 0;
    rs_list_for_each_safe(pos, tmp, &found->parked) n++;
    *nblocks = found->nblocks;
    *parked = n;
    pthread_mutex_unlock(&found->lock);
    pthread_mutex_lock(&node->lock);
    found->busy--;
    pthread_mutex_unlock(&node->lock);
    return 1;
}

int rs_bc_src_serve_cb(rs_bcast_node_t *node, rs_bc_epinfo_t *info, const rs_bc_req_t *q)
{
    uint32_t nblocks, parked, need;
    if (__atomic_load_n(&node->work_queued, __ATOMIC_ACQUIRE) != 0)
        return 0; /* keep this endpoint's order: the service thread has earlier requests */
    if (!src_peek(node, q, &nblocks, &parked))
        return 0;
    /*
     * Slots needed, sized as reply_manifest sizes them: the manifest or the
     * update (and a status reply should it not fit); an announcement may
     * release every parked poll (updates, at most the update's full size).
     */
    size_t upd = rs_bc_reply_meta_len(0) + RS_BREPLY_ACTIVE_BUDGET + RS_BREPLY_HOLDER_BUDGET;
    size_t cap = q->kind == RS_BREQ_GET ? rs_bc_reply_meta_len(nblocks) + RS_BREPLY_ACTIVE_BUDGET +
                                              RS_BREPLY_HOLDER_BUDGET
                                        : upd;
    if (q->kind != RS_BREQ_ANNOUNCE && cap > q->reply_cap)
        cap = q->reply_cap;
    need = q->kind == RS_BREQ_ANNOUNCE ? parked : 1;
    if (!rs_bc_slots_stash_fill(&node->staging, need, cap))
        return 0; /* the service thread registers more */
    /* A manifest that does not fit is answered with a status: a small slot, if one is free. */
    if (q->kind != RS_BREQ_ANNOUNCE)
        rs_bc_slots_stash_fill(&node->staging, 1, RS_BREPLY_MIN_LEN);
    rs_bc_src_serve(node, info, q);
    rs_bc_slots_stash_return();
    return 1;
}
