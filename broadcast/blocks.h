/*
 * Block geometry, checksums, bitmaps, the block order a reader follows and a
 * small PRNG: the pure parts of the broadcast, unit-tested without a fabric.
 */
#ifndef RS_BROADCAST_BLOCKS_H
#define RS_BROADCAST_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

/* Offset and length of block i of an object of size bytes. */
static inline uint64_t rs_bblock_off(uint32_t i, uint32_t block_size)
{
    return (uint64_t)i * block_size;
}

static inline uint32_t rs_bblock_len(uint32_t i, uint64_t size, uint32_t block_size)
{
    uint64_t off = rs_bblock_off(i, block_size);
    uint64_t left = size > off ? size - off : 0;
    return left < block_size ? (uint32_t)left : block_size;
}

/*
 * A block's checksum: XXH3-64 seeded with the block's index, so bytes that
 * belong to another block (an offset bug, a stale key) never verify.
 */
uint64_t rs_bblock_sum(const void *data, size_t len, uint32_t index);

/* Bitmaps of nbits bits, LSB first within a byte. */
static inline size_t rs_bmap_bytes(uint32_t nbits)
{
    return ((size_t)nbits + 7) / 8;
}

static inline int rs_bmap_test(const uint8_t *m, uint32_t i)
{
    return (m[i / 8] >> (i % 8)) & 1;
}

static inline void rs_bmap_set(uint8_t *m, uint32_t i)
{
    m[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* Number of bits set. */
uint32_t rs_bmap_count(const uint8_t *m, uint32_t nbits);

/* splitmix64: a tiny PRNG with 64 bits of state. */
static inline uint64_t rs_brand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A uniform integer in [0, n) (n > 0). */
static inline uint32_t rs_brand_below(uint64_t *state, uint32_t n)
{
    return (uint32_t)(((rs_brand(state) >> 32) * (uint64_t)n) >> 32);
}

/*
 * The order a reader fetches blocks in: one random permutation of the
 * blocks shared by every reader of the object (seed from the source), started
 * at a point that depends on the reader's ticket (its registration order) so
 * that concurrent readers start far apart: tickets 0, 1, 2, 3, ... start at
 * fractions 0, 1/2, 1/4, 3/4, 1/8, ... of the permutation (van der Corput).
 * Writes n block indexes into order.
 */
void rs_border(uint64_t seed, uint32_t ticket, uint32_t n, uint32_t *order);

/* Where ticket starts, as an index into the permutation of n blocks. */
uint32_t rs_border_start(uint32_t ticket, uint32_t n);

/*
 * How many leading blocks of ticket's order are its own to read from the
 * source while the readers with the given tickets are active: up to the next
 * active reader's start (all n when alone; 0 when a lower ticket starts at
 * the same place). The other blocks come from whoever owns them, once they
 * announce them.
 */
uint32_t rs_bown_count(uint32_t ticket, const uint32_t *active, uint32_t n_active, uint32_t n);

#endif
