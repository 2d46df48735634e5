/*
 * none / lz4 / snappy behind one interface; output goes straight to the
 * caller's buffer. Malformed compressed bytes (from a peer) are logged at
 * debug level, like rejected frames (frame.c).
 */
#include <limits.h>
#include <string.h>
#include <lz4.h>
#include <snappy-c.h>

#include <rshuffle/codec.h>
#include "common/log.h"

/* LZ4 and snappy take int / size_t lengths: RS_CODEC_RAW_MAX keeps both in range. */
_Static_assert(RS_CODEC_RAW_MAX < LZ4_MAX_INPUT_SIZE, "raw max must fit LZ4");

const char *rs_codec_name(rs_codec_t codec)
{
    switch (codec) {
        case RS_CODEC_NONE:
            return "none";
        case RS_CODEC_LZ4:
            return "lz4";
        case RS_CODEC_SNAPPY:
            return "snappy";
    }
    return "unknown";
}

rs_status_t rs_codec_from_name(const char *name, rs_codec_t *codec_p)
{
    static const rs_codec_t all[] = {RS_CODEC_NONE, RS_CODEC_LZ4, RS_CODEC_SNAPPY};
    if (codec_p == NULL)
        return RS_ERR_INVALID;
    for (size_t i = 0; name != NULL && i < sizeof(all) / sizeof(all[0]); i++) {
        if (strcmp(name, rs_codec_name(all[i])) == 0) {
            *codec_p = all[i];
            return RS_OK;
        }
    }
    rs_error("unknown codec \"%s\" (none, lz4 or snappy)", name ? name : "(null)");
    return RS_ERR_INVALID;
}

size_t rs_codec_bound(rs_codec_t codec, size_t raw_len)
{
    if (raw_len > RS_CODEC_RAW_MAX)
        return 0;
    switch (codec) {
        case RS_CODEC_NONE:
            return raw_len;
        case RS_CODEC_LZ4:
            return (size_t)LZ4_compressBound((int)raw_len);
        case RS_CODEC_SNAPPY:
            return snappy_max_compressed_length(raw_len);
    }
    return 0;
}

rs_status_t rs_codec_compress(rs_codec_t codec, const void *src, size_t src_len, void *dst,
                              size_t dst_cap, size_t *stored_len_p)
{
    if (stored_len_p == NULL)
        return RS_ERR_INVALID;
    if ((unsigned)codec > RS_CODEC_SNAPPY) {
        rs_error("unknown codec id %d", (int)codec);
        return RS_ERR_BAD_CODEC;
    }
    if (src_len > RS_CODEC_RAW_MAX) {
        rs_error("%zu bytes exceed the codec limit of %zu", src_len, RS_CODEC_RAW_MAX);
        return RS_ERR_INVALID;
    }
    if ((src == NULL && src_len > 0) || dst == NULL) {
        rs_error("rs_codec_compress: NULL source or destination");
        return RS_ERR_INVALID;
    }
    size_t bound = rs_codec_bound(codec, src_len);
    char empty = 0;
    if (src_len == 0)
        src = &empty; /* the libraries get a valid pointer even for no bytes */
    if (dst_cap < bound) {
        rs_error("%s output of %zu bytes needs %zu", rs_codec_name(codec), dst_cap, bound);
        return RS_ERR_NO_SPACE;
    }
    size_t stored;
    switch (codec) {
        case RS_CODEC_NONE:
            if (src_len > 0 && dst != src)
                memmove(dst, src, src_len);
            stored = src_len;
            break;
        case RS_CODEC_LZ4: {
            int n = LZ4_compress_default(src, dst, (int)src_len, (int)bound);
            if (n <= 0) { /* cannot happen with a bound-sized output */
                rs_error("LZ4_compress_default failed on %zu bytes", src_len);
                return RS_ERR_INVALID;
            }
            stored = (size_t)n;
            break;
        }
        case RS_CODEC_SNAPPY: {
            stored = dst_cap;
            if (snappy_compress(src, src_len, dst, &stored) != SNAPPY_OK) {
                rs_error("snappy_compress failed on %zu bytes", src_len);
                return RS_ERR_INVALID;
            }
            break;
        }
        default:
            return RS_ERR_BAD_CODEC; /* excluded above */
    }
    *stored_len_p = stored;
    return RS_OK;
}

static rs_status_t lz4_decompress(const void *src, size_t src_len, void *dst, size_t raw_len)
{
    if (src_len > INT_MAX || raw_len > RS_CODEC_RAW_MAX) {
        rs_debug("lz4 block of %zu -> %zu bytes is out of range", src_len, raw_len);
        return RS_ERR_DECOMPRESS;
    }
    int n = LZ4_decompress_safe(src, dst, (int)src_len, (int)raw_len);
    if (n < 0 || (size_t)n != raw_len) {
        rs_debug("lz4 block of %zu bytes is malformed or not %zu bytes raw (got %d)", src_len,
                 raw_len, n);
        return RS_ERR_DECOMPRESS;
    }
    return RS_OK;
}

static rs_status_t snappy_decompress(const void *src, size_t src_len, void *dst, size_t raw_len)
{
    size_t n = 0;
    if (snappy_uncompressed_length(src, src_len, &n) != SNAPPY_OK || n != raw_len) {
        rs_debug("snappy block of %zu bytes is malformed or not %zu bytes raw", src_len, raw_len);
        return RS_ERR_DECOMPRESS;
    }
    n = raw_len;
    if (snappy_uncompress(src, src_len, dst, &n) != SNAPPY_OK || n != raw_len) {
        rs_debug("snappy block of %zu bytes is malformed", src_len);
        return RS_ERR_DECOMPRESS;
    }
    return RS_OK;
}

rs_status_t rs_codec_decompress(rs_codec_t codec, const void *src, size_t src_len, void *dst,
                                size_t raw_len)
{
    char empty = 0;
    if ((src == NULL && src_len > 0) || (dst == NULL && raw_len > 0)) {
        rs_error("rs_codec_decompress: NULL source or destination");
        return RS_ERR_INVALID;
    }
    if (src_len == 0)
        src = &empty; /* the libraries get valid pointers even for no bytes */
    if (raw_len == 0)
        dst = &empty;
    switch (codec) {
        case RS_CODEC_NONE:
            if (src_len != raw_len) {
                rs_debug("uncompressed block of %zu bytes claims %zu raw", src_len, raw_len);
                return RS_ERR_DECOMPRESS;
            }
            if (raw_len > 0 && dst != src)
                memmove(dst, src, raw_len);
            return RS_OK;
        case RS_CODEC_LZ4:
            return lz4_decompress(src, src_len, dst, raw_len);
        case RS_CODEC_SNAPPY:
            return snappy_decompress(src, src_len, dst, raw_len);
    }
    rs_debug("unknown codec id %d", (int)codec);
    return RS_ERR_BAD_CODEC;
}
