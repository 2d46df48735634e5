/*
 * rs-perf-codec: the sized-codec benchmark (docs/codec.md). One spill writes N partitions
 * (default 1,009) of key/value records through one partition stream each,
 * as Tez's UnorderedPartitionedKVWriter does: open, write the records,
 * finish, free. "fixed" streams get the block-sized buffers of the unsized
 * path (a 256 KiB raw buffer and its compression bound); "sized" streams
 * get buffers for the partition's raw length. Both emit the same bytes into
 * one spill buffer (checked). Reports the median time per spill and the
 * bytes allocated per spill through the streams' allocator.
 *
 *   rs-perf-codec [--json [FILE]] [--csv FILE] [--partitions N] [--rounds N] [--sizes a,b,c]
 * [--codecs x,y]
 *                 [--retain-heap]
 *
 * By default malloc runs with glibc's settings as a process starts: a block
 * above the mmap threshold comes from mmap or a fresh heap top and goes
 * back to the OS when freed, so every fixed stream pays system calls and
 * page faults. --retain-heap raises the thresholds (as glibc itself does
 * once a process has freed a large mmapped block): freed blocks are then
 * reused untouched and the fixed path costs little more time, only memory.
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "perf_json.h"
#include "perf_util.h"
#include <rshuffle/codec.h>

#define MAX_CASES 16
#define RECORD    22 /* bytes per key/value record, as in Tez's sized-buffer benchmark */

typedef struct counting_alloc {
    uint64_t bytes; /* allocated (malloc sizes plus realloc growth) */
    uint64_t calls;
} counting_alloc_t;

static void *count_malloc(void *user, size_t size)
{
    counting_alloc_t *c = user;
    c->bytes += size;
    c->calls++;
    return malloc(size);
}

static void *count_realloc(void *user, void *ptr, size_t old_size, size_t new_size)
{
    counting_alloc_t *c = user;
    if (new_size > old_size)
        c->bytes += new_size - old_size;
    c->calls++;
    return realloc(ptr, new_size);
}

static void count_free(void *user, void *ptr, size_t size)
{
    (void)user;
    (void)size;
    free(ptr);
}

/* The spill file: frames land back to back (the sink copies, as a write() would). */
typedef struct spill_out {
    uint8_t *buf;
    size_t cap, len;
} spill_out_t;

static rs_status_t spill_commit(void *user, const void *frame, size_t frame_len)
{
    spill_out_t *o = user;
    if (o->cap - o->len < frame_len)
        return RS_ERR_NO_SPACE;
    memcpy(o->buf + o->len, frame, frame_len);
    o->len += frame_len;
    return RS_OK;
}

typedef struct workload {
    size_t partitions, per_partition, records;
    uint8_t *data; /* partitions * per_partition bytes of records */
} workload_t;

/* Key/value-like records: 1-byte key and value lengths, an 8-byte key, a 12-byte value. */
static void make_records(workload_t *w)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    size_t n = w->partitions * w->per_partition;
    for (size_t off = 0; off + RECORD <= n; off += RECORD) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        char rec[RECORD + 1];
        snprintf(rec, sizeof(rec), "%c%cu%07u%05u-cnt=%02u", 8, 12, (unsigned)(x % 10000000),
                 (unsigned)(x >> 40) % 100000, (unsigned)(x >> 20) % 50);
        memcpy(w->data + off, rec, RECORD);
    }
}

/*
 * The benchmark's own big buffers come from mmap, not malloc: freeing a big
 * malloc'd block raises glibc's mmap and trim thresholds for the rest of the
 * process, which would change how the streams' allocations behave from one
 * case to the next (docs/codec.md, "allocator regime").
 */
static void *map_bytes(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memset(p, 0, len); /* fault the pages in outside the timed spills */
    return p;
}

static void unmap_bytes(void *p, size_t len)
{
    if (p != NULL)
        munmap(p, len);
}

/* One spill; returns its time in ns (0 on error) and adds its allocations to *alloc. */
static uint64_t spill(const workload_t *w, rs_codec_t codec, int sized, counting_alloc_t *alloc,
                      spill_out_t *out)
{
    const rs_allocator_t hook = {count_malloc, count_realloc, count_free, alloc};
    out->len = 0;
    uint64_t t0 = perf_now_ns();
    for (size_t p = 0; p < w->partitions; p++) {
        rs_pstream_params_t params = {
            .codec = codec,
            .block_size = RS_PSTREAM_BLOCK_DEFAULT,
            .expected_len = sized ? w->per_partition : RS_PSTREAM_UNSIZED,
            .ids = {.shuffle_id = 1, .map_id = 7, .partition = (uint32_t)p},
            .sink = {.commit = spill_commit, .user = out},
            .alloc = &hook,
        };
        rs_pstream_t *s;
        rs_status_t st = rs_pstream_open(&params, &s);
        const uint8_t *rec = w->data + p * w->per_partition;
        for (size_t r = 0; st == RS_OK && r < w->records; r++)
            st = rs_pstream_write(s, rec + r * RECORD, RECORD);
        if (st == RS_OK)
            st = rs_pstream_finish(s, NULL);
        rs_pstream_destroy(s);
        if (st != RS_OK) {
            fprintf(stderr, "rs-perf-codec: spill failed: %s\n", rs_strerror(st));
            return 0;
        }
    }
    return perf_now_ns() - t0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct result {
    rs_codec_t codec;
    size_t per_partition;
    uint64_t fixed_ns, sized_ns, fixed_alloc, sized_alloc, spill_bytes;
    int identical;
} result_t;

/* Rounds alternate fixed and sized so that machine noise hits both alike. */
static int run_case(rs_codec_t codec, size_t per_partition, size_t partitions, int rounds,
                    result_t *res)
{
    workload_t w = {partitions, per_partition, per_partition / RECORD, NULL};
    size_t data_len = partitions * per_partition + 1;
    w.data = map_bytes(data_len);
    size_t spill_cap = partitions * rs_frame_bound(codec, per_partition);
    spill_out_t fixed_out = {map_bytes(spill_cap), spill_cap, 0};
    spill_out_t sized_out = {map_bytes(spill_cap), spill_cap, 0};
    uint64_t *fixed_t = calloc((size_t)rounds, sizeof(uint64_t));
    uint64_t *sized_t = calloc((size_t)rounds, sizeof(uint64_t));
    int ok = w.data && fixed_out.buf && sized_out.buf && fixed_t && sized_t;
    if (ok) {
        make_records(&w);
        counting_alloc_t fa = {0, 0}, sa = {0, 0}, warm = {0, 0};
        ok = spill(&w, codec, 0, &warm, &fixed_out) && spill(&w, codec, 1, &warm, &sized_out);
        for (int r = 0; ok && r < rounds; r++) {
            fa = sa = (counting_alloc_t){0, 0};
            fixed_t[r] = spill(&w, codec, 0, &fa, &fixed_out);
            sized_t[r] = spill(&w, codec, 1, &sa, &sized_out);
            ok = fixed_t[r] && sized_t[r];
        }
        if (ok) {
            *res = (result_t){
                .codec = codec,
                .per_partition = per_partition,
                .fixed_ns = median(fixed_t, (size_t)rounds),
                .sized_ns = median(sized_t, (size_t)rounds),
                .fixed_alloc = fa.bytes,
                .sized_alloc = sa.bytes,
                .spill_bytes = sized_out.len,
                .identical = fixed_out.len == sized_out.len &&
                             memcmp(fixed_out.buf, sized_out.buf, sized_out.len) == 0,
            };
        }
    } else {
        fprintf(stderr, "rs-perf-codec: out of memory\n");
    }
    unmap_bytes(w.data, data_len);
    unmap_bytes(fixed_out.buf, spill_cap);
    unmap_bytes(sized_out.buf, spill_cap);
    free(fixed_t);
    free(sized_t);
    return ok ? 0 : -1;
}

static void print_table(const result_t *res, size_t n, size_t partitions, int rounds, int retain)
{
    printf("rs-perf-codec: one spill of %zu partitions, %d-byte key/value records, "
           "median of %d rounds, malloc %s\n",
           partitions, RECORD, rounds,
           retain ? "retaining freed blocks (--retain-heap)" : "defaults");
    printf("fixed = block-sized buffers (256 KiB + bound) per partition; sized = buffers for "
           "the partition's bytes\n\n");
    printf("%-7s %9s %12s %12s %7s %14s %14s %7s %10s\n", "codec", "B/part", "fixed ms", "sized ms",
           "time", "fixed alloc", "sized alloc", "alloc", "same bytes");
    for (size_t i = 0; i < n; i++) {
        const result_t *r = &res[i];
        printf("%-7s %9zu %12.3f %12.3f %+6.0f%% %11.1f MB %11.3f MB %+6.1f%% %10s\n",
               rs_codec_name(r->codec), r->per_partition, r->fixed_ns / 1e6, r->sized_ns / 1e6,
               100.0 * ((double)r->sized_ns / (double)r->fixed_ns - 1.0), r->fixed_alloc / 1e6,
               r->sized_alloc / 1e6,
               100.0 * ((double)r->sized_alloc / (double)r->fixed_alloc - 1.0),
               r->identical ? "yes" : "NO");
    }
}

/* The bars of docs/codec.md, checked on this run's numbers (a report, not a test: timings are
 * noisy). */
static void print_bars(const result_t *res, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const result_t *r = &res[i];
        double t = (double)r->sized_ns / (double)r->fixed_ns;
        double a = (double)r->sized_alloc / (double)r->fixed_alloc;
        if (r->per_partition == 22)
            printf("bar %-6s    22 B: sized/fixed time %.3f (<= 0.5) %s, alloc %.4f (<= 0.05) %s\n",
                   rs_codec_name(r->codec), t, t <= 0.5 ? "ok" : "MISSED", a,
                   a <= 0.05 ? "ok" : "MISSED");
        else if (r->per_partition == 22000)
            printf("bar %-6s 22000 B: sized/fixed time %.3f (<= 1.05) %s\n",
                   rs_codec_name(r->codec), t, t <= 1.05 ? "ok" : "MISSED");
    }
}

static void put_results(perf_out_t *po, const result_t *res, size_t n, size_t partitions,
                        int retain)
{
    perf_out_meta(po, "none", "-"); /* codecs only: no fabric */
    for (size_t i = 0; i < n; i++) {
        const result_t *r = &res[i];
        perf_row(po);
        perf_str(po, "codec", rs_codec_name(r->codec));
        perf_u64(po, "bytes_per_partition", r->per_partition);
        perf_u64(po, "partitions", partitions);
        perf_u64(po, "fixed_ns", r->fixed_ns);
        perf_u64(po, "sized_ns", r->sized_ns);
        perf_u64(po, "fixed_alloc_bytes", r->fixed_alloc);
        perf_u64(po, "sized_alloc_bytes", r->sized_alloc);
        perf_u64(po, "spill_bytes", r->spill_bytes);
        perf_bool(po, "identical", r->identical);
        perf_str(po, "malloc", retain ? "retain-heap" : "defaults");
    }
}

static int parse_list(char *arg, size_t *out, size_t max, size_t *n)
{
    *n = 0;
    for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ",")) {
        uint64_t v;
        if (rs_parse_uint(tok, 64u << 20, &v) != RS_OK || v < RECORD || *n == max)
            return -1;
        out[(*n)++] = (size_t)v;
    }
    return *n ? 0 : -1;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: rs-perf-codec [--json [FILE]] [--csv FILE] [--partitions N] [--rounds N] "
            "[--sizes BYTES,...] [--codecs snappy,lz4,none] [--retain-heap]\n");
    return 2;
}

int main(int argc, char **argv)
{
    perf_std_args(
        argc, argv,
        "usage: rs-perf-codec [--json [FILE]] [--csv FILE] [--partitions N] [--rounds N]\n"
        "                     [--sizes a,b,c] [--codecs x,y] [--retain-heap]\n"
        "One spill of N partitions: sized vs fixed 256 KiB codec buffers.\n");
    perf_out_t po;
    perf_out_init(&po, "rs-perf-codec", &argc, argv);
    int rounds = 9, retain = 0;
    size_t partitions = 1009, sizes[MAX_CASES] = {22, 2200, 22000}, nsizes = 3;
    rs_codec_t codecs[3] = {RS_CODEC_SNAPPY, RS_CODEC_LZ4};
    size_t ncodecs = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--retain-heap") == 0) {
            retain = 1;
        } else if (strcmp(a, "--partitions") == 0 && v) {
            partitions = (size_t)perf_arg_uint("rs-perf-codec", a, v, 1, 1u << 20), i++;
        } else if (strcmp(a, "--rounds") == 0 && v) {
            rounds = (int)perf_arg_uint("rs-perf-codec", a, v, 1, 100000), i++;
        } else if (strcmp(a, "--sizes") == 0 && v) {
            char buf[256];
            snprintf(buf, sizeof(buf), "%s", v), i++;
            if (parse_list(buf, sizes, MAX_CASES / 2, &nsizes))
                return usage();
        } else if (strcmp(a, "--codecs") == 0 && v) {
            char buf[64];
            snprintf(buf, sizeof(buf), "%s", v), i++;
            ncodecs = 0;
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
                if (ncodecs == 3 || rs_codec_from_name(t, &codecs[ncodecs++]) != RS_OK)
                    return usage();
            }
        } else {
            return usage();
        }
    }
    if (partitions < 1 || partitions > 100000 || rounds < 1 || rounds > 1000 || ncodecs == 0)
        return usage();

    if (retain && (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, 256 << 20))) {
        fprintf(stderr, "rs-perf-codec: mallopt failed\n");
        return 1;
    }
    result_t res[MAX_CASES * 3];
    size_t n = 0;
    int identical = 1;
    for (size_t c = 0; c < ncodecs; c++) {
        for (size_t s = 0; s < nsizes; s++) {
            if (run_case(codecs[c], sizes[s], partitions, rounds, &res[n]) != 0)
                return 1;
            identical &= res[n++].identical;
        }
    }
    print_table(res, n, partitions, rounds, retain);
    printf("\n");
    print_bars(res, n);
    put_results(&po, res, n, partitions, retain);
    if (perf_out_emit(&po) != 0)
        return 1;
    if (!identical) {
        fprintf(stderr, "rs-perf-codec: sized and fixed spills differ\n");
        return 1;
    }
    return 0;
}
