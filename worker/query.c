/* rs_worker_query: one INFO request to a running worker (rshuffle_info --worker). */
#include "worker/internal.h"

#include "common/clock.h"
#include "shuffle/name.h"

#include <stdlib.h>
#include <string.h>

typedef struct query_state {
    int answered;
    rs_status_t status;
    rs_worker_info_t *info;
} query_state_t;

static rs_worker_info_t *info_of(const rs_smsg_info_reply_t *m)
{
    rs_worker_info_t *in = calloc(1, sizeof(*in));
    if (in == NULL)
        return NULL;
    in->shuffles = calloc(m->n_shuffles ? m->n_shuffles : 1, sizeof(*in->shuffles));
    in->conns = calloc(m->n_conns ? m->n_conns : 1, sizeof(*in->conns));
    if (in->shuffles == NULL || in->conns == NULL) {
        rs_worker_info_free(in);
        return NULL;
    }
    in->stats = (rs_worker_stats_t){.batches = m->c.batches,
                                    .bytes = m->c.bytes,
                                    .refused = m->c.refused,
                                    .spilled_bytes = m->c.spilled_bytes,
                                    .backpressure = m->c.backpressure,
                                    .arena_used = m->c.arena_used,
                                    .arena_peak = m->c.arena_peak,
                                    .commits = m->c.commits,
                                    .shuffles = m->n_shuffles,
                                    .stray_retires = m->c.stray_retires};
    in->arena_len = m->c.arena_len;
    in->spill_files = m->c.spill_files;
    in->draining = (m->flags & RS_INFO_DRAINING) != 0;
    in->truncated = (m->flags & RS_INFO_TRUNCATED) != 0;
    in->n_shuffles = m->n_shuffles;
    in->n_conns = m->n_conns;
    for (uint32_t i = 0; i < m->n_shuffles; i++) {
        rs_info_shuffle_t e = rs_sproto_info_shuffle_get(m, i);
        in->shuffles[i] = (rs_worker_shuffle_info_t){.shuffle_id = e.shuffle_id,
                                                     .n_partitions = e.n_partitions,
                                                     .maps_committed = e.maps,
                                                     .replicas = e.replicas,
                                                     .dropped = (e.flags & RS_INFO_SH_DROPPED) != 0,
                                                     .open_snapshots = e.open_snaps,
                                                     .bytes = e.bytes,
                                                     .batches = e.batches,
                                                     .spilled_bytes = e.spilled_bytes};
    }
    for (uint32_t i = 0; i < m->n_conns; i++) {
        rs_info_conn_t e = rs_sproto_info_conn_get(m, i);
        in->conns[i] = (rs_worker_conn_info_t){.role = (int)e.role,
                                               .shuffle_id = e.shuffle_id,
                                               .map_id = e.map_id,
                                               .attempt = e.attempt,
                                               .open_snapshots = e.snaps,
                                               .open_grants = e.open_grants,
                                               .batches = e.batches};
    }
    return in;
}

static void on_info_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    query_state_t *q = arg;
    rs_smsg_info_reply_t m;
    if (q->answered)
        return;
    q->answered = 1;
    q->status = rs_sproto_info_reply_decode(data, len, &m);
    if (q->status == RS_OK)
        q->status = m.status;
    if (q->status == RS_OK && (q->info = info_of(&m)) == NULL)
        q->status = RS_ERR_NOMEM;
}

static rs_status_t query(const char *worker, const rs_config_t *tcfg, uint32_t flags,
                         rs_worker_info_t **info_p)
{
    if (worker == NULL)
        return RS_ERR_INVALID;
    rs_ctx_t *ctx;
    rs_status_t s = rs_ctx_create(tcfg, &ctx);
    if (s != RS_OK)
        return s;
    query_state_t q = {.status = RS_ERR_TIMEOUT};
    rs_ep_t *ep = NULL;
    s = rs_set_msg_handler(ctx, RS_SMSG_INFO_REPLY, on_info_reply, &q);
    if (s == RS_OK)
        s = rs_sproto_name_connect(ctx, worker, &ep);
    if (s != RS_OK)
        goto out_ctx;
    rs_smsg_info_t m = {.status = RS_OK, .flags = flags};
    uint8_t buf[RS_SPROTO_INFO_LEN];
    size_t len;
    s = rs_sproto_info_encode(&m, buf, sizeof(buf), &len);
    if (s == RS_OK)
        s = rs_msg_send(ep, RS_SMSG_INFO, buf, len, NULL, NULL);
    uint64_t deadline = rs_now_coarse_ns() + RS_MS_TO_NS(rs_ctx_config(ctx)->connect_timeout_ms);
    while (s == RS_OK && !q.answered && rs_ep_status(ep) == RS_OK && rs_now_coarse_ns() < deadline)
        rs_wait(ctx, 10);
    if (s == RS_OK && !q.answered && rs_ep_status(ep) != RS_OK)
        s = RS_ERR_UNREACHABLE;
    if (s == RS_OK)
        s = q.status;
    rs_ep_close(ep);
out_ctx:
    rs_ctx_destroy(ctx);
    if (s != RS_OK) {
        rs_worker_info_free(q.info);
        return s;
    }
    if (info_p != NULL)
        *info_p = q.info;
    else
        rs_worker_info_free(q.info);
    return RS_OK;
}

rs_status_t rs_worker_query(const char *worker, const rs_config_t *tcfg, rs_worker_info_t **info_p)
{
    return info_p != NULL ? query(worker, tcfg, 0, info_p) : RS_ERR_INVALID;
}

rs_status_t rs_worker_request_drain(const char *worker, const rs_config_t *tcfg,
                                    rs_worker_info_t **info_p)
{
    return query(worker, tcfg, RS_INFO_REQ_DRAIN, info_p);
}

void rs_worker_info_free(rs_worker_info_t *info)
{
    if (info == NULL)
        return;
    free(info->shuffles);
    free(info->conns);
    free(info);
}
