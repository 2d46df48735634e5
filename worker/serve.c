/*
 * The worker's protocol handlers (docs/shuffle.md, "Protocol"). They run on
 * the worker thread inside rs_wait, with the transport lock held; a refused
 * request gets an error reply and changes nothing else.
 */
#include "worker/internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <rshuffle/codec.h>

#include <stdlib.h>
#include <string.h>

static void reply_status(rs_ep_t *ep, unsigned type, rs_status_t status)
{
    uint8_t buf[RS_SPROTO_HDR_LEN];
    size_t len;
    if (rs_sproto_status_encode(type, status, buf, sizeof(buf), &len) == RS_OK)
        rs_msg_send(ep, type, buf, len, NULL, NULL);
}

static wconn_t *conn_of(rs_ep_t *ep)
{
    return rs_ep_user(ep);
}

/* ---------------------------------------------------------------- attach */

static void commit_reset(wconn_t *c);

/* What a connection keeps of one pusher attach: its grants, arrivals and commit. */
static void pusher_reset(rs_worker_t *w, wconn_t *c)
{
    for (uint32_t i = 0; i < c->n_slots; i++) {
        if (c->slots[i] != NULL)
            rs_wk_store_grant_free(&w->st, c->slots[i]);
        c->slots[i] = NULL;
    }
    c->n_free = 0;
    for (uint32_t i = c->n_slots; i > 0; i--) /* lowest numbers on top */
        c->free_slots[c->n_free++] = i - 1;
    c->open_grants = 0;
    if (c->sh != NULL)
        rs_wk_store_pusher_detach(&w->st, c->sh);
    c->sh = NULL;
    free(c->stats);
    c->stats = NULL;
    commit_reset(c);
    if (c->seen != NULL)
        memset(c->seen, 0, c->seen_bits / 8);
    c->batches = c->distinct = 0;
    c->commit_total = 0;
}

/*
 * Is (map_id, attempt) of sh attached on another live pusher connection, or
 * committed? Two pushers of one attempt would mix their batches under one
 * identity: the second is refused at attach, never found out at read.
 */
static int attempt_taken(rs_worker_t *w, const wconn_t *self, const wshuffle_t *sh, uint32_t map_id,
                         uint32_t attempt)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->conns)
    {
        const wconn_t *o = RS_CONTAINER_OF(pos, wconn_t, link);
        if (o != self && o->role == RS_ROLE_PUSHER && o->sh == sh && o->map_id == map_id &&
            o->attempt == attempt)
            return 1;
    }
    rs_list_for_each_safe(pos, tmp, &sh->commits)
    {
        const wcommit_t *cm = RS_CONTAINER_OF(pos, wcommit_t, link);
        if (cm->map_id == map_id && cm->attempt == attempt)
            return 1;
    }
    return 0;
}

/*
 * A shuffle id is held for one registration (generation) at a time: another
 * job's pushes would replace its commits, and its readers would be served
 * this one's records.
 */
static void generation_refused(const wshuffle_t *sh, uint32_t role, uint64_t generation)
{
    rs_warn("worker: shuffle %u is held for generation %llu; a %s of generation %llu is refused "
            "(RS_ERR_EXISTS) until it is dropped",
            sh->id, (unsigned long long)sh->generation,
            role == RS_ROLE_PUSHER ? "pusher" : "reader", (unsigned long long)generation);
}

static void on_attach(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_worker_t *w = arg;
    wconn_t *c = conn_of(ep);
    rs_smsg_attach_t m;
    rs_status_t s = rs_sproto_attach_decode(data, len, &m);
    if (c == NULL || s != RS_OK) {
        rs_warn("worker: malformed attach (%s)", rs_strerror(s));
        reply_status(ep, RS_SMSG_ATTACH_REPLY, s != RS_OK ? s : RS_ERR_STATE);
        return;
    }
    if (c->role != 0 && c->role != (int)m.role) {
        reply_status(ep, RS_SMSG_ATTACH_REPLY, RS_ERR_PROTOCOL);
        return;
    }
    /*
     * A client's connection carries its tasks one after the other: a new
     * attach ends the previous one (committed already, or abandoned: then
     * never committed, as if its connection had closed).
     */
    if (c->role == RS_ROLE_PUSHER)
        pusher_reset(w, c);
    wshuffle_t *sh = rs_wk_store_find(&w->st, m.shuffle_id);
    if (sh != NULL && sh->generation != m.generation) {
        generation_refused(sh, m.role, m.generation);
        reply_status(ep, RS_SMSG_ATTACH_REPLY, RS_ERR_EXISTS);
        return;
    }
    uint32_t replicas = m.replicas ? m.replicas : 1;
    if (m.role == RS_ROLE_PUSHER && sh != NULL && sh->replicas != 0 && sh->replicas != replicas) {
        /* Readers trust only the replicas the pushers wrote to: all must agree on R. */
        rs_warn("worker: shuffle %u is pushed with %u replicas, refused a pusher with %u",
                m.shuffle_id, sh->replicas, replicas);
        reply_status(ep, RS_SMSG_ATTACH_REPLY, RS_ERR_INVALID);
        return;
    }
    if (m.role == RS_ROLE_PUSHER && __atomic_load_n(&w->draining, __ATOMIC_RELAXED)) {
        /* Draining (rs_worker_drain): what it holds is read, nothing new is taken. */
        rs_info("worker: draining, refused map %u of shuffle %u", m.map_id, m.shuffle_id);
        reply_status(ep, RS_SMSG_ATTACH_REPLY, RS_ERR_STATE);
        return;
    }
    if (m.role == RS_ROLE_PUSHER && sh != NULL && attempt_taken(w, c, sh, m.map_id, m.attempt)) {
        rs_warn("worker: shuffle %u map %u attempt %u is already open or committed, refused a "
                "second pusher of it",
                m.shuffle_id, m.map_id, m.attempt);
        reply_status(ep, RS_SMSG_ATTACH_REPLY, RS_ERR_EXISTS);
        return;
    }
    if (m.role == RS_ROLE_PUSHER) {
        int fresh = sh == NULL;
        s = rs_wk_store_attach(&w->st, m.shuffle_id, m.n_partitions, &sh);
        if (s != RS_OK) {
            reply_status(ep, RS_SMSG_ATTACH_REPLY, s);
            return;
        }
        if (fresh)
            sh->generation = m.generation;
        c->stats = calloc(sh->n_partitions, sizeof(*c->stats));
        if (c->stats == NULL) {
            reply_status(ep, RS_SMSG_ATTACH_REPLY, RS_ERR_NOMEM);
            return;
        }
        c->sh = sh;
        sh->pushers++;
        sh->replicas = replicas;
        c->map_id = m.map_id;
        c->attempt = m.attempt;
    }
    c->role = (int)m.role;
    c->generation = m.generation;
    uint8_t buf[RS_SPROTO_ATTACH_REPLY_LEN + RS_RKEY_BLOB_MAX];
    rs_smsg_attach_reply_t r = {.status = RS_OK,
                                .arena_len = w->st.arena_len,
                                .rkey = w->rkey,
                                .rkey_len = (uint32_t)w->rkey_len,
                                .replicas = sh != NULL ? sh->replicas : 0};
    size_t rlen;
    if (rs_sproto_attach_reply_encode(&r, buf, sizeof(buf), &rlen) == RS_OK)
        rs_msg_send(ep, RS_SMSG_ATTACH_REPLY, buf, rlen, NULL, NULL);
}

/* ---------------------------------------------------------------- grants */

/* A grant leaves its slot once the pusher retired it and all its bytes arrived. */
/* A free slot in O(1): grants come and go by the hundred thousand with many partitions. */
static rs_status_t slot_alloc(wconn_t *c, wgrant_t *g)
{
    if (c->n_free == 0) {
        if (c->n_slots == RS_GRANT_SLOTS)
            return RS_ERR_BUSY;
        uint32_t n = c->n_slots ? 2 * c->n_slots : 64;
        if (n > RS_GRANT_SLOTS)
            n = RS_GRANT_SLOTS;
        wgrant_t **s = realloc(c->slots, n * sizeof(*s));
        if (s == NULL)
            return RS_ERR_NOMEM;
        c->slots = s;
        uint32_t *f = realloc(c->free_slots, n * sizeof(*f));
        if (f == NULL)
            return RS_ERR_NOMEM; /* slots grown, none added: the next call tries again */
        c->free_slots = f;
        memset(s + c->n_slots, 0, (n - c->n_slots) * sizeof(*s));
        for (uint32_t i = n; i > c->n_slots; i--) /* lowest numbers on top */
            f[c->n_free++] = i - 1;
        c->n_slots = n;
    }
    uint32_t slot = c->free_slots[--c->n_free];
    c->slots[slot] = g;
    g->slot = slot;
    return RS_OK;
}

/* The pusher is done with the grant in slot after used bytes. */
static void grant_retire(rs_worker_t *w, wconn_t *c, uint32_t slot, uint32_t partition,
                         uint64_t used)
{
    wgrant_t *g = slot < c->n_slots ? c->slots[slot] : NULL;
    if (g == NULL || g->partition != partition || g->retired) {
        rs_warn("worker: retire of grant slot %u (partition %u) that is not open", slot, partition);
        w->st.stats.stray_retires++;
        return;
    }
    rs_wk_store_retire(&w->st, g, used);
    c->open_grants--;
    rs_wk_slot_maybe_free(w, c, g);
}

/* Every grant the pusher still holds ends here (its commit: all its batches arrived). */
static void grants_retire_all(rs_worker_t *w, wconn_t *c)
{
    for (uint32_t i = 0; i < c->n_slots; i++) {
        wgrant_t *g = c->slots[i];
        if (g != NULL && !g->retired)
            grant_retire(w, c, i, g->partition, g->settled);
    }
}

/*
 * Memory is short: ask every pusher holding grants to give back the room it
 * is not using (at most once per retry interval each). Their retires release
 * extents, which can then be spilled.
 */
static void reclaim_broadcast(rs_worker_t *w)
{
    uint64_t now = rs_now_coarse_ns();
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &w->conns)
    {
        wconn_t *c = RS_CONTAINER_OF(pos, wconn_t, link);
        if (c->role != RS_ROLE_PUSHER || c->open_grants == 0 ||
            now - c->reclaim_at < RS_MS_TO_NS(w->st.cfg.retry_ms))
            continue;
        c->reclaim_at = now;
        reply_status(c->ep, RS_SMSG_RECLAIM, RS_OK);
    }
}

static void on_grant_req(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_worker_t *w = arg;
    wconn_t *c = conn_of(ep);
    rs_smsg_grant_req_t m;
    rs_status_t s = rs_sproto_grant_req_decode(data, len, &m);
    size_t msg_max = rs_ctx_config(w->ctx)->msg_max;
    size_t max_n = rs_sproto_grant_max(msg_max);
    if (s == RS_OK && (c == NULL || c->role != RS_ROLE_PUSHER || c->sh == NULL))
        s = RS_ERR_STATE;
    if (s == RS_OK && c->sh->dropped)
        s = RS_ERR_NOT_FOUND;
    if (s == RS_OK && m.n > max_n)
        s = RS_ERR_MSG_SIZE;
    if (s != RS_OK) {
        rs_warn("worker: grant request refused: %s", rs_strerror(s));
        rs_smsg_grant_t r = {.status = s, .n = 0};
        uint8_t rbuf[RS_SPROTO_GRANT_LEN];
        size_t rlen;
        if (rs_sproto_grant_encode(&r, rbuf, sizeof(rbuf), &rlen) == RS_OK)
            rs_msg_send(ep, RS_SMSG_GRANT, rbuf, rlen, NULL, NULL);
        return;
    }
    uint8_t *buf = w->msg_buf;
    rs_smsg_grant_t r = {.status = RS_OK, .req_id = m.req_id, .n = m.n, .retry_ms = 0};
    int backpressure = 0;
    for (uint32_t i = 0; i < m.n; i++) {
        rs_grant_want_t wt = rs_sproto_grant_want_get(&m, i);
        rs_grant_t gr = {.partition = wt.partition, .status = RS_OK};
        int merged = (wt.flags & RS_GRANT_MERGED) != 0; /* then partition is RS_MERGED_PART */
        if (wt.partition >= c->sh->n_partitions && !merged) {
            rs_warn("worker: grant for partition %u of shuffle %u (%u partitions) refused",
                    wt.partition, c->sh->id, c->sh->n_partitions);
            gr.status = RS_ERR_NOT_FOUND;
            rs_sproto_grant_put(buf, msg_max, i, &gr);
            continue;
        }
        if (wt.retire_slot != RS_SLOT_NONE)
            grant_retire(w, c, wt.retire_slot, wt.partition, wt.retire_used);
        wgrant_t *g = NULL;
        if (wt.want == 0)
            s = RS_OK;
        else if (c->n_free == 0 && c->n_slots == RS_GRANT_SLOTS)
            s = RS_ERR_BUSY; /* no slot: carve nothing (the pusher asks again later) */
        else if (merged)
            s = rs_wk_store_grant_merged(&w->st, c->sh, wt.want, &g);
        else
            s = rs_wk_store_grant(&w->st, c->sh, wt.partition, wt.want, wt.flags, &g);
        if (s == RS_OK && g != NULL) {
            s = slot_alloc(c, g);
            if (s != RS_OK) {
                rs_wk_store_grant_free(&w->st, g);
                g = NULL;
            }
        }
        if (g != NULL) {
            c->open_grants++;
            gr.slot = g->slot;
            gr.off = g->off;
            gr.len = g->len;
        }
        gr.status = s;
        if (s == RS_ERR_BACKPRESSURE)
            backpressure = 1;
        rs_sproto_grant_put(buf, msg_max, i, &gr);
    }
    if (backpressure)
        r.retry_ms = w->st.cfg.retry_ms;
    size_t rlen; /* m.n <= max_n: it fits */
    if (rs_sproto_grant_encode(&r, buf, msg_max, &rlen) == RS_OK)
        rs_msg_send(ep, RS_SMSG_GRANT, buf, rlen, NULL, NULL);
    if (backpressure)
        reclaim_broadcast(w);
}

/* ----------------------------------------------------------- batch arrival */

static void on_notify(void *arg, rs_ep_t *ep, uint32_t imm)
{
    rs_worker_t *w = arg;
    wconn_t *c = conn_of(ep);
    if (c == NULL || c->role != RS_ROLE_PUSHER || c->sh == NULL) {
        rs_warn("worker: notification from an endpoint that is not an attached pusher");
        return;
    }
    uint32_t slot = rs_imm_slot(imm);
    uint64_t in = rs_imm_off(imm);
    wgrant_t *g = slot < c->n_slots ? c->slots[slot] : NULL;
    if (g == NULL || in >= g->len) {
        rs_warn("worker: batch notification outside any grant (slot %u, offset %llu)", slot,
                (unsigned long long)in);
        rs_wk_nack(w, c, UINT32_MAX, imm, 0, RS_ERR_OUT_OF_RANGE);
        return;
    }
    if (g->partition == RS_MERGED_PART) { /* frames of many partitions: worker/merged.c */
        rs_wk_merged_arrived(w, c, g, in, imm);
        rs_wk_slot_maybe_free(w, c, g);
        if (c->commit_pending)
            rs_wk_commit_check(w, c, 0);
        return;
    }
    const uint8_t *frame = w->st.arena + g->off + in;
    size_t room = (size_t)(g->len - in);
    rs_frame_t f;
    rs_status_t s = rs_wk_frame_check(w, c, frame, room, g->partition, &f);
    if (s != RS_OK) {
        rs_warn("worker: batch of shuffle %u partition %u refused: %s", c->sh->id, g->partition,
                rs_strerror(s));
        rs_wk_store_settle(&w->st, g, room < RS_SPROTO_ALIGN ? room : RS_SPROTO_ALIGN);
        rs_wk_nack(w, c, g->partition, imm, 0, s);
        rs_wk_slot_maybe_free(w, c, g);
        return;
    }
    rs_snap_entry_t e = {.loc = g->off + in,
                         .len = (uint32_t)f.frame_len,
                         .map_id = f.ids.map_id,
                         .attempt = f.ids.attempt,
                         .seq = f.ids.seq};
    s = rs_wk_store_add_entry(&w->st, g, &e);
    if (s != RS_OK) {
        rs_wk_nack(w, c, g->partition, imm, f.ids.seq, s);
        return;
    }
    /* A repeated batch (a retry) stays in the index for readers to drop, but counts once. */
    if (rs_wk_seen(c, f.ids.seq)) {
        rs_info("worker: batch %llu of map %u partition %u arrived again (slot %u offset %llu)",
                (unsigned long long)f.ids.seq, c->map_id, g->partition, slot,
                (unsigned long long)in);
    } else {
        c->distinct++;
        wpstat_t *ps = &c->stats[g->partition];
        ps->batches++;
        ps->bytes += f.frame_len;
        ps->checksum += f.checksum;
    }
    c->batches++;
    rs_wk_store_settle(&w->st, g, f.frame_len);
    rs_wk_slot_maybe_free(w, c, g);
    if (c->commit_pending)
        rs_wk_commit_check(w, c, 0);
}

/* ---------------------------------------------------------------- commit */

static void commit_reset(wconn_t *c)
{
    free(c->commit);
    c->commit = NULL;
    c->commit_n = c->commit_cap = 0;
    c->commit_pending = 0;
}

static int cmp_entry(const void *a, const void *b)
{
    const rs_commit_entry_t *x = a, *y = b;
    return (x->partition > y->partition) - (x->partition < y->partition);
}

/* Replies to a pending commit once every announced batch arrived (or it timed out). */
void rs_wk_commit_check(rs_worker_t *w, wconn_t *c, int timed_out)
{
    if (!c->commit_pending)
        return;
    if (c->batches < c->commit_total && !timed_out)
        return;
    rs_status_t s = RS_OK;
    if (c->batches != c->commit_total) {
        rs_warn("worker: map %u attempt %u committed %llu batches, %llu arrived", c->map_id,
                c->attempt, (unsigned long long)c->commit_total, (unsigned long long)c->batches);
        s = c->batches < c->commit_total ? RS_ERR_TIMEOUT : RS_ERR_PROTOCOL;
    }
    uint64_t listed = 0;
    for (uint32_t i = 0; s == RS_OK && i < c->commit_n; i++) {
        const rs_commit_entry_t *e = &c->commit[i];
        const wpstat_t *ps = &c->stats[e->partition];
        listed += e->batches;
        if (ps->batches != e->batches || ps->bytes != e->bytes || ps->checksum != e->checksum) {
            rs_warn("worker: map %u attempt %u partition %u: commit says %u batches, %llu bytes; "
                    "%u batches, %llu bytes arrived",
                    c->map_id, c->attempt, e->partition, e->batches, (unsigned long long)e->bytes,
                    ps->batches, (unsigned long long)ps->bytes);
            s = RS_ERR_CHECKSUM;
        }
    }
    if (s == RS_OK && listed != c->distinct)
        s = RS_ERR_PROTOCOL;
    if (s == RS_OK) {
        /*
         * Pushers list partitions in order: checking costs one pass, where
         * sorting 20,000 entries per map took a visible share of the thread.
         */
        uint32_t i = 1;
        while (i < c->commit_n && c->commit[i - 1].partition <= c->commit[i].partition)
            i++;
        if (i < c->commit_n) /* a map with nothing for this worker commits no entries */
            qsort(c->commit, c->commit_n, sizeof(*c->commit), cmp_entry);
        rs_wk_store_commit(&w->st, c->sh, c->map_id, c->attempt, c->commit, c->commit_n);
        c->commit = NULL; /* the store owns the entries now */
        c->committed = 1;
        grants_retire_all(w, c);
    }
    int committed = s == RS_OK;
    rs_wk_stats_publish(w); /* a committed map's batches show in the stats from now on */
    reply_status(c->ep, RS_SMSG_COMMIT_REPLY, s);
    commit_reset(c);
    if (committed) /* the attach is over: a dropped shuffle need not wait for the connection */
        pusher_reset(w, c);
}

static void on_commit(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_worker_t *w = arg;
    wconn_t *c = conn_of(ep);
    rs_smsg_commit_t m;
    rs_status_t s = rs_sproto_commit_decode(data, len, &m);
    if (s == RS_OK &&
        (c == NULL || c->role != RS_ROLE_PUSHER || c->sh == NULL || c->commit_pending))
        s = RS_ERR_STATE;
    if (s == RS_OK && c->sh->dropped)
        s = RS_ERR_NOT_FOUND;
    for (uint32_t i = 0; s == RS_OK && i < m.n; i++) {
        rs_commit_entry_t e = rs_sproto_commit_get(&m, i);
        if (e.partition >= c->sh->n_partitions)
            s = RS_ERR_NOT_FOUND;
    }
    if (s == RS_OK && c->commit_n + m.n > c->commit_cap) {
        /* Doubling: a commit of 100,000 partitions comes in hundreds of chunks. */
        uint32_t cap =
            c->commit_n + m.n > 2 * c->commit_cap ? c->commit_n + m.n + 64 : 2 * c->commit_cap;
        rs_commit_entry_t *n = realloc(c->commit, cap * sizeof(*n));
        if (n == NULL)
            s = RS_ERR_NOMEM;
        else
            c->commit = n, c->commit_cap = cap;
    }
    if (s != RS_OK) {
        rs_warn("worker: commit refused: %s", rs_strerror(s));
        if (c != NULL)
            commit_reset(c);
        reply_status(ep, RS_SMSG_COMMIT_REPLY, s);
        return;
    }
    for (uint32_t i = 0; i < m.n; i++)
        c->commit[c->commit_n + i] = rs_sproto_commit_get(&m, i);
    c->commit_n += m.n;
    if (!m.last)
        return;
    c->commit_total = m.total_batches;
    c->commit_pending = 1;
    c->commit_deadline = rs_now_coarse_ns() + RS_MS_TO_NS(w->st.cfg.commit_wait_ms);
    rs_wk_commit_check(w, c, 0);
}

/* ----------------------------------------------------------------- reads */

static wsnap_t *snap_find(wconn_t *c, uint32_t id)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &c->snaps)
    {
        wsnap_t *s = RS_CONTAINER_OF(pos, wsnap_t, link);
        if (s->id == id)
            return s;
    }
    return NULL;
}

/* inline_len is at most msg_max - RS_SPROTO_READ_REPLY_LEN; inline_buf may be where it goes. */
static void read_reply(rs_worker_t *w, rs_ep_t *ep, rs_status_t s, uint32_t tag,
                       const wsnap_t *snap, const void *inline_buf, size_t inline_len)
{
    size_t len;
    uint8_t *buf = w->msg_buf;
    rs_smsg_read_reply_t r = {.status = s, .tag = tag};
    if (snap != NULL) {
        r.snap_id = snap->id;
        r.index_off = inline_len > 0 ? RS_SPROTO_INLINE : snap->index.off;
        r.index_len = inline_len > 0 ? inline_len : snap->index_bytes;
        r.index = inline_buf;
    }
    if (rs_sproto_read_reply_encode(&r, buf, rs_ctx_config(w->ctx)->msg_max, &len) == RS_OK)
        rs_msg_send(ep, RS_SMSG_READ_REPLY, buf, len, NULL, NULL);
}

static void on_read_open(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_worker_t *w = arg;
    wconn_t *c = conn_of(ep);
    rs_smsg_read_open_t m = {0};
    rs_status_t s = rs_sproto_read_open_decode(data, len, &m);
    if (s == RS_OK && (c == NULL || c->role != RS_ROLE_READER))
        s = RS_ERR_STATE;
    wshuffle_t *sh = NULL;
    if (s == RS_OK) {
        sh = rs_wk_store_find(&w->st, m.shuffle_id);
        if (sh != NULL && m.n_partitions != 0 && m.n_partitions != sh->n_partitions) {
            rs_warn("worker: shuffle %u has %u partitions, refused a reader that says %u",
                    m.shuffle_id, sh->n_partitions, m.n_partitions);
            s = RS_ERR_INVALID;
        } else if (sh == NULL || m.partition >= sh->n_partitions) {
            /* Once per connection: a reader of a restarted worker asks for every partition. */
            if (!c->said_unknown)
                rs_warn("worker: read of unknown shuffle %u partition %u refused", m.shuffle_id,
                        m.partition);
            c->said_unknown = 1;
            s = RS_ERR_NOT_FOUND;
        } else if (sh->generation != c->generation) {
            generation_refused(sh, RS_ROLE_READER, c->generation);
            s = RS_ERR_EXISTS;
        }
    }
    size_t index_len = 0;
    wsnap_t *snap = NULL;
    /* A small index is built where the reply carries it: no copy. */
    uint8_t *inline_buf = w->msg_buf + RS_SPROTO_READ_REPLY_LEN;
    size_t inline_max = rs_ctx_config(w->ctx)->msg_max - RS_SPROTO_READ_REPLY_LEN;
    if (s == RS_OK)
        s = rs_wk_store_snap_open(&w->st, sh, m.partition, inline_buf, inline_max, &snap,
                                  &index_len);
    if (s != RS_OK) {
        read_reply(w, ep, s, m.tag, NULL, NULL, 0);
        return;
    }
    rs_list_add_tail(&c->snaps, &snap->link);
    if (snap->index.len == 0)
        read_reply(w, ep, RS_OK, m.tag, snap, inline_buf, index_len);
    else
        read_reply(w, ep, RS_OK, m.tag, snap, NULL, 0);
}

static void on_spill_load(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_worker_t *w = arg;
    wconn_t *c = conn_of(ep);
    rs_smsg_spill_load_t m = {0};
    rs_smsg_spill_reply_t r = {0};
    rs_status_t s = rs_sproto_spill_load_decode(data, len, &m);
    wsnap_t *snap = NULL;
    if (s == RS_OK) {
        snap = c != NULL ? snap_find(c, m.snap_id) : NULL;
        if (snap == NULL)
            s = RS_ERR_NOT_FOUND;
    }
    uint32_t staged = 0;
    if (s == RS_OK)
        s = rs_wk_store_stage(&w->st, snap, m.first, m.n, &staged);
    if (s == RS_OK) {
        r.off = snap->stage.off;
        r.len = snap->stage.len;
        r.n = staged;
    } else if (s == RS_ERR_BACKPRESSURE) {
        r.retry_ms = w->st.cfg.retry_ms;
        reclaim_broadcast(w);
    } else {
        rs_warn("worker: spill load refused: %s", rs_strerror(s));
    }
    r.tag = m.tag;
    r.status = s;
    uint8_t buf[RS_SPROTO_SPILL_REPLY_LEN];
    size_t rlen;
    if (rs_sproto_spill_reply_encode(&r, buf, sizeof(buf), &rlen) == RS_OK)
        rs_msg_send(ep, RS_SMSG_SPILL_REPLY, buf, rlen, NULL, NULL);
}

static void snap_close(rs_worker_t *w, wsnap_t *snap)
{
    rs_list_del(&snap->link);
    rs_wk_store_snap_close(&w->st, snap);
}

static void on_read_close(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_worker_t *w = arg;
    wconn_t *c = conn_of(ep);
    rs_smsg_read_close_t m;
    if (rs_sproto_read_close_decode(data, len, &m) != RS_OK || c == NULL)
        return;
    wsnap_t *snap = snap_find(c, m.snap_id);
    if (snap != NULL)
        snap_close(w, snap);
}

static void on_drop(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    rs_worker_t *w = arg;
    rs_smsg_drop_t m;
    rs_status_t s = rs_sproto_drop_decode(data, len, &m);
    if (s == RS_OK) {
        wshuffle_t *sh = rs_wk_store_find(&w->st, m.shuffle_id);
        if (sh == NULL)
            s = RS_ERR_NOT_FOUND;
        else
            rs_wk_store_drop(&w->st, sh);
    }
    reply_status(ep, RS_SMSG_DROP_REPLY, s);
}

/* ---------------------------------------------------------- connections */

void rs_wk_conn_free(rs_worker_t *w, wconn_t *c)
{
    for (uint32_t i = 0; i < c->n_slots; i++)
        if (c->slots[i] != NULL)
            rs_wk_store_grant_free(&w->st, c->slots[i]);
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &c->snaps) snap_close(w, RS_CONTAINER_OF(pos, wsnap_t, link));
    if (c->sh != NULL)
        rs_wk_store_pusher_detach(&w->st, c->sh);
    free(c->slots);
    free(c->free_slots);
    free(c->stats);
    free(c->commit);
    free(c->seen);
    rs_list_del(&c->link);
    free(c);
}

static void on_ep(void *arg, rs_ep_t *ep, rs_status_t status)
{
    rs_worker_t *w = arg;
    if (status == RS_OK) {
        wconn_t *c = calloc(1, sizeof(*c));
        if (c == NULL)
            return; /* the peer's requests then get no reply and time out */
        c->ep = ep;
        rs_list_init(&c->snaps);
        rs_list_add_tail(&w->conns, &c->link);
        rs_ep_set_user(ep, c);
        return;
    }
    wconn_t *c = conn_of(ep);
    if (c != NULL && c->role == RS_ROLE_PUSHER && !c->committed)
        rs_warn("worker: pusher of shuffle %u map %u attempt %u gone before its commit (%s): "
                "its %llu batches here stay uncommitted (readers skip them)",
                c->sh->id, c->map_id, c->attempt, rs_strerror(status),
                (unsigned long long)c->batches);
    else if (c != NULL)
        rs_info("worker: peer gone (%s); its grants are released", rs_strerror(status));
    if (c != NULL) {
        rs_wk_conn_free(w, c);
        rs_ep_set_user(ep, NULL);
    }
    rs_wk_defer_close(w, ep);
}

rs_status_t rs_wk_handlers(rs_worker_t *w)
{
    static const struct {
        unsigned type;
        rs_msg_cb_t cb;
    } h[] = {
        {RS_SMSG_ATTACH, on_attach},
        {RS_SMSG_GRANT_REQ, on_grant_req},
        {RS_SMSG_COMMIT, on_commit},
        {RS_SMSG_READ_OPEN, on_read_open},
        {RS_SMSG_SPILL_LOAD, on_spill_load},
        {RS_SMSG_READ_CLOSE, on_read_close},
        {RS_SMSG_DROP, on_drop},
        {RS_SMSG_INFO, rs_wk_on_info},
    };
    for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
        rs_status_t s = rs_set_msg_handler(w->ctx, h[i].type, h[i].cb, w);
        if (s != RS_OK)
            return s;
    }
    rs_set_notify_handler(w->ctx, on_notify, w);
    rs_set_ep_handler(w->ctx, on_ep, w);
    return RS_OK;
}
