/* Frame header byte layout (docs/codec.md) and helpers shared with tests and fuzz targets. */
#ifndef RS_CODEC_FRAME_INTERNAL_H
#define RS_CODEC_FRAME_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/codec.h>

enum {
    RS_FRAME_OFF_MAGIC = 0,       /* u32 RS_FRAME_MAGIC */
    RS_FRAME_OFF_VERSION = 4,     /* u8 */
    RS_FRAME_OFF_CODEC = 5,       /* u8 rs_codec_t */
    RS_FRAME_OFF_FLAGS = 6,       /* u16 */
    RS_FRAME_OFF_RAW_LEN = 8,     /* u32 */
    RS_FRAME_OFF_STORED_LEN = 12, /* u32 */
    RS_FRAME_OFF_SHUFFLE = 16,    /* u32 */
    RS_FRAME_OFF_MAP = 20,        /* u32 */
    RS_FRAME_OFF_ATTEMPT = 24,    /* u32 */
    RS_FRAME_OFF_PARTITION = 28,  /* u32 */
    RS_FRAME_OFF_SEQ = 32,        /* u64 */
    RS_FRAME_OFF_CHECKSUM = 40,   /* u64 over bytes [0, 40) then the stored payload */
};

static inline uint32_t rs_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t rs_get_le64(const uint8_t *p)
{
    return (uint64_t)rs_get_le32(p) | (uint64_t)rs_get_le32(p + 4) << 32;
}

static inline void rs_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void rs_put_le64(uint8_t *p, uint64_t v)
{
    rs_put_le32(p, (uint32_t)v);
    rs_put_le32(p + 4, (uint32_t)(v >> 32));
}

/* The checksum a frame with this header and stored payload must carry. */
uint64_t rs_frame_checksum(const uint8_t *hdr, const void *payload, size_t stored_len);

#endif
