/*
 * Little-endian integers in byte buffers, for every wire format of the
 * project (frames, manifests, address and key blobs): byte by byte, so they
 * work at any alignment and on any host order. n is 1..8 bytes.
 */
#ifndef RS_COMMON_BYTEORDER_H
#define RS_COMMON_BYTEORDER_H

#include <stdint.h>

static inline void rs_put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t rs_get_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline uint32_t rs_get_le32(const uint8_t *p)
{
    return (uint32_t)rs_get_le(p, 4);
}

static inline uint64_t rs_get_le64(const uint8_t *p)
{
    return rs_get_le(p, 8);
}

static inline void rs_put_le32(uint8_t *p, uint32_t v)
{
    rs_put_le(p, v, 4);
}

static inline void rs_put_le64(uint8_t *p, uint64_t v)
{
    rs_put_le(p, v, 8);
}

#endif
