/*
 * Replicas (R >= 2): which worker serves a partition, and when a worker
 * counts as lost for the rest of the session.
 */
#include "reader/internal.h"

#include "common/log.h"

int rs_rd_sess_lost(rs_reader_session_t *s, rconn_t *c, rs_status_t st)
{
    if (s->replicas < 2 || c->lost)
        return 0;
    if (st == RS_ERR_TIMEOUT && c->ep != NULL && rs_ep_status(c->ep) == RS_OK &&
        s->open_readers <= 1 && rs_ctx_renew_due(s->ctx)) {
        rs_warn("reader: worker %s silent after a worker of this host exited: trying it again "
                "on a renewed receive queue",
                c->addr);
        return 1;
    }
    int dead = st == RS_ERR_UNREACHABLE || st == RS_ERR_TIMEOUT || st == RS_ERR_REFUSED ||
               st == RS_ERR_CANCELED || st == RS_ERR_TRANSPORT ||
               (c->ep != NULL && rs_ep_status(c->ep) != RS_OK);
    if (!dead)
        return 0;
    c->lost = 1;
    rs_warn("reader: worker %s lost (%s): its partitions are read from their other replicas",
            c->addr, rs_strerror(st));
    return 0;
}

rs_status_t rs_rd_sess_replica(rs_reader_session_t *s, uint32_t partition, uint32_t *worker_p)
{
    for (uint32_t k = 0; k < s->replicas; k++) {
        uint32_t w;
        rs_status_t st = rs_shuffle_replica(&s->desc, partition, k, &w);
        if (st != RS_OK)
            return st;
        if (!s->conns[w].lost) {
            *worker_p = w;
            return RS_OK;
        }
    }
    return RS_ERR_UNREACHABLE;
}
