/* The reduce side (include/rshuffle/reader.h, docs/shuffle.md "Read path"). */
#include <rshuffle/codec.h>
#include <rshuffle/reader.h>
#include <rshuffle/transport.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/log.h"
#include "common/shuffle_proto.h"

#include <stdlib.h>
#include <string.h>

typedef struct rent {
    rs_snap_entry_t e;
    uint32_t index; /* in the worker's snapshot (for spill loads) */
} rent_t;

typedef struct rmap {
    int committed;
    rs_snap_commit_t c; /* what the winning attempt committed here */
    uint32_t batches;
    uint64_t bytes, checksum; /* what was read */
} rmap_t;

struct rs_reader {
    rs_reader_config_t cfg;
    rs_ctx_t *ctx;
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    rs_mr_t *buf_mr;
    uint8_t *buf;
    uint32_t shuffle_id, partition, n_maps;
    const char *addr;
    rmap_t *maps;
    uint32_t snap_id;
    int snap_open;
    rent_t *mem, *spill; /* kept entries, in memory (sorted by loc) and spilled */
    uint32_t n_mem, n_spill, next_mem, next_spill;
    /* the batches of the current read, in buf */
    rent_t *span;
    uint64_t span_base; /* arena offset of buf[0] for memory spans; UINT64_MAX: staged */
    uint32_t span_n, span_i;
    uint64_t *span_off; /* offset of each frame in buf */
    size_t span_cap;
    /* the current batch's records */
    const uint8_t *rec, *rec_end;
    uint8_t *raw;
    size_t raw_cap;
    rs_status_t error;
    int done;
    rs_reader_stats_t stats;
    /* replies */
    int got;
    rs_status_t got_status;
    uint8_t *reply;
    size_t reply_len;
};

void rs_reader_config_defaults(rs_reader_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->read_max = 16 << 20;
    cfg->wait_ms = 30000;
}

static void on_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    rs_reader_t *r = arg;
    free(r->reply);
    r->reply = malloc(len);
    if (r->reply == NULL) {
        r->got_status = RS_ERR_NOMEM;
    } else {
        memcpy(r->reply, data, len);
        r->reply_len = len;
        r->got_status = RS_OK;
    }
    r->got = 1;
}

static void on_op(void *arg, rs_status_t status)
{
    rs_reader_t *r = arg;
    r->got_status = status;
    r->got = 1;
}

/* Waits for the reply or operation started last. */
static rs_status_t wait_got(rs_reader_t *r, const char *what)
{
    uint64_t deadline = rs_now_coarse_ns() + RS_MS_TO_NS(r->cfg.wait_ms);
    while (!r->got) {
        if (rs_ep_status(r->ep) != RS_OK) {
            rs_error("reader: worker %s gone during %s: %s", r->addr, what,
                     rs_strerror(rs_ep_status(r->ep)));
            return rs_ep_status(r->ep);
        }
        if (rs_now_coarse_ns() >= deadline) {
            rs_error("reader: no answer from worker %s to %s within %u ms", r->addr, what,
                     r->cfg.wait_ms);
            return RS_ERR_TIMEOUT;
        }
        rs_wait(r->ctx, 10);
    }
    r->got = 0;
    return r->got_status;
}

static rs_status_t request(rs_reader_t *r, unsigned type, const void *m, size_t len,
                           unsigned reply_type, size_t reply_min, const char *what)
{
    r->got = 0;
    rs_status_t s = rs_msg_send(r->ep, type, m, len, NULL, NULL);
    if (s == RS_OK)
        s = wait_got(r, what);
    if (s == RS_OK)
        s = rs_smsg_check(r->reply, r->reply_len, reply_type, reply_min, 0, 0);
    if (s == RS_OK) {
        rs_smsg_hdr_t h;
        memcpy(&h, r->reply, sizeof(h));
        s = (rs_status_t)h.status;
        if (s != RS_OK)
            rs_error("reader: worker %s refused %s of shuffle %u partition %u: %s", r->addr, what,
                     r->shuffle_id, r->partition, rs_strerror(s));
    }
    return s;
}

static rs_status_t get(rs_reader_t *r, void *dst, size_t len, uint64_t roff)
{
    r->got = 0;
    r->stats.reads++;
    rs_status_t s = rs_get(r->ep, dst, len, r->buf_mr, r->rkey, roff, on_op, r);
    return s == RS_OK ? wait_got(r, "a read") : s;
}

static int cmp_loc(const void *a, const void *b)
{
    const rent_t *x = a, *y = b;
    return (x->e.loc > y->e.loc) - (x->e.loc < y->e.loc);
}

static int cmp_dedup(const void *a, const void *b)
{
    const rent_t *x = a, *y = b;
    if (x->e.map_id != y->e.map_id)
        return (x->e.map_id > y->e.map_id) - (x->e.map_id < y->e.map_id);
    if (x->e.seq != y->e.seq)
        return (x->e.seq > y->e.seq) - (x->e.seq < y->e.seq);
    return (x->index > y->index) - (x->index < y->index);
}

/* Parses the snapshot: keeps batches of winning attempts, once each. */
static rs_status_t plan(rs_reader_t *r, const uint8_t *snap, size_t len, const uint32_t *attempts)
{
    rs_snap_hdr_t h;
    if (len < sizeof(h))
        return RS_ERR_TRUNCATED;
    memcpy(&h, snap, sizeof(h));
    if (h.magic != RS_SNAP_MAGIC || h.partition != r->partition ||
        len != sizeof(h) + (size_t)h.n_commits * sizeof(rs_snap_commit_t) +
                   (size_t)h.n_entries * sizeof(rs_snap_entry_t))
        return RS_ERR_PROTOCOL;
    const uint8_t *p = snap + sizeof(h);
    for (uint32_t i = 0; i < h.n_commits; i++, p += sizeof(rs_snap_commit_t)) {
        rs_snap_commit_t c;
        memcpy(&c, p, sizeof(c));
        if (c.map_id < r->n_maps && c.attempt == attempts[c.map_id]) {
            r->maps[c.map_id].committed = 1;
            r->maps[c.map_id].c = c;
        }
    }
    for (uint32_t m = 0; m < r->n_maps; m++) {
        if (!r->maps[m].committed) {
            rs_error("reader: map %u attempt %u has not committed shuffle %u at worker %s", m,
                     attempts[m], r->shuffle_id, r->addr);
            return RS_ERR_STATE;
        }
    }
    rent_t *all = calloc(h.n_entries ? h.n_entries : 1, sizeof(*all));
    r->mem = calloc(h.n_entries ? h.n_entries : 1, sizeof(*r->mem));
    r->spill = calloc(h.n_entries ? h.n_entries : 1, sizeof(*r->spill));
    if (all == NULL || r->mem == NULL || r->spill == NULL) {
        free(all);
        return RS_ERR_NOMEM;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < h.n_entries; i++, p += sizeof(rs_snap_entry_t)) {
        rent_t e = {.index = i};
        memcpy(&e.e, p, sizeof(e.e));
        if (e.e.map_id >= r->n_maps || e.e.attempt != attempts[e.e.map_id]) {
            r->stats.other_attempts++;
            continue;
        }
        if (e.e.len < RS_FRAME_HEADER_SIZE || e.e.len > r->cfg.read_max) {
            free(all);
            return RS_ERR_BAD_LENGTH;
        }
        all[n++] = e;
    }
    qsort(all, n, sizeof(*all), cmp_dedup);
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0 && all[i].e.map_id == all[i - 1].e.map_id && all[i].e.seq == all[i - 1].e.seq) {
            r->stats.duplicates++;
            continue;
        }
        if (all[i].e.flags & RS_SNAP_SPILLED)
            r->spill[r->n_spill++] = all[i];
        else
            r->mem[r->n_mem++] = all[i];
    }
    free(all);
    qsort(r->mem, r->n_mem, sizeof(*r->mem), cmp_loc);
    qsort(r->spill, r->n_spill, sizeof(*r->spill), cmp_loc);
    return RS_OK;
}

static rs_status_t connect_and_open(rs_reader_t *r, const uint32_t *attempts)
{
    char host[RS_SHUFFLE_ADDR_MAX];
    const char *colon = strrchr(r->addr, ':');
    if (colon == NULL || (size_t)(colon - r->addr) >= sizeof(host)) {
        rs_error("reader: bad worker address '%s'", r->addr);
        return RS_ERR_INVALID;
    }
    memcpy(host, r->addr, (size_t)(colon - r->addr));
    host[colon - r->addr] = '\0';
    rs_status_t s = rs_connect(r->ctx, host, (uint16_t)atoi(colon + 1), &r->ep);
    if (s != RS_OK) {
        rs_error("reader: cannot connect to worker %s: %s", r->addr, rs_strerror(s));
        return s;
    }
    rs_smsg_attach_t a = {.role = RS_ROLE_READER, .shuffle_id = r->shuffle_id};
    rs_smsg_init(&a.h, RS_SMSG_ATTACH, RS_OK);
    s = request(r, RS_SMSG_ATTACH, &a, sizeof(a), RS_SMSG_ATTACH_REPLY,
                sizeof(rs_smsg_attach_reply_t), "attach");
    if (s != RS_OK)
        return s;
    rs_smsg_attach_reply_t ar;
    memcpy(&ar, r->reply, sizeof(ar));
    if (ar.rkey_len > r->reply_len - sizeof(ar))
        return RS_ERR_TRUNCATED;
    s = rs_rkey_unpack(r->ep, r->reply + sizeof(ar), ar.rkey_len, &r->rkey);
    if (s != RS_OK)
        return s;
    rs_smsg_read_open_t o = {.shuffle_id = r->shuffle_id, .partition = r->partition};
    rs_smsg_init(&o.h, RS_SMSG_READ_OPEN, RS_OK);
    s = request(r, RS_SMSG_READ_OPEN, &o, sizeof(o), RS_SMSG_READ_REPLY,
                sizeof(rs_smsg_read_reply_t), "open");
    if (s != RS_OK)
        return s;
    rs_smsg_read_reply_t rr;
    memcpy(&rr, r->reply, sizeof(rr));
    r->snap_id = rr.snap_id;
    r->snap_open = 1;
    if (rr.index_off == UINT64_MAX) {
        if (rr.index_len != r->reply_len - sizeof(rr))
            return RS_ERR_PROTOCOL;
        return plan(r, r->reply + sizeof(rr), rr.index_len, attempts);
    }
    if (rr.index_len > r->cfg.read_max) {
        rs_error("reader: partition index of %llu bytes exceeds the %zu-byte read buffer",
                 (unsigned long long)rr.index_len, r->cfg.read_max);
        return RS_ERR_NO_SPACE;
    }
    s = get(r, r->buf, rr.index_len, rr.index_off);
    if (s != RS_OK)
        return s;
    return plan(r, r->buf, rr.index_len, attempts);
}

rs_status_t rs_reader_open(const rs_shuffle_desc_t *desc, uint32_t partition, uint32_t n_maps,
                           const uint32_t *attempts, const rs_reader_config_t *cfg,
                           rs_reader_t **reader_p)
{
    uint32_t w;
    rs_status_t s = rs_shuffle_place(desc, partition, &w);
    if (s != RS_OK || (n_maps > 0 && attempts == NULL))
        return RS_ERR_INVALID;
    rs_reader_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return RS_ERR_NOMEM;
    if (cfg != NULL)
        r->cfg = *cfg;
    else
        rs_reader_config_defaults(&r->cfg);
    if (r->cfg.read_max < RS_GRANT_MAX)
        r->cfg.read_max = RS_GRANT_MAX; /* one frame always fits */
    r->shuffle_id = desc->shuffle_id;
    r->partition = partition;
    r->n_maps = n_maps;
    r->addr = desc->workers[w];
    r->maps = calloc(n_maps ? n_maps : 1, sizeof(*r->maps));
    if (r->maps == NULL) {
        free(r);
        return RS_ERR_NOMEM;
    }
    s = rs_ctx_create(cfg != NULL ? cfg->transport : NULL, &r->ctx);
    if (s == RS_OK) {
        rs_set_msg_handler(r->ctx, RS_SMSG_ATTACH_REPLY, on_reply, r);
        rs_set_msg_handler(r->ctx, RS_SMSG_READ_REPLY, on_reply, r);
        rs_set_msg_handler(r->ctx, RS_SMSG_SPILL_REPLY, on_reply, r);
        s = rs_mem_alloc(r->ctx, r->cfg.read_max, RS_MEM_LOCAL, &r->buf_mr);
    }
    if (s == RS_OK) {
        r->buf = rs_mr_addr(r->buf_mr);
        s = connect_and_open(r, attempts);
    }
    if (s != RS_OK) {
        rs_reader_close(r);
        return s;
    }
    *reader_p = r;
    return RS_OK;
}

static rs_status_t span_reserve(rs_reader_t *r, size_t n)
{
    if (n <= r->span_cap)
        return RS_OK;
    uint64_t *o = realloc(r->span_off, n * sizeof(*o));
    if (o == NULL)
        return RS_ERR_NOMEM;
    r->span_off = o;
    r->span_cap = n;
    return RS_OK;
}

/* Pulls the next group of batches into buf: one read of a memory span, or a staged spill load. */
static rs_status_t next_span(rs_reader_t *r)
{
    rs_status_t s;
    if (r->next_mem < r->n_mem) {
        uint32_t first = r->next_mem, last = first;
        uint64_t base = r->mem[first].e.loc;
        while (last + 1 < r->n_mem &&
               r->mem[last + 1].e.loc + r->mem[last + 1].e.len - base <= r->cfg.read_max &&
               r->mem[last + 1].e.loc - (r->mem[last].e.loc + r->mem[last].e.len) <= (64 << 10))
            last++;
        uint64_t end = r->mem[last].e.loc + r->mem[last].e.len;
        if ((s = span_reserve(r, last - first + 1)) != RS_OK)
            return s;
        if ((s = get(r, r->buf, end - base, base)) != RS_OK)
            return s;
        r->span = &r->mem[first];
        r->span_n = last - first + 1;
        for (uint32_t i = 0; i < r->span_n; i++)
            r->span_off[i] = r->span[i].e.loc - base;
        r->next_mem = last + 1;
        r->span_i = 0;
        return RS_OK;
    }
    /* Spilled: consecutive snapshot entries staged by the worker, back to back. */
    uint32_t first = r->next_spill, last = first;
    uint64_t total = rs_sproto_round(r->spill[first].e.len);
    while (last + 1 < r->n_spill && r->spill[last + 1].index == r->spill[last].index + 1 &&
           total + rs_sproto_round(r->spill[last + 1].e.len) <= RS_STAGE_MAX)
        total += rs_sproto_round(r->spill[++last].e.len);
    rs_smsg_spill_load_t m = {
        .snap_id = r->snap_id, .first = r->spill[first].index, .n = last - first + 1};
    rs_smsg_init(&m.h, RS_SMSG_SPILL_LOAD, RS_OK);
    s = request(r, RS_SMSG_SPILL_LOAD, &m, sizeof(m), RS_SMSG_SPILL_REPLY,
                sizeof(rs_smsg_spill_reply_t), "spill load");
    if (s != RS_OK)
        return s;
    r->stats.spill_loads++;
    rs_smsg_spill_reply_t sr;
    memcpy(&sr, r->reply, sizeof(sr));
    if (sr.len < total || total > r->cfg.read_max)
        return RS_ERR_PROTOCOL;
    if ((s = span_reserve(r, last - first + 1)) != RS_OK)
        return s;
    if ((s = get(r, r->buf, total, sr.off)) != RS_OK)
        return s;
    r->span = &r->spill[first];
    r->span_n = last - first + 1;
    uint64_t at = 0;
    for (uint32_t i = 0; i < r->span_n; i++) {
        r->span_off[i] = at;
        at += rs_sproto_round(r->span[i].e.len);
    }
    r->next_spill = last + 1;
    r->span_i = 0;
    return RS_OK;
}

/* Verifies and decodes the next batch into the record cursor. */
static rs_status_t next_batch(rs_reader_t *r)
{
    rs_status_t s;
    if (r->span_i >= r->span_n) {
        if (r->next_mem >= r->n_mem && r->next_spill >= r->n_spill)
            return RS_ERR_NOT_FOUND; /* the end */
        if ((s = next_span(r)) != RS_OK)
            return s;
    }
    const rent_t *e = &r->span[r->span_i];
    const uint8_t *frame = r->buf + r->span_off[r->span_i];
    r->span_i++;
    rs_frame_t f;
    s = rs_frame_verify(frame, e->e.len, &f);
    if (s == RS_OK && (f.frame_len != e->e.len || f.ids.shuffle_id != r->shuffle_id ||
                       f.ids.partition != r->partition || f.ids.map_id != e->e.map_id ||
                       f.ids.attempt != e->e.attempt || f.ids.seq != e->e.seq))
        s = RS_ERR_PROTOCOL;
    if (s != RS_OK) {
        rs_error("reader: batch %llu of map %u (shuffle %u partition %u) is bad: %s",
                 (unsigned long long)e->e.seq, e->e.map_id, r->shuffle_id, r->partition,
                 rs_strerror(s));
        return s;
    }
    rmap_t *m = &r->maps[e->e.map_id];
    m->batches++;
    m->bytes += f.frame_len;
    m->checksum += f.checksum;
    r->stats.batches++;
    r->stats.bytes += f.frame_len;
    if (f.codec == RS_CODEC_NONE) {
        r->rec = f.payload;
    } else {
        if (f.raw_len > r->raw_cap) {
            uint8_t *n = realloc(r->raw, f.raw_len);
            if (n == NULL)
                return RS_ERR_NOMEM;
            r->raw = n;
            r->raw_cap = f.raw_len;
        }
        if ((s = rs_frame_decode(&f, r->raw, r->raw_cap)) != RS_OK)
            return s;
        r->rec = r->raw;
    }
    r->rec_end = r->rec + f.raw_len;
    return RS_OK;
}

/* At the end: what was read must be exactly what each winning attempt committed. */
static rs_status_t check_commits(rs_reader_t *r)
{
    for (uint32_t i = 0; i < r->n_maps; i++) {
        const rmap_t *m = &r->maps[i];
        if (m->batches != m->c.batches || m->bytes != m->c.bytes || m->checksum != m->c.checksum) {
            rs_error("reader: shuffle %u partition %u map %u: committed %u batches / %llu bytes, "
                     "read %u / %llu",
                     r->shuffle_id, r->partition, i, m->c.batches, (unsigned long long)m->c.bytes,
                     m->batches, (unsigned long long)m->bytes);
            return RS_ERR_CHECKSUM;
        }
    }
    return RS_OK;
}

rs_status_t rs_reader_next(rs_reader_t *r, const void **rec_p, uint32_t *len_p)
{
    if (r->error != RS_OK)
        return r->error;
    if (r->done) {
        *rec_p = NULL;
        *len_p = 0;
        return RS_OK;
    }
    while (r->rec == NULL || r->rec >= r->rec_end) {
        rs_status_t s = next_batch(r);
        if (s == RS_ERR_NOT_FOUND) {
            s = check_commits(r);
            if (s != RS_OK)
                return r->error = s;
            r->done = 1;
            *rec_p = NULL;
            *len_p = 0;
            return RS_OK;
        }
        if (s != RS_OK)
            return r->error = s;
    }
    if (r->rec_end - r->rec < RS_RECORD_HDR)
        return r->error = RS_ERR_TRUNCATED;
    uint32_t len = (uint32_t)r->rec[0] | (uint32_t)r->rec[1] << 8 | (uint32_t)r->rec[2] << 16 |
                   (uint32_t)r->rec[3] << 24;
    if ((size_t)(r->rec_end - r->rec - RS_RECORD_HDR) < len) {
        rs_error("reader: a record of %u bytes overruns its batch", len);
        return r->error = RS_ERR_TRUNCATED;
    }
    *rec_p = r->rec + RS_RECORD_HDR;
    *len_p = len;
    r->rec += RS_RECORD_HDR + len;
    r->stats.records++;
    return RS_OK;
}

void rs_reader_stats(const rs_reader_t *r, rs_reader_stats_t *stats)
{
    *stats = r->stats;
}

void rs_reader_close(rs_reader_t *r)
{
    if (r == NULL)
        return;
    if (r->snap_open && rs_ep_status(r->ep) == RS_OK) {
        rs_smsg_read_close_t m = {.snap_id = r->snap_id};
        rs_smsg_init(&m.h, RS_SMSG_READ_CLOSE, RS_OK);
        r->got = 0;
        if (rs_msg_send(r->ep, RS_SMSG_READ_CLOSE, &m, sizeof(m), on_op, r) == RS_OK)
            wait_got(r, "close");
    }
    if (r->ep != NULL)
        rs_ep_close(r->ep);
    if (r->buf_mr != NULL)
        rs_mem_free(r->buf_mr);
    if (r->ctx != NULL)
        rs_ctx_destroy(r->ctx);
    free(r->maps);
    free(r->mem);
    free(r->spill);
    free(r->span_off);
    free(r->raw);
    free(r->reply);
    free(r);
}
