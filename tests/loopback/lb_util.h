/*
 * Helpers for the unit tests over the loopback backend (tests/pusher,
 * tests/worker, tests/reader): in-process workers, a shuffle descriptor
 * naming them, records that say who wrote them, pushes and checked reads.
 * Every wait is bounded.
 */
#ifndef RS_TESTS_LB_UTIL_H
#define RS_TESTS_LB_UTIL_H

#include <stdint.h>
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/worker.h>

#include "tests/loopback/loopback.h"
#include "tests/records.h"

#define LB_MAX_WORKERS 4

/* The test defaults: short transport timeouts, errors only (setenv unless already set). */
void lb_env_defaults(void);
/* Bounds the whole test program (a hung test is a failed test). */
void lb_alarm(unsigned seconds);
uint64_t lb_now_ms(void);

/* Sleeps 1 ms steps until cond holds or ms passed; evaluates to cond. */
#define LB_UNTIL(cond, ms)                                    \
    __extension__({                                           \
        uint64_t lb_end_ = lb_now_ms() + (uint64_t)(ms);      \
        int lb_ok_;                                           \
        while (!(lb_ok_ = !!(cond)) && lb_now_ms() < lb_end_) \
            lb_sleep_ms(1);                                   \
        lb_ok_;                                               \
    })
void lb_sleep_ms(unsigned ms);

/* Is s the status of an undecodable answer, not a refusal? Such an answer costs its connection. */
int lb_status_garbled(rs_status_t s);

/* A shuffle over in-process workers. */
typedef struct lb_shuffle {
    rs_worker_t *worker[LB_MAX_WORKERS];
    uint16_t port[LB_MAX_WORKERS];
    char addr[LB_MAX_WORKERS][RS_SHUFFLE_ADDR_MAX];
    const char *addrs[LB_MAX_WORKERS];
    rs_shuffle_desc_t desc;
    uint32_t n_maps, n_records; /* records per map */
    uint8_t *seen;              /* [map][record]: times read */
} lb_shuffle_t;

/* Worker config of the tests: mem bytes, small extents, spill into dir (NULL: /tmp). */
void lb_worker_config(rs_worker_config_t *wc, uint64_t mem, const char *spill_dir);
/* Starts n workers (wc NULL: lb_worker_config(8 MiB)); asserts. */
void lb_workers_start(lb_shuffle_t *s, uint32_t n, const rs_worker_config_t *wc);
void lb_workers_stop(lb_shuffle_t *s);
/* The transport context of worker k (for rs_lb_kill). */
rs_ctx_t *lb_worker_ctx(const lb_shuffle_t *s, uint32_t k);
/* Sets desc (id, parts, replicas over every started worker) and the record grid. */
void lb_shuffle_desc(lb_shuffle_t *s, uint32_t id, uint32_t parts, uint32_t replicas,
                     uint32_t n_maps, uint32_t n_records);
void lb_shuffle_free(lb_shuffle_t *s);

/* Records: trec_make (tests/records.h); record i goes to partition i % n_partitions. */

/* Pusher config of the tests: small buffers, waits of wait_ms. */
void lb_pusher_config(rs_pusher_config_t *pc, uint32_t wait_ms);
/* Appends map's records (attempt) and closes; returns the first error. */
rs_status_t lb_push_map(lb_shuffle_t *s, uint32_t map, uint32_t attempt,
                        const rs_pusher_config_t *pc);

/* Reader config of the tests: local reads off unless asked, waits of wait_ms. */
void lb_reader_config(rs_reader_config_t *rc, int local_reads, uint32_t wait_ms);
/*
 * Reads partition part of sess and checks every record (bytes, partition,
 * first sighting in s->seen). Returns 0 or the line of the failed check;
 * *status: the reader's last status. st (may be NULL) gets its stats.
 */
int lb_read_part(lb_shuffle_t *s, rs_reader_session_t *sess, uint32_t part, rs_status_t *status,
                 rs_reader_stats_t *st);
/* lb_read_part, failing the test (partition, line, status) if a check fails. */
void lb_read_part_ok(lb_shuffle_t *s, rs_reader_session_t *sess, uint32_t part,
                     rs_reader_stats_t *st);
/* Opens a session (attempt 0 of every map unless attempts), reads every partition; 0 or a line. */
int lb_read_all(lb_shuffle_t *s, const rs_reader_config_t *rc, const uint32_t *attempts,
                rs_status_t *status);
/* Every record of every map seen exactly once? */
int lb_all_seen(const lb_shuffle_t *s);
void lb_seen_clear(lb_shuffle_t *s);

#endif
