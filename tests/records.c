/* Records that say who wrote them, and checked reads (records.h). */
#include "tests/records.h"

#include <stddef.h>
#include <string.h>

uint32_t trec_make(uint32_t m, uint32_t i, uint8_t *rec)
{
    uint32_t len = 8 + (i * 7u + m) % 128;
    uint32_t x = m * 2654435761u ^ i;
    for (uint32_t k = 0; k < len; k++) {
        x = x * 1103515245u + 12345u;
        rec[k] = (uint8_t)(x >> 16);
    }
    memcpy(rec, &m, 4);
    memcpy(rec + 4, &i, 4);
    return len;
}

rs_status_t trec_push(rs_pusher_t *p, const trec_grid_t *g, uint32_t map)
{
    rs_status_t s = RS_OK;
    uint8_t rec[TREC_MAX];
    for (uint32_t i = 0; i < g->n_records && s == RS_OK; i++) {
        uint32_t len = trec_make(map, i, rec);
        s = rs_pusher_append(p, i % g->n_partitions, rec, len);
    }
    if (s == RS_OK)
        s = rs_pusher_close(p, NULL);
    return s;
}

int trec_check(const trec_grid_t *g, uint32_t part, const void *rec, uint32_t len)
{
    uint32_t m, i;
    uint8_t want[TREC_MAX];
    if (len < 8)
        return __LINE__;
    memcpy(&m, rec, 4);
    memcpy(&i, (const uint8_t *)rec + 4, 4);
    if (m >= g->n_maps || i >= g->n_records || i % g->n_partitions != part ||
        trec_make(m, i, want) != len || memcmp(rec, want, len) != 0)
        return __LINE__;
    if (g->seen[(size_t)m * g->n_records + i]++)
        return __LINE__; /* delivered twice */
    return 0;
}

int trec_read_part(const trec_grid_t *g, rs_reader_session_t *sess, uint32_t part,
                   rs_status_t *status, rs_reader_stats_t *st)
{
    rs_reader_t *r;
    rs_status_t rs = rs_reader_open_in(sess, part, &r);
    *status = rs;
    if (rs != RS_OK)
        return __LINE__;
    const void *rec;
    uint32_t len;
    int bad = 0;
    while (!bad && (rs = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL)
        bad = trec_check(g, part, rec, len);
    if (st != NULL)
        rs_reader_stats(r, st);
    rs_reader_close(r);
    *status = rs;
    return bad ? bad : rs != RS_OK ? __LINE__ : 0;
}

int trec_all_seen(const trec_grid_t *g)
{
    for (size_t k = 0; k < (size_t)g->n_maps * g->n_records; k++)
        if (g->seen[k] != 1)
            return 0;
    return 1;
}

void trec_stats_add(rs_reader_stats_t *sum, const rs_reader_stats_t *st)
{
    sum->records += st->records;
    sum->batches += st->batches;
    sum->bytes += st->bytes;
    sum->duplicates += st->duplicates;
    sum->other_attempts += st->other_attempts;
    sum->reads += st->reads;
    sum->spill_loads += st->spill_loads;
    sum->local_batches += st->local_batches;
    sum->zero_copy_bytes += st->zero_copy_bytes;
    sum->failovers += st->failovers;
}
