/* codec/: sized partition streams: same bytes as the unsized path, bounded memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/codec.h>
#include "testdata.h"

static const rs_codec_t codecs[] = {RS_CODEC_NONE, RS_CODEC_LZ4, RS_CODEC_SNAPPY};
#define NCODECS 3
#define BLOCK   RS_PSTREAM_BLOCK_DEFAULT

/* A partition's input: its bytes and how they are cut into writes. */
typedef struct input {
    uint8_t *data;
    size_t len;
    size_t *writes; /* lengths, summing to len */
    size_t nwrites;
} input_t;

typedef enum pattern { ONE_WRITE, RECORDS_22, RANDOM_WRITES, PATTERNS } pattern_t;

static input_t make_input(data_kind_t kind, size_t len, pattern_t pattern, uint64_t seed)
{
    input_t in = {make_data(kind, len, seed), len, malloc((len + 1) * sizeof(size_t)), 0};
    uint64_t r = seed + 1;
    for (size_t done = 0; done < len;) {
        size_t w = len - done;
        if (pattern == RECORDS_22 && w > 22)
            w = 22;
        else if (pattern == RANDOM_WRITES)
            w = 1 + next_rand(&r) % (next_rand(&r) % 8 == 0 ? 3 * BLOCK : 5000);
        if (w > len - done)
            w = len - done;
        in.writes[in.nwrites++] = w;
        done += w;
    }
    return in;
}

static void free_input(input_t *in)
{
    free(in->data);
    free(in->writes);
}

static rs_pstream_params_t params_for(rs_codec_t codec, size_t block, size_t expected,
                                      collect_sink_t *out, const rs_allocator_t *alloc)
{
    return (rs_pstream_params_t){
        .codec = codec,
        .block_size = block,
        .expected_len = expected,
        .flags = 0x0102,
        .ids = {.shuffle_id = 5, .map_id = 6, .attempt = 1, .partition = 42, .seq = 1000},
        .sink = collect_sink(out),
        .alloc = alloc,
    };
}

/* Writes the input through one stream into out; returns the stream's stats. */
static rs_pstream_stats_t write_stream(const rs_pstream_params_t *p, const input_t *in)
{
    rs_pstream_t *s = NULL;
    assert_int_equal(rs_pstream_open(p, &s), RS_OK);
    size_t off = 0;
    for (size_t i = 0; i < in->nwrites; i++) {
        assert_int_equal(rs_pstream_write(s, in->data + off, in->writes[i]), RS_OK);
        off += in->writes[i];
    }
    rs_pstream_stats_t stats;
    assert_int_equal(rs_pstream_finish(s, &stats), RS_OK);
    rs_pstream_destroy(s);
    return stats;
}

/*
 * The frames the stream's rule implies, built with rs_frame_encode from the
 * spec (not from the stream's code): a frame holds at most a block; a write
 * that does not fit the open block starts a new one; a write larger than a
 * block is cut into whole blocks and its tail opens the next.
 */
static void model_frames(rs_codec_t codec, size_t block, const input_t *in, collect_sink_t *out)
{
    uint8_t *pending = malloc(block);
    size_t fill = 0, off = 0;
    uint64_t seq = 1000;
    rs_frame_ids_t ids = {5, 6, 1, 42, 0};
    size_t cap = rs_frame_bound(codec, block);
    uint8_t *frame = malloc(cap);
#define EMIT(src, n)                                                                          \
    do {                                                                                      \
        size_t flen;                                                                          \
        ids.seq = seq++;                                                                      \
        assert_int_equal(rs_frame_encode(codec, 0x0102, &ids, (src), (n), frame, cap, &flen), \
                         RS_OK);                                                              \
        assert_int_equal(collect_sink(out).commit(out, frame, flen), RS_OK);                  \
    } while (0)
    for (size_t i = 0; i < in->nwrites; i++) {
        const uint8_t *d = in->data + off;
        size_t n = in->writes[i];
        off += n;
        if (fill + n > block) {
            if (fill > 0)
                EMIT(pending, fill);
            fill = 0;
            for (; n >= block; d += block, n -= block)
                EMIT(d, block);
        }
        memcpy(pending + fill, d, n);
        fill += n;
        if (fill == block) {
            EMIT(pending, fill);
            fill = 0;
        }
    }
    if (fill > 0)
        EMIT(pending, fill);
#undef EMIT
    free(frame);
    free(pending);
}

/* Walks the frames in out and checks they decode back to the input, in sequence. */
static void check_decodes(const collect_sink_t *out, const input_t *in, uint64_t frames)
{
    uint8_t *back = malloc(in->len + 1);
    size_t got = 0;
    uint64_t n = 0;
    rs_frame_iter_t it;
    rs_frame_t fr;
    for (rs_frame_iter_init(&it, out->buf, out->len); it.off < it.len; n++) {
        assert_int_equal(rs_frame_iter_next(&it, &fr), RS_OK);
        assert_int_equal(fr.ids.seq, 1000 + n);
        assert_int_equal(fr.ids.partition, 42);
        assert_int_equal(fr.flags, 0x0102);
        assert_true(fr.raw_len > 0);
        assert_true(got + fr.raw_len <= in->len);
        assert_int_equal(rs_frame_decode(&fr, back + got, in->len - got), RS_OK);
        got += fr.raw_len;
    }
    assert_int_equal(n, frames);
    assert_int_equal(got, in->len);
    assert_memory_equal(back, in->data, in->len);
    free(back);
}

/* Sized streams (any estimate) write exactly the bytes of the unsized one, which match the model.
 */
static void check_identity(rs_codec_t codec, size_t block, data_kind_t kind, size_t len,
                           pattern_t pattern)
{
    input_t in = make_input(kind, len, pattern, len ^ (size_t)pattern);
    collect_sink_t model = {0}, fixed = {0};
    model_frames(codec, block, &in, &model);
    rs_pstream_params_t p = params_for(codec, block, RS_PSTREAM_UNSIZED, &fixed, NULL);
    rs_pstream_stats_t st = write_stream(&p, &in);
    assert_int_equal(fixed.len, model.len);
    assert_memory_equal(fixed.buf, model.buf, model.len);
    assert_int_equal(st.frame_bytes, fixed.len);
    assert_int_equal(st.raw_bytes, len);
    assert_int_equal(st.frames, fixed.commits);
    check_decodes(&fixed, &in, st.frames);

    const size_t estimates[] = {len, 0, 1, len / 3, len > 0 ? len - 1 : 0, len + 1, 2 * len + 9};
    for (size_t e = 0; e < sizeof(estimates) / sizeof(estimates[0]); e++) {
        collect_sink_t sized = {0};
        count_alloc_t ca = {0};
        rs_allocator_t a = count_allocator(&ca);
        p = params_for(codec, block, estimates[e], &sized, &a);
        write_stream(&p, &in);
        if (sized.len != fixed.len ||
            (fixed.len > 0 && memcmp(sized.buf, fixed.buf, fixed.len) != 0))
            fail_msg("%s block %zu, %s, %zu bytes, pattern %d, estimate %zu: sized bytes differ",
                     rs_codec_name(codec), block, data_kind_name(kind), len, (int)pattern,
                     estimates[e]);
        assert_int_equal(ca.live, 0); /* everything freed through the hook */
        collect_sink_free(&sized);
    }
    collect_sink_free(&model);
    collect_sink_free(&fixed);
    free_input(&in);
}

static void test_identity_default_block(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 22, 2200, BLOCK - 1, BLOCK, BLOCK + 1, 1 << 20};
    for (int c = 0; c < NCODECS; c++)
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
            for (int pat = 0; pat < PATTERNS; pat++)
                if (sizes[i] <= BLOCK + 1 || pat != RECORDS_22) /* 22-byte writes of 1 MiB: slow */
                    check_identity(codecs[c], BLOCK, (data_kind_t)((i + (size_t)pat) % DATA_KINDS),
                                   sizes[i], (pattern_t)pat);
}

/* A small configured block exercises many boundaries cheaply. */
static void test_identity_small_block(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 999, 1000, 1001, 4095, 4096, 4097, 50000};
    for (int c = 0; c < NCODECS; c++)
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
            for (int pat = 0; pat < PATTERNS; pat++)
                for (int k = 0; k < DATA_KINDS; k++)
                    check_identity(codecs[c], 1000, (data_kind_t)k, sizes[i], (pattern_t)pat);
}

/* The sizing rule, counted through the allocator hook. */
static void test_sized_allocations(void **state)
{
    (void)state;
    for (int c = 0; c < NCODECS; c++) {
        rs_codec_t codec = codecs[c];
        const size_t lens[] = {1, 22, 2200, 22000, BLOCK, BLOCK + 1, 3 * BLOCK};
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            input_t in = make_input(DATA_KV, lens[i], RECORDS_22, 9);
            size_t cap = lens[i] < BLOCK ? lens[i] : BLOCK;
            /* none seals in place (header room, no output buffer); the others get a bound. */
            size_t want = codec == RS_CODEC_NONE ? RS_FRAME_HEADER_SIZE + cap
                                                 : cap + rs_frame_bound(codec, cap);
            count_alloc_t ca = {0}, cf = {0};
            rs_allocator_t a = count_allocator(&ca), af = count_allocator(&cf);
            collect_sink_t out = {0}, fout = {0};
            rs_pstream_params_t p = params_for(codec, 0, lens[i], &out, &a);
            rs_pstream_t *s;
            assert_int_equal(rs_pstream_open(&p, &s), RS_OK);
            size_t object = ca.allocated - want; /* the stream object itself */
            assert_true(object > 0 && object <= 256);
            rs_pstream_destroy(s);
            ca = (count_alloc_t){0};
            write_stream(&p, &in);
            assert_int_equal(ca.allocated, object + want); /* an exact estimate never regrows */
            /* The unsized path: a whole block and its bound, whatever the partition holds. */
            p = params_for(codec, 0, RS_PSTREAM_UNSIZED, &fout, &af);
            write_stream(&p, &in);
            assert_int_equal(cf.allocated, object + (codec == RS_CODEC_NONE
                                                         ? RS_FRAME_HEADER_SIZE + BLOCK
                                                         : BLOCK + rs_frame_bound(codec, BLOCK)));
            assert_int_equal(out.len, fout.len);
            assert_memory_equal(out.buf, fout.buf, out.len);
            collect_sink_free(&out);
            collect_sink_free(&fout);
            free_input(&in);
        }
    }
}

/* A low estimate costs regrowth, never correctness; growth stops at the block. */
static void test_underestimate(void **state)
{
    (void)state;
    for (int c = 0; c < NCODECS; c++) {
        input_t in = make_input(DATA_KV, 3 * BLOCK + 17, RANDOM_WRITES, 4);
        count_alloc_t ca = {0};
        rs_allocator_t a = count_allocator(&ca);
        collect_sink_t out = {0};
        rs_pstream_params_t p = params_for(codecs[c], 0, 10, &out, &a);
        rs_pstream_stats_t st = write_stream(&p, &in);
        check_decodes(&out, &in, st.frames);
        /* Never more than a block's raw buffer and its output bound live at once. */
        assert_true(ca.peak <=
                    256 + RS_FRAME_HEADER_SIZE + BLOCK + rs_frame_bound(codecs[c], BLOCK));
        assert_int_equal(ca.live, 0);
        collect_sink_free(&out);
        free_input(&in);
    }
}

/* Expected 0: nothing but the stream object until bytes arrive; an empty stream emits nothing. */
static void test_empty_and_zero_estimate(void **state)
{
    (void)state;
    for (int c = 0; c < NCODECS; c++) {
        count_alloc_t ca = {0};
        rs_allocator_t a = count_allocator(&ca);
        collect_sink_t out = {0};
        rs_pstream_params_t p = params_for(codecs[c], 0, 0, &out, &a);
        rs_pstream_t *s;
        assert_int_equal(rs_pstream_open(&p, &s), RS_OK);
        assert_int_equal(ca.calls, 1);
        assert_int_equal(rs_pstream_write(s, NULL, 0), RS_OK);
        rs_pstream_stats_t st = {9, 9, 9};
        assert_int_equal(rs_pstream_finish(s, &st), RS_OK);
        assert_int_equal(st.frames, 0);
        assert_int_equal(st.raw_bytes, 0);
        assert_int_equal(out.len, 0);
        assert_int_equal(rs_pstream_write(s, "x", 1), RS_ERR_STATE);
        assert_int_equal(rs_pstream_finish(s, &st), RS_OK); /* finishing twice is harmless */
        rs_pstream_destroy(s);
        assert_int_equal(ca.calls, 1);
        assert_int_equal(ca.live, 0);
        collect_sink_free(&out);
    }
}

/* The direct sink: frames are encoded where the sink says (a registered buffer), no output buffer.
 */
typedef struct direct_sink {
    uint8_t *region;
    size_t cap, tail;
    void *last_reserved;
    size_t reserves, commits;
} direct_sink_t;

static rs_status_t direct_reserve(void *user, size_t need, void **dst_p)
{
    direct_sink_t *d = user;
    if (d->cap - d->tail < need)
        return RS_ERR_NO_SPACE;
    d->reserves++;
    *dst_p = d->last_reserved = d->region + d->tail;
    return RS_OK;
}

static rs_status_t direct_commit(void *user, const void *frame, size_t frame_len)
{
    direct_sink_t *d = user;
    assert_ptr_equal(frame, d->last_reserved); /* the frame is where it was reserved: no copy */
    d->tail += frame_len;
    d->commits++;
    return RS_OK;
}

static void test_direct_sink(void **state)
{
    (void)state;
    for (int c = 0; c < NCODECS; c++) {
        input_t in = make_input(DATA_KV, 2 * BLOCK + 5000, RANDOM_WRITES, 8);
        collect_sink_t ref = {0};
        rs_pstream_params_t p = params_for(codecs[c], 0, in.len, &ref, NULL);
        write_stream(&p, &in);

        direct_sink_t d = {.cap = ref.len + BLOCK * 2};
        d.region = malloc(d.cap);
        count_alloc_t ca = {0};
        rs_allocator_t a = count_allocator(&ca);
        p.sink = (rs_sink_t){direct_reserve, direct_commit, &d};
        p.alloc = &a;
        rs_pstream_stats_t st = write_stream(&p, &in);
        assert_int_equal(d.tail, ref.len);
        assert_memory_equal(d.region, ref.buf, ref.len);
        assert_int_equal(d.commits, st.frames);
        /* Only the stream object and its raw buffer (codec none: plus header room). */
        assert_true(ca.allocated <= 256 + RS_FRAME_HEADER_SIZE + BLOCK);

        /* A sink without room fails the write that needs it, and every later call. */
        d.tail = 0;
        d.cap = 10;
        rs_pstream_t *s;
        assert_int_equal(rs_pstream_open(&p, &s), RS_OK);
        assert_int_equal(rs_pstream_write(s, in.data, BLOCK), RS_ERR_NO_SPACE);
        assert_int_equal(rs_pstream_write(s, in.data, 1), RS_ERR_NO_SPACE);
        assert_int_equal(rs_pstream_finish(s, NULL), RS_ERR_NO_SPACE);
        rs_pstream_destroy(s);
        assert_int_equal(ca.live, 0);
        free(d.region);
        collect_sink_free(&ref);
        free_input(&in);
    }
}

static void test_sink_error(void **state)
{
    (void)state;
    collect_sink_t out = {.fail_with = RS_ERR_IO};
    rs_pstream_params_t p = params_for(RS_CODEC_LZ4, 100, 50, &out, NULL);
    rs_pstream_t *s;
    assert_int_equal(rs_pstream_open(&p, &s), RS_OK);
    assert_int_equal(rs_pstream_write(s, "0123456789", 10), RS_OK); /* buffered */
    assert_int_equal(rs_pstream_finish(s, NULL), RS_ERR_IO);
    assert_int_equal(rs_pstream_write(s, "x", 1), RS_ERR_IO);
    rs_pstream_destroy(s);

    out.fail_with = RS_ERR_IO;
    assert_int_equal(rs_pstream_open(&p, &s), RS_OK);
    uint8_t big[250] = {0};
    assert_int_equal(rs_pstream_write(s, big, sizeof(big)), RS_ERR_IO); /* emits whole blocks */
    out.fail_with = RS_OK;
    assert_int_equal(rs_pstream_write(s, big, 1), RS_ERR_IO); /* sticky */
    rs_pstream_destroy(s);
    collect_sink_free(&out);
}

/* Every allocation that can fail, fails cleanly: no leak, a clear status. */
static void test_alloc_failures(void **state)
{
    (void)state;
    input_t in = make_input(DATA_KV, 3000, RECORDS_22, 2);
    for (int c = 0; c < NCODECS; c++) {
        for (uint64_t at = 1; at <= 8; at++) {
            count_alloc_t ca = {.fail_at = at};
            rs_allocator_t a = count_allocator(&ca);
            collect_sink_t out = {0};
            rs_pstream_params_t p = params_for(codecs[c], 1024, 10, &out, &a);
            rs_pstream_t *s = NULL;
            rs_status_t st = rs_pstream_open(&p, &s);
            size_t off = 0;
            for (size_t i = 0; st == RS_OK && i < in.nwrites; off += in.writes[i++])
                st = rs_pstream_write(s, in.data + off, in.writes[i]);
            if (st == RS_OK)
                st = rs_pstream_finish(s, NULL);
            rs_pstream_destroy(s);
            assert_true(st == RS_OK || st == RS_ERR_NOMEM);
            if (ca.calls >= at)
                assert_int_equal(st, RS_ERR_NOMEM);
            assert_int_equal(ca.live, 0);
            collect_sink_free(&out);
        }
    }
    free_input(&in);
}

static void test_bad_params(void **state)
{
    (void)state;
    collect_sink_t out = {0};
    rs_pstream_t *s = (rs_pstream_t *)&out;
    rs_pstream_params_t p = params_for((rs_codec_t)3, 0, 0, &out, NULL);
    assert_int_equal(rs_pstream_open(&p, &s), RS_ERR_BAD_CODEC);
    p = params_for(RS_CODEC_LZ4, RS_CODEC_RAW_MAX + 1, 0, &out, NULL);
    assert_int_equal(rs_pstream_open(&p, &s), RS_ERR_INVALID);
    p = params_for(RS_CODEC_LZ4, 0, 0, &out, NULL);
    p.sink.commit = NULL;
    assert_int_equal(rs_pstream_open(&p, &s), RS_ERR_INVALID);
    rs_allocator_t half = {NULL, NULL, NULL, NULL};
    p = params_for(RS_CODEC_LZ4, 0, 0, &out, &half);
    assert_int_equal(rs_pstream_open(&p, &s), RS_ERR_INVALID);
    assert_ptr_equal(s, (rs_pstream_t *)&out); /* untouched on error */
    assert_int_equal(rs_pstream_open(NULL, &s), RS_ERR_INVALID);
    rs_pstream_destroy(NULL);
}

/*
 * A Tez-like spill: 1,009 partitions of varied sizes, each through its own
 * sized stream, allocate no more than the sum of the partitions' bounds
 * (min(raw, block) + the frame bound of that) plus the stream objects.
 */
static void test_spill_1009_partitions(void **state)
{
    (void)state;
    enum { PARTS = 1009 };
    for (int c = 0; c < NCODECS; c++) {
        rs_codec_t codec = codecs[c];
        uint64_t r = 77;
        size_t lens[PARTS], total = 0, bounds = 0;
        for (int i = 0; i < PARTS; i++) {
            uint64_t v = next_rand(&r);
            lens[i] = v % 16 == 0 ? 0 : v % 64 == 1 ? BLOCK + v % 100000 : v % 5000;
            total += lens[i];
            size_t m = lens[i] < BLOCK ? lens[i] : BLOCK;
            bounds += m > 0 ? m + rs_frame_bound(codec, m) : 0;
        }
        uint8_t *data = make_data(DATA_KV, total, 1);
        count_alloc_t ca = {0};
        rs_allocator_t a = count_allocator(&ca);
        collect_sink_t out = {0};
        size_t off = 0;
        for (int i = 0; i < PARTS; i++) {
            rs_pstream_params_t p = params_for(codec, 0, lens[i], &out, &a);
            p.ids.partition = (uint32_t)i;
            rs_pstream_t *s;
            assert_int_equal(rs_pstream_open(&p, &s), RS_OK);
            for (size_t w = 0; w < lens[i]; w += 22)
                assert_int_equal(
                    rs_pstream_write(s, data + off + w, lens[i] - w < 22 ? lens[i] - w : 22),
                    RS_OK);
            assert_int_equal(rs_pstream_finish(s, NULL), RS_OK);
            rs_pstream_destroy(s);
            off += lens[i];
        }
        const uint64_t object = 256; /* per stream: the stream object itself */
        assert_true(ca.allocated <= bounds + PARTS * object);
        /* ...and far below the unsized path's block plus bound per partition. */
        assert_true(ca.allocated * 20 < (uint64_t)PARTS * (BLOCK + rs_frame_bound(codec, BLOCK)));
        assert_int_equal(ca.live, 0);

        /* Every partition's frames decode back to its bytes, in order. */
        rs_frame_iter_t it;
        rs_frame_t fr;
        uint8_t *back = malloc(total + 1);
        size_t got = 0;
        uint32_t last_part = 0;
        for (rs_frame_iter_init(&it, out.buf, out.len); it.off < it.len;) {
            assert_int_equal(rs_frame_iter_next(&it, &fr), RS_OK);
            assert_true(fr.ids.partition >= last_part);
            last_part = fr.ids.partition;
            assert_int_equal(rs_frame_decode(&fr, back + got, total - got), RS_OK);
            got += fr.raw_len;
        }
        assert_int_equal(got, total);
        assert_memory_equal(back, data, total);
        free(back);
        free(data);
        collect_sink_free(&out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_default_block),
        cmocka_unit_test(test_identity_small_block),
        cmocka_unit_test(test_sized_allocations),
        cmocka_unit_test(test_underestimate),
        cmocka_unit_test(test_empty_and_zero_estimate),
        cmocka_unit_test(test_direct_sink),
        cmocka_unit_test(test_sink_error),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_spill_1009_partitions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
