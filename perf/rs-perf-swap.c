/*
 * rs-perf-swap: the writer-side cost of handing one full push buffer to the
 * push engine, by copy (into an idle pooled buffer) and by swap (the buffer
 * itself goes, an idle one of the same length comes back). One writer
 * thread, a no-op push engine, the median over warm rounds of the mean cost
 * per hand-off (docs/shuffle.md has the table).
 *
 *   rs-perf-swap [--sizes 65536,262144] [--rounds 21] [--iters 2000] [--json [FILE]]
 *                [--csv FILE]
 *
 * Rounds are long enough (about 0.4 ms of swaps each) that one scheduling
 * hiccup on a shared machine moves a round, not the median.
 */
#include <rshuffle/pusher.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_json.h"
#include "perf_util.h"

static void noop_push(void *arg, rs_pushq_t *q, uint32_t partition, rs_pbuf_t *buf, size_t used)
{
    (void)arg;
    (void)partition;
    (void)used;
    rs_pushq_release(q, buf);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Mean ns per hand-off in each of rounds rounds; returns the median of the warm ones. */
static int measure(size_t size, int rounds, int iters, int swap, double *result)
{
    rs_pushq_config_t cfg;
    rs_pushq_config_defaults(&cfg);
    cfg.buf_len = size;
    cfg.slab_bytes = 16 * (size + RS_PBUF_HEAD_ROOM);
    rs_pushq_t *q;
    rs_status_t st = rs_pushq_create(&cfg, noop_push, NULL, &q);
    if (st != RS_OK) {
        fprintf(stderr, "rs-perf-swap: rs_pushq_create: %s\n", rs_strerror(st));
        return -1;
    }
    unsigned char *plain = malloc(size); /* the copy path's writer buffer */
    rs_pbuf_t *buf = NULL;
    double *per_round = calloc((size_t)rounds, sizeof(double));
    if (plain == NULL || per_round == NULL || rs_pushq_buf_get(q, size, &buf) != RS_OK) {
        fprintf(stderr, "rs-perf-swap: out of memory\n");
        st = RS_ERR_NOMEM;
        goto out;
    }
    for (int r = 0; r < rounds; r++) {
        uint64_t total = 0;
        for (int i = 0; i < iters; i++) {
            unsigned char *dst = swap ? buf->data : plain;
            memset(dst, (int)(i & 0xff), size); /* the writer fills the buffer (not timed) */
            uint64_t t0 = perf_now_ns();
            st = swap ? rs_pushq_swap(q, (uint32_t)i, buf, size, &buf)
                      : rs_pushq_copy(q, (uint32_t)i, plain, size);
            total += perf_now_ns() - t0;
            if (st != RS_OK) {
                fprintf(stderr, "rs-perf-swap: hand-off: %s\n", rs_strerror(st));
                goto out;
            }
        }
        per_round[r] = (double)total / iters;
    }
    int warm = rounds > 3 ? 2 : 0; /* the first rounds warm caches and the pool */
    *result = median(per_round + warm, rounds - warm);
out:
    if (rs_pushq_drain(q, 10000) != RS_OK && st == RS_OK)
        st = RS_ERR_TIMEOUT;
    if (buf != NULL)
        rs_pushq_buf_put(q, buf);
    rs_pushq_destroy(q);
    free(per_round);
    free(plain);
    return st == RS_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    perf_std_args(argc, argv,
                  "usage: rs-perf-swap [--sizes 65536,262144] [--rounds 21] [--iters 2000]\n"
                  "                    [--json [FILE]] [--csv FILE]\n"
                  "Writer-side cost of handing a full push buffer to the engine: copy vs swap.\n");
    perf_out_t po;
    perf_out_init(&po, "rs-perf-swap", &argc, argv);
    int rounds = 21, iters = 2000;
    char sizes_arg[256] = "65536,262144";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = (int)perf_arg_uint("rs-perf-swap", "--rounds", argv[++i], 1, 100000);
        } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            iters = (int)perf_arg_uint("rs-perf-swap", "--iters", argv[++i], 1, 100000000);
        } else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            snprintf(sizes_arg, sizeof(sizes_arg), "%s", argv[++i]);
        } else {
            fprintf(
                stderr,
                "usage: rs-perf-swap [--sizes B,B,...] [--rounds N] [--iters N] [--json [FILE]] "
                "[--csv FILE]\n");
            return 2;
        }
    }
    if (rounds < 1 || iters < 1) {
        fprintf(stderr, "rs-perf-swap: --rounds and --iters must be positive\n");
        return 2;
    }
    size_t sizes[16];
    int n = 0;
    for (char *tok = strtok(sizes_arg, ","); tok != NULL && n < 16; tok = strtok(NULL, ","))
        sizes[n++] = (size_t)perf_arg_size("rs-perf-swap", "--sizes", tok, 1, 1ull << 30);
    double copy_ns[16], swap_ns[16];
    printf("%-10s %12s %12s\n", "size", "copy_ns", "swap_ns");
    for (int i = 0; i < n; i++) {
        if (sizes[i] == 0 || measure(sizes[i], rounds, iters, 0, &copy_ns[i]) != 0 ||
            measure(sizes[i], rounds, iters, 1, &swap_ns[i]) != 0)
            return 1;
        printf("%-10zu %12.0f %12.0f\n", sizes[i], copy_ns[i], swap_ns[i]);
    }
    perf_out_meta(&po, "none", "-"); /* a no-op engine: no fabric */
    for (int i = 0; i < n; i++) {
        perf_row(&po);
        perf_u64(&po, "size", sizes[i]);
        perf_num(&po, "copy_ns", copy_ns[i], 1);
        perf_num(&po, "swap_ns", swap_ns[i], 1);
    }
    return perf_out_emit(&po) == 0 ? 0 : 1;
}
