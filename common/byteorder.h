/*
 * Little-endian integers in byte buffers, for every wire format of the
 * project (frames, manifests, address and key blobs): at any alignment and
 * on any host order. n is 1..8 bytes. On a little-endian host the 4- and
 * 8-byte cases are one unaligned load or store (a snapshot of 200 commits
 * is read field by field: byte loops cost ~200 instructions a commit).
 */
#ifndef RS_COMMON_BYTEORDER_H
#define RS_COMMON_BYTEORDER_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RS_HOST_LE 1
#else
#define RS_HOST_LE 0
#endif

static inline void rs_put_le_bytes(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t rs_get_le_bytes(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline uint32_t rs_get_le32(const uint8_t *p)
{
    if (!RS_HOST_LE)
        return (uint32_t)rs_get_le_bytes(p, 4);
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint64_t rs_get_le64(const uint8_t *p)
{
    if (!RS_HOST_LE)
        return rs_get_le_bytes(p, 8);
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline void rs_put_le32(uint8_t *p, uint32_t v)
{
    if (RS_HOST_LE)
        memcpy(p, &v, sizeof(v));
    else
        rs_put_le_bytes(p, v, 4);
}

static inline void rs_put_le64(uint8_t *p, uint64_t v)
{
    if (RS_HOST_LE)
        memcpy(p, &v, sizeof(v));
    else
        rs_put_le_bytes(p, v, 8);
}

/* n is a constant at nearly every call: the switch folds to one case. */
static inline void rs_put_le(uint8_t *p, uint64_t v, unsigned n)
{
    switch (n) {
        case 4:
            rs_put_le32(p, (uint32_t)v);
            break;
        case 8:
            rs_put_le64(p, v);
            break;
        default:
            rs_put_le_bytes(p, v, n);
    }
}

static inline uint64_t rs_get_le(const uint8_t *p, unsigned n)
{
    switch (n) {
        case 4:
            return rs_get_le32(p);
        case 8:
            return rs_get_le64(p);
        default:
            return rs_get_le_bytes(p, n);
    }
}

#endif
