/*
 * mpi-shuffle: the yardstick for rs-shuffle-bench. The same shuffle written
 * the way an HPC code would, with MPI: every rank is a mapper and a reducer.
 * Rank r generates the records rs-shuffle-bench's mapper r would
 * (perf/records.h: same ids, bytes and partitions), packs them per
 * destination rank (partition p lives at rank p % ranks) and exchanges them
 * with MPI_Alltoallv in rounds of at most --round bytes sent per rank, so
 * MPI's memory stays bounded; every record is verified at its reducer
 * (all 100 bytes, its partition, exactly once) and per partition the count
 * and checksum of what arrived must equal what the mappers sent.
 *
 *   mpirun -np N mpi-shuffle [--size 1G] [--partitions 16] [--round 64M]
 *                            [--json [FILE]] [--csv FILE]
 *
 * "total_s" runs from a barrier after MPI_Init to the end of the last
 * round's verification, reductions included (no process start). Rank 0
 * prints a summary and, with --json, perf/perf_json.h's object. Exit status 1 if anything
 * was lost, duplicated or damaged.
 */
#include <mpi.h>

#include "mpi_args.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_json.h"
#include "records.h"

typedef struct opts {
    uint64_t size, round;
    uint32_t partitions;
} opts_t;

static int parse_args(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.size = 1ull << 30, .round = 64ull << 20, .partitions = 16};
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
            o->partitions = (uint32_t)mpi_parse_count(v, UINT32_MAX);
        else
            return -1;
    }
    /* counts and displacements are ints: a round's bytes must fit one */
    if (o->size < REC_LEN || o->round < REC_LEN || o->round > (1u << 30) || o->partitions == 0)
        return -1;
    return 0;
}

/* What one rank found as a reducer. */
typedef struct verdict {
    uint64_t records, bad, dups;
} verdict_t;

/* Checks the n records at buf, all sent to rank me; marks their ids in seen. */
static void verify(const uint8_t *buf, uint64_t n, const opts_t *o, int me, int ranks,
                   uint64_t total, uint8_t *seen, pcount_t *got, verdict_t *v)
{
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *rec = buf + i * REC_LEN;
        uint64_t id, seed;
        memcpy(&id, rec, 8);
        seed = rec_seed(id);
        uint32_t part = rec_partition(seed, o->partitions);
        if (id >= total || !rec_ok(rec, id, seed) || part % (uint32_t)ranks != (uint32_t)me) {
            v->bad++;
            continue;
        }
        if (seen[id / 8] & (1u << (id % 8)))
            v->dups++;
        seen[id / 8] |= (uint8_t)(1u << (id % 8));
        got[part].records++;
        got[part].sum += seed;
        v->records++;
    }
}

/* Buffers one rank holds for the whole run (bounded by --round, not --size). */
typedef struct bufs {
    uint64_t *seeds; /* this round's records' seeds */
    uint32_t *dest;  /* and destination ranks */
    uint8_t *send, *recv;
    size_t recv_cap;
    int *scount, *sdispl, *rcount, *rdispl, *cursor;
} bufs_t;

/*
 * One round: this rank's records first .. first+n-1 (n may be 0), packed per
 * destination with no staging copy (pass 1 counts, pass 2 writes each record
 * at its place), exchanged, verified. 0, or -1 (said on stderr).
 */
static int round_run(const opts_t *o, int me, int ranks, uint64_t first, uint64_t n, bufs_t *b,
                     uint64_t total, uint8_t *seen, pcount_t *want, pcount_t *got, verdict_t *v)
{
    memset(b->scount, 0, (size_t)ranks * sizeof(int));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seed = rec_seed(first + i);
        uint32_t part = rec_partition(seed, o->partitions);
        b->seeds[i] = seed;
        b->dest[i] = part % (uint32_t)ranks;
        b->scount[b->dest[i]] += REC_LEN;
        want[part].records++;
        want[part].sum += seed;
    }
    for (int r = 0, off = 0; r < ranks; r++) {
        b->sdispl[r] = b->cursor[r] = off;
        off += b->scount[r];
    }
    for (uint64_t i = 0; i < n; i++) {
        rec_make(first + i, b->seeds[i], b->send + b->cursor[b->dest[i]]);
        b->cursor[b->dest[i]] += REC_LEN;
    }
    if (MPI_Alltoall(b->scount, 1, MPI_INT, b->rcount, 1, MPI_INT, MPI_COMM_WORLD) != MPI_SUCCESS)
        return -1;
    size_t in = 0;
    for (int r = 0; r < ranks; r++) {
        b->rdispl[r] = (int)in;
        in += (size_t)b->rcount[r];
    }
    if (in > INT32_MAX) {
        fprintf(stderr, "mpi-shuffle: rank %d: %zu bytes in one round\n", me, in);
        return -1;
    }
    if (in > b->recv_cap) { /* other ranks' shares of this rank's partitions: about a round */
        uint8_t *p = realloc(b->recv, in);
        if (p == NULL)
            return -1;
        b->recv = p;
        b->recv_cap = in;
    }
    if (MPI_Alltoallv(b->send, b->scount, b->sdispl, MPI_BYTE, b->recv, b->rcount, b->rdispl,
                      MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS)
        return -1;
    verify(b->recv, in / REC_LEN, o, me, ranks, total, seen, got, v);
    return 0;
}

static int bufs_init(bufs_t *b, uint64_t per_round, int ranks)
{
    memset(b, 0, sizeof(*b));
    b->seeds = malloc(per_round * sizeof(*b->seeds));
    b->dest = malloc(per_round * sizeof(*b->dest));
    b->send = malloc(per_round * REC_LEN);
    b->recv_cap = per_round * REC_LEN;
    b->recv = malloc(b->recv_cap);
    b->scount = calloc((size_t)ranks * 5, sizeof(int));
    if (b->seeds == NULL || b->dest == NULL || b->send == NULL || b->recv == NULL ||
        b->scount == NULL)
        return -1;
    b->sdispl = b->scount + ranks;
    b->rcount = b->sdispl + ranks;
    b->rdispl = b->rcount + ranks;
    b->cursor = b->rdispl + ranks;
    /*
     * Touch them once, so page faults are not timed (an MPI code reuses its
     * buffers); not with zeros, which a compiler may fold with the malloc
     * into a calloc that leaves fresh pages untouched.
     */
    memset(b->send, 0xa5, per_round * REC_LEN);
    memset(b->recv, 0xa5, b->recv_cap);
    return 0;
}

static void bufs_free(bufs_t *b)
{
    free(b->seeds);
    free(b->dest);
    free(b->send);
    free(b->recv);
    free(b->scount);
}

int main(int argc, char **argv)
{
    opts_t o;
    int me, ranks, rc = 1;
    perf_out_t po;
    perf_out_init(&po, "mpi-shuffle", &argc, argv);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (parse_args(argc, argv, &o) != 0) {
        if (me == 0)
            fprintf(stderr, "usage: mpirun -np N mpi-shuffle [--size 1G] [--partitions 16] "
                            "[--round 64M] [--json [FILE]] [--csv FILE]\n");
        MPI_Finalize();
        return 2;
    }
    uint64_t total = o.size / REC_LEN, first = rec_first(total, (uint32_t)ranks, (uint32_t)me);
    uint64_t mine = rec_count(total, (uint32_t)ranks, (uint32_t)me);
    uint64_t per_round = o.round / REC_LEN, my_rounds = (mine + per_round - 1) / per_round, rounds;
    bufs_t b;
    uint8_t *seen = calloc(total / 8 + 1, 1);
    pcount_t *want = calloc(o.partitions, sizeof(*want)), *got = calloc(o.partitions, sizeof(*got));
    verdict_t v = {0};
    int fail = bufs_init(&b, per_round, ranks) != 0 || seen == NULL || want == NULL || got == NULL;
    MPI_Allreduce(MPI_IN_PLACE, &fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (fail) {
        if (me == 0)
            fprintf(stderr, "mpi-shuffle: out of memory\n");
        goto out;
    }
    MPI_Allreduce(&my_rounds, &rounds, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (uint64_t r = 0; r < rounds && !fail; r++) {
        uint64_t done = r * per_round, n = done >= mine ? 0 : mine - done;
        if (n > per_round)
            n = per_round;
        fail = round_run(&o, me, ranks, first + done, n, &b, total, seen, want, got, &v) != 0;
    }
    /* every rank's verdict and the partitions' sums, everywhere (rank 0 reports) */
    uint64_t distinct = 0, sums[3];
    for (uint64_t i = 0; i < total / 8 + 1; i++)
        distinct += (uint64_t)__builtin_popcountll(seen[i]);
    uint64_t mine3[3] = {distinct, v.bad, v.dups};
    MPI_Allreduce(mine3, sums, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, want, (int)o.partitions * 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, got, (int)o.partitions * 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    double secs = MPI_Wtime() - t0;

    uint64_t lost = total - (sums[0] < total ? sums[0] : total);
    int mismatch = 0;
    for (uint32_t p = 0; p < o.partitions; p++)
        if (want[p].records != got[p].records || want[p].sum != got[p].sum) {
            if (me == 0)
                fprintf(stderr, "mpi-shuffle: partition %u: sent %llu records, received %llu\n", p,
                        (unsigned long long)want[p].records, (unsigned long long)got[p].records);
            mismatch = 1;
        }
    int ok = !fail && !mismatch && lost == 0 && sums[1] == 0 && sums[2] == 0;
    if (me == 0) {
        double gbps = secs > 0 ? (double)(total * REC_LEN) * 8 / secs / 1e9 : 0;
        printf("mpi shuffle %s: %d ranks, %.2f GiB, %llu records, %u partitions, %llu rounds of "
               "<= %llu bytes per rank: %.3f s (%.2f Gbit/s); lost %llu, duplicates %llu, bad "
               "%llu\n",
               ok ? "verified" : "FAILED", ranks, (double)(total * REC_LEN) / (1 << 30),
               (unsigned long long)total, o.partitions, (unsigned long long)rounds,
               (unsigned long long)(per_round * REC_LEN), secs, gbps, (unsigned long long)lost,
               (unsigned long long)sums[2], (unsigned long long)sums[1]);
        perf_out_meta(&po, "mpi", "-");
        snprintf(po.launcher, sizeof(po.launcher), "mpi");
        po.ranks = ranks;
        perf_row(&po);
        perf_int(&po, "ranks", ranks);
        perf_u64(&po, "bytes", total * REC_LEN);
        perf_u64(&po, "records", total);
        perf_u64(&po, "partitions", o.partitions);
        perf_u64(&po, "rounds", rounds);
        perf_u64(&po, "round_bytes", per_round * REC_LEN);
        perf_num(&po, "total_s", secs, 4);
        perf_num(&po, "gbit_s", gbps, 3);
        perf_u64(&po, "lost", lost);
        perf_u64(&po, "duplicates", sums[2]);
        perf_u64(&po, "bad", sums[1]);
        perf_bool(&po, "ok", ok);
        if (perf_out_emit(&po) != 0)
            ok = 0;
        fflush(stdout);
    }
    rc = ok ? 0 : 1;
out:
    bufs_free(&b);
    free(seen);
    free(want);
    free(got);
    MPI_Finalize();
    return rc;
}
