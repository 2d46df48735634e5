/* codec/: none, lz4 and snappy blocks: bounds, round trips, hostile input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <lz4.h>
#include <snappy-c.h>

#include <rshuffle/codec.h>
#include "testdata.h"

static const rs_codec_t codecs[] = {RS_CODEC_NONE, RS_CODEC_LZ4, RS_CODEC_SNAPPY};
#define NCODECS 3
#define BLOCK   RS_PSTREAM_BLOCK_DEFAULT
static const size_t sizes[] = {0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 1 << 20};

static void test_names(void **state)
{
    (void)state;
    for (int i = 0; i < NCODECS; i++) {
        rs_codec_t c = (rs_codec_t)99;
        assert_int_equal(rs_codec_from_name(rs_codec_name(codecs[i]), &c), RS_OK);
        assert_int_equal(c, codecs[i]);
    }
    assert_string_equal(rs_codec_name(RS_CODEC_LZ4), "lz4");
    assert_string_equal(rs_codec_name((rs_codec_t)3), "unknown");
    rs_codec_t c = RS_CODEC_SNAPPY;
    assert_int_equal(rs_codec_from_name("zstd", &c), RS_ERR_INVALID);
    assert_int_equal(rs_codec_from_name(NULL, &c), RS_ERR_INVALID);
    assert_int_equal(c, RS_CODEC_SNAPPY); /* untouched on error */
    /* Wire values are fixed. */
    assert_int_equal(RS_CODEC_NONE, 0);
    assert_int_equal(RS_CODEC_LZ4, 1);
    assert_int_equal(RS_CODEC_SNAPPY, 2);
}

static void test_bound(void **state)
{
    (void)state;
    for (size_t n = 0; n <= (1 << 20); n = n * 3 + 1) {
        assert_int_equal(rs_codec_bound(RS_CODEC_NONE, n), n);
        assert_int_equal(rs_codec_bound(RS_CODEC_LZ4, n), (size_t)LZ4_compressBound((int)n));
        assert_int_equal(rs_codec_bound(RS_CODEC_SNAPPY, n), snappy_max_compressed_length(n));
    }
    assert_int_equal(rs_codec_bound(RS_CODEC_LZ4, RS_CODEC_RAW_MAX + 1), 0);
    assert_true(rs_codec_bound(RS_CODEC_SNAPPY, RS_CODEC_RAW_MAX) > RS_CODEC_RAW_MAX);
    assert_int_equal(rs_codec_bound((rs_codec_t)3, 10), 0);
}

/* Compresses into a buffer of exactly the bound, decompresses into exactly raw_len bytes. */
static void round_trip(rs_codec_t codec, data_kind_t kind, size_t len)
{
    uint8_t *src = make_data(kind, len, len + kind);
    size_t bound = rs_codec_bound(codec, len);
    uint8_t *dst = malloc(bound + 1), *back = malloc(len + 1);
    assert_non_null(dst);
    assert_non_null(back);
    size_t stored = 0;
    assert_int_equal(rs_codec_compress(codec, src, len, dst, bound, &stored), RS_OK);
    assert_true(stored <= bound);
    if (codec != RS_CODEC_NONE && kind == DATA_COMPRESSIBLE && len >= 4096)
        assert_true(stored < len / 8);
    if (codec == RS_CODEC_NONE)
        assert_int_equal(stored, len);
    memset(back, 0xa5, len + 1);
    assert_int_equal(rs_codec_decompress(codec, dst, stored, back, len), RS_OK);
    assert_memory_equal(back, src, len);
    assert_int_equal(back[len], 0xa5); /* nothing written past raw_len */
    free(src);
    free(dst);
    free(back);
}

static void test_round_trips(void **state)
{
    (void)state;
    for (int c = 0; c < NCODECS; c++)
        for (int k = 0; k < DATA_KINDS; k++)
            for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                round_trip(codecs[c], (data_kind_t)k, sizes[i]);
}

static void test_compress_errors(void **state)
{
    (void)state;
    uint8_t src[100] = {1, 2, 3}, dst[200];
    size_t stored = 77;
    for (int c = 0; c < NCODECS; c++) {
        size_t bound = rs_codec_bound(codecs[c], sizeof(src));
        assert_int_equal(rs_codec_compress(codecs[c], src, sizeof(src), dst, bound - 1, &stored),
                         RS_ERR_NO_SPACE);
    }
    assert_int_equal(rs_codec_compress((rs_codec_t)3, src, sizeof(src), dst, sizeof(dst), &stored),
                     RS_ERR_BAD_CODEC);
    assert_int_equal(
        rs_codec_compress(RS_CODEC_LZ4, src, RS_CODEC_RAW_MAX + 1, dst, sizeof(dst), &stored),
        RS_ERR_INVALID);
    assert_int_equal(rs_codec_compress(RS_CODEC_LZ4, NULL, 10, dst, sizeof(dst), &stored),
                     RS_ERR_INVALID);
    assert_int_equal(stored, 77); /* untouched on error */
}

/* Hostile compressed bytes: every failure is RS_ERR_DECOMPRESS and dst is not overrun. */
static void test_decompress_errors(void **state)
{
    (void)state;
    enum { RAW = 5000 };
    uint8_t *raw = make_data(DATA_KV, RAW, 3);
    for (int c = 1; c < NCODECS; c++) {
        rs_codec_t codec = codecs[c];
        size_t bound = rs_codec_bound(codec, RAW), stored = 0;
        uint8_t *comp = malloc(bound), *back = malloc(RAW + 16);
        assert_int_equal(rs_codec_compress(codec, raw, RAW, comp, bound, &stored), RS_OK);
        /* The raw length lies, both ways. */
        assert_int_equal(rs_codec_decompress(codec, comp, stored, back, RAW - 1),
                         RS_ERR_DECOMPRESS);
        memset(back, 0x5a, RAW + 16);
        assert_int_equal(rs_codec_decompress(codec, comp, stored, back, RAW + 1),
                         RS_ERR_DECOMPRESS);
        for (int i = 0; i < 15; i++)
            assert_int_equal(back[RAW + 1 + i], 0x5a);
        /* Cut short, empty, garbage. */
        assert_int_equal(rs_codec_decompress(codec, comp, stored / 2, back, RAW),
                         RS_ERR_DECOMPRESS);
        assert_int_equal(rs_codec_decompress(codec, comp, 0, back, RAW), RS_ERR_DECOMPRESS);
        memset(comp, 0xff, stored);
        assert_int_equal(rs_codec_decompress(codec, comp, stored, back, RAW), RS_ERR_DECOMPRESS);
        free(comp);
        free(back);
    }
    uint8_t b[4] = {0};
    assert_int_equal(rs_codec_decompress(RS_CODEC_NONE, raw, 10, b, 4), RS_ERR_DECOMPRESS);
    assert_int_equal(rs_codec_decompress((rs_codec_t)7, raw, 10, b, 4), RS_ERR_BAD_CODEC);
    assert_int_equal(rs_codec_decompress(RS_CODEC_LZ4, raw, 10, NULL, 4), RS_ERR_INVALID);
    free(raw);
}

/* Random bytes of random lengths into a guarded destination: never OK by accident of size. */
static void test_decompress_garbage(void **state)
{
    (void)state;
    uint64_t r = 42;
    uint8_t src[512], dst[300];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = next_rand(&r) % sizeof(src), raw = next_rand(&r) % 256;
        for (size_t i = 0; i < n; i++)
            src[i] = (uint8_t)next_rand(&r);
        memset(dst, 0xee, sizeof(dst));
        rs_codec_t codec = codecs[1 + iter % 2];
        rs_status_t st = rs_codec_decompress(codec, src, n, dst, raw);
        assert_true(st == RS_OK || st == RS_ERR_DECOMPRESS);
        for (size_t i = raw; i < sizeof(dst); i++)
            assert_int_equal(dst[i], 0xee);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_compress_errors),
        cmocka_unit_test(test_decompress_errors),
        cmocka_unit_test(test_decompress_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
