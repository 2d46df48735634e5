/* Helpers for the unit tests over the loopback backend (lb_util.h). */
#include "tests/loopback/lb_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

void lb_env_defaults(void)
{
    setenv("RSHUFFLE_LOG", "error", 0);
    setenv("RSHUFFLE_PEER_TIMEOUT_MS", "1000", 0);
    setenv("RSHUFFLE_CONNECT_TIMEOUT_MS", "1000", 0);
}

void lb_alarm(unsigned seconds)
{
    alarm(seconds);
}

uint64_t lb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void lb_sleep_ms(unsigned ms)
{
    usleep(ms * 1000u);
}

void lb_worker_config(rs_worker_config_t *wc, uint64_t mem, const char *spill_dir)
{
    rs_worker_config_defaults(wc);
    wc->mem_limit = mem;
    wc->extent_min = 16 << 10;
    wc->extent_max = 256 << 10;
    wc->grant_bulk = 64 << 10;
    wc->commit_wait_ms = 2000;
    if (spill_dir != NULL)
        snprintf(wc->spill_dir, sizeof(wc->spill_dir), "%s", spill_dir);
}

void lb_workers_start(lb_shuffle_t *s, uint32_t n, const rs_worker_config_t *wc)
{
    rs_worker_config_t def;
    if (wc == NULL) {
        lb_worker_config(&def, 8 << 20, NULL);
        wc = &def;
    }
    assert_true(n <= LB_MAX_WORKERS);
    for (uint32_t k = 0; k < n; k++) {
        assert_int_equal(rs_worker_create(NULL, wc, &s->worker[k]), RS_OK);
        assert_int_equal(rs_worker_listen(s->worker[k], "127.0.0.1", 0), RS_OK);
        s->port[k] = rs_worker_port(s->worker[k]);
        snprintf(s->addr[k], sizeof(s->addr[k]), "127.0.0.1:%u", s->port[k]);
        s->addrs[k] = s->addr[k];
    }
}

void lb_workers_stop(lb_shuffle_t *s)
{
    for (uint32_t k = 0; k < LB_MAX_WORKERS; k++) {
        rs_worker_destroy(s->worker[k]);
        s->worker[k] = NULL;
    }
}

rs_ctx_t *lb_worker_ctx(const lb_shuffle_t *s, uint32_t k)
{
    return rs_lb_ctx_of_port(s->port[k]);
}

void lb_shuffle_desc(lb_shuffle_t *s, uint32_t id, uint32_t parts, uint32_t replicas,
                     uint32_t n_maps, uint32_t n_records)
{
    uint32_t n = 0;
    while (n < LB_MAX_WORKERS && s->worker[n] != NULL)
        n++;
    s->desc = (rs_shuffle_desc_t){.shuffle_id = id,
                                  .n_partitions = parts,
                                  .n_workers = n,
                                  .workers = s->addrs,
                                  .replicas = replicas};
    s->n_maps = n_maps;
    s->n_records = n_records;
    free(s->seen);
    s->seen = calloc((size_t)n_maps * n_records, 1);
    assert_non_null(s->seen);
}

void lb_shuffle_free(lb_shuffle_t *s)
{
    free(s->seen);
    s->seen = NULL;
}

uint32_t lb_rec_make(uint32_t m, uint32_t i, uint8_t *rec)
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

void lb_pusher_config(rs_pusher_config_t *pc, uint32_t wait_ms)
{
    rs_pusher_config_defaults(pc);
    pc->buf_len = 16 << 10;
    pc->min_buf = 4 << 10;
    pc->pool_bytes = 1 << 20;
    pc->max_inflight = 256 << 10;
    pc->wait_ms = wait_ms;
    pc->backpressure_ms = wait_ms;
}

rs_status_t lb_push_map(lb_shuffle_t *s, uint32_t map, uint32_t attempt,
                        const rs_pusher_config_t *pc)
{
    rs_pusher_t *p;
    rs_status_t st = rs_pusher_open(&s->desc, map, attempt, pc, &p);
    if (st != RS_OK)
        return st;
    uint8_t rec[LB_REC_MAX];
    for (uint32_t i = 0; i < s->n_records && st == RS_OK; i++) {
        uint32_t len = lb_rec_make(map, i, rec);
        st = rs_pusher_append(p, i % s->desc.n_partitions, rec, len);
    }
    if (st == RS_OK)
        st = rs_pusher_close(p, NULL);
    rs_pusher_destroy(p);
    return st;
}

void lb_reader_config(rs_reader_config_t *rc, int local_reads, uint32_t wait_ms)
{
    rs_reader_config_defaults(rc);
    rc->local_reads = local_reads;
    rc->wait_ms = wait_ms;
    rc->read_max = 1 << 20;
}

int lb_read_part(lb_shuffle_t *s, rs_reader_session_t *sess, uint32_t part, rs_status_t *status,
                 rs_reader_stats_t *st)
{
    rs_reader_t *r;
    rs_status_t rs = rs_reader_open_in(sess, part, &r);
    *status = rs;
    if (rs != RS_OK)
        return __LINE__;
    const void *rec;
    uint32_t len;
    uint8_t want[LB_REC_MAX];
    int bad = 0;
    while (!bad && (rs = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL) {
        uint32_t m, i;
        if (len < 8) {
            bad = __LINE__;
            break;
        }
        memcpy(&m, rec, 4);
        memcpy(&i, (const uint8_t *)rec + 4, 4);
        if (m >= s->n_maps || i >= s->n_records || i % s->desc.n_partitions != part ||
            lb_rec_make(m, i, want) != len || memcmp(rec, want, len) != 0)
            bad = __LINE__;
        else if (s->seen[(size_t)m * s->n_records + i]++)
            bad = __LINE__; /* delivered twice */
    }
    if (st != NULL)
        rs_reader_stats(r, st);
    rs_reader_close(r);
    *status = rs;
    return bad ? bad : rs != RS_OK ? __LINE__ : 0;
}

int lb_read_all(lb_shuffle_t *s, const rs_reader_config_t *rc, const uint32_t *attempts,
                rs_status_t *status)
{
    uint32_t *zero = NULL;
    if (attempts == NULL) {
        zero = calloc(s->n_maps, sizeof(*zero));
        attempts = zero;
    }
    rs_reader_session_t *sess;
    *status = rs_reader_session_open(&s->desc, s->n_maps, attempts, rc, &sess);
    free(zero);
    if (*status != RS_OK)
        return __LINE__;
    int line = 0;
    for (uint32_t p = 0; p < s->desc.n_partitions && line == 0; p++)
        line = lb_read_part(s, sess, p, status, NULL);
    rs_reader_session_close(sess);
    return line;
}

int lb_all_seen(const lb_shuffle_t *s)
{
    for (size_t k = 0; k < (size_t)s->n_maps * s->n_records; k++)
        if (s->seen[k] != 1)
            return 0;
    return 1;
}

void lb_seen_clear(lb_shuffle_t *s)
{
    memset(s->seen, 0, (size_t)s->n_maps * s->n_records);
}
