/*
 * Block geometry, checksums, bitmaps, the block order a reader follows and a
 * small PRNG: the pure parts of the broadcast, unit-tested without a fabric.
 */
#ifndef RS_BROADCAST_BLOCKS_H
#define RS_BROADCAST_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

/* Offset and length of block i of an object of size bytes. */
static inline uint64_t rs_bc_block_off(uint32_t i, uint32_t block_size)
{
    return (uint64_t)i * block_size;
}

static inline uint32_t rs_bc_block_len(uint32_t i, uint64_t size, uint32_t block_size)
{
    uint64_t off = rs_bc_block_off(i, block_size);
    uint64_t left = size > off ? size - off : 0;
    return left < block_size ? (uint32_t)left : block_size;
}

/*
 * A block's checksum: XXH3-64 seeded with the block's index, so bytes that
 * belong to another block (an offset bug, a stale key) never verify.
 */
uint64_t rs_bc_block_sum(const void *data, size_t len, uint32_t index);

/* Bitmaps of nbits bits, LSB first within a byte. */
static inline size_t rs_bc_map_bytes(uint32_t nbits)
{
    return ((size_t)nbits + 7) / 8;
}

static inline int rs_bc_map_test(const uint8_t *m, uint32_t i)
{
    return (m[i / 8] >> (i % 8)) & 1;
}

static inline void rs_bc_map_set(uint8_t *m, uint32_t i)
{
    m[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* Number of bits set. */
uint32_t rs_bc_map_count(const uint8_t *m, uint32_t nbits);

/* splitmix64: a tiny PRNG with 64 bits of state. */
static inline uint64_t rs_bc_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A uniform integer in [0, n) (n > 0). */
static inline uint32_t rs_bc_rand_below(uint64_t *state, uint32_t n)
{
    return (uint32_t)(((rs_bc_rand(state) >> 32) * (uint64_t)n) >> 32);
}

/*
 * The order a reader fetches blocks in: one random permutation of the
 * blocks shared by every reader of the object (seed from the source), read
 * from position start on (the source picks each reader's start, see
 * rs_bc_start_pick). Writes n block indexes into order; start 0 gives the
 * permutation itself.
 */
void rs_bc_order(uint64_t seed, uint32_t start, uint32_t n, uint32_t *order);

/* An active reader as the source lists it: its ticket (registration order) and start. */
typedef struct rs_bc_active {
    uint32_t ticket;
    uint32_t start;
} rs_bc_active_t;

/*
 * How many leading blocks of a reader's order (it starts at start) are its
 * own to read from the source while the given readers are active: up to the
 * next active reader's start (all n when alone; 0 when a lower ticket starts
 * at the same place). The other blocks come from whoever owns them, once
 * they announce them.
 */
uint32_t rs_bc_own_count(uint32_t ticket, uint32_t start, const rs_bc_active_t *active,
                         uint32_t n_active, uint32_t n);

/*
 * Where a new reader should start: the middle of the longest (circular) run
 * of permutation positions nobody holds, claims or starts at (busy[pos] !=
 * 0), so that it is as far as it can be from what the readers already there
 * are reading. 0 when every position is busy or none is.
 */
uint32_t rs_bc_start_pick(const uint8_t *busy, uint32_t n);

#endif
