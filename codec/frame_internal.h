/* Frame header byte layout (docs/codec.md) and helpers shared with tests and fuzz targets. */
#ifndef RS_CODEC_FRAME_INTERNAL_H
#define RS_CODEC_FRAME_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/codec.h>

#include "common/byteorder.h"

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

/* The checksum a frame with this header and stored payload must carry. */
uint64_t rs_frame_checksum(const uint8_t *hdr, const void *payload, size_t stored_len);

#endif
