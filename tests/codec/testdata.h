/* Test inputs and helpers shared by the codec tests. */
#ifndef RS_TESTS_CODEC_TESTDATA_H
#define RS_TESTS_CODEC_TESTDATA_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/codec.h>

typedef enum data_kind {
    DATA_RANDOM,       /* incompressible */
    DATA_COMPRESSIBLE, /* long runs and a short repeating pattern */
    DATA_KV,           /* key/value-like records */
    DATA_KINDS
} data_kind_t;

const char *data_kind_name(data_kind_t kind);

/* Fills buf[0, len) with reproducible data of the kind (seeded). */
void fill_data(data_kind_t kind, uint8_t *buf, size_t len, uint64_t seed);

/* A malloc'd copy of len bytes of data (exact size, so ASan sees any overrun). */
uint8_t *make_data(data_kind_t kind, size_t len, uint64_t seed);

/* xorshift64: reproducible pseudo-random numbers. */
uint64_t next_rand(uint64_t *state);

/* An allocator hook that counts bytes and calls, and can fail on purpose. */
typedef struct count_alloc {
    uint64_t allocated; /* bytes obtained: malloc sizes plus realloc growth */
    uint64_t live, peak;
    uint64_t calls;
    uint64_t fail_at; /* the fail_at-th call (1-based) fails; 0 = never */
} count_alloc_t;

rs_allocator_t count_allocator(count_alloc_t *c);

/* A buffered sink that appends committed frames to a growing buffer. */
typedef struct collect_sink {
    uint8_t *buf;
    size_t len, cap;
    size_t commits;
    rs_status_t fail_with; /* commit returns this when not RS_OK */
} collect_sink_t;

rs_sink_t collect_sink(collect_sink_t *c);
void collect_sink_free(collect_sink_t *c);

#endif
