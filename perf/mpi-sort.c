/*
 * mpi-sort: the yardstick for rs-sort. The same sort written the way an HPC
 * code would, with MPI (a sample sort): every rank samples its keys, the
 * samples are gathered (MPI_Allgather) and every rank picks the same
 * splitters; then in rounds of at most --round bytes sent per rank it
 * generates its records (perf/sort_records.h: the very records rs-sort's
 * map tasks make for the same --size, --skew and --seed), packs them per
 * destination rank ordered by partition (partition p lives at rank
 * p % ranks) and exchanges them with MPI_Alltoallv; then each rank sorts its
 * partitions with the same MSD radix sort and validates them the same way
 * (order within and across partitions, record count, sum of record hashes
 * against the input's).
 *
 *   mpirun -np N mpi-sort [--size 1G] [--partitions 4N] [--round 64M]
 *                         [--skew none|zipf:S] [--seed 1] [--samples N]
 *                         [--json [FILE]] [--csv FILE]
 *
 * "total_s" runs from a barrier after MPI_Init to the verdict (no process
 * start). Rank 0 prints a summary and, with --json, perf/perf_json.h's
 * object. Exit status 1 when the output is not valid.
 */
#include <mpi.h>

#include "mpi_args.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_json.h"
#include "sort_records.h"

typedef struct opts {
    uint64_t size, round, seed, samples;
    uint32_t partitions;
    double zipf;
    const char *skew;
} opts_t;

static int parse_args(int argc, char **argv, opts_t *o, int ranks)
{
    *o = (opts_t){.size = 1ull << 30, .round = 64ull << 20, .seed = 1, .skew = "none"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            return -1;
        i++;
        if (strcmp(a, "--size") == 0)
            o->size = mpi_parse_size(v);
        else if (strcmp(a, "--round") == 0)
            o->round = mpi_parse_size(v);
        else if (strcmp(a, "--partitions") == 0)
            o->partitions = (uint32_t)mpi_parse_count(v, 100000);
        else if (strcmp(a, "--seed") == 0)
            o->seed = strcmp(v, "0") == 0 ? 0 : mpi_parse_count(v, UINT64_MAX);
        else if (strcmp(a, "--samples") == 0)
            o->samples = mpi_parse_count(v, 100000000);
        else if (strcmp(a, "--skew") == 0 && (o->zipf = sskew_parse(v)) >= 0)
            o->skew = v;
        else
            return -1;
        if (strcmp(a, "--partitions") == 0 && o->partitions == 0)
            return -1;
    }
    if (o->partitions == 0)
        o->partitions = 4 * (uint32_t)ranks;
    if (o->samples == 0)
        o->samples = 1000 * (uint64_t)o->partitions;
    /* counts and displacements are ints: a round's bytes must fit one */
    return o->size < REC_LEN || o->round < REC_LEN || o->round > (1u << 30) ? -1 : 0;
}

/* A growable array of records: one partition at its rank. */
typedef struct part {
    uint8_t *recs;
    uint64_t n, cap;
} part_t;

static int part_append(part_t *p, const uint8_t *recs, uint64_t n)
{
    if (p->n + n > p->cap) {
        uint64_t cap = p->cap ? p->cap : 4096;
        while (cap < p->n + n)
            cap *= 2;
        uint8_t *b = realloc(p->recs, cap * REC_LEN);
        if (b == NULL)
            return -1;
        p->recs = b;
        p->cap = cap;
    }
    memcpy(p->recs + p->n * REC_LEN, recs, n * REC_LEN);
    p->n += n;
    return 0;
}

/* One round's buffers (bounded by --round) and the counts it sends. */
typedef struct bufs {
    uint8_t *gen, *send, *recv;
    uint32_t *part_of;
    size_t recv_cap;
    int *pcount_out, *pcount_in; /* records per partition: ranks x partitions each */
    int *scount, *sdispl, *rcount, *rdispl;
    uint64_t *cursor; /* per partition */
} bufs_t;

/*
 * One round: records first .. first+n-1 generated, packed per destination
 * rank in partition order (pass 1 counts, pass 2 places), exchanged with
 * their per-partition counts, appended to this rank's partitions.
 */
static int round_run(const opts_t *o, const sgen_t *g, const skey_t *spl, int me, int ranks,
                     uint64_t first, uint64_t n, bufs_t *b, part_t *parts, uint64_t *in,
                     pcount_t *want, double *gen_s)
{
    const uint32_t P = o->partitions;
    double t0 = MPI_Wtime();
    for (uint64_t i = 0; i < n; i++)
        srec_make(g, first + i, b->gen + i * REC_LEN);
    *gen_s += MPI_Wtime() - t0;
    memset(b->pcount_out, 0, (size_t)ranks * P * sizeof(int));
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *rec = b->gen + i * REC_LEN;
        uint32_t p = spart(spl, P, skey_get(rec));
        uint64_t h = srec_hash(rec);
        b->part_of[i] = p;
        b->pcount_out[(p % (uint32_t)ranks) * P + p]++;
        want[p].records++;
        want[p].sum += h;
        in[0]++, in[1] += h;
    }
    uint64_t off = 0;
    for (int r = 0; r < ranks; r++) {
        b->sdispl[r] = (int)(off * REC_LEN);
        for (uint32_t p = 0; p < P; p++) {
            if (p % (uint32_t)ranks == (uint32_t)r) {
                b->cursor[p] = off;
                off += (uint64_t)b->pcount_out[(size_t)r * P + p];
            }
        }
        b->scount[r] = (int)(off * REC_LEN) - b->sdispl[r];
    }
    for (uint64_t i = 0; i < n; i++)
        memcpy(b->send + b->cursor[b->part_of[i]]++ * REC_LEN, b->gen + i * REC_LEN, REC_LEN);
    if (MPI_Alltoall(b->pcount_out, (int)P, MPI_INT, b->pcount_in, (int)P, MPI_INT,
                     MPI_COMM_WORLD) != MPI_SUCCESS)
        return -1;
    size_t bytes = 0;
    for (int r = 0; r < ranks; r++) {
        uint64_t recs = 0;
        for (uint32_t p = 0; p < P; p++)
            recs += (uint64_t)b->pcount_in[(size_t)r * P + p];
        b->rdispl[r] = (int)bytes;
        b->rcount[r] = (int)(recs * REC_LEN);
        bytes += recs * REC_LEN;
    }
    if (bytes > INT32_MAX) {
        fprintf(stderr, "mpi-sort: rank %d: %zu bytes in one round\n", me, bytes);
        return -1;
    }
    if (bytes > b->recv_cap) {
        uint8_t *p = realloc(b->recv, bytes);
        if (p == NULL)
            return -1;
        b->recv = p;
        b->recv_cap = bytes;
    }
    if (MPI_Alltoallv(b->send, b->scount, b->sdispl, MPI_BYTE, b->recv, b->rcount, b->rdispl,
                      MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS)
        return -1;
    const uint8_t *at = b->recv;
    for (int r = 0; r < ranks; r++)
        for (uint32_t p = (uint32_t)me; p < P; p += (uint32_t)ranks) {
            uint64_t k = (uint64_t)b->pcount_in[(size_t)r * P + p];
            if (part_append(&parts[p], at, k) != 0)
                return -1;
            at += k * REC_LEN;
        }
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    int me, ranks, rc = 1;
    perf_out_t po;
    perf_out_init(&po, "mpi-sort", &argc, argv);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    sgen_t g;
    if (parse_args(argc, argv, &o, ranks) != 0 || sgen_init(&g, o.seed, o.zipf) != 0) {
        if (me == 0)
            fprintf(stderr, "usage: mpirun -np N mpi-sort [--size 1G] [--partitions 4N] "
                            "[--round 64M] [--skew none|zipf:S] [--seed 1] [--samples N] "
                            "[--json [FILE]] [--csv FILE]\n");
        MPI_Finalize();
        return 2;
    }
    const uint32_t P = o.partitions;
    uint64_t total = o.size / REC_LEN, first = rec_first(total, (uint32_t)ranks, (uint32_t)me);
    uint64_t mine = rec_count(total, (uint32_t)ranks, (uint32_t)me);
    uint64_t per_round = o.round / REC_LEN, my_rounds = (mine + per_round - 1) / per_round, rounds;
    uint64_t per_rank = o.samples / (uint64_t)ranks + 1;
    bufs_t b = {0};
    b.gen = malloc(per_round * REC_LEN);
    b.send = malloc(per_round * REC_LEN);
    b.part_of = malloc(per_round * sizeof(*b.part_of));
    b.recv_cap = per_round * REC_LEN;
    b.recv = malloc(b.recv_cap);
    b.pcount_out = calloc((size_t)ranks * P * 2, sizeof(int));
    b.pcount_in = b.pcount_out ? b.pcount_out + (size_t)ranks * P : NULL;
    b.scount = calloc((size_t)ranks * 4, sizeof(int));
    b.cursor = calloc(P, sizeof(*b.cursor));
    part_t *parts = calloc(P, sizeof(*parts));
    pcount_t *want = calloc(P, sizeof(*want));
    spsum_t *sums = calloc(P, sizeof(*sums));
    skey_t *spl = calloc(P, sizeof(*spl));
    uint64_t *samp = calloc(per_rank * 2 + 1, 8), *all = calloc((per_rank * 2 + 1) * ranks, 8);
    skey_t *keys = malloc(per_rank * ranks * sizeof(*keys));
    int fail = b.gen == NULL || b.send == NULL || b.part_of == NULL || b.recv == NULL ||
               b.pcount_out == NULL || b.scount == NULL || b.cursor == NULL || parts == NULL ||
               want == NULL || sums == NULL || spl == NULL || samp == NULL || all == NULL ||
               keys == NULL;
    MPI_Allreduce(MPI_IN_PLACE, &fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (fail) {
        if (me == 0)
            fprintf(stderr, "mpi-sort: out of memory\n");
        goto out;
    }
    b.sdispl = b.scount + ranks;
    b.rcount = b.sdispl + ranks;
    b.rdispl = b.rcount + ranks;
    /*
     * Touch them once, so page faults are not timed (an MPI code reuses its
     * buffers); not with zeros, which a compiler may fold with the malloc
     * into a calloc that leaves fresh pages untouched.
     */
    memset(b.gen, 0xa5, per_round * REC_LEN);
    memset(b.send, 0xa5, per_round * REC_LEN);
    memset(b.recv, 0xa5, b.recv_cap);
    MPI_Allreduce(&my_rounds, &rounds, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    /* sample: the same splitters at every rank */
    samp[0] = ssample(&g, first, mine, keys, per_rank);
    for (uint64_t i = 0; i < samp[0]; i++)
        samp[1 + 2 * i] = keys[i].hi, samp[2 + 2 * i] = keys[i].lo;
    MPI_Allgather(samp, (int)(per_rank * 2 + 1), MPI_UINT64_T, all, (int)(per_rank * 2 + 1),
                  MPI_UINT64_T, MPI_COMM_WORLD);
    uint64_t nk = 0;
    for (int r = 0; r < ranks; r++) {
        const uint64_t *s = all + (size_t)r * (per_rank * 2 + 1);
        for (uint64_t j = 0; j < s[0]; j++)
            keys[nk++] = (skey_t){s[1 + 2 * j], (uint16_t)s[2 + 2 * j]};
    }
    ssplitters(keys, nk, P, spl);
    double t1 = MPI_Wtime();

    /* exchange: rounds of generate, pack, MPI_Alltoallv */
    uint64_t in[2] = {0, 0};
    double gen_s = 0;
    for (uint64_t r = 0; r < rounds && !fail; r++) {
        uint64_t done = r * per_round, n = done >= mine ? 0 : mine - done;
        if (n > per_round)
            n = per_round;
        fail = round_run(&o, &g, spl, me, ranks, first + done, n, &b, parts, in, want, &gen_s) != 0;
    }
    double t2 = MPI_Wtime();

    /* sort and validate this rank's partitions */
    double sort_s = 0, val_s = 0;
    uint64_t cap = 0;
    uint8_t *out = NULL;
    sent_t *ents = NULL, *tmp = NULL;
    for (uint32_t p = (uint32_t)me; p < P && !fail; p += (uint32_t)ranks) {
        uint64_t n = parts[p].n;
        if (n > cap) {
            free(out), free(ents), free(tmp);
            cap = n;
            out = malloc(cap * REC_LEN);
            ents = malloc(cap * sizeof(*ents));
            tmp = malloc(cap * sizeof(*tmp));
            if (out == NULL || ents == NULL || tmp == NULL) {
                fail = 1;
                break;
            }
        }
        double s0 = MPI_Wtime();
        ssort_records(parts[p].recs, n, out, ents, tmp, 0);
        double s1 = MPI_Wtime();
        svalidate(out, n, &sums[p]);
        val_s += MPI_Wtime() - s1;
        sort_s += s1 - s0;
        free(parts[p].recs);
        parts[p].recs = NULL;
    }
    free(out), free(ents), free(tmp);
    uint64_t inall[2];
    MPI_Allreduce(in, inall, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, want, (int)P * 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, sums, (int)P * SPSUM_WORDS, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    double t3 = MPI_Wtime();
    double times[3] = {gen_s, sort_s, val_s};
    MPI_Allreduce(MPI_IN_PLACE, times, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    char msg[256];
    int ok = !fail && sverdict(sums, P, total, inall[1], msg, sizeof(msg)) == 0;
    if (fail)
        snprintf(msg, sizeof(msg), "a phase failed");
    for (uint32_t p = 0; p < P && ok; p++)
        if (want[p].records != sums[p].records || want[p].sum != sums[p].hash) {
            snprintf(msg, sizeof(msg), "partition %u: %llu records sent, %llu sorted", p,
                     (unsigned long long)want[p].records, (unsigned long long)sums[p].records);
            ok = 0;
        }
    if (me == 0) {
        uint64_t largest = 0;
        for (uint32_t p = 0; p < P; p++)
            largest = sums[p].records > largest ? sums[p].records : largest;
        double secs = t3 - t0, mean = (double)total / P;
        double gbps = secs > 0 ? (double)(total * REC_LEN) * 8 / secs / 1e9 : 0;
        printf("mpi sort %s%s%s: %d ranks, %.2f GiB, %llu records, %u partitions, keys %s, %llu "
               "rounds of <= %llu bytes per rank: %.3f s (%.2f Gbit/s): sample %.3f s, exchange "
               "%.3f s (generate %.3f), sort %.3f s, validate %.3f s; largest partition %.3fx "
               "the mean\n",
               ok ? "valid" : "INVALID (", ok ? "" : msg, ok ? "" : ")", ranks,
               (double)(total * REC_LEN) / (1 << 30), (unsigned long long)total, P, o.skew,
               (unsigned long long)rounds, (unsigned long long)(per_round * REC_LEN), secs, gbps,
               t1 - t0, t2 - t1, times[0], times[1], times[2], (double)largest / mean);
        perf_out_meta(&po, "mpi", "-");
        snprintf(po.launcher, sizeof(po.launcher), "mpi");
        po.ranks = ranks;
        perf_row(&po);
        perf_str(&po, "exchange", "mpi");
        perf_str(&po, "algorithm", "msd-radix");
        perf_str(&po, "skew", o.skew);
        perf_int(&po, "ranks", ranks);
        perf_u64(&po, "partitions", P);
        perf_u64(&po, "bytes", total * REC_LEN);
        perf_u64(&po, "records", total);
        perf_u64(&po, "rounds", rounds);
        perf_u64(&po, "round_bytes", per_round * REC_LEN);
        perf_num(&po, "total_s", secs, 4);
        perf_num(&po, "sample_s", t1 - t0, 4);
        perf_num(&po, "exchange_s", t2 - t1, 4);
        perf_num(&po, "reduce_s", t3 - t2, 4);
        perf_num(&po, "generate_s", times[0], 4);
        perf_num(&po, "sort_s", times[1], 4);
        perf_num(&po, "validate_s", times[2], 4);
        perf_num(&po, "gbit_s", gbps, 3);
        perf_u64(&po, "largest_partition", largest);
        perf_num(&po, "mean_partition", mean, 1);
        perf_num(&po, "largest_over_mean", (double)largest / mean, 3);
        perf_str(&po, "verdict", ok ? "valid" : msg);
        perf_bool(&po, "ok", ok);
        if (perf_out_emit(&po) != 0)
            ok = 0;
        fflush(stdout);
    }
    rc = ok ? 0 : 1;
out:
    for (uint32_t p = 0; parts != NULL && p < P; p++)
        free(parts[p].recs);
    free(b.gen), free(b.send), free(b.part_of), free(b.recv), free(b.pcount_out), free(b.scount);
    free(b.cursor), free(parts), free(want), free(sums), free(spl), free(samp), free(all);
    free(keys);
    sgen_free(&g);
    MPI_Finalize();
    return rc;
}
