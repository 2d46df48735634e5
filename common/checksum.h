/*
 * Checksums for bytes that cross the fabric: XXH3-64 from Debian's
 * libxxhash (xxHash 0.8). Chosen over ISA-L's crc32_iscsi because it runs at
 * memory speed with plain SSE2/AVX2 (no CPU-specific dispatch to get right),
 * gives 64 bits instead of 32 for the same cost, and comes from the lz4
 * author's actively kept library that lz4 users already trust.
 */
#ifndef RS_COMMON_CHECKSUM_H
#define RS_COMMON_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

static inline uint64_t rs_checksum64(const void *data, size_t len)
{
    return (uint64_t)XXH3_64bits(data, len);
}

/* Chains a checksum over several pieces (seeded by the previous result). */
static inline uint64_t rs_checksum64_seeded(const void *data, size_t len, uint64_t seed)
{
    return (uint64_t)XXH3_64bits_withSeed(data, len, seed);
}

#endif
