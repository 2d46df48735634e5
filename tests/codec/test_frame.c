/* codec/: batch frames: layout, encode, seal in place, verify, decode, walk, hostile bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/codec.h>
#include "codec/frame_internal.h"
#include "testdata.h"

static const rs_codec_t codecs[] = {RS_CODEC_NONE, RS_CODEC_LZ4, RS_CODEC_SNAPPY};
#define NCODECS 3
#define BLOCK   RS_PSTREAM_BLOCK_DEFAULT

static const rs_frame_ids_t ids = {.shuffle_id = 0x01020304,
                                   .map_id = 77,
                                   .attempt = 2,
                                   .partition = 1008,
                                   .seq = 0x1122334455ull};

/* An exact-size heap copy of a frame, so that ASan catches any read past its end. */
typedef struct frame_buf {
    uint8_t *buf;
    size_t len;
} frame_buf_t;

static frame_buf_t encode(rs_codec_t codec, const void *src, size_t len)
{
    size_t cap = rs_frame_bound(codec, len), n = 0;
    uint8_t *tmp = malloc(cap);
    assert_non_null(tmp);
    assert_int_equal(rs_frame_encode(codec, 0xbeef, &ids, src, len, tmp, cap, &n), RS_OK);
    frame_buf_t f = {malloc(n), n};
    memcpy(f.buf, tmp, n);
    free(tmp);
    return f;
}

static frame_buf_t encode_kind(rs_codec_t codec, data_kind_t kind, size_t len)
{
    uint8_t *src = make_data(kind, len, 11);
    frame_buf_t f = encode(codec, src, len);
    free(src);
    return f;
}

/* Recomputes the checksum after a test edited the header or payload on purpose. */
static void reseal(frame_buf_t *f)
{
    uint32_t stored = rs_get_le32(f->buf + RS_FRAME_OFF_STORED_LEN);
    rs_put_le64(f->buf + RS_FRAME_OFF_CHECKSUM,
                rs_frame_checksum(f->buf, f->buf + RS_FRAME_HEADER_SIZE, stored));
}

static rs_status_t verify(const frame_buf_t *f)
{
    rs_frame_t fr;
    return rs_frame_verify(f->buf, f->len, &fr);
}

/* Verify, then decode into an exact-size buffer. */
static rs_status_t verify_decode(const frame_buf_t *f)
{
    rs_frame_t fr;
    rs_status_t st = rs_frame_verify(f->buf, f->len, &fr);
    if (st != RS_OK)
        return st;
    uint8_t *dst = malloc(fr.raw_len + 1);
    st = rs_frame_decode(&fr, dst, fr.raw_len);
    free(dst);
    return st;
}

static void test_layout(void **state)
{
    (void)state;
    const uint8_t payload[3] = {'a', 'b', 'c'};
    frame_buf_t f = encode(RS_CODEC_NONE, payload, 3);
    const uint8_t *h = f.buf;
    assert_int_equal(f.len, 48 + 3);
    assert_memory_equal(h, "RSHF", 4);
    assert_int_equal(h[4], 1);    /* version */
    assert_int_equal(h[5], 0);    /* codec none */
    assert_int_equal(h[6], 0xef); /* flags, little-endian */
    assert_int_equal(h[7], 0xbe);
    assert_int_equal(h[8], 3);     /* raw length */
    assert_int_equal(h[12], 3);    /* stored length */
    assert_int_equal(h[16], 0x04); /* shuffle id, little-endian */
    assert_int_equal(h[19], 0x01);
    assert_int_equal(h[20], 77);   /* map */
    assert_int_equal(h[24], 2);    /* attempt */
    assert_int_equal(h[28], 0xf0); /* partition 1008 = 0x3f0 */
    assert_int_equal(h[29], 0x03);
    assert_int_equal(h[32], 0x55); /* seq, 64-bit */
    assert_int_equal(h[36], 0x11);
    assert_memory_equal(h + 48, "abc", 3);
    /* The checksum chains XXH3 over the header's first 40 bytes into the payload. */
    assert_int_equal(rs_get_le64(h + 40), rs_frame_checksum(h, h + 48, 3));
    free(f.buf);
}

static void check_round_trip(rs_codec_t codec, data_kind_t kind, size_t len)
{
    uint8_t *src = make_data(kind, len, len * 3 + kind);
    frame_buf_t f = encode(codec, src, len);
    assert_true(f.len <= rs_frame_bound(codec, len));
    rs_frame_t fr;
    assert_int_equal(rs_frame_verify(f.buf, f.len, &fr), RS_OK);
    assert_int_equal(fr.codec, codec);
    assert_int_equal(fr.flags, 0xbeef);
    assert_int_equal(fr.raw_len, len);
    assert_int_equal(fr.frame_len, f.len);
    assert_int_equal(fr.stored_len, f.len - RS_FRAME_HEADER_SIZE);
    assert_ptr_equal(fr.payload, f.buf + RS_FRAME_HEADER_SIZE);
    assert_memory_equal(&fr.ids, &ids, sizeof(ids));
    uint8_t *dst = malloc(len + 1);
    dst[len] = 0x77;
    assert_int_equal(rs_frame_decode(&fr, dst, len), RS_OK);
    assert_memory_equal(dst, src, len);
    assert_int_equal(dst[len], 0x77);
    if (len > 0)
        assert_int_equal(rs_frame_decode(&fr, dst, len - 1), RS_ERR_NO_SPACE);
    free(dst);
    free(src);
    free(f.buf);
}

static void test_round_trips(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 1 << 20};
    for (int c = 0; c < NCODECS; c++)
        for (int k = 0; k < DATA_KINDS; k++)
            for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                check_round_trip(codecs[c], (data_kind_t)k, sizes[i]);
}

static void test_encode_errors(void **state)
{
    (void)state;
    uint8_t src[64] = {0}, dst[256];
    size_t n = 9;
    for (int c = 0; c < NCODECS; c++) {
        size_t bound = rs_frame_bound(codecs[c], sizeof(src));
        assert_int_equal(rs_frame_encode(codecs[c], 0, &ids, src, sizeof(src), dst, bound - 1, &n),
                         RS_ERR_NO_SPACE);
    }
    assert_int_equal(rs_frame_encode(RS_CODEC_LZ4, 0, &ids, src, 8, dst, 47, &n), RS_ERR_NO_SPACE);
    assert_int_equal(rs_frame_encode((rs_codec_t)9, 0, &ids, src, 8, dst, sizeof(dst), &n),
                     RS_ERR_BAD_CODEC);
    assert_int_equal(rs_frame_encode(RS_CODEC_LZ4, 0, NULL, src, 8, dst, sizeof(dst), &n),
                     RS_ERR_INVALID);
    assert_int_equal(n, 9);
    assert_int_equal(rs_frame_bound((rs_codec_t)9, 8), 0);
    assert_int_equal(rs_frame_bound(RS_CODEC_NONE, 0), RS_FRAME_HEADER_SIZE);
}

/* The pusher's zero-copy path: records appended after reserved header room, then sealed. */
static void test_seal_in_place(void **state)
{
    (void)state;
    enum { PAYLOAD = 3000 };
    uint8_t *buf = malloc(RS_FRAME_HEADER_SIZE + PAYLOAD);
    uint8_t *payload = buf + RS_FRAME_HEADER_SIZE;
    fill_data(DATA_KV, payload, PAYLOAD, 5);
    uint8_t *copy = malloc(PAYLOAD);
    memcpy(copy, payload, PAYLOAD);
    size_t n = 0;
    assert_int_equal(rs_frame_seal(buf, RS_FRAME_HEADER_SIZE + PAYLOAD - 1, PAYLOAD, 1, &ids, &n),
                     RS_ERR_NO_SPACE);
    assert_int_equal(rs_frame_seal(buf, RS_FRAME_HEADER_SIZE + PAYLOAD, PAYLOAD, 1, &ids, &n),
                     RS_OK);
    assert_int_equal(n, RS_FRAME_HEADER_SIZE + PAYLOAD);
    assert_memory_equal(payload, copy, PAYLOAD); /* sealing never moves the payload */
    rs_frame_t fr;
    assert_int_equal(rs_frame_verify(buf, n, &fr), RS_OK);
    assert_ptr_equal(fr.payload, payload);
    assert_int_equal(fr.codec, RS_CODEC_NONE);
    assert_int_equal(fr.raw_len, PAYLOAD);
    /* Same bytes as encoding the payload with codec none. */
    uint8_t *enc = malloc(n);
    size_t en = 0;
    assert_int_equal(rs_frame_encode(RS_CODEC_NONE, 1, &ids, copy, PAYLOAD, enc, n, &en), RS_OK);
    assert_int_equal(en, n);
    assert_memory_equal(enc, buf, n);
    free(enc);
    /* An empty payload is a header alone. */
    assert_int_equal(rs_frame_seal(buf, RS_FRAME_HEADER_SIZE, 0, 0, &ids, &n), RS_OK);
    assert_int_equal(n, RS_FRAME_HEADER_SIZE);
    assert_int_equal(rs_frame_verify(buf, n, &fr), RS_OK);
    assert_int_equal(fr.raw_len, 0);
    free(copy);
    free(buf);
}

static void test_truncated(void **state)
{
    (void)state;
    frame_buf_t f = encode_kind(RS_CODEC_LZ4, DATA_KV, 2000);
    rs_frame_t fr;
    assert_int_equal(rs_frame_parse(f.buf, 0, &fr), RS_ERR_TRUNCATED);
    assert_int_equal(rs_frame_parse(NULL, 0, &fr), RS_ERR_TRUNCATED);
    assert_int_equal(rs_frame_parse(f.buf, RS_FRAME_HEADER_SIZE - 1, &fr), RS_ERR_TRUNCATED);
    assert_int_equal(rs_frame_verify(f.buf, RS_FRAME_HEADER_SIZE - 1, &fr), RS_ERR_TRUNCATED);
    /* A header alone parses (a reader learns the frame's length)... */
    assert_int_equal(rs_frame_parse(f.buf, RS_FRAME_HEADER_SIZE, &fr), RS_OK);
    assert_int_equal(fr.frame_len, f.len);
    /* ...but the frame verifies only whole. */
    for (size_t cut = RS_FRAME_HEADER_SIZE; cut < f.len; cut += 97)
        assert_int_equal(rs_frame_verify(f.buf, cut, &fr), RS_ERR_TRUNCATED);
    assert_int_equal(rs_frame_verify(f.buf, f.len - 1, &fr), RS_ERR_TRUNCATED);
    free(f.buf);
}

static void test_bad_magic(void **state)
{
    (void)state;
    frame_buf_t f = encode_kind(RS_CODEC_SNAPPY, DATA_KV, 500);
    f.buf[0] ^= 0x20; /* "rSHF" */
    reseal(&f);
    assert_int_equal(verify(&f), RS_ERR_BAD_MAGIC);
    memset(f.buf, 0, 4);
    assert_int_equal(verify(&f), RS_ERR_BAD_MAGIC);
    free(f.buf);
}

static void test_bad_version(void **state)
{
    (void)state;
    frame_buf_t f = encode_kind(RS_CODEC_SNAPPY, DATA_KV, 500);
    f.buf[RS_FRAME_OFF_VERSION] = 2;
    reseal(&f);
    assert_int_equal(verify(&f), RS_ERR_BAD_VERSION);
    f.buf[RS_FRAME_OFF_VERSION] = 0;
    reseal(&f);
    assert_int_equal(verify(&f), RS_ERR_BAD_VERSION);
    free(f.buf);
}

static void test_bad_codec(void **state)
{
    (void)state;
    frame_buf_t f = encode_kind(RS_CODEC_SNAPPY, DATA_KV, 500);
    f.buf[RS_FRAME_OFF_CODEC] = 3;
    reseal(&f);
    assert_int_equal(verify(&f), RS_ERR_BAD_CODEC);
    f.buf[RS_FRAME_OFF_CODEC] = 0xff;
    reseal(&f);
    assert_int_equal(verify(&f), RS_ERR_BAD_CODEC);
    free(f.buf);
}

static void test_bad_lengths(void **state)
{
    (void)state;
    frame_buf_t f = encode_kind(RS_CODEC_LZ4, DATA_KV, 4000);
    uint32_t stored = (uint32_t)(f.len - RS_FRAME_HEADER_SIZE);
    rs_frame_t fr;
    /* Raw length beyond the sane maximum. */
    rs_put_le32(f.buf + RS_FRAME_OFF_RAW_LEN, (uint32_t)RS_CODEC_RAW_MAX + 1);
    reseal(&f);
    assert_int_equal(rs_frame_parse(f.buf, f.len, &fr), RS_ERR_BAD_LENGTH);
    assert_int_equal(verify(&f), RS_ERR_BAD_LENGTH);
    rs_put_le32(f.buf + RS_FRAME_OFF_RAW_LEN, UINT32_MAX);
    assert_int_equal(verify(&f), RS_ERR_BAD_LENGTH);
    /* Stored length no codec output could have: beyond the bound of the raw length, or 0. */
    rs_put_le32(f.buf + RS_FRAME_OFF_RAW_LEN, 4000);
    rs_put_le32(f.buf + RS_FRAME_OFF_STORED_LEN, (uint32_t)rs_codec_bound(RS_CODEC_LZ4, 4000) + 1);
    assert_int_equal(verify(&f), RS_ERR_BAD_LENGTH);
    rs_put_le32(f.buf + RS_FRAME_OFF_STORED_LEN, UINT32_MAX);
    assert_int_equal(verify(&f), RS_ERR_BAD_LENGTH);
    rs_put_le32(f.buf + RS_FRAME_OFF_STORED_LEN, 0);
    reseal(&f);
    assert_int_equal(verify(&f), RS_ERR_BAD_LENGTH);
    /* A plausible stored length past the end of the buffer: the frame was cut short. */
    rs_put_le32(f.buf + RS_FRAME_OFF_STORED_LEN, stored + 1);
    assert_int_equal(rs_frame_parse(f.buf, f.len, &fr), RS_OK);
    assert_int_equal(verify(&f), RS_ERR_TRUNCATED);
    /* Codec none stores exactly the raw bytes. */
    frame_buf_t n = encode_kind(RS_CODEC_NONE, DATA_KV, 100);
    rs_put_le32(n.buf + RS_FRAME_OFF_STORED_LEN, 99);
    reseal(&n);
    assert_int_equal(verify(&n), RS_ERR_BAD_LENGTH);
    rs_put_le32(n.buf + RS_FRAME_OFF_STORED_LEN, 100);
    rs_put_le32(n.buf + RS_FRAME_OFF_RAW_LEN, 101);
    reseal(&n);
    assert_int_equal(verify(&n), RS_ERR_BAD_LENGTH);
    free(n.buf);
    free(f.buf);
}

static void test_checksum(void **state)
{
    (void)state;
    for (int c = 0; c < NCODECS; c++) {
        frame_buf_t f = encode_kind(codecs[c], DATA_KV, 3000);
        size_t spots[] = {RS_FRAME_OFF_FLAGS,
                          RS_FRAME_OFF_SHUFFLE,
                          RS_FRAME_OFF_MAP,
                          RS_FRAME_OFF_ATTEMPT,
                          RS_FRAME_OFF_PARTITION,
                          RS_FRAME_OFF_SEQ + 7,
                          RS_FRAME_OFF_CHECKSUM,
                          RS_FRAME_OFF_CHECKSUM + 7,
                          RS_FRAME_HEADER_SIZE,
                          f.len / 2,
                          f.len - 1};
        for (size_t i = 0; i < sizeof(spots) / sizeof(spots[0]); i++) {
            f.buf[spots[i]] ^= 0x10;
            assert_int_equal(verify(&f), RS_ERR_CHECKSUM);
            f.buf[spots[i]] ^= 0x10;
            assert_int_equal(verify(&f), RS_OK);
        }
        free(f.buf);
    }
}

/* Lengths that lie with a matching checksum (a buggy or hostile sender) fail in decompression. */
static void test_raw_length_lies(void **state)
{
    (void)state;
    for (int c = 1; c < NCODECS; c++) {
        frame_buf_t f = encode_kind(codecs[c], DATA_KV, 3000);
        assert_int_equal(verify_decode(&f), RS_OK);
        rs_put_le32(f.buf + RS_FRAME_OFF_RAW_LEN, 2999);
        assert_int_equal(verify(&f), RS_ERR_CHECKSUM); /* without a new checksum */
        reseal(&f);
        assert_int_equal(verify(&f), RS_OK); /* verify does not decompress */
        assert_int_equal(verify_decode(&f), RS_ERR_DECOMPRESS);
        rs_put_le32(f.buf + RS_FRAME_OFF_RAW_LEN, 3001);
        reseal(&f);
        assert_int_equal(verify_decode(&f), RS_ERR_DECOMPRESS);
        free(f.buf);
    }
}

static void test_decompress_failure(void **state)
{
    (void)state;
    for (int c = 1; c < NCODECS; c++) {
        frame_buf_t f = encode_kind(codecs[c], DATA_KV, 3000);
        memset(f.buf + RS_FRAME_HEADER_SIZE, 0xff, f.len - RS_FRAME_HEADER_SIZE);
        reseal(&f);
        assert_int_equal(verify(&f), RS_OK);
        assert_int_equal(verify_decode(&f), RS_ERR_DECOMPRESS);
        /* Cut the payload but keep the header consistent. */
        frame_buf_t g = encode_kind(codecs[c], DATA_KV, 3000);
        g.len -= 10;
        rs_put_le32(g.buf + RS_FRAME_OFF_STORED_LEN, (uint32_t)(g.len - RS_FRAME_HEADER_SIZE));
        reseal(&g);
        assert_int_equal(verify_decode(&g), RS_ERR_DECOMPRESS);
        free(g.buf);
        free(f.buf);
    }
}

static void test_zero_length(void **state)
{
    (void)state;
    for (int c = 0; c < NCODECS; c++) {
        frame_buf_t f = encode(codecs[c], NULL, 0);
        rs_frame_t fr;
        assert_int_equal(rs_frame_verify(f.buf, f.len, &fr), RS_OK);
        assert_int_equal(fr.raw_len, 0);
        assert_int_equal(fr.stored_len, codecs[c] == RS_CODEC_NONE ? 0 : f.len - 48);
        assert_int_equal(rs_frame_decode(&fr, NULL, 0), RS_OK);
        free(f.buf);
    }
    /* An lz4 frame claiming 0 raw bytes but carrying a real block. */
    frame_buf_t f = encode_kind(RS_CODEC_LZ4, DATA_KV, 10);
    rs_put_le32(f.buf + RS_FRAME_OFF_RAW_LEN, 0);
    reseal(&f);
    assert_int_equal(verify_decode(&f), RS_ERR_DECOMPRESS);
    free(f.buf);
}

/* Expected status of a frame with one flipped bit, by the field the bit falls in. */
static rs_status_t expected_after_flip(const frame_buf_t *f, size_t byte)
{
    const uint8_t *h = f->buf;
    if (byte < 4)
        return RS_ERR_BAD_MAGIC;
    if (byte == RS_FRAME_OFF_VERSION)
        return RS_ERR_BAD_VERSION;
    if (byte == RS_FRAME_OFF_CODEC && h[byte] > RS_CODEC_SNAPPY)
        return RS_ERR_BAD_CODEC;
    rs_codec_t codec = (rs_codec_t)h[RS_FRAME_OFF_CODEC];
    uint32_t raw = rs_get_le32(h + RS_FRAME_OFF_RAW_LEN);
    uint32_t stored = rs_get_le32(h + RS_FRAME_OFF_STORED_LEN);
    if (raw > RS_CODEC_RAW_MAX)
        return RS_ERR_BAD_LENGTH;
    if (codec == RS_CODEC_NONE ? stored != raw : stored == 0 || stored > rs_codec_bound(codec, raw))
        return RS_ERR_BAD_LENGTH;
    if (RS_FRAME_HEADER_SIZE + (size_t)stored > f->len)
        return RS_ERR_TRUNCATED;
    return RS_ERR_CHECKSUM;
}

static void test_every_bit_flip(void **state)
{
    (void)state;
    for (int c = 0; c < NCODECS; c++) {
        frame_buf_t f = encode_kind(codecs[c], DATA_KV, 300);
        for (size_t byte = 0; byte < f.len; byte++) {
            for (int bit = 0; bit < 8; bit++) {
                f.buf[byte] ^= (uint8_t)(1u << bit);
                rs_status_t want = expected_after_flip(&f, byte);
                if (verify(&f) != want)
                    fail_msg("codec %s byte %zu bit %d: %s, expected %s", rs_codec_name(codecs[c]),
                             byte, bit, rs_strerror(verify(&f)), rs_strerror(want));
                f.buf[byte] ^= (uint8_t)(1u << bit);
            }
        }
        assert_int_equal(verify(&f), RS_OK);
        free(f.buf);
    }
}

/* Back-to-back frames of every codec, as a reader pulls them in one extent. */
static void test_walk(void **state)
{
    (void)state;
    enum { FRAMES = 30 };
    uint8_t *extent = NULL;
    size_t len = 0, offs[FRAMES], raw_lens[FRAMES];
    for (int i = 0; i < FRAMES; i++) {
        rs_codec_t codec = codecs[i % NCODECS];
        size_t raw = (size_t)(i * 977) % 5000;
        uint8_t *src = make_data((data_kind_t)(i % DATA_KINDS), raw, (uint64_t)i);
        size_t cap = rs_frame_bound(codec, raw), n;
        extent = realloc(extent, len + cap);
        rs_frame_ids_t fi = ids;
        fi.seq = (uint64_t)i;
        assert_int_equal(rs_frame_encode(codec, 0, &fi, src, raw, extent + len, cap, &n), RS_OK);
        offs[i] = len;
        raw_lens[i] = raw;
        len += n;
        free(src);
    }
    uint8_t *exact = malloc(len);
    memcpy(exact, extent, len);
    free(extent);

    rs_frame_iter_t it;
    rs_frame_t fr;
    int count = 0;
    uint8_t dst[5000];
    for (rs_frame_iter_init(&it, exact, len); it.off < it.len; count++) {
        assert_int_equal(it.off, offs[count]);
        assert_int_equal(rs_frame_iter_next(&it, &fr), RS_OK);
        assert_int_equal(fr.ids.seq, (uint64_t)count);
        assert_int_equal(fr.raw_len, raw_lens[count]);
        assert_int_equal(rs_frame_decode(&fr, dst, sizeof(dst)), RS_OK);
        uint8_t *want =
            make_data((data_kind_t)(count % DATA_KINDS), raw_lens[count], (uint64_t)count);
        assert_memory_equal(dst, want, raw_lens[count]);
        free(want);
    }
    assert_int_equal(count, FRAMES);
    assert_int_equal(it.off, len);

    /* A corrupted frame in the middle stops the walk there, with the iterator on it. */
    exact[offs[17] + RS_FRAME_HEADER_SIZE] ^= 1;
    rs_frame_iter_init(&it, exact, len);
    for (count = 0; count < 17; count++)
        assert_int_equal(rs_frame_iter_next(&it, &fr), RS_OK);
    assert_int_equal(rs_frame_iter_next(&it, &fr), RS_ERR_CHECKSUM);
    assert_int_equal(it.off, offs[17]);
    exact[offs[17] + RS_FRAME_HEADER_SIZE] ^= 1;

    /* An extent that ends inside its last frame. */
    rs_frame_iter_init(&it, exact, len - 1);
    for (count = 0; count < FRAMES - 1; count++)
        assert_int_equal(rs_frame_iter_next(&it, &fr), RS_OK);
    assert_int_equal(rs_frame_iter_next(&it, &fr), RS_ERR_TRUNCATED);
    assert_int_equal(it.off, offs[FRAMES - 1]);

    /* Trailing bytes that are not a frame. */
    rs_frame_iter_init(&it, exact, offs[1] + 10);
    assert_int_equal(rs_frame_iter_next(&it, &fr), RS_OK);
    assert_int_equal(rs_frame_iter_next(&it, &fr), RS_ERR_TRUNCATED);

    /* Nothing to walk. */
    rs_frame_iter_init(&it, NULL, 0);
    assert_int_equal(it.off, it.len);
    assert_int_equal(rs_frame_iter_next(&it, &fr), RS_ERR_TRUNCATED);
    free(exact);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_encode_errors),
        cmocka_unit_test(test_seal_in_place),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_bad_version),
        cmocka_unit_test(test_bad_codec),
        cmocka_unit_test(test_bad_lengths),
        cmocka_unit_test(test_checksum),
        cmocka_unit_test(test_raw_length_lies),
        cmocka_unit_test(test_decompress_failure),
        cmocka_unit_test(test_zero_length),
        cmocka_unit_test(test_every_bit_flip),
        cmocka_unit_test(test_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
