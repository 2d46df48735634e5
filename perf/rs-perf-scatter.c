/*
 * rs-perf-scatter: what a map task's appends cost by how many bytes of
 * partition buffers they write into, the measurement behind the pusher's
 * hot_bytes (docs/shuffle.md, "Buffers that stay in cache").
 *
 *   rs-perf-scatter [--partitions 16,200,2000] [--bufs 4K,16K,80K]
 *                   [--size 256M] [--procs 2] [--mode direct|staged|runs]
 *                   [--block 256K] [--json [FILE]] [--csv FILE]
 *
 * Each of --procs processes at once (they share the last-level cache, as
 * a host's executors do) appends --size bytes of 100-byte records, each to
 * the one of P partitions its seed (perf/records.h) picks, into that
 * partition's buffer of BUF bytes, as rs_pusher_append does (the next
 * record's lines fetched ahead). A full buffer is read once, as its seal reads it, and swapped
 * for the idle buffer returned last, from a pool of twice P buffers on
 * huge pages. One row per P and BUF: ns per record in the processes' own
 * CPU time (the slowest, and the mean), and P x BUF, the bytes the
 * appends keep open.
 *
 * --mode staged measures the append that packs per destination instead, as
 * MPI packs per rank: records go one after another into one block of BUF
 * bytes, their partitions beside them; a full block is sorted by partition
 * into a second one (each partition's records together after a 64-byte
 * frame header slot, the next record's destination fetched 8 ahead) and
 * that one read once, as its frames' seals would read it. The sort's copy
 * is counted; the merge copy that direct frames below merge_below make is
 * not, so the comparison favours direct mode. BUF is the block's size
 * here, and the frames are about BUF / P bytes.
 *
 * --mode runs keeps the push format: records are staged in one block of
 * --block bytes as in staged mode, and a full block is copied partition by
 * partition, each one's records in a burst, into partition buffers of BUF
 * bytes handled as in direct mode.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf_json.h"
#include "perf_util.h"
#include "records.h"

#define PROG     "rs-perf-scatter"
#define LIST_MAX 16

static const char *const mode_name[] = {"direct", "staged", "runs"};

/* What the seal-reads sum to: volatile, so that they are made. */
static volatile uint64_t seal_sum;

/* len bytes on huge pages, resident: first touches are rs-perf-touch's subject. */
static uint8_t *map_resident(size_t len)
{
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        perf_die(PROG, "no memory for %zu bytes", len);
    (void)madvise(p, len, MADV_HUGEPAGE);
    memset(p, 1, len);
    return p;
}

/* Partition buffers of buf bytes from a pool of twice as many, as a pusher's. */
typedef struct part_bufs {
    uint8_t *pool;
    size_t len, buf, n_idle;
    uint32_t *idle, *cur;
    size_t *fill;
    uint64_t sum; /* of the seal-reads */
} part_bufs_t;

static void part_bufs_init(part_bufs_t *b, uint32_t parts, size_t buf)
{
    size_t nbuf = 2 * (size_t)parts;
    *b = (part_bufs_t){.len = nbuf * buf, .buf = buf};
    b->pool = map_resident(b->len);
    b->idle = malloc(nbuf * sizeof(*b->idle));
    b->cur = malloc(parts * sizeof(*b->cur));
    b->fill = calloc(parts, sizeof(*b->fill));
    if (b->idle == NULL || b->cur == NULL || b->fill == NULL)
        perf_die(PROG, "no memory for %zu buffers of %zu bytes", nbuf, buf);
    for (size_t i = nbuf; i-- > parts;)
        b->idle[b->n_idle++] = (uint32_t)i;
    for (uint32_t p = 0; p < parts; p++)
        b->cur[p] = p;
}

/* Room for one record in partition p's buffer; a full one is read (its seal) and swapped first. */
static inline uint8_t *part_bufs_room(part_bufs_t *b, uint32_t p)
{
    if (b->fill[p] + REC_LEN > b->buf) {
        const uint8_t *full = b->pool + (size_t)b->cur[p] * b->buf;
        for (size_t o = 0; o < b->fill[p]; o += 64)
            b->sum += full[o];
        uint32_t was = b->cur[p];
        b->cur[p] =
            b->idle[--b->n_idle]; /* taken before the full one goes back, as the pusher does */
        b->idle[b->n_idle++] = was;
        b->fill[p] = 0;
    }
    uint8_t *dst = b->pool + (size_t)b->cur[p] * b->buf + b->fill[p];
    b->fill[p] += REC_LEN;
    return dst;
}

static void part_bufs_free(part_bufs_t *b)
{
    seal_sum += b->sum;
    munmap(b->pool, b->len);
    free(b->idle);
    free(b->cur);
    free(b->fill);
}

/* ns per record of one process's appends. */
static double scatter(uint32_t parts, size_t buf, uint64_t size)
{
    part_bufs_t b;
    part_bufs_init(&b, parts, buf);
    uint8_t rec[REC_LEN];
    memset(rec, 7, sizeof(rec));
    uint64_t n = size / REC_LEN;
    double t0 = perf_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seed = rec_seed(i);
        uint8_t *dst = part_bufs_room(&b, (uint32_t)(seed % parts));
        memcpy(rec, &seed, sizeof(seed));
        memcpy(dst, rec, REC_LEN);
        __builtin_prefetch(dst + REC_LEN, 1, 3);
        __builtin_prefetch(dst + 2 * REC_LEN - 1, 1, 3);
    }
    double ns = (perf_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0) / (double)n * 1e9;
    part_bufs_free(&b);
    return ns;
}

/*
 * Counts a block's k records by partition into count[] (zero before) and
 * lists the partitions present in present[] (room for k), in the order
 * first seen; how many. Its cost follows the block, not the partition
 * count; the caller zeroes the present partitions' counts after use.
 */
static size_t block_count(const uint32_t *part_of, size_t k, uint32_t *count, uint32_t *present)
{
    size_t n = 0;
    for (size_t j = 0; j < k; j++)
        if (count[part_of[j]]++ == 0)
            present[n++] = part_of[j];
    return n;
}

/*
 * ns per record of appends staged in one block of `block` bytes and, when it
 * is full, copied partition by partition (each partition's records in a
 * burst, found through a counting sort of their indexes) into partition
 * buffers of buf bytes, handled as in scatter() (--mode runs: the push
 * format unchanged).
 */
static double runs(uint32_t parts, size_t buf, size_t block, uint64_t size)
{
    size_t cap = block / REC_LEN;
    part_bufs_t b;
    part_bufs_init(&b, parts, buf);
    uint8_t *stage = map_resident(block);
    uint32_t *part_of = malloc(cap * sizeof(*part_of)), *order = malloc(cap * sizeof(*order));
    uint32_t *present = malloc(cap * sizeof(*present)), *start = calloc(parts, sizeof(*start));
    if (part_of == NULL || order == NULL || present == NULL || start == NULL)
        perf_die(PROG, "no memory for a block of %zu records", cap);
    uint8_t rec[REC_LEN];
    memset(rec, 7, sizeof(rec));
    uint64_t n = size / REC_LEN;
    size_t k = 0;
    double t0 = perf_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seed = rec_seed(i);
        memcpy(rec, &seed, sizeof(seed));
        memcpy(stage + k * REC_LEN, rec, REC_LEN);
        part_of[k++] = (uint32_t)(seed % parts);
        if (k < cap && i + 1 < n)
            continue;
        size_t np = block_count(part_of, k, start, present); /* start[q]: q's count, then */
        for (uint32_t at = 0, x = 0; x < np; x++) {          /* its first place in order */
            uint32_t c = start[present[x]];
            start[present[x]] = at;
            at += c;
        }
        for (size_t j = 0; j < k; j++)
            order[start[part_of[j]]++] = (uint32_t)j;
        for (size_t x = 0; x < np; x++)
            start[present[x]] = 0;
        for (size_t j = 0; j < k; j++) {
            if (j + 16 < k) { /* a later record's room, fetched ahead */
                uint32_t q = part_of[order[j + 16]];
                __builtin_prefetch(b.pool + (size_t)b.cur[q] * buf + b.fill[q], 1, 3);
            }
            memcpy(part_bufs_room(&b, part_of[order[j]]), stage + (size_t)order[j] * REC_LEN,
                   REC_LEN);
        }
        k = 0;
    }
    double ns = (perf_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0) / (double)n * 1e9;
    part_bufs_free(&b);
    munmap(stage, block);
    free(part_of);
    free(order);
    free(present);
    free(start);
    return ns;
}

/* ns per record of one process's appends packed per destination and sorted (--mode staged). */
static double staged(uint32_t parts, size_t block, uint64_t size)
{
    size_t cap = block / REC_LEN, out_len = block + (size_t)parts * 128;
    uint8_t *stage = map_resident(block), *out = map_resident(out_len);
    uint32_t *part_of = malloc(cap * sizeof(*part_of));
    uint32_t *count = calloc(parts, sizeof(*count)), *present = malloc(cap * sizeof(*present));
    size_t *at = malloc(parts * sizeof(*at));
    if (part_of == NULL || count == NULL || present == NULL || at == NULL)
        perf_die(PROG, "no memory for a block of %zu records", cap);
    uint8_t rec[REC_LEN];
    memset(rec, 7, sizeof(rec));
    uint64_t n = size / REC_LEN, sum = 0;
    size_t k = 0;
    double t0 = perf_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seed = rec_seed(i);
        uint32_t p = (uint32_t)(seed % parts);
        memcpy(rec, &seed, sizeof(seed));
        memcpy(stage + k * REC_LEN, rec, REC_LEN);
        part_of[k++] = p;
        if (k < cap && i + 1 < n)
            continue;
        size_t np = block_count(part_of, k, count, present), end = 0;
        for (size_t x = 0; x < np; x++) {
            uint32_t q = present[x];
            at[q] = end + 64; /* the frame header's slot */
            end = (at[q] + (size_t)count[q] * REC_LEN + 63) & ~(size_t)63;
            count[q] = 0;
        }
        for (size_t j = 0; j < k; j++) {
            if (j + 8 < k)
                __builtin_prefetch(out + at[part_of[j + 8]], 1, 3);
            memcpy(out + at[part_of[j]], stage + j * REC_LEN, REC_LEN);
            at[part_of[j]] += REC_LEN;
        }
        for (size_t o = 0; o < end; o += 64)
            sum += out[o];
        k = 0;
    }
    double ns = (perf_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0) / (double)n * 1e9;
    seal_sum += sum;
    munmap(stage, block);
    munmap(out, out_len);
    free(part_of);
    free(count);
    free(present);
    free(at);
    return ns;
}

/* flag's comma list into out, each in [min, max]; how many. Exits 2 on anything else. */
static int arg_list(const char *flag, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    int n = perf_parse_sizes(s, out, LIST_MAX);
    for (int i = 0; i < n; i++)
        if (out[i] < min || out[i] > max)
            n = -1;
    if (n < 0) {
        fprintf(stderr, "%s: bad %s '%s': expected up to %d values from %llu to %llu\n", PROG, flag,
                s, LIST_MAX, (unsigned long long)min, (unsigned long long)max);
        exit(2);
    }
    return n;
}

int main(int argc, char **argv)
{
    perf_out_t po;
    perf_out_init(&po, PROG, &argc, argv);
    uint64_t parts[LIST_MAX] = {16, 200, 2000}, bufs[LIST_MAX] = {4 << 10, 16 << 10, 80 << 10};
    int n_parts = 3, n_bufs = 3;
    uint64_t size = 256ull << 20, procs = 2;
    int mode = 0; /* direct, staged, runs */
    uint64_t block = 256 << 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            fprintf(stderr, "usage: " PROG " [--partitions 16,200,2000] [--bufs 4K,16K,80K] "
                            "[--size 256M] [--procs 2] [--mode direct|staged|runs] "
                            "[--block 256K] [--json [FILE]] [--csv FILE]\n");
            return 2;
        }
        i++;
        if (strcmp(a, "--partitions") == 0)
            n_parts = arg_list(a, v, 1, 1u << 20, parts);
        else if (strcmp(a, "--bufs") == 0)
            n_bufs = arg_list(a, v, 2 * REC_LEN, 64u << 20, bufs);
        else if (strcmp(a, "--size") == 0)
            size = perf_arg_size(PROG, a, v, REC_LEN, 1ull << 40);
        else if (strcmp(a, "--procs") == 0)
            procs = perf_arg_uint(PROG, a, v, 1, 64);
        else if (strcmp(a, "--mode") == 0) {
            mode = -1;
            for (int m = 0; m < 3; m++)
                mode = strcmp(v, mode_name[m]) == 0 ? m : mode;
            if (mode < 0)
                perf_die(PROG, "--mode takes direct, staged or runs, not '%s'", v);
        } else if (strcmp(a, "--block") == 0)
            block = perf_arg_size(PROG, a, v, 2 * REC_LEN, 1ull << 30);
        else
            perf_die(PROG, "unknown option %s", a);
    }
    perf_out_meta(&po, "none", "-");
    for (int pi = 0; pi < n_parts; pi++) {
        for (int bi = 0; bi < n_bufs; bi++) {
            int fds[2];
            if (pipe(fds) != 0)
                perf_die(PROG, "pipe: %s", strerror(errno));
            for (uint64_t k = 0; k < procs; k++) {
                pid_t pid = fork();
                if (pid < 0)
                    perf_die(PROG, "fork: %s", strerror(errno));
                if (pid == 0) {
                    uint32_t np = (uint32_t)parts[pi];
                    double ns = mode == 1   ? staged(np, bufs[bi], size)
                                : mode == 2 ? runs(np, bufs[bi], block, size)
                                            : scatter(np, bufs[bi], size);
                    _exit(write(fds[1], &ns, sizeof(ns)) == sizeof(ns) ? 0 : 1);
                }
            }
            close(fds[1]);
            double worst = 0, total = 0;
            uint64_t got = 0;
            for (double ns; read(fds[0], &ns, sizeof(ns)) == sizeof(ns); got++) {
                worst = ns > worst ? ns : worst;
                total += ns;
            }
            close(fds[0]);
            int failed = 0;
            for (uint64_t k = 0; k < procs; k++) {
                int ws;
                if (wait(&ws) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
                    failed = 1;
            }
            if (failed || got != procs)
                perf_die(PROG, "a process failed (%llu of %llu answered)", (unsigned long long)got,
                         (unsigned long long)procs);
            perf_row(&po);
            perf_u64(&po, "partitions", parts[pi]);
            perf_u64(&po, "buf", bufs[bi]);
            perf_str(&po, "mode", mode_name[mode]);
            perf_u64(&po, "open_bytes", mode == 1 ? 2 * bufs[bi] : parts[pi] * bufs[bi]);
            perf_u64(&po, "procs", procs);
            perf_num(&po, "ns_per_record", worst, 2);
            perf_num(&po, "ns_per_record_mean", total / (double)procs, 2);
            if (!po.json)
                printf("%s %6llu partitions x %8llu bytes: %6.2f ns/record (mean %.2f, %llu "
                       "procs)\n",
                       mode_name[mode], (unsigned long long)parts[pi], (unsigned long long)bufs[bi],
                       worst, total / (double)procs, (unsigned long long)procs);
        }
    }
    return perf_out_emit(&po);
}
