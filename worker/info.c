/*
 * The worker's INFO answer (rshuffle_info --worker): its counters, the
 * shuffles it holds and its connections, as the worker thread sees them.
 */
#include "worker/internal.h"

#include "common/log.h"

static rs_info_shuffle_t shuffle_info(wshuffle_t *sh)
{
    rs_info_shuffle_t e = {.shuffle_id = sh->id,
                           .n_partitions = sh->n_partitions,
                           .replicas = sh->replicas,
                           .flags = sh->dropped ? RS_INFO_SH_DROPPED : 0,
                           .open_snaps = sh->open_snaps,
                           .spilled_bytes = sh->spill_len};
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &sh->commits)
    {
        const wcommit_t *c = RS_CONTAINER_OF(pos, wcommit_t, link);
        e.maps++;
        for (uint32_t i = 0; i < c->n; i++) {
            e.bytes += c->entries[i].bytes;
            e.batches += c->entries[i].batches;
        }
    }
    return e;
}

static rs_info_conn_t conn_info(wconn_t *c)
{
    rs_info_conn_t e = {.role = (uint32_t)c->role,
                        .shuffle_id = RS_INFO_NONE,
                        .map_id = RS_INFO_NONE,
                        .open_grants = c->open_grants};
    if (c->role == RS_ROLE_PUSHER && c->sh != NULL) { /* NULL: between a client's tasks */
        e.shuffle_id = c->sh->id;
        e.map_id = c->map_id;
        e.attempt = c->attempt;
        e.batches = c->batches;
    }
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &c->snaps)
    {
        const wsnap_t *s = RS_CONTAINER_OF(pos, wsnap_t, link);
        if (e.snaps++ == 0 && c->role == RS_ROLE_READER)
            e.shuffle_id = s->sh->id;
    }
    return e;
}

void rs_wk_on_info(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_worker_t *w = arg;
    rs_smsg_info_t m;
    rs_smsg_info_reply_t r = {.status = rs_sproto_info_decode(data, len, &m)};
    uint8_t *buf = w->msg_buf;
    size_t cap = rs_ctx_config(w->ctx)->msg_max, rlen;
    if (r.status != RS_OK) {
        rs_warn("worker: malformed info request (%s)", rs_strerror(r.status));
        if (rs_sproto_info_reply_encode(&r, buf, cap, &rlen) == RS_OK)
            rs_msg_send(ep, RS_SMSG_INFO_REPLY, buf, rlen, NULL, NULL);
        return;
    }
    if ((m.flags & RS_INFO_REQ_DRAIN) && !__atomic_load_n(&w->draining, __ATOMIC_RELAXED)) {
        rs_info("worker: drain requested by a peer");
        __atomic_store_n(&w->draining, 1, __ATOMIC_RELAXED);
    }
    const rs_worker_stats_t *st = &w->st.stats;
    r.c = (rs_info_counters_t){.batches = st->batches,
                               .bytes = st->bytes,
                               .refused = st->refused,
                               .spilled_bytes = st->spilled_bytes,
                               .backpressure = st->backpressure,
                               .arena_used = st->arena_used,
                               .arena_peak = st->arena_peak,
                               .arena_len = w->st.arena_len,
                               .commits = st->commits,
                               .stray_retires = st->stray_retires};
    r.flags = __atomic_load_n(&w->draining, __ATOMIC_RELAXED) ? RS_INFO_DRAINING : 0;
    /* Shuffles first, then connections, as many as one message holds. */
    uint32_t n_sh = 0, n_conn = 0, want_sh = 0, want_conn = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->st.shuffles)
    {
        wshuffle_t *sh = RS_CONTAINER_OF(pos, wshuffle_t, link);
        r.c.spill_files += sh->spill_fd >= 0;
        want_sh++;
        if (rs_sproto_info_reply_len(n_sh + 1, 0) > cap)
            continue;
        rs_info_shuffle_t e = shuffle_info(sh);
        if (rs_sproto_info_shuffle_put(buf, cap, n_sh, &e) == RS_OK)
            n_sh++;
    }
    rs_list_for_each_safe(pos, tmp, &w->conns)
    {
        wconn_t *c = RS_CONTAINER_OF(pos, wconn_t, link);
        want_conn++;
        if (rs_sproto_info_reply_len(n_sh, n_conn + 1) > cap)
            continue;
        rs_info_conn_t e = conn_info(c);
        if (rs_sproto_info_conn_put(buf, cap, n_sh, n_conn, &e) == RS_OK)
            n_conn++;
    }
    if (n_sh < want_sh || n_conn < want_conn)
        r.flags |= RS_INFO_TRUNCATED;
    r.n_shuffles = n_sh;
    r.n_conns = n_conn;
    if (rs_sproto_info_reply_encode(&r, buf, cap, &rlen) == RS_OK)
        rs_msg_send(ep, RS_SMSG_INFO_REPLY, buf, rlen, NULL, NULL);
}
