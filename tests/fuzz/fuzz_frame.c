/*
 * libFuzzer target for the frame decoder and the frame walker (bytes from a
 * peer). Besides memory safety (ASan/UBSan), it checks the decoder's
 * contract: statuses are the documented ones, an accepted frame lies inside
 * the input, and whatever decodes re-encodes and decodes to the same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include <rshuffle/codec.h>
#include "codec/frame_internal.h"
#include "fuzz_check.h"
#include "fuzz_frame.h"

#define DECODE_MAX ((size_t)4 << 20) /* larger raw lengths are verified, not decoded */

static int is_frame_error(rs_status_t st)
{
    return st == RS_ERR_TRUNCATED || st == RS_ERR_BAD_MAGIC || st == RS_ERR_BAD_VERSION ||
           st == RS_ERR_BAD_CODEC || st == RS_ERR_BAD_LENGTH || st == RS_ERR_CHECKSUM;
}

/* raw decoded from a frame or block of this codec must survive another round trip. */
static void check_reencode(rs_codec_t codec, const rs_frame_t *f, const uint8_t *raw, size_t len)
{
    size_t cap = rs_frame_bound(codec, len), n = 0;
    CHECK(cap >= RS_FRAME_HEADER_SIZE);
    uint8_t *buf = malloc(cap), *back = malloc(len + 1);
    CHECK(buf != NULL && back != NULL);
    rs_frame_ids_t ids = f != NULL ? f->ids : (rs_frame_ids_t){0};
    CHECK(rs_frame_encode(codec, f != NULL ? f->flags : 0, &ids, raw, len, buf, cap, &n) == RS_OK);
    rs_frame_t g;
    CHECK(rs_frame_verify(buf, n, &g) == RS_OK);
    CHECK(g.raw_len == len && g.frame_len == n && g.codec == codec);
    CHECK(rs_frame_decode(&g, back, len) == RS_OK);
    CHECK(len == 0 || memcmp(back, raw, len) == 0);
    free(back);
    free(buf);
}

/* Decodes a frame that verified; returns its status. */
static rs_status_t decode_frame(const rs_frame_t *f)
{
    if (f->raw_len > DECODE_MAX)
        return RS_OK;
    uint8_t *dst = malloc(f->raw_len + 1);
    CHECK(dst != NULL);
    rs_status_t st = rs_frame_decode(f, dst, f->raw_len);
    CHECK(st == RS_OK || st == RS_ERR_DECOMPRESS);
    if (st == RS_OK)
        check_reencode(f->codec, f, dst, f->raw_len);
    free(dst);
    return st;
}

static void fuzz_frame(const uint8_t *buf, size_t len)
{
    rs_frame_t f;
    rs_status_t parsed = rs_frame_parse(buf, len, &f);
    CHECK(parsed == RS_OK || is_frame_error(parsed));
    if (parsed == RS_OK) {
        CHECK(f.frame_len == RS_FRAME_HEADER_SIZE + (size_t)f.stored_len);
        CHECK(f.raw_len <= RS_CODEC_RAW_MAX && f.codec <= RS_CODEC_SNAPPY);
        CHECK(f.stored_len <= rs_codec_bound(f.codec, f.raw_len));
    }
    rs_status_t st = rs_frame_verify(buf, len, &f);
    CHECK(st == RS_OK || is_frame_error(st));
    CHECK(st == RS_OK || parsed != RS_OK || st == RS_ERR_TRUNCATED || st == RS_ERR_CHECKSUM);
    if (st != RS_OK)
        return;
    CHECK(parsed == RS_OK && f.frame_len <= len && f.payload == buf + RS_FRAME_HEADER_SIZE);
    decode_frame(&f);
}

static void fuzz_resealed(const uint8_t *data, size_t len)
{
    uint8_t *buf = malloc(len ? len : 1);
    CHECK(buf != NULL);
    memcpy(buf, data, len);
    if (len >= RS_FRAME_HEADER_SIZE) {
        size_t stored = rs_get_le32(buf + RS_FRAME_OFF_STORED_LEN);
        if (stored <= len - RS_FRAME_HEADER_SIZE)
            rs_put_le64(buf + RS_FRAME_OFF_CHECKSUM,
                        rs_frame_checksum(buf, buf + RS_FRAME_HEADER_SIZE, stored));
    }
    fuzz_frame(buf, len);
    free(buf);
}

static void fuzz_extent(const uint8_t *buf, size_t len)
{
    rs_frame_iter_t it;
    rs_frame_t f;
    rs_frame_iter_init(&it, buf, len);
    while (it.off < it.len) {
        size_t before = it.off;
        rs_status_t st = rs_frame_iter_next(&it, &f);
        CHECK(st == RS_OK || is_frame_error(st));
        if (st != RS_OK) {
            CHECK(it.off == before); /* stays on the bad frame */
            break;
        }
        CHECK(it.off == before + f.frame_len && it.off <= len);
        CHECK(f.payload == buf + before + RS_FRAME_HEADER_SIZE);
        decode_frame(&f);
    }
}

static void fuzz_block(const uint8_t *buf, size_t len)
{
    if (len < 3)
        return;
    rs_codec_t codec = (rs_codec_t)(buf[0] % 4); /* 3: an unknown codec */
    size_t raw = (size_t)buf[1] | (size_t)buf[2] << 8;
    uint8_t *dst = malloc(raw + 1);
    CHECK(dst != NULL);
    rs_status_t st = rs_codec_decompress(codec, buf + 3, len - 3, dst, raw);
    CHECK(st == RS_OK || st == RS_ERR_DECOMPRESS || (codec == 3 && st == RS_ERR_BAD_CODEC));
    if (st == RS_OK)
        check_reencode(codec, NULL, dst, raw);
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % FUZZ_MODES;
    const uint8_t *buf = data + 1;
    size_t len = size - 1;
    switch (mode) {
        case FUZZ_FRAME:
            fuzz_frame(buf, len);
            break;
        case FUZZ_FRAME_RESEALED:
            fuzz_resealed(buf, len);
            break;
        case FUZZ_EXTENT:
            fuzz_extent(buf, len);
            break;
        default:
            fuzz_block(buf, len);
            break;
    }
    return 0;
}
