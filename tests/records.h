/*
 * Records that say who wrote them, and reads that check them: for the tests
 * over any backend (tests/loopback/lb_util.c, tests/shuffle/test_colocated.c).
 * No cmocka asserts: a failed check returns its line, so a child process can
 * report it too.
 */
#ifndef RS_TESTS_RECORDS_H
#define RS_TESTS_RECORDS_H

#include <stdint.h>
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>

#define TREC_MAX 256 /* room for any record trec_make makes */

/* What was pushed: n_maps maps of n_records, record i in partition i % n_partitions. */
typedef struct trec_grid {
    uint32_t n_maps, n_records, n_partitions;
    uint8_t *seen; /* [map][record]: times read */
} trec_grid_t;

/* Record i of map m (8..135 bytes, m and i first); returns its length. */
uint32_t trec_make(uint32_t m, uint32_t i, uint8_t *rec);
/* Appends records 0..n_records-1 of map to p (record i to i % g's partitions) and closes p. */
rs_status_t trec_push(rs_pusher_t *p, const trec_grid_t *g, uint32_t map);
/*
 * Reads partition part of sess and checks every record (bytes, partition,
 * first sighting in g->seen). Returns 0 or the line of the failed check;
 * *status: the reader's last status. st (may be NULL) gets its stats.
 */
int trec_read_part(const trec_grid_t *g, rs_reader_session_t *sess, uint32_t part,
                   rs_status_t *status, rs_reader_stats_t *st);
/*
 * Checks record rec of len bytes read from partition part (bytes,
 * partition, first sighting in g->seen); 0 or the line of the failed check.
 */
int trec_check(const trec_grid_t *g, uint32_t part, const void *rec, uint32_t len);
/* Every record of every map seen exactly once? */
int trec_all_seen(const trec_grid_t *g);
/* Adds every count of st to sum. */
void trec_stats_add(rs_reader_stats_t *sum, const rs_reader_stats_t *st);

#endif
