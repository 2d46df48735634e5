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

int lb_status_garbled(rs_status_t s)
{
    return s == RS_ERR_TRUNCATED || s == RS_ERR_BAD_LENGTH || s == RS_ERR_PROTOCOL ||
           s == RS_ERR_BAD_VERSION;
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

/* The records s pushed, as the checks see them. */
static trec_grid_t grid(const lb_shuffle_t *s)
{
    return (trec_grid_t){.n_maps = s->n_maps,
                         .n_records = s->n_records,
                         .n_partitions = s->desc.n_partitions,
                         .seen = s->seen};
}

rs_status_t lb_push_map(lb_shuffle_t *s, uint32_t map, uint32_t attempt,
                        const rs_pusher_config_t *pc)
{
    rs_pusher_t *p;
    rs_status_t st = rs_pusher_open(&s->desc, map, attempt, pc, &p);
    if (st != RS_OK)
        return st;
    trec_grid_t g = grid(s);
    st = trec_push(p, &g, map);
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
    trec_grid_t g = grid(s);
    return trec_read_part(&g, sess, part, status, st);
}

void lb_read_part_ok(lb_shuffle_t *s, rs_reader_session_t *sess, uint32_t part,
                     rs_reader_stats_t *st)
{
    rs_status_t status;
    int line = lb_read_part(s, sess, part, &status, st);
    if (line != 0)
        fail_msg("partition %u: check at line %d failed (%s)", part, line, rs_strerror(status));
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
    trec_grid_t g = grid(s);
    return trec_all_seen(&g);
}

void lb_seen_clear(lb_shuffle_t *s)
{
    memset(s->seen, 0, (size_t)s->n_maps * s->n_records);
}
