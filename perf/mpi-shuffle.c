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
 * With --group it also does what a reduce task needs before it can read
 * one partition, which rshuffle's reader gives it and a receive buffer of
 * all of a rank's partitions mixed does not: each rank packs its records
 * by partition inside each destination's part (a counting sort over all
 * partitions instead of over the ranks), sends the per-partition counts
 * beside them, and keeps every round's receive buffer (allocated and made
 * resident before the clock, as a worker's arena is) with each partition's
 * runs indexed; at the end it verifies partition by partition, reading
 * each one's runs as rs-shuffle-bench's reducers read their partitions.
 * No record is copied more than without --group.
 *
 *   mpirun -np N mpi-shuffle [--size 1G] [--partitions 16] [--round 64M]
 *                            [--group] [--json [FILE]] [--csv FILE]
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
    int group;
} opts_t;

static int parse_args(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.size = 1ull << 30, .round = 64ull << 20, .partitions = 16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--group") == 0) {
            o->group = 1;
            continue;
        }
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

/* What a reducer checks its records against. */
typedef struct check {
    const opts_t *o;
    int me, ranks;
    uint64_t total;
    uint8_t *seen;
    pcount_t *got;
    verdict_t *v;
} check_t;

/* Checks the n records at buf, all sent to rank me (all of partition part, unless ~0u). */
static void verify(const uint8_t *buf, uint64_t n, const check_t *c, uint32_t part_want)
{
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *rec = buf + i * REC_LEN;
        uint64_t id, seed;
        memcpy(&id, rec, 8);
        seed = rec_seed(id);
        uint32_t part = rec_partition(seed, c->o->partitions);
        if (id >= c->total || !rec_ok(rec, id, seed) ||
            part % (uint32_t)c->ranks != (uint32_t)c->me ||
            (part_want != ~0u && part != part_want)) {
            c->v->bad++;
            continue;
        }
        if (c->seen[id / 8] & (1u << (id % 8)))
            c->v->dups++;
        c->seen[id / 8] |= (uint8_t)(1u << (id % 8));
        c->got[part].records++;
        c->got[part].sum += seed;
        c->v->records++;
    }
}

/*
 * --group: every round's receive buffer, kept, and where each of this
 * rank's partitions lies in it: run[(round * ranks + sender) * held + j]
 * is the j-th held partition's (me + j * ranks) run from that sender.
 */
typedef struct kept {
    uint8_t *data;
    uint64_t cap, used;
    uint32_t held, rounds;
    struct run {
        uint64_t off;
        uint32_t n;
    } * run;
} kept_t;

/* Buffers one rank holds for the whole run (bounded by --round, not --size, without --group). */
typedef struct bufs {
    uint64_t *seeds; /* this round's records' seeds */
    uint32_t *dest;  /* and destinations: ranks, or partitions with --group */
    uint8_t *send, *recv;
    size_t recv_cap;
    int *scount, *sdispl, *rcount, *rdispl, *cursor;
    uint64_t *pcursor;       /* --group: per partition */
    int *pcount, *pcount_in; /* --group: per (rank, held partition), out and in */
    kept_t kept;
} bufs_t;

/* Partition p's place in a rank's counts: partitions p % ranks == r, in order. */
static inline uint32_t held_index(uint32_t p, int ranks)
{
    return p / (uint32_t)ranks;
}

/*
 * --group's packing: per destination, its partitions in order, each one's
 * records together (one counting sort over the partitions); counts per
 * partition in pcount, bytes per rank in scount, what was sent in want.
 */
static void pack_grouped(const opts_t *o, int ranks, uint64_t first, uint64_t n, bufs_t *b,
                         pcount_t *want)
{
    uint32_t held = b->kept.held;
    memset(b->pcount, 0, (size_t)ranks * held * sizeof(int));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seed = rec_seed(first + i);
        uint32_t part = rec_partition(seed, o->partitions);
        b->seeds[i] = seed;
        b->dest[i] = part;
        b->pcount[(part % (uint32_t)ranks) * held + held_index(part, ranks)]++;
        want[part].records++;
        want[part].sum += seed;
    }
    uint64_t off = 0;
    for (int r = 0; r < ranks; r++) {
        b->sdispl[r] = (int)off;
        for (uint32_t p = (uint32_t)r; p < o->partitions; p += (uint32_t)ranks) {
            b->pcursor[p] = off;
            off += (uint64_t)b->pcount[(uint32_t)r * held + held_index(p, ranks)] * REC_LEN;
        }
        b->scount[r] = (int)(off - (uint64_t)b->sdispl[r]);
    }
    for (uint64_t i = 0; i < n; i++) {
        if (i + 8 < n) /* 8 records ahead: its partition's next line, seldom in cache */
            __builtin_prefetch(b->send + b->pcursor[b->dest[i + 8]], 1);
        rec_make(first + i, b->seeds[i], b->send + b->pcursor[b->dest[i]]);
        b->pcursor[b->dest[i]] += REC_LEN;
    }
}

/* --group: where this round's runs lie, from their senders' counts, once received at base. */
static void index_runs(kept_t *k, uint32_t round, int ranks, const int *rdispl,
                       const int *pcount_in, uint64_t base)
{
    for (int s = 0; s < ranks; s++) {
        uint64_t off = base + (uint64_t)rdispl[s];
        for (uint32_t j = 0; j < k->held; j++) {
            struct run *r = &k->run[((size_t)round * (size_t)ranks + (size_t)s) * k->held + j];
            r->off = off;
            r->n = (uint32_t)pcount_in[(size_t)s * k->held + j];
            off += (uint64_t)r->n * REC_LEN;
        }
    }
}

/* --group: each of this rank's partitions read and verified in turn, as a reduce task would. */
static void verify_kept(const kept_t *k, int ranks, const check_t *c)
{
    for (uint32_t j = 0; j < k->held; j++) {
        uint32_t part = (uint32_t)c->me + j * (uint32_t)ranks;
        if (part >= c->o->partitions)
            break;
        for (uint32_t round = 0; round < k->rounds; round++)
            for (int s = 0; s < ranks; s++) {
                const struct run *r =
                    &k->run[((size_t)round * (size_t)ranks + (size_t)s) * k->held + j];
                verify(k->data + r->off, r->n, c, part);
            }
    }
}

/* --group's round: packed by partition, counts exchanged, received into the kept buffer. */
static int round_grouped(const opts_t *o, int me, int ranks, uint32_t round, uint64_t first,
                         uint64_t n, bufs_t *b, pcount_t *want)
{
    pack_grouped(o, ranks, first, n, b, want);
    kept_t *k = &b->kept;
    if (MPI_Alltoall(b->pcount, (int)k->held, MPI_INT, b->pcount_in, (int)k->held, MPI_INT,
                     MPI_COMM_WORLD) != MPI_SUCCESS)
        return -1;
    uint64_t in = 0;
    for (int r = 0; r < ranks; r++) {
        b->rcount[r] = 0;
        for (uint32_t j = 0; j < k->held; j++)
            b->rcount[r] += b->pcount_in[(size_t)r * k->held + j] * REC_LEN;
        b->rdispl[r] = (int)in;
        in += (uint64_t)b->rcount[r];
    }
    if (in > INT32_MAX || k->used + in > k->cap) { /* the others are in the exchange: abort */
        fprintf(stderr, "mpi-shuffle: rank %d: %llu bytes more do not fit what --group keeps\n", me,
                (unsigned long long)in);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return -1;
    }
    uint8_t *dst = k->data + k->used;
    if (MPI_Alltoallv(b->send, b->scount, b->sdispl, MPI_BYTE, dst, b->rcount, b->rdispl, MPI_BYTE,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
        return -1;
    index_runs(k, round, ranks, b->rdispl, b->pcount_in, k->used);
    k->used += in;
    return 0;
}

/*
 * One round: this rank's records first .. first+n-1 (n may be 0), packed per
 * destination with no staging copy (pass 1 counts, pass 2 writes each record
 * at its place), exchanged, verified (--group: kept, indexed). 0, or -1
 * (said on stderr).
 */
static int round_run(const opts_t *o, int me, int ranks, uint32_t round, uint64_t first, uint64_t n,
                     bufs_t *b, const check_t *c, pcount_t *want)
{
    if (o->group)
        return round_grouped(o, me, ranks, round, first, n, b, want);
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
    verify(b->recv, in / REC_LEN, c, ~0u);
    return 0;
}

/* --group's buffers: counts, cursors, and a kept buffer of its partitions' share and a quarter. */
static int bufs_init_grouped(bufs_t *b, const opts_t *o, int ranks, uint64_t total, uint64_t rounds)
{
    kept_t *k = &b->kept;
    k->held = (o->partitions + (uint32_t)ranks - 1) / (uint32_t)ranks;
    k->rounds = (uint32_t)rounds;
    k->cap = (uint64_t)((double)total * k->held / o->partitions) * REC_LEN;
    k->cap += k->cap / 4 + REC_LEN * (uint64_t)ranks * rounds;
    k->data = malloc(k->cap);
    k->run = calloc(rounds * (uint64_t)ranks * k->held, sizeof(*k->run));
    b->pcursor = calloc(o->partitions, sizeof(*b->pcursor));
    b->pcount = calloc((size_t)ranks * k->held * 2, sizeof(int));
    if (k->data == NULL || k->run == NULL || b->pcursor == NULL || b->pcount == NULL)
        return -1;
    b->pcount_in = b->pcount + (size_t)ranks * k->held;
    memset(k->data, 0xa5, k->cap); /* resident before the clock, as a worker's arena */
    return 0;
}

/* The round's buffers; a receive buffer too unless --group receives into what it keeps. */
static int bufs_init(bufs_t *b, uint64_t per_round, int ranks, int group)
{
    b->seeds = malloc(per_round * sizeof(*b->seeds));
    b->dest = malloc(per_round * sizeof(*b->dest));
    b->send = malloc(per_round * REC_LEN);
    b->recv_cap = group ? 0 : per_round * REC_LEN;
    b->recv = group ? NULL : malloc(b->recv_cap);
    b->scount = calloc((size_t)ranks * 5, sizeof(int));
    if (b->seeds == NULL || b->dest == NULL || b->send == NULL || (b->recv == NULL && !group) ||
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
    if (b->recv != NULL)
        memset(b->recv, 0xa5, b->recv_cap);
    return 0;
}

static void bufs_free(bufs_t *b)
{
    free(b->kept.data);
    free(b->kept.run);
    free(b->pcursor);
    free(b->pcount);
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
                            "[--round 64M] [--group] [--json [FILE]] [--csv FILE]\n");
        MPI_Finalize();
        return 2;
    }
    uint64_t total = o.size / REC_LEN, first = rec_first(total, (uint32_t)ranks, (uint32_t)me);
    uint64_t mine = rec_count(total, (uint32_t)ranks, (uint32_t)me);
    uint64_t per_round = o.round / REC_LEN, my_rounds = (mine + per_round - 1) / per_round, rounds;
    bufs_t b;
    memset(&b, 0, sizeof(b));
    uint8_t *seen = calloc(total / 8 + 1, 1);
    pcount_t *want = calloc(o.partitions, sizeof(*want)), *got = calloc(o.partitions, sizeof(*got));
    verdict_t v = {0};
    check_t chk = {&o, me, ranks, total, seen, got, &v};
    MPI_Allreduce(&my_rounds, &rounds, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    int fail = bufs_init(&b, per_round, ranks, o.group) != 0 || seen == NULL || want == NULL ||
               got == NULL;
    if (!fail && o.group)
        fail = bufs_init_grouped(&b, &o, ranks, total, rounds) != 0;
    MPI_Allreduce(MPI_IN_PLACE, &fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (fail) {
        if (me == 0)
            fprintf(stderr, "mpi-shuffle: out of memory\n");
        goto out;
    }

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (uint64_t r = 0; r < rounds && !fail; r++) {
        uint64_t done = r * per_round, n = done >= mine ? 0 : mine - done;
        if (n > per_round)
            n = per_round;
        fail = round_run(&o, me, ranks, (uint32_t)r, first + done, n, &b, &chk, want) != 0;
    }
    if (o.group && !fail)
        verify_kept(&b.kept, ranks, &chk);
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
        perf_bool(&po, "group", o.group);
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
