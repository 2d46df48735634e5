/*
 * Compression codecs, batch frames and sized partition streams.
 *
 * A frame is a 48-byte little-endian header followed by the stored payload
 * (layout in docs/codec.md). The codec layer knows nothing of shuffles: the
 * ids in a frame are plain integers that the push protocol gives meaning to.
 * Every function that reads a frame treats its bytes as untrusted.
 *
 * Threading: the functions on codecs and frames keep no state and may run
 * concurrently on different buffers. A stream (rs_pstream_t) and a frame
 * iterator are used by one thread at a time.
 *
 * Errors common to the calls that read peer bytes (rs_frame_parse,
 * rs_frame_verify, rs_frame_iter_next): RS_ERR_TRUNCATED (shorter than the
 * header or the frame), RS_ERR_BAD_MAGIC, RS_ERR_BAD_VERSION,
 * RS_ERR_BAD_CODEC (codec id unknown), RS_ERR_BAD_LENGTH (raw length over
 * RS_CODEC_RAW_MAX, or a stored length no codec output could have). They
 * are logged at debug level only: the caller knows the peer and reports.
 */
#ifndef RSHUFFLE_CODEC_H
#define RSHUFFLE_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Codec ids are wire values: never renumber them. */
typedef enum rs_codec {
    RS_CODEC_NONE = 0,
    RS_CODEC_LZ4 = 1,
    RS_CODEC_SNAPPY = 2,
} rs_codec_t;

#define RS_CODEC_RAW_MAX ((size_t)64 << 20) /* largest raw block a codec call or frame takes */

/* The codec's name ("none", "lz4", "snappy"), or "unknown": a static string. */
RS_API const char *rs_codec_name(rs_codec_t codec);

/*
 * Parses a codec name as rs_codec_name prints it (exact, lower case) into
 * *codec_p. RS_ERR_INVALID (logged) for anything else or a NULL name;
 * *codec_p is set only on RS_OK.
 */
RS_API rs_status_t rs_codec_from_name(const char *name, rs_codec_t *codec_p);

/*
 * Largest compressed size of raw_len bytes (LZ4_compressBound,
 * snappy_max_compressed_length, raw_len for none). 0 for an unknown codec
 * or raw_len > RS_CODEC_RAW_MAX.
 */
RS_API size_t rs_codec_bound(rs_codec_t codec, size_t raw_len);

/*
 * Compresses src into dst, which must hold rs_codec_bound(codec, src_len)
 * bytes even when the output would be smaller (RS_ERR_NO_SPACE otherwise).
 * *stored_len_p gets the compressed size. RS_ERR_BAD_CODEC: unknown codec;
 * RS_ERR_INVALID: src_len > RS_CODEC_RAW_MAX, NULL dst, or NULL src with
 * src_len > 0. *stored_len_p is written only on RS_OK; dst is untouched
 * on these argument errors. src and dst may overlap only for codec none.
 */
RS_API rs_status_t rs_codec_compress(rs_codec_t codec, const void *src, size_t src_len, void *dst,
                                     size_t dst_cap, size_t *stored_len_p);

/*
 * Decompresses untrusted src into dst, which receives exactly raw_len bytes.
 * RS_ERR_DECOMPRESS when the bytes are malformed or do not yield raw_len
 * bytes; RS_ERR_BAD_CODEC: unknown codec; RS_ERR_INVALID: NULL src with
 * src_len > 0 or NULL dst with raw_len > 0. Never writes past dst +
 * raw_len, but on an error dst[0, raw_len) may be partly written.
 */
RS_API rs_status_t rs_codec_decompress(rs_codec_t codec, const void *src, size_t src_len, void *dst,
                                       size_t raw_len);

/* ---- frames ---- */

#define RS_FRAME_HEADER_SIZE 48
#define RS_FRAME_MAGIC       0x46485352u /* "RSHF" as little-endian bytes */
#define RS_FRAME_VERSION     1

/* The ids a frame carries for the push protocol (opaque to the codec). */
typedef struct rs_frame_ids {
    uint32_t shuffle_id;
    uint32_t map_id;
    uint32_t attempt;
    uint32_t partition;
    uint64_t seq; /* batch sequence number */
} rs_frame_ids_t;

/* A parsed frame; payload points into the buffer it was parsed from. */
typedef struct rs_frame {
    rs_codec_t codec;
    uint16_t flags; /* caller-defined, carried and checksummed */
    uint32_t raw_len;
    uint32_t stored_len;
    rs_frame_ids_t ids;
    uint64_t checksum;
    const uint8_t *payload; /* stored_len bytes */
    size_t frame_len;       /* RS_FRAME_HEADER_SIZE + stored_len */
} rs_frame_t;

/*
 * Largest frame for raw_len bytes: header + rs_codec_bound. 0 for an unknown
 * codec or raw_len > RS_CODEC_RAW_MAX (RS_FRAME_HEADER_SIZE for raw_len 0).
 */
RS_API size_t rs_frame_bound(rs_codec_t codec, size_t raw_len);

/*
 * Compresses src straight into dst after the header and seals the frame
 * (ids copied into the header). dst must hold rs_frame_bound(codec,
 * src_len) bytes; *frame_len_p gets the frame's size. RS_ERR_INVALID: NULL
 * ids or dst, NULL src with src_len > 0, src_len > RS_CODEC_RAW_MAX;
 * RS_ERR_NO_SPACE: dst_cap below that bound; RS_ERR_BAD_CODEC. On an error
 * *frame_len_p is not written and dst is not a valid frame.
 */
RS_API rs_status_t rs_frame_encode(rs_codec_t codec, uint16_t flags, const rs_frame_ids_t *ids,
                                   const void *src, size_t src_len, void *dst, size_t dst_cap,
                                   size_t *frame_len_p);

/*
 * Seals an uncompressed (codec none) frame in place: the payload_len bytes
 * already sit at frame + RS_FRAME_HEADER_SIZE; the header is written before
 * them. RS_ERR_INVALID: NULL frame or ids, payload_len > RS_CODEC_RAW_MAX;
 * RS_ERR_NO_SPACE: frame_cap < RS_FRAME_HEADER_SIZE + payload_len. Nothing
 * is written on an error; *frame_len_p is set only on RS_OK.
 */
RS_API rs_status_t rs_frame_seal(void *frame, size_t frame_cap, size_t payload_len, uint16_t flags,
                                 const rs_frame_ids_t *ids, size_t *frame_len_p);

/*
 * Checks the header at buf (magic, version, codec, length limits) without
 * needing the payload: tells how long the frame is (frame_p->frame_len).
 * No checksum check and no check that the payload lies in buf. The errors
 * common to readers above, and RS_ERR_INVALID for a NULL buf with len > 0.
 * *frame_p is set only on RS_OK; its payload points into buf (valid while
 * buf is).
 */
RS_API rs_status_t rs_frame_parse(const void *buf, size_t len, rs_frame_t *frame_p);

/*
 * rs_frame_parse, then checks that the whole frame lies in buf
 * (RS_ERR_TRUNCATED) and that its checksum holds (RS_ERR_CHECKSUM). Does
 * not decompress (a worker verifies frames on arrival). Bytes after the
 * frame are ignored. *frame_p is set only on RS_OK; it points into buf.
 */
RS_API rs_status_t rs_frame_verify(const void *buf, size_t len, rs_frame_t *frame_p);

/*
 * Decompresses a frame that rs_frame_verify accepted into dst, which must
 * hold frame->raw_len bytes (RS_ERR_NO_SPACE otherwise). Reads the payload
 * frame->payload points to, which must still be valid; does not check the
 * checksum again. RS_ERR_INVALID: NULL frame, or NULL dst with raw_len > 0;
 * RS_ERR_DECOMPRESS / RS_ERR_BAD_CODEC as rs_codec_decompress, and like it
 * dst may be partly written on an error.
 */
RS_API rs_status_t rs_frame_decode(const rs_frame_t *frame, void *dst, size_t dst_cap);

/* Walks back-to-back frames in one buffer (an extent a reader pulled). */
typedef struct rs_frame_iter {
    const uint8_t *buf;
    size_t len;
    size_t off; /* where the next frame starts; == len at the end */
} rs_frame_iter_t;

/*
 * Starts a walk over buf[0, len) (a NULL buf is an empty walk). The
 * iterator keeps buf by reference: it must stay valid during the walk.
 * Iterate while it->off < it->len. Cannot fail.
 */
RS_API void rs_frame_iter_init(rs_frame_iter_t *it, const void *buf, size_t len);

/*
 * Verifies the frame at it->off (rs_frame_verify) and steps past it;
 * *frame_p points into the walked buffer. On an error the iterator stays on
 * the bad frame, at it->off, and *frame_p is not written. The errors of
 * rs_frame_verify (RS_ERR_TRUNCATED also when called at the end, it->off ==
 * it->len); RS_ERR_INVALID when it->off > it->len.
 */
RS_API rs_status_t rs_frame_iter_next(rs_frame_iter_t *it, rs_frame_t *frame_p);

/* ---- sized partition streams ---- */

/*
 * Allocation hook: every buffer of a stream, and the stream itself, comes
 * from here (sizes are exact). All three functions are required.
 */
typedef struct rs_allocator {
    void *(*malloc_fn)(void *user, size_t size);
    void *(*realloc_fn)(void *user, void *ptr, size_t old_size, size_t new_size);
    void (*free_fn)(void *user, void *ptr, size_t size);
    void *user;
} rs_allocator_t;

/*
 * Where a stream's frames go. With reserve set, each frame is encoded in
 * place into the memory it returns (e.g. a registered push buffer) and then
 * committed there. Without it, frames are built in the stream's own output
 * buffer and commit must consume them before returning (e.g. write a file).
 * reserve must return at least need bytes (RS_OK with a NULL *dst_p counts
 * as RS_ERR_NO_SPACE); the stream writes one frame there and commits it
 * before it asks again. A status other than RS_OK from either fails the
 * stream with that status. Both run on the thread that calls the stream.
 */
typedef struct rs_sink {
    rs_status_t (*reserve)(void *user, size_t need, void **dst_p);
    rs_status_t (*commit)(void *user, const void *frame, size_t frame_len);
    void *user;
} rs_sink_t;

#define RS_PSTREAM_BLOCK_DEFAULT ((size_t)256 << 10)
#define RS_PSTREAM_UNSIZED       SIZE_MAX /* expected_len: size buffers to the block */

typedef struct rs_pstream_params {
    rs_codec_t codec;
    size_t block_size;           /* raw bytes per frame at most; 0 = RS_PSTREAM_BLOCK_DEFAULT */
    size_t expected_len;         /* estimated raw bytes of the partition, or RS_PSTREAM_UNSIZED */
    uint16_t flags;              /* put in every frame */
    rs_frame_ids_t ids;          /* ids of every frame; ids.seq is the first frame's, then +1 */
    rs_sink_t sink;              /* commit is required */
    const rs_allocator_t *alloc; /* NULL: libc */
} rs_pstream_params_t;

typedef struct rs_pstream_stats {
    uint64_t frames;
    uint64_t raw_bytes;
    uint64_t frame_bytes; /* headers + stored payloads */
} rs_pstream_stats_t;

typedef struct rs_pstream rs_pstream_t;

/*
 * Opens a stream for one partition. Its buffers hold min(expected_len,
 * block_size) raw bytes and that size's frame bound; they grow (up to the
 * block) when the estimate was low. The frames do not depend on the estimate.
 * *params is copied, and *params->alloc with it; the sink's and the
 * allocator's user pointers are kept by reference for the stream's life.
 * RS_ERR_INVALID: NULL params or stream_p, block_size > RS_CODEC_RAW_MAX,
 * no sink.commit, an allocator missing a function; RS_ERR_BAD_CODEC;
 * RS_ERR_NOMEM. *stream_p is set only on RS_OK.
 */
RS_API rs_status_t rs_pstream_open(const rs_pstream_params_t *params, rs_pstream_t **stream_p);

/*
 * Appends len bytes; data is consumed before this returns. A frame holds at most block_size raw
 * bytes and a write is never split across frames unless it is larger than
 * a block. Frames may be emitted (reserve/commit called) during the call.
 * An error of the stream (the sink's status, RS_ERR_NO_SPACE from reserve,
 * RS_ERR_NOMEM) is sticky: returned here and by every later write and
 * finish; part of the write may then have been committed. Not sticky:
 * RS_ERR_INVALID (NULL stream, NULL data with len > 0) and RS_ERR_STATE
 * (a write after rs_pstream_finish).
 */
RS_API rs_status_t rs_pstream_write(rs_pstream_t *stream, const void *data, size_t len);

/*
 * Emits the last, partial frame (if any); *stats_p (optional) gets the
 * stream's totals. Returns the stream's sticky error if it has one (or
 * gets one emitting that frame), RS_ERR_INVALID for a NULL stream;
 * *stats_p is written only on RS_OK. Calling it again returns the same
 * result and emits nothing.
 */
RS_API rs_status_t rs_pstream_finish(rs_pstream_t *stream, rs_pstream_stats_t *stats_p);

/* Frees the stream and its buffers (finished or not). NULL is ignored. */
RS_API void rs_pstream_destroy(rs_pstream_t *stream);

#ifdef __cplusplus
}
#endif
#endif
