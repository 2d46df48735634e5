/*
 * Sized partition streams: a partition's raw and output buffers
 * hold min(expected, block) bytes and that size's frame bound instead of a
 * whole block each. Frame boundaries depend only on the block size and the
 * writes, never on the estimate, so sized and unsized streams emit the same
 * bytes; a low estimate only costs regrowth.
 */
#include <stdlib.h>
#include <string.h>

#include <rshuffle/codec.h>
#include "common/log.h"

struct rs_pstream {
    rs_codec_t codec;
    size_t block;
    uint16_t flags;
    rs_frame_ids_t ids; /* ids.seq: the next frame's */
    rs_sink_t sink;
    rs_allocator_t alloc;
    /* Codec none seals frames in place: the raw buffer starts with header room. */
    size_t headroom;
    uint8_t *raw; /* headroom + raw_cap bytes */
    size_t raw_cap;
    size_t fill;
    uint8_t *out; /* buffered sinks, compressed codecs: out_cap bytes */
    size_t out_cap;
    rs_pstream_stats_t stats;
    rs_status_t error; /* sticky: the partition's bytes are incomplete */
    int finished;
};

static void *libc_malloc(void *user, size_t size)
{
    (void)user;
    return malloc(size);
}

static void *libc_realloc(void *user, void *ptr, size_t old_size, size_t new_size)
{
    (void)user;
    (void)old_size;
    return realloc(ptr, new_size);
}

static void libc_free(void *user, void *ptr, size_t size)
{
    (void)user;
    (void)size;
    free(ptr);
}

static const rs_allocator_t libc_allocator = {libc_malloc, libc_realloc, libc_free, NULL};

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Makes the raw buffer hold need (<= block) bytes, doubling up to the block. */
static rs_status_t grow_raw(rs_pstream_t *s, size_t need)
{
    if (need <= s->raw_cap)
        return RS_OK;
    size_t cap = min_size(s->block, s->raw_cap * 2);
    if (cap < need)
        cap = need;
    uint8_t *raw = s->raw == NULL
                       ? s->alloc.malloc_fn(s->alloc.user, s->headroom + cap)
                       : s->alloc.realloc_fn(s->alloc.user, s->raw, s->headroom + s->raw_cap,
                                             s->headroom + cap);
    if (raw == NULL) {
        rs_error("partition stream: cannot grow raw buffer to %zu bytes", s->headroom + cap);
        return RS_ERR_NOMEM;
    }
    s->raw = raw;
    s->raw_cap = cap;
    return RS_OK;
}

/* Makes the output buffer hold a frame of raw_len bytes (sized to the raw buffer's bound). */
static rs_status_t grow_out(rs_pstream_t *s, size_t raw_len)
{
    size_t need = rs_frame_bound(s->codec, raw_len);
    if (need <= s->out_cap)
        return RS_OK;
    size_t cap = rs_frame_bound(s->codec, s->raw_cap > raw_len ? s->raw_cap : raw_len);
    if (s->out != NULL)
        s->alloc.free_fn(s->alloc.user, s->out, s->out_cap); /* nothing to keep */
    s->out = s->alloc.malloc_fn(s->alloc.user, cap);
    s->out_cap = s->out != NULL ? cap : 0;
    if (s->out == NULL) {
        rs_error("partition stream: cannot allocate a %zu-byte output buffer", cap);
        return RS_ERR_NOMEM;
    }
    return RS_OK;
}

/* Builds one frame from src[0, len) (len <= block) and hands it to the sink. */
static rs_status_t emit(rs_pstream_t *s, const uint8_t *src, size_t len)
{
    size_t need = rs_frame_bound(s->codec, len), frame_len = 0;
    uint8_t *dst;
    rs_status_t st;
    if (s->sink.reserve != NULL) {
        void *room = NULL;
        st = s->sink.reserve(s->sink.user, need, &room);
        if (st == RS_OK && room == NULL)
            st = RS_ERR_NO_SPACE;
        if (st != RS_OK) {
            rs_error("partition %u: sink has no room for a %zu-byte frame: %s", s->ids.partition,
                     need, rs_strerror(st));
            return st;
        }
        dst = room;
    } else if (s->codec == RS_CODEC_NONE) {
        dst = s->raw; /* src is the raw buffer's payload: seal in place */
    } else {
        st = grow_out(s, len);
        if (st != RS_OK)
            return st;
        dst = s->out;
        need = s->out_cap;
    }
    if (s->codec == RS_CODEC_NONE) {
        if (dst + RS_FRAME_HEADER_SIZE != src)
            memcpy(dst + RS_FRAME_HEADER_SIZE, src, len);
        st = rs_frame_seal(dst, need, len, s->flags, &s->ids, &frame_len);
    } else {
        st = rs_frame_encode(s->codec, s->flags, &s->ids, src, len, dst, need, &frame_len);
    }
    if (st != RS_OK)
        return st;
    st = s->sink.commit(s->sink.user, dst, frame_len);
    if (st != RS_OK) {
        rs_error("partition %u: frame %llu of %zu bytes not delivered: %s", s->ids.partition,
                 (unsigned long long)s->ids.seq, frame_len, rs_strerror(st));
        return st;
    }
    s->ids.seq++;
    s->stats.frames++;
    s->stats.raw_bytes += len;
    s->stats.frame_bytes += frame_len;
    return RS_OK;
}

static rs_status_t emit_buffered(rs_pstream_t *s)
{
    rs_status_t st = emit(s, s->raw + s->headroom, s->fill);
    if (st == RS_OK)
        s->fill = 0;
    return st;
}

/* Appends to the open block, which has room for len bytes; emits it once full. */
static rs_status_t append(rs_pstream_t *s, const uint8_t *data, size_t len)
{
    rs_status_t st = grow_raw(s, s->fill + len);
    if (st != RS_OK)
        return st;
    memcpy(s->raw + s->headroom + s->fill, data, len);
    s->fill += len;
    return s->fill == s->block ? emit_buffered(s) : RS_OK;
}

static rs_status_t write_block(rs_pstream_t *s, const uint8_t *data, size_t len)
{
    rs_status_t st;
    if (len <= s->block - s->fill)
        return append(s, data, len);
    if (s->fill > 0 && (st = emit_buffered(s)) != RS_OK) /* the write starts a new block */
        return st;
    /* Whole blocks of a large write: compressed codecs read the caller's bytes directly. */
    for (; len >= s->block; data += s->block, len -= s->block) {
        st = s->codec != RS_CODEC_NONE || s->sink.reserve != NULL ? emit(s, data, s->block)
                                                                  : append(s, data, s->block);
        if (st != RS_OK)
            return st;
    }
    return len > 0 ? append(s, data, len) : RS_OK;
}

rs_status_t rs_pstream_write(rs_pstream_t *s, const void *data, size_t len)
{
    if (s == NULL || (data == NULL && len > 0)) {
        rs_error("rs_pstream_write: NULL stream or data");
        return RS_ERR_INVALID;
    }
    if (s->error != RS_OK)
        return s->error;
    if (s->finished) {
        rs_error("partition %u: write after finish", s->ids.partition);
        return RS_ERR_STATE;
    }
    if (len == 0)
        return RS_OK;
    s->error = write_block(s, data, len);
    return s->error;
}

rs_status_t rs_pstream_finish(rs_pstream_t *s, rs_pstream_stats_t *stats_p)
{
    if (s == NULL) {
        rs_error("rs_pstream_finish: NULL stream");
        return RS_ERR_INVALID;
    }
    if (s->error != RS_OK)
        return s->error;
    if (!s->finished && s->fill > 0)
        s->error = emit_buffered(s);
    s->finished = 1;
    if (s->error != RS_OK)
        return s->error;
    if (stats_p != NULL)
        *stats_p = s->stats;
    return RS_OK;
}

static rs_status_t check_params(const rs_pstream_params_t *p, size_t block)
{
    if ((unsigned)p->codec > RS_CODEC_SNAPPY) {
        rs_error("partition stream: unknown codec id %d", (int)p->codec);
        return RS_ERR_BAD_CODEC;
    }
    if (block > RS_CODEC_RAW_MAX) {
        rs_error("partition stream: block of %zu bytes exceeds %zu", block, RS_CODEC_RAW_MAX);
        return RS_ERR_INVALID;
    }
    if (p->sink.commit == NULL) {
        rs_error("partition stream: the sink has no commit function");
        return RS_ERR_INVALID;
    }
    const rs_allocator_t *a = p->alloc;
    if (a != NULL && (a->malloc_fn == NULL || a->realloc_fn == NULL || a->free_fn == NULL)) {
        rs_error("partition stream: allocator without malloc, realloc or free");
        return RS_ERR_INVALID;
    }
    return RS_OK;
}

rs_status_t rs_pstream_open(const rs_pstream_params_t *params, rs_pstream_t **stream_p)
{
    if (params == NULL || stream_p == NULL) {
        rs_error("rs_pstream_open: NULL params or stream pointer");
        return RS_ERR_INVALID;
    }
    size_t block = params->block_size != 0 ? params->block_size : RS_PSTREAM_BLOCK_DEFAULT;
    rs_status_t st = check_params(params, block);
    if (st != RS_OK)
        return st;
    const rs_allocator_t *a = params->alloc != NULL ? params->alloc : &libc_allocator;
    rs_pstream_t *s = a->malloc_fn(a->user, sizeof(*s));
    if (s == NULL) {
        rs_error("partition stream: cannot allocate %zu bytes", sizeof(*s));
        return RS_ERR_NOMEM;
    }
    *s = (rs_pstream_t){
        .codec = params->codec,
        .block = block,
        .flags = params->flags,
        .ids = params->ids,
        .sink = params->sink,
        .alloc = *a,
        .headroom = params->codec == RS_CODEC_NONE ? RS_FRAME_HEADER_SIZE : 0,
    };
    /* The sizing: buffers for min(expected, block) raw bytes, never a whole block blindly. */
    size_t first = min_size(params->expected_len, block);
    if (first > 0) {
        st = grow_raw(s, first);
        if (st == RS_OK && s->codec != RS_CODEC_NONE && s->sink.reserve == NULL)
            st = grow_out(s, first);
        if (st != RS_OK)
            goto err_destroy;
    }
    *stream_p = s;
    return RS_OK;

err_destroy:
    rs_pstream_destroy(s);
    return st;
}

void rs_pstream_destroy(rs_pstream_t *s)
{
    if (s == NULL)
        return;
    rs_allocator_t a = s->alloc;
    if (s->out != NULL)
        a.free_fn(a.user, s->out, s->out_cap);
    if (s->raw != NULL)
        a.free_fn(a.user, s->raw, s->headroom + s->raw_cap);
    a.free_fn(a.user, s, sizeof(*s));
}
