/*
 * Verbs backend: helpers every file of the backend shares (the context
 * accessor, the QP-number -> endpoint table, the wake-up of a sleeping
 * waiter, completion status mapping). They live apart from ctx.c, which
 * holds the ops table, so the backend's call graph has no circle: ctx.c
 * calls into cm.c, post.c and mem.c, and those call only into here and
 * each other downward.
 */
#include "transport/verbs/verbs.h"

#include <stdint.h>
#include <unistd.h>

rs_vctx_t *rs_verbs_vctx(const rs_ctx_t *ctx)
{
    return rs_tp_ctx_be(ctx);
}

/* ------------------------------------------------------- QP number table */

static unsigned qp_bucket(uint32_t qp_num)
{
    return (qp_num * 2654435761u) >> 24 & (RS_V_QP_BUCKETS - 1);
}

void rs_verbs_qp_table_add(rs_vctx_t *vc, rs_vep_t *v)
{
    unsigned b = qp_bucket(v->qp_num);
    v->hnext = vc->qp_table[b];
    vc->qp_table[b] = v;
    v->in_table = 1;
}

void rs_verbs_qp_table_del(rs_vctx_t *vc, rs_vep_t *v)
{
    if (!v->in_table)
        return;
    for (rs_vep_t **pp = &vc->qp_table[qp_bucket(v->qp_num)]; *pp != NULL; pp = &(*pp)->hnext) {
        if (*pp == v) {
            *pp = v->hnext;
            break;
        }
    }
    v->in_table = 0;
}

rs_vep_t *rs_verbs_qp_table_find(rs_vctx_t *vc, uint32_t qp_num)
{
    rs_vep_t *v = vc->qp_table[qp_bucket(qp_num)];
    while (v != NULL && v->qp_num != qp_num)
        v = v->hnext;
    return v;
}

rs_status_t rs_verbs_wc_status(enum ibv_wc_status st)
{
    switch (st) {
        case IBV_WC_SUCCESS:
            return RS_OK;
        case IBV_WC_RETRY_EXC_ERR:
        case IBV_WC_RNR_RETRY_EXC_ERR:
        case IBV_WC_WR_FLUSH_ERR:
        case IBV_WC_RESP_TIMEOUT_ERR:
            return RS_ERR_UNREACHABLE;
        case IBV_WC_REM_ACCESS_ERR:
            return RS_ERR_BAD_RKEY;
        default:
            return RS_ERR_TRANSPORT;
    }
}

void rs_verbs_wake(rs_vctx_t *vc)
{
    if (!vc->armed)
        return;
    vc->armed = 0;
    vc->woken = 1;
    uint64_t one = 1;
    ssize_t unused = write(vc->wake_fd, &one, sizeof(one));
    (void)unused;
}
