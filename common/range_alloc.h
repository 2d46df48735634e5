/*
 * First-fit allocator of offset ranges inside one region (a registered slab
 * or arena carved without registering again). Free ranges are kept sorted by
 * offset and coalesced, so odd sizes never fragment the region for good.
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

typedef struct rs_range_alloc {
    rs_range_t *free; /* sorted by offset, never adjacent */
    size_t n_free, cap;
    uint64_t size;  /* the region's length */
    uint64_t align; /* every offset and length is a multiple (power of two) */
    uint64_t used;  /* bytes handed out */
} rs_range_alloc_t;

/* The whole [0, size) starts free; align is a power of two. */
rs_status_t rs_range_alloc_init(rs_range_alloc_t *ra, uint64_t size, uint64_t align);
void rs_range_alloc_cleanup(rs_range_alloc_t *ra);

/* Rounds len up to the allocator's alignment. */
static inline uint64_t rs_range_round(const rs_range_alloc_t *ra, uint64_t len)
{
    return (len + ra->align - 1) & ~(ra->align - 1);
}

/*
 * Takes rs_range_round(len) bytes at the lowest free offset that fits.
 * RS_ERR_NO_SPACE when no free range is large enough.
 */
rs_status_t rs_range_get(rs_range_alloc_t *ra, uint64_t len, uint64_t *off_p);

/* Gives back a range that rs_range_get returned (same len). */
void rs_range_put(rs_range_alloc_t *ra, uint64_t off, uint64_t len);

/* Largest free range (0 when full). */
uint64_t rs_range_largest(const rs_range_alloc_t *ra);

#endif
