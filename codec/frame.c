/*
 * Batch frames: header + payload, sealed with an XXH3 checksum; parsing
 * trusts nothing. Rejected peer bytes are logged at debug level only: the
 * status says what was wrong, and the caller, who knows the peer, reports
 * it (a hostile or broken peer must not be able to flood the log).
 */
#include <string.h>

#include <rshuffle/codec.h>
#include "codec/frame_internal.h"
#include "common/checksum.h"
#include "common/log.h"

_Static_assert(RS_FRAME_OFF_CHECKSUM + 8 == RS_FRAME_HEADER_SIZE, "header layout");
_Static_assert(RS_CODEC_RAW_MAX <= UINT32_MAX, "lengths are u32 on the wire");

uint64_t rs_frame_checksum(const uint8_t *hdr, const void *payload, size_t stored_len)
{
    uint64_t seed = rs_checksum64(hdr, RS_FRAME_OFF_CHECKSUM);
    return rs_checksum64_seeded(payload, stored_len, seed);
}

size_t rs_frame_bound(rs_codec_t codec, size_t raw_len)
{
    size_t bound = rs_codec_bound(codec, raw_len);
    if (bound == 0 && (raw_len > 0 || (unsigned)codec > RS_CODEC_SNAPPY))
        return 0;
    return RS_FRAME_HEADER_SIZE + bound;
}

/* Writes the header of a frame whose stored payload already follows it. */
static void seal_header(uint8_t *h, rs_codec_t codec, uint16_t flags, size_t raw_len,
                        size_t stored_len, const rs_frame_ids_t *ids)
{
    rs_put_le32(h + RS_FRAME_OFF_MAGIC, RS_FRAME_MAGIC);
    h[RS_FRAME_OFF_VERSION] = RS_FRAME_VERSION;
    h[RS_FRAME_OFF_CODEC] = (uint8_t)codec;
    rs_put_le(h + RS_FRAME_OFF_FLAGS, flags, 2);
    rs_put_le32(h + RS_FRAME_OFF_RAW_LEN, (uint32_t)raw_len);
    rs_put_le32(h + RS_FRAME_OFF_STORED_LEN, (uint32_t)stored_len);
    rs_put_le32(h + RS_FRAME_OFF_SHUFFLE, ids->shuffle_id);
    rs_put_le32(h + RS_FRAME_OFF_MAP, ids->map_id);
    rs_put_le32(h + RS_FRAME_OFF_ATTEMPT, ids->attempt);
    rs_put_le32(h + RS_FRAME_OFF_PARTITION, ids->partition);
    rs_put_le64(h + RS_FRAME_OFF_SEQ, ids->seq);
    rs_put_le64(h + RS_FRAME_OFF_CHECKSUM,
                rs_frame_checksum(h, h + RS_FRAME_HEADER_SIZE, stored_len));
}

rs_status_t rs_frame_encode(rs_codec_t codec, uint16_t flags, const rs_frame_ids_t *ids,
                            const void *src, size_t src_len, void *dst, size_t dst_cap,
                            size_t *frame_len_p)
{
    if (ids == NULL || dst == NULL || (src == NULL && src_len > 0) || frame_len_p == NULL) {
        rs_error("rs_frame_encode: NULL ids, destination, source or length pointer");
        return RS_ERR_INVALID;
    }
    if (dst_cap < RS_FRAME_HEADER_SIZE) {
        rs_error("frame destination of %zu bytes is smaller than a header", dst_cap);
        return RS_ERR_NO_SPACE;
    }
    uint8_t *h = dst;
    size_t stored;
    rs_status_t st = rs_codec_compress(codec, src, src_len, h + RS_FRAME_HEADER_SIZE,
                                       dst_cap - RS_FRAME_HEADER_SIZE, &stored);
    if (st != RS_OK)
        return st;
    seal_header(h, codec, flags, src_len, stored, ids);
    *frame_len_p = RS_FRAME_HEADER_SIZE + stored;
    return RS_OK;
}

rs_status_t rs_frame_seal(void *frame, size_t frame_cap, size_t payload_len, uint16_t flags,
                          const rs_frame_ids_t *ids, size_t *frame_len_p)
{
    if (frame == NULL || ids == NULL || frame_len_p == NULL || payload_len > RS_CODEC_RAW_MAX) {
        rs_error(
            "rs_frame_seal: NULL frame, ids or length pointer, or payload of %zu bytes over %zu",
            payload_len, RS_CODEC_RAW_MAX);
        return RS_ERR_INVALID;
    }
    if (frame_cap < RS_FRAME_HEADER_SIZE || frame_cap - RS_FRAME_HEADER_SIZE < payload_len) {
        rs_error("frame of %zu bytes cannot hold a header and %zu payload bytes", frame_cap,
                 payload_len);
        return RS_ERR_NO_SPACE;
    }
    seal_header(frame, RS_CODEC_NONE, flags, payload_len, payload_len, ids);
    *frame_len_p = RS_FRAME_HEADER_SIZE + payload_len;
    return RS_OK;
}

/* Length rules that need no payload: a stored length no codec output could have is corrupt. */
static rs_status_t check_lengths(rs_codec_t codec, uint32_t raw_len, uint32_t stored_len)
{
    if (raw_len > RS_CODEC_RAW_MAX) {
        rs_debug("frame raw length %u exceeds the limit %zu", raw_len, RS_CODEC_RAW_MAX);
        return RS_ERR_BAD_LENGTH;
    }
    if (codec == RS_CODEC_NONE ? stored_len != raw_len
                               : stored_len == 0 || stored_len > rs_codec_bound(codec, raw_len)) {
        rs_debug("%s frame: stored length %u impossible for raw length %u", rs_codec_name(codec),
                 stored_len, raw_len);
        return RS_ERR_BAD_LENGTH;
    }
    return RS_OK;
}

rs_status_t rs_frame_parse(const void *buf, size_t len, rs_frame_t *frame_p)
{
    const uint8_t *h = buf;
    if ((buf == NULL && len > 0) || frame_p == NULL) {
        rs_error("rs_frame_parse: NULL buffer or frame pointer");
        return RS_ERR_INVALID;
    }
    if (len < RS_FRAME_HEADER_SIZE) {
        rs_debug("frame truncated: %zu bytes, the header needs %d", len, RS_FRAME_HEADER_SIZE);
        return RS_ERR_TRUNCATED;
    }
    if (rs_get_le32(h + RS_FRAME_OFF_MAGIC) != RS_FRAME_MAGIC) {
        rs_debug("not a frame: magic 0x%08x", rs_get_le32(h + RS_FRAME_OFF_MAGIC));
        return RS_ERR_BAD_MAGIC;
    }
    if (h[RS_FRAME_OFF_VERSION] != RS_FRAME_VERSION) {
        rs_debug("frame version %u not understood (this is %d)", h[RS_FRAME_OFF_VERSION],
                 RS_FRAME_VERSION);
        return RS_ERR_BAD_VERSION;
    }
    uint8_t codec = h[RS_FRAME_OFF_CODEC];
    if (codec > RS_CODEC_SNAPPY) {
        rs_debug("frame codec id %u unknown", codec);
        return RS_ERR_BAD_CODEC;
    }
    uint32_t raw_len = rs_get_le32(h + RS_FRAME_OFF_RAW_LEN);
    uint32_t stored_len = rs_get_le32(h + RS_FRAME_OFF_STORED_LEN);
    rs_status_t st = check_lengths((rs_codec_t)codec, raw_len, stored_len);
    if (st != RS_OK)
        return st;

    frame_p->codec = (rs_codec_t)codec;
    frame_p->flags = (uint16_t)rs_get_le(h + RS_FRAME_OFF_FLAGS, 2);
    frame_p->raw_len = raw_len;
    frame_p->stored_len = stored_len;
    frame_p->ids.shuffle_id = rs_get_le32(h + RS_FRAME_OFF_SHUFFLE);
    frame_p->ids.map_id = rs_get_le32(h + RS_FRAME_OFF_MAP);
    frame_p->ids.attempt = rs_get_le32(h + RS_FRAME_OFF_ATTEMPT);
    frame_p->ids.partition = rs_get_le32(h + RS_FRAME_OFF_PARTITION);
    frame_p->ids.seq = rs_get_le64(h + RS_FRAME_OFF_SEQ);
    frame_p->checksum = rs_get_le64(h + RS_FRAME_OFF_CHECKSUM);
    frame_p->payload = h + RS_FRAME_HEADER_SIZE;
    frame_p->frame_len = RS_FRAME_HEADER_SIZE + (size_t)stored_len;
    return RS_OK;
}

rs_status_t rs_frame_verify(const void *buf, size_t len, rs_frame_t *frame_p)
{
    if (frame_p == NULL)
        return RS_ERR_INVALID;
    rs_frame_t f;
    rs_status_t st = rs_frame_parse(buf, len, &f);
    if (st != RS_OK)
        return st;
    if (len < f.frame_len) {
        rs_debug("frame truncated: %zu bytes of a %zu-byte frame", len, f.frame_len);
        return RS_ERR_TRUNCATED;
    }
    uint64_t sum = rs_frame_checksum(buf, f.payload, f.stored_len);
    if (sum != f.checksum) {
        rs_debug("frame checksum mismatch (seq %llu, partition %u): 0x%016llx != 0x%016llx",
                 (unsigned long long)f.ids.seq, f.ids.partition, (unsigned long long)sum,
                 (unsigned long long)f.checksum);
        return RS_ERR_CHECKSUM;
    }
    *frame_p = f;
    return RS_OK;
}

rs_status_t rs_frame_decode(const rs_frame_t *frame, void *dst, size_t dst_cap)
{
    if (frame == NULL || (dst == NULL && frame->raw_len > 0)) {
        rs_error("rs_frame_decode: NULL frame or destination");
        return RS_ERR_INVALID;
    }
    if (dst_cap < frame->raw_len) {
        rs_error("frame of %u raw bytes does not fit %zu", frame->raw_len, dst_cap);
        return RS_ERR_NO_SPACE;
    }
    return rs_codec_decompress(frame->codec, frame->payload, frame->stored_len, dst,
                               frame->raw_len);
}

void rs_frame_iter_init(rs_frame_iter_t *it, const void *buf, size_t len)
{
    if (it == NULL)
        return;
    it->buf = buf;
    it->len = buf != NULL ? len : 0;
    it->off = 0;
}

rs_status_t rs_frame_iter_next(rs_frame_iter_t *it, rs_frame_t *frame_p)
{
    if (it == NULL || frame_p == NULL)
        return RS_ERR_INVALID;
    if (it->off > it->len) {
        rs_error("frame iterator offset %zu past its %zu bytes", it->off, it->len);
        return RS_ERR_INVALID;
    }
    rs_frame_t f;
    const uint8_t *at = it->buf != NULL ? it->buf + it->off : NULL;
    rs_status_t st = rs_frame_verify(at, it->len - it->off, &f);
    if (st != RS_OK)
        return st;
    it->off += f.frame_len;
    *frame_p = f;
    return RS_OK;
}
