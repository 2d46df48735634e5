/*
 * First-fit allocator of offset ranges inside one region (a registered slab
 * or arena carved without registering again). Free ranges are coalesced, so
 * odd sizes never fragment the region for good, and kept in a tree ordered
 * by offset where each node also knows the longest free range below it: the
 * lowest-offset range that fits is found, and a range given back merged
 * with its neighbours, in O(log n) steps for n free ranges, not O(n).
 * Not thread-safe: the owner serialises calls.
 */
#ifndef RS_COMMON_RANGE_ALLOC_H
#define RS_COMMON_RANGE_ALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/status.h>

typedef struct rs_range {
    uint64_t off, len;
} rs_range_t;

struct rs_range_node; /* range_alloc.c */

typedef struct rs_range_alloc {
    struct rs_range_node *node; /* node[0] stands for "none"; the others free ranges or spare */
    uint32_t root;              /* the tree of free ranges (0: none free) */
    uint32_t spare;             /* unused nodes, chained */
    uint32_t cap;               /* nodes allocated, node[0] included */
    uint32_t seed;              /* the tree's balancing priorities */
    size_t n_free;              /* free ranges (never adjacent) */
    uint64_t size;              /* the region's length */
    uint64_t align;             /* every offset and length is a multiple (power of two) */
    uint64_t used;              /* bytes handed out */
} rs_range_alloc_t;

/*
 * The whole [0, size) starts free; align is a power of two.
 * RS_ERR_INVALID when align is not one, RS_ERR_NOMEM when out of memory.
 */
rs_status_t rs_range_alloc_init(rs_range_alloc_t *ra, uint64_t size, uint64_t align);
void rs_range_alloc_cleanup(rs_range_alloc_t *ra);

/* Rounds len up to the allocator's alignment. */
static inline uint64_t rs_range_round(const rs_range_alloc_t *ra, uint64_t len)
{
    return (len + ra->align - 1) & ~(ra->align - 1);
}

/*
 * Takes rs_range_round(len) bytes at the lowest free offset that fits.
 * RS_ERR_INVALID when that is 0 bytes, RS_ERR_NO_SPACE when no free range
 * is large enough (then *off_p is left alone).
 */
rs_status_t rs_range_get(rs_range_alloc_t *ra, uint64_t len, uint64_t *off_p);

/* Gives back a range that rs_range_get returned (same len). */
void rs_range_put(rs_range_alloc_t *ra, uint64_t off, uint64_t len);

/* Largest free range (0 when full). */
uint64_t rs_range_largest(const rs_range_alloc_t *ra);

/*
 * Walks every free range and RS_ASSERTs the allocator's invariants (sorted,
 * aligned, inside the region, never adjacent, the counts and the per-node
 * longest range right, free + used = size). O(n): for tests. Returns the
 * tree's height.
 */
unsigned rs_range_check(const rs_range_alloc_t *ra);

#endif
