/* Seed inputs for fuzz_frame: valid frames, extents and blocks of every codec. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rshuffle/codec.h>
#include "fuzz_frame.h"

#define SEED_MAX 8192

static void fill(uint8_t *buf, size_t len, unsigned kind, uint64_t x)
{
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (kind == 0)
            buf[i] = (uint8_t)x; /* incompressible */
        else if (kind == 1)
            buf[i] = (uint8_t) "key=0042;val=abc\n"[i % 17]; /* key/value-like */
        else
            buf[i] = (uint8_t)(i / 300); /* long runs */
    }
}

/* Appends one frame of raw_len bytes to seed[*len]. */
static void add_frame(uint8_t *seed, size_t *len, rs_codec_t codec, size_t raw_len, unsigned kind,
                      uint64_t seq)
{
    uint8_t raw[2048];
    fill(raw, raw_len, kind, seq + 1);
    rs_frame_ids_t ids = {.shuffle_id = 1, .map_id = 2, .attempt = 0, .partition = 3, .seq = seq};
    size_t n = 0;
    if (rs_frame_encode(codec, (uint16_t)kind, &ids, raw, raw_len, seed + *len, SEED_MAX - *len,
                        &n) == RS_OK)
        *len += n;
}

void frame_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user)
{
    static const size_t sizes[] = {0, 1, 17, 300, 2048};
    uint8_t *seed = malloc(SEED_MAX);
    if (seed == NULL)
        return;
    for (unsigned c = 0; c <= RS_CODEC_SNAPPY; c++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            for (unsigned mode = FUZZ_FRAME; mode <= FUZZ_FRAME_RESEALED; mode++) {
                size_t len = 1;
                seed[0] = (uint8_t)mode;
                add_frame(seed, &len, (rs_codec_t)c, sizes[s], (unsigned)s % 3, s);
                emit(user, seed, len);
            }
        }
        /* An extent: several frames back to back, all codecs. */
        size_t len = 1;
        seed[0] = FUZZ_EXTENT;
        for (unsigned i = 0; i < 5; i++)
            add_frame(seed, &len, (rs_codec_t)((c + i) % 3), sizes[i % 5] / 2 + i, i % 3, i);
        emit(user, seed, len);
        /* A bare block: codec, raw length, compressed bytes. */
        uint8_t raw[600];
        fill(raw, sizeof(raw), c % 3, c);
        size_t stored = 0;
        seed[0] = FUZZ_BLOCK;
        seed[1] = (uint8_t)c;
        seed[2] = (uint8_t)(sizeof(raw) & 0xff);
        seed[3] = (uint8_t)(sizeof(raw) >> 8);
        if (rs_codec_compress((rs_codec_t)c, raw, sizeof(raw), seed + 4, SEED_MAX - 4, &stored) ==
            RS_OK)
            emit(user, seed, 4 + stored);
    }
    free(seed);
}
