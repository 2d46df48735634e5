/*
 * mpi-bcast: the yardstick for rs-bcast-bench's get_us. Rank 0 broadcasts
 * S bytes with MPI_Bcast to the other ranks (the readers), --iters times
 * after one warm-up; every rank checks a checksum of what it holds against
 * rank 0's after every repetition (the bytes differ per repetition).
 *
 *   mpirun -np R+1 mpi-bcast [--size 1M] [--iters N] [--json [FILE]] [--csv FILE]
 *
 * Per repetition: a barrier, then each rank times its own MPI_Bcast call;
 * the repetition's time is the slowest rank's (as get_us is the slowest
 * reader's rs_bcast_get). median_us is the median over repetitions. --iters
 * defaults to rs-bcast-bench's count for the size. Rank 0 prints a summary
 * and, with --json, perf/perf_json.h's object; exit status 1 if a checksum differed.
 */
#include <mpi.h>

#include "mpi_args.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_json.h"
#include "records.h"

#define MAX_ITERS 256

/* rs-bcast-bench's iteration count for a size (iters_for there). */
static int iters_for(uint64_t bytes)
{
    return bytes <= (64u << 10) ? 40 : bytes <= (4u << 20) ? 15 : bytes <= (16u << 20) ? 7 : 5;
}

/* Repetition it's bytes: words base + i * GOLDEN, base from it (each repetition differs). */
static void fill(uint8_t *buf, uint64_t len, int it)
{
    uint64_t base = rec_mix((uint64_t)it + 1), i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = base + (i / 8) * GOLDEN;
        memcpy(buf + i, &w, 8);
    }
    for (; i < len; i++)
        buf[i] = (uint8_t)(base >> (8 * (i % 8)));
}

/* A position-dependent checksum of every byte (a lost, swapped or changed word shows). */
static uint64_t checksum(const uint8_t *buf, uint64_t len)
{
    uint64_t h = len, i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, buf + i, 8);
        h = (h ^ w) * 0x100000001b3ull + i;
    }
    for (; i < len; i++)
        h = (h ^ buf[i]) * 0x100000001b3ull;
    return h;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int me, ranks, iters = 0, rc = 1;
    uint64_t size = 1u << 20;
    perf_out_t po;
    perf_out_init(&po, "mpi-bcast", &argc, argv);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
            size = mpi_parse_size(argv[++i]);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = (int)mpi_parse_count(argv[++i], MAX_ITERS);
        else
            size = 0;
    }
    if (iters == 0)
        iters = iters_for(size);
    if (size == 0 || size > INT32_MAX || iters < 1 || iters > MAX_ITERS || ranks < 2) {
        if (me == 0)
            fprintf(stderr,
                    "usage: mpirun -np R+1 mpi-bcast [--size 1M] [--iters 1..%d] "
                    "[--json [FILE]] [--csv FILE] (2 ranks at least)\n",
                    MAX_ITERS);
        MPI_Finalize();
        return 2;
    }
    uint8_t *buf = malloc(size);
    double times[MAX_ITERS];
    int bad = buf == NULL;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad)
        goto out;
    memset(buf, 0, size);
    for (int it = -1; it < iters; it++) { /* repetition -1 warms connections up */
        uint64_t sum = 0;
        if (me == 0) {
            fill(buf, size, it);
            sum = checksum(buf, size);
        } else {
            memset(buf, 0, size); /* a broadcast that delivers nothing must not pass */
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Bcast(buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
        double t = MPI_Wtime() - t0, slowest;
        MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        /* rank 0's checksum to everyone, each rank compares its own (untimed) */
        MPI_Bcast(&sum, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        int wrong = checksum(buf, size) != sum;
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        bad += wrong;
        if (it >= 0)
            times[it] = slowest;
    }
    if (me == 0) {
        qsort(times, (size_t)iters, sizeof(times[0]), cmp_double);
        double med = iters % 2 ? times[iters / 2] : (times[iters / 2 - 1] + times[iters / 2]) / 2;
        printf("mpi bcast %s: %llu bytes to %d readers, %d repetitions: median %.1f us, min %.1f "
               "us; %d wrong checksums\n",
               bad ? "FAILED" : "verified", (unsigned long long)size, ranks - 1, iters, med * 1e6,
               times[0] * 1e6, bad);
        perf_out_meta(&po, "mpi", "-");
        snprintf(po.launcher, sizeof(po.launcher), "mpi");
        po.ranks = ranks;
        perf_row(&po);
        perf_u64(&po, "bytes", size);
        perf_int(&po, "readers", ranks - 1);
        perf_int(&po, "ranks", ranks);
        perf_int(&po, "iters", iters);
        perf_num(&po, "median_us", med * 1e6, 1);
        perf_num(&po, "min_us", times[0] * 1e6, 1);
        perf_int(&po, "wrong", bad);
        perf_bool(&po, "ok", !bad);
        if (perf_out_emit(&po) != 0)
            bad = 1;
        fflush(stdout);
    }
    rc = bad ? 1 : 0;
out:
    free(buf);
    MPI_Finalize();
    return rc;
}
