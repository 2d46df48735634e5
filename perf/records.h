/*
 * The shuffle benches' records (rs-shuffle-bench and mpi-shuffle generate,
 * partition and verify the very same ones, so their times compare).
 *
 * Record id -> its 100 bytes: the id, then 11 words and a 4-byte tail
 * derived from one mix of the id (its seed): word i is seed + i * GOLDEN.
 * One mix per record, the rest is an add per word (vectorisable), so a bench
 * measures the shuffle, not its generator; a reducer recomputes every word
 * from the id it reads and compares all 100 bytes (rec_ok). Ids 0 ..
 * total-1 are split among the mappers in contiguous runs (rec_first,
 * rec_count).
 */
#ifndef RS_PERF_RECORDS_H
#define RS_PERF_RECORDS_H

#include <stdint.h>
#include <string.h>

#define REC_LEN 100
#define GOLDEN  0x9e3779b97f4a7c15ull

/* Per partition: how many records, and the sum of their seeds (a checksum). */
typedef struct pcount {
    uint64_t records, sum;
} pcount_t;

static inline uint64_t rec_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline uint64_t rec_seed(uint64_t id)
{
    return rec_mix(id);
}

/* How many of total records mapper m of n generates, and its first id. */
static inline uint64_t rec_count(uint64_t total, uint32_t n, uint32_t m)
{
    return total / n + (m < total % n ? 1 : 0);
}

static inline uint64_t rec_first(uint64_t total, uint32_t n, uint32_t m)
{
    uint64_t extra = total % n;
    return (uint64_t)m * (total / n) + (m < extra ? m : extra);
}

/* Writes record id (seed = rec_seed(id)) at rec: REC_LEN bytes. */
static inline void rec_make(uint64_t id, uint64_t seed, uint8_t *rec)
{
    /* Word by word into place: no staging copy whose wide loads would wait on narrow stores. */
    memcpy(rec, &id, 8);
    for (unsigned i = 1; i < REC_LEN / 8; i++) {
        uint64_t w = seed + i * GOLDEN;
        memcpy(rec + 8 * i, &w, 8);
    }
    uint32_t tail = (uint32_t)(seed + (REC_LEN / 8) * GOLDEN);
    memcpy(rec + REC_LEN - 4, &tail, 4);
}

/* Are the 100 bytes at rec exactly rec_make(id)? (id = its first 8 bytes) */
static inline int rec_ok(const uint8_t *rec, uint64_t id, uint64_t seed)
{
    uint64_t diff = 0, w;
    memcpy(&w, rec, 8);
    diff |= w ^ id;
    for (unsigned i = 1; i < REC_LEN / 8; i++) {
        memcpy(&w, rec + 8 * i, 8);
        diff |= w ^ (seed + i * GOLDEN);
    }
    uint32_t tail;
    memcpy(&tail, rec + REC_LEN - 4, 4);
    diff |= tail ^ (uint32_t)(seed + (REC_LEN / 8) * GOLDEN);
    return diff == 0;
}

/* The partition of a record: its seed's high half scaled to [0, partitions). */
static inline uint32_t rec_partition(uint64_t seed, uint32_t partitions)
{
    return (uint32_t)(((seed >> 32) * partitions) >> 32);
}

#endif
