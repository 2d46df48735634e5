/*
 * rs-sort: a distributed sort of Sort Benchmark records (perf/sort_records.h:
 * 100 bytes, a 10-byte key first) on rshuffle, validated as valsort does.
 *
 *   rs-sort [--size 1G] [--procs 4] [--tasks C] [--threads C] [--partitions P]
 *           [--skew none|zipf:S] [--seed N] [--output DIR] [--worker-mem BYTES]
 *           [--exchange rshuffle|none] [--sort radix|qsort] [--samples N]
 *           [--tls shm|tcp] [--host H] [--launcher local|mpi]
 *           [--json [FILE]] [--csv FILE] [--progress]
 *
 * Every process (forked here, or one per MPI rank with --launcher mpi) is a
 * worker, runs --tasks map tasks and reduces the partitions its own worker
 * holds, on --threads threads (each task its own pusher, each thread its
 * own reader session). Phases, each ended by a collective:
 *   sample  every map task samples its keys from (seed, index); the samples
 *           are gathered (by this driver, or MPI collectives) and every
 *           process picks the same partitions - 1 splitters
 *   map     generate records in chunks, range-partition, push
 *   reduce  read each partition (in place: the worker is in the process),
 *           sort it (MSD radix on the key), validate it, write it
 *           (--output DIR: DIR/part-NNNNN, raw records in key order)
 * Validation: every partition sorted, partition p's last key <= partition
 * p+1's first, the record count and the sum of per-record hashes equal at
 * input and output, per partition and in all; any mismatch: "ok": false and
 * exit status 1. --exchange none is the limit: one process, its threads,
 * the same phases with partitions handed over in memory (no shuffle).
 * --worker-mem below the data's share makes the workers spill.
 */
#include "launch.h"
#include "perf_json.h"
#include "perf_util.h"
#include "sort_records.h"
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/worker.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG      "rs-sort"
#define MAX_PROCS 64
#define CHUNK     8192 /* records generated at once by a map task */

typedef struct opts {
    uint64_t size, seed, worker_mem, samples;
    uint32_t procs, tasks, threads, partitions;
    double zipf;
    const char *skew, *output, *tls, *host;
    int mpi, local_exchange, use_qsort;
} opts_t;

static opts_t o;
static perf_out_t pout;
static sgen_t gen;

/* ------------------------------------------------------------ collectives */

/*
 * The processes' collectives: MPI's (perf/launch.h) with --launcher mpi;
 * locally, each forked process sends {op, len, bytes} on its pipe and the
 * driver (hub) answers every process with the combination.
 */
enum { OP_SUM = 1, OP_MAX = 2, OP_GATHER = 3 };
static int hub_in = -1, hub_out = -1; /* a forked process's pipes to the driver */
static uint32_t n_procs = 1, my_rank;

static void hub_call(uint32_t op, const void *buf, size_t len, void *out, size_t out_len)
{
    uint32_t head[2] = {op, (uint32_t)len};
    if (perf_write_all(hub_out, head, sizeof(head)) != 0 ||
        perf_write_all(hub_out, buf, len) != 0 || perf_read_all(hub_in, out, out_len, -1) != 0)
        _exit(1); /* the driver is gone (it says why) */
}

static void coll_sum(uint64_t *v, size_t n)
{
    if (o.mpi)
        launch_sum_u64(v, n);
    else if (n_procs > 1)
        hub_call(OP_SUM, v, n * 8, v, n * 8);
}

static void coll_max(double *v, size_t n)
{
    if (o.mpi)
        launch_max_f64(v, n);
    else if (n_procs > 1)
        hub_call(OP_MAX, v, n * 8, v, n * 8);
}

static void coll_gather(const void *mine, void *all, size_t len)
{
    if (o.mpi)
        launch_allgather(mine, all, len);
    else if (n_procs > 1)
        hub_call(OP_GATHER, mine, len, all, len * n_procs);
    else
        memmove(all, mine, len);
}

/* The driver's side: answers the n processes until they close their pipes; 0, or -1. */
static int hub_run(uint32_t n, const int *from, const int *to)
{
    uint8_t *acc = NULL, *in = NULL;
    int rc = 0;
    for (;;) {
        uint32_t head[2], h0[2] = {0, 0};
        size_t out_len = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (perf_read_all(from[i], head, sizeof(head), -1) != 0) {
                if (i == 0 && errno == EPIPE) /* done (a process gone mid-way fails below) */
                    goto out;
                rc = -1;
                goto out;
            }
            if (i == 0) {
                memcpy(h0, head, sizeof(h0));
                out_len = head[0] == OP_GATHER ? (size_t)head[1] * n : head[1];
                uint8_t *a = realloc(acc, out_len + 1), *b = a ? realloc(in, head[1] + 1) : NULL;
                if (a != NULL)
                    acc = a;
                if (b != NULL)
                    in = b;
                if (a == NULL || b == NULL) {
                    rc = -1;
                    goto out;
                }
            } else if (head[0] != h0[0] || head[1] != h0[1]) {
                fprintf(stderr, PROG ": process %u out of step\n", i);
                rc = -1;
                goto out;
            }
            uint8_t *dst = head[0] == OP_GATHER ? acc + (size_t)i * head[1] : (i ? in : acc);
            if (perf_read_all(from[i], dst, head[1], -1) != 0) {
                rc = -1;
                goto out;
            }
            if (i > 0 && head[0] == OP_SUM)
                for (size_t k = 0; k < head[1] / 8; k++)
                    ((uint64_t *)acc)[k] += ((uint64_t *)in)[k];
            if (i > 0 && head[0] == OP_MAX)
                for (size_t k = 0; k < head[1] / 8; k++)
                    if (((double *)in)[k] > ((double *)acc)[k])
                        ((double *)acc)[k] = ((double *)in)[k];
        }
        for (uint32_t i = 0; i < n; i++)
            if (perf_write_all(to[i], acc, out_len) != 0)
                rc = -1;
    }
out:
    free(acc);
    free(in);
    return rc;
}

/* --------------------------------------------------------------- the job */

/* What one process measures and finds (thread-seconds summed over its threads). */
typedef struct rank_stats {
    _Atomic uint64_t map_done, red_done; /* bytes: progress */
    double gen_s, push_s, read_s, sort_s, validate_s, write_s;
    uint64_t in_records, in_hash, failed, spilled, pushed_bytes;
    uint64_t read_bytes, in_place_bytes; /* frame bytes read, and of those read in place */
    pthread_mutex_t lock;
} rank_stats_t;

typedef struct job {
    rank_stats_t st;
    skey_t *spl;
    pcount_t *want; /* per partition: records and hash sum pushed (summed over processes) */
    spsum_t *parts; /* per partition: the output's sums (each from its one owner) */
    uint32_t *mine; /* the partitions this process reduces */
    uint32_t n_mine;
    _Atomic uint32_t next_task, next_part, threads_done;
    rs_shuffle_desc_t desc;
    const char **addrs;
    /* --exchange none: each thread's records per partition, in memory */
    uint8_t ***bucket;
    uint64_t **bucket_n, **bucket_cap;
} job_t;

static job_t J;

static uint64_t total_records(void)
{
    return o.size / REC_LEN;
}

static void stats_add(double *field, double v)
{
    pthread_mutex_lock(&J.st.lock);
    *field += v;
    pthread_mutex_unlock(&J.st.lock);
}

static void fail_rs(const char *what, rs_status_t s)
{
    fprintf(stderr, PROG ": process %u: %s: %s\n", my_rank, what, rs_strerror(s));
    pthread_mutex_lock(&J.st.lock);
    J.st.failed = 1;
    pthread_mutex_unlock(&J.st.lock);
}

/* Appends rec to thread t's in-memory bucket of partition p (--exchange none); 0 or -1. */
static int bucket_put(uint32_t t, uint32_t p, const uint8_t *rec)
{
    uint64_t n = J.bucket_n[t][p];
    if (n == J.bucket_cap[t][p]) {
        uint64_t cap = n ? 2 * n : 4096;
        uint8_t *b = realloc(J.bucket[t][p], cap * REC_LEN);
        if (b == NULL)
            return -1;
        J.bucket[t][p] = b;
        J.bucket_cap[t][p] = cap;
    }
    memcpy(J.bucket[t][p] + n * REC_LEN, rec, REC_LEN);
    J.bucket_n[t][p] = n + 1;
    return 0;
}

/* Map task m (of procs * tasks): generate, partition, push (or keep). 0, or -1. */
static int map_task(uint32_t t, uint32_t m, uint8_t *chunk, pcount_t *want, uint64_t *in)
{
    uint64_t maps = (uint64_t)n_procs * o.tasks, total = total_records();
    uint64_t first = rec_first(total, (uint32_t)maps, m), n = rec_count(total, (uint32_t)maps, m);
    rs_pusher_t *p = NULL;
    rs_status_t s = RS_OK;
    if (!o.local_exchange) {
        rs_pusher_config_t pc;
        rs_pusher_config_defaults(&pc);
        s = rs_pusher_config_from_env(&pc);
        if (s == RS_OK)
            s = rs_pusher_open(&J.desc, m, 0, &pc, &p);
        if (s != RS_OK) {
            fail_rs("rs_pusher_open", s);
            return -1;
        }
    }
    double gen_s = 0, push_s = 0;
    for (uint64_t done = 0; done < n && s == RS_OK;) {
        uint64_t k = n - done < CHUNK ? n - done : CHUNK;
        double t0 = perf_now_s();
        for (uint64_t i = 0; i < k; i++)
            srec_make(&gen, first + done + i, chunk + i * REC_LEN);
        in[0] += k;
        double t1 = perf_now_s();
        for (uint64_t i = 0; i < k && s == RS_OK; i++) {
            const uint8_t *rec = chunk + i * REC_LEN;
            uint32_t part = spart(J.spl, o.partitions, skey_get(rec));
            uint64_t h = srec_hash(rec); /* the input's checksum */
            in[1] += h;
            want[part].records++;
            want[part].sum += h;
            if (p != NULL)
                s = rs_pusher_append(p, part, rec, REC_LEN);
            else if (bucket_put(t, part, rec) != 0)
                s = RS_ERR_NOMEM;
        }
        push_s += perf_now_s() - t1;
        gen_s += t1 - t0;
        done += k;
        atomic_fetch_add(&J.st.map_done, k * REC_LEN);
    }
    rs_pusher_stats_t ps = {0};
    double t2 = perf_now_s();
    if (p != NULL && s == RS_OK && (s = rs_pusher_close(p, &ps)) != RS_OK)
        fail_rs("rs_pusher_close", s);
    else if (s != RS_OK)
        fail_rs(p != NULL ? "rs_pusher_append" : "out of memory", s);
    push_s += perf_now_s() - t2;
    rs_pusher_destroy(p);
    stats_add(&J.st.gen_s, gen_s);
    stats_add(&J.st.push_s, push_s);
    return s == RS_OK ? 0 : -1;
}

static void *map_thread(void *arg)
{
    uint32_t t = (uint32_t)(uintptr_t)arg;
    uint8_t *chunk = malloc(CHUNK * REC_LEN);
    pcount_t *want = calloc(o.partitions, sizeof(*want));
    uint64_t in[2] = {0, 0};
    if (chunk == NULL || want == NULL) {
        fail_rs("map", RS_ERR_NOMEM);
        goto out;
    }
    for (uint32_t i; (i = atomic_fetch_add(&J.next_task, 1)) < o.tasks;)
        if (map_task(t, my_rank * o.tasks + i, chunk, want, in) != 0)
            break;
    pthread_mutex_lock(&J.st.lock);
    for (uint32_t p = 0; p < o.partitions; p++) {
        J.want[p].records += want[p].records;
        J.want[p].sum += want[p].sum;
    }
    J.st.in_records += in[0];
    J.st.in_hash += in[1];
    pthread_mutex_unlock(&J.st.lock);
out:
    free(chunk);
    free(want);
    atomic_fetch_add(&J.threads_done, 1);
    return NULL;
}

/* A reduce thread's buffers, grown to the largest partition it sorts. */
typedef struct red_bufs {
    uint8_t *recs, *out;
    sent_t *ents, *tmp;
    uint64_t cap;
} red_bufs_t;

static int red_reserve(red_bufs_t *b, uint64_t n)
{
    if (n <= b->cap)
        return 0;
    uint64_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < n)
        cap *= 2;
    uint8_t *r = realloc(b->recs, cap * REC_LEN), *w = NULL;
    sent_t *e = NULL, *t = NULL;
    if (r != NULL)
        b->recs = r;
    if (r != NULL && (w = realloc(b->out, cap * REC_LEN)) != NULL)
        b->out = w;
    if (w != NULL && (e = realloc(b->ents, cap * sizeof(*e))) != NULL)
        b->ents = e;
    if (e != NULL && (t = realloc(b->tmp, cap * sizeof(*t))) != NULL)
        b->tmp = t;
    if (t == NULL)
        return -1;
    b->cap = cap;
    return 0;
}

/* Reads partition part into b->recs: its record count, or -1. */
static int64_t red_read(rs_reader_session_t *sess, uint32_t part, red_bufs_t *b)
{
    uint64_t n = 0;
    if (sess == NULL) { /* --exchange none: every thread's bucket */
        for (uint32_t t = 0; t < o.threads; t++)
            n += J.bucket_n[t][part];
        if (red_reserve(b, n) != 0)
            return -1;
        n = 0;
        for (uint32_t t = 0; t < o.threads; t++) {
            if (J.bucket_n[t][part] > 0)
                memcpy(b->recs + n * REC_LEN, J.bucket[t][part], J.bucket_n[t][part] * REC_LEN);
            n += J.bucket_n[t][part];
            free(J.bucket[t][part]);
            J.bucket[t][part] = NULL;
        }
        return (int64_t)n;
    }
    rs_reader_t *rd = NULL;
    rs_status_t s = rs_reader_open_in(sess, part, &rd);
    const void *rec;
    uint32_t len;
    while (s == RS_OK && (s = rs_reader_next(rd, &rec, &len)) == RS_OK && rec != NULL) {
        if (len != REC_LEN) {
            s = RS_ERR_BAD_LENGTH;
            break;
        }
        if (n == b->cap && red_reserve(b, n + 1) != 0) {
            s = RS_ERR_NOMEM;
            break;
        }
        memcpy(b->recs + n * REC_LEN, rec, REC_LEN);
        n++;
    }
    if (rd != NULL) {
        rs_reader_stats_t rst;
        rs_reader_stats(rd, &rst);
        pthread_mutex_lock(&J.st.lock);
        J.st.read_bytes += rst.bytes;
        J.st.in_place_bytes += rst.zero_copy_bytes;
        pthread_mutex_unlock(&J.st.lock);
    }
    rs_reader_close(rd);
    if (s != RS_OK) {
        fail_rs("reading a partition", s);
        return -1;
    }
    return (int64_t)n;
}

/* Writes the n records at out as DIR/part-NNNNN: 0, or -1 (said on stderr). */
static int red_write(uint32_t part, const uint8_t *out, uint64_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/part-%05u", o.output, part);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || perf_write_all(fd, out, n * REC_LEN) != 0 || close(fd) != 0) {
        fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void *red_thread(void *arg)
{
    (void)arg;
    red_bufs_t b = {0};
    rs_reader_session_t *sess = NULL;
    double read_s = 0, sort_s = 0, val_s = 0, write_s = 0;
    if (!o.local_exchange) {
        uint32_t *attempts = calloc((size_t)n_procs * o.tasks, sizeof(*attempts));
        rs_status_t s = attempts == NULL ? RS_ERR_NOMEM
                                         : rs_reader_session_open(&J.desc, n_procs * o.tasks,
                                                                  attempts, NULL, &sess);
        free(attempts);
        if (s != RS_OK) {
            fail_rs("rs_reader_session_open", s);
            atomic_fetch_add(&J.threads_done, 1);
            return NULL;
        }
    }
    for (uint32_t i; (i = atomic_fetch_add(&J.next_part, 1)) < J.n_mine;) {
        uint32_t part = J.mine[i];
        double t0 = perf_now_s();
        int64_t n = red_read(sess, part, &b);
        if (n < 0 || red_reserve(&b, (uint64_t)n) != 0) {
            fail_rs("reduce", RS_ERR_NOMEM);
            break;
        }
        double t1 = perf_now_s();
        ssort_records(b.recs, (uint64_t)n, b.out, b.ents, b.tmp, o.use_qsort);
        double t2 = perf_now_s();
        svalidate(b.out, (uint64_t)n, &J.parts[part]);
        double t3 = perf_now_s();
        if (o.output != NULL && red_write(part, b.out, (uint64_t)n) != 0) {
            fail_rs("write", RS_ERR_IO);
            break;
        }
        read_s += t1 - t0, sort_s += t2 - t1, val_s += t3 - t2, write_s += perf_now_s() - t3;
        atomic_fetch_add(&J.st.red_done, (uint64_t)n * REC_LEN); /* progress: partitions done */
    }
    rs_reader_session_close(sess);
    free(b.recs);
    free(b.out);
    free(b.ents);
    free(b.tmp);
    stats_add(&J.st.read_s, read_s);
    stats_add(&J.st.sort_s, sort_s);
    stats_add(&J.st.validate_s, val_s);
    stats_add(&J.st.write_s, write_s);
    atomic_fetch_add(&J.threads_done, 1);
    return NULL;
}

/* Runs fn on --threads threads; rank 0 says progress of counter (bytes of total). */
static void run_threads(void *(*fn)(void *), const char *what, _Atomic uint64_t *counter,
                        uint64_t total)
{
    pthread_t th[256];
    uint32_t started = 0;
    atomic_store(&J.threads_done, 0);
    for (; started < o.threads; started++)
        if (pthread_create(&th[started], NULL, fn, (void *)(uintptr_t)started) != 0)
            break;
    if (started < o.threads)
        fail_rs("pthread_create", RS_ERR_NOMEM);
    if (my_rank == 0 && pout.progress) {
        double t0 = perf_now_s();
        for (int done = 0; !done;) {
            done = atomic_load(&J.threads_done) >= started;
            /* process 0's share, scaled to all: an estimate until every thread is done */
            double est = done ? (double)total : (double)atomic_load(counter) * n_procs;
            perf_progress(&pout, what, est < (double)total ? est : (double)total, (double)total,
                          "B", t0, perf_now_s(), done);
            if (!done)
                usleep(200000);
        }
    }
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

/* This process's worker: NULL when it could not start (said on stderr). */
static rs_worker_t *worker_start(void)
{
    rs_worker_config_t wc;
    rs_worker_config_defaults(&wc);
    rs_status_t s = rs_worker_config_from_env(&wc);
    wc.mem_limit = o.worker_mem;
    rs_worker_t *w = NULL;
    if (s == RS_OK)
        s = rs_worker_create(NULL, &wc, &w);
    if (s == RS_OK && (s = rs_worker_listen(w, o.host, 0)) != RS_OK)
        rs_worker_destroy(w);
    if (s != RS_OK) {
        fprintf(stderr, PROG ": worker: %s\n", rs_strerror(s));
        return NULL;
    }
    return w;
}

/* What rank 0 reports: the phases' wall times and the sums of every process. */
typedef struct report {
    double sample_s, map_s, reduce_s, total_s, start_s;
    double thread_s[6]; /* generate, push, read, sort, validate, write: slowest process */
    uint64_t in_records, in_hash, failed, spilled, read_bytes, in_place_bytes;
} report_t;

static void report(const report_t *r, const char *verdict, int ok);

/* Process `rank` of n_procs: the whole job; its exit status. */
static int rank_main(void)
{
    uint64_t maps = (uint64_t)n_procs * o.tasks, total = total_records();
    uint64_t per_task = o.samples / maps + 1;
    static char name[RS_SHUFFLE_NAME_MAX];
    rs_worker_t *w = NULL;
    int rc = 1;
    report_t r = {0};
    double tw = perf_now_s();

    pthread_mutex_init(&J.st.lock, NULL);
    J.spl = calloc(o.partitions, sizeof(*J.spl));
    J.want = calloc(o.partitions, sizeof(*J.want));
    J.parts = calloc(o.partitions, sizeof(*J.parts));
    J.mine = calloc(o.partitions, sizeof(*J.mine));
    J.addrs = calloc(n_procs, sizeof(*J.addrs));
    char *names = calloc(n_procs, RS_SHUFFLE_NAME_MAX);
    uint64_t *samp = calloc(per_task * o.tasks * 2 + 1, 8);
    uint64_t *all_samp = calloc((per_task * o.tasks * 2 + 1) * n_procs, 8);
    uint64_t fail = J.spl == NULL || J.want == NULL || J.parts == NULL || J.mine == NULL ||
                    J.addrs == NULL || names == NULL || samp == NULL || all_samp == NULL;
    if (!fail && !o.local_exchange) {
        w = worker_start();
        name[0] = '\0';
        if (w == NULL || rs_worker_name(w, name, sizeof(name)) != RS_OK)
            fail = 1, name[0] = '\0';
    }
    if (!fail && o.local_exchange) {
        J.bucket = calloc(o.threads, sizeof(*J.bucket));
        J.bucket_n = calloc(o.threads, sizeof(*J.bucket_n));
        J.bucket_cap = calloc(o.threads, sizeof(*J.bucket_cap));
        fail = J.bucket == NULL || J.bucket_n == NULL || J.bucket_cap == NULL;
        for (uint32_t t = 0; t < o.threads && !fail; t++) {
            J.bucket[t] = calloc(o.partitions, sizeof(**J.bucket));
            J.bucket_n[t] = calloc(o.partitions, 8);
            J.bucket_cap[t] = calloc(o.partitions, 8);
            fail = J.bucket[t] == NULL || J.bucket_n[t] == NULL || J.bucket_cap[t] == NULL;
        }
    }
    if (names != NULL)
        coll_gather(name, names, RS_SHUFFLE_NAME_MAX);
    for (uint32_t i = 0; i < n_procs && names != NULL && !o.local_exchange; i++) {
        J.addrs[i] = names + (size_t)i * RS_SHUFFLE_NAME_MAX;
        if (J.addrs[i][0] == '\0')
            fail = 1;
    }
    coll_sum(&fail, 1);
    if (fail) {
        if (my_rank == 0)
            fprintf(stderr, PROG ": a process could not start (out of memory or its worker)\n");
        goto out;
    }
    J.desc = (rs_shuffle_desc_t){.shuffle_id = 27,
                                 .n_partitions = o.partitions,
                                 .n_workers = n_procs,
                                 .workers = J.addrs,
                                 .replicas = 1};
    for (uint32_t p = 0; p < o.partitions; p++) {
        uint32_t wk = 0;
        if (o.local_exchange || (rs_shuffle_place(&J.desc, p, &wk) == RS_OK && wk == my_rank))
            J.mine[J.n_mine++] = p;
    }
    double t0 = perf_now_s();
    r.start_s = t0 - tw;

    /* sample: every task's keys, gathered; the same splitters everywhere */
    uint64_t k = 0;
    for (uint32_t t = 0; t < o.tasks; t++) {
        uint32_t m = my_rank * o.tasks + t;
        skey_t *ks = malloc(per_task * sizeof(*ks));
        uint64_t got = ks ? ssample(&gen, rec_first(total, (uint32_t)maps, m),
                                    rec_count(total, (uint32_t)maps, m), ks, per_task)
                          : 0;
        for (uint64_t i = 0; i < got; i++)
            samp[1 + 2 * (k + i)] = ks[i].hi, samp[2 + 2 * (k + i)] = ks[i].lo;
        k += got;
        free(ks);
    }
    samp[0] = k;
    size_t slot = per_task * o.tasks * 2 + 1;
    coll_gather(samp, all_samp, slot * 8);
    skey_t *keys = malloc((per_task * o.tasks * n_procs + 1) * sizeof(*keys));
    uint64_t nk = 0;
    for (uint32_t i = 0; i < n_procs && keys != NULL; i++) {
        const uint64_t *s = all_samp + i * slot;
        for (uint64_t j = 0; j < s[0]; j++)
            keys[nk++] = (skey_t){s[1 + 2 * j], (uint16_t)s[2 + 2 * j]};
    }
    if (keys != NULL)
        ssplitters(keys, nk, o.partitions, J.spl);
    free(keys);
    double t1 = perf_now_s();

    /* map */
    run_threads(map_thread, "map", &J.st.map_done, total * REC_LEN);
    fail = J.st.failed;
    coll_sum(&fail, 1); /* also: every map task committed */
    double t2 = perf_now_s();

    /* reduce */
    if (!fail)
        run_threads(red_thread, "reduce", &J.st.red_done, total * REC_LEN);
    if (w != NULL) {
        rs_worker_stats_t ws;
        rs_worker_stats(w, &ws);
        J.st.spilled = ws.spilled_bytes;
    }
    uint64_t sums[6] = {J.st.in_records, J.st.in_hash,    J.st.failed | fail,
                        J.st.spilled,    J.st.read_bytes, J.st.in_place_bytes};
    coll_sum(sums, 6); /* also: every reader done before any worker goes */
    double t3 = perf_now_s();

    coll_sum(&J.want[0].records, 2 * (size_t)o.partitions);
    coll_sum(&J.parts[0].records, SPSUM_WORDS * (size_t)o.partitions);
    double times[11] = {t1 - t0,     t2 - t1,         t3 - t2,     t3 - t0,
                        r.start_s,   J.st.gen_s,      J.st.push_s, J.st.read_s,
                        J.st.sort_s, J.st.validate_s, J.st.write_s};
    for (int i = 5; i < 11; i++)
        times[i] /= o.threads; /* per thread: the phase's share of the wall time */
    coll_max(times, 11);
    r.sample_s = times[0], r.map_s = times[1], r.reduce_s = times[2], r.total_s = times[3];
    r.start_s = times[4];
    memcpy(r.thread_s, times + 5, sizeof(r.thread_s));
    r.in_records = sums[0], r.in_hash = sums[1], r.failed = sums[2], r.spilled = sums[3];
    r.read_bytes = sums[4], r.in_place_bytes = sums[5];

    char msg[256];
    int ok = !r.failed;
    if (!ok)
        snprintf(msg, sizeof(msg), "a phase failed");
    else
        ok = sverdict(J.parts, o.partitions, total, r.in_hash, msg, sizeof(msg)) == 0;
    for (uint32_t p = 0; p < o.partitions && ok; p++)
        if (J.want[p].records != J.parts[p].records || J.want[p].sum != J.parts[p].hash) {
            snprintf(msg, sizeof(msg), "partition %u: %llu records pushed, %llu sorted", p,
                     (unsigned long long)J.want[p].records, (unsigned long long)J.parts[p].records);
            ok = 0;
        }
    if (ok && r.in_records != total) {
        snprintf(msg, sizeof(msg), "%llu records generated, %llu asked",
                 (unsigned long long)r.in_records, (unsigned long long)total);
        ok = 0;
    }
    if (my_rank == 0)
        report(&r, msg, ok);
    rc = ok ? 0 : 1;
out:
    rs_worker_destroy(w);
    for (uint32_t t = 0; J.bucket != NULL && t < o.threads; t++) {
        for (uint32_t p = 0; J.bucket[t] != NULL && p < o.partitions; p++)
            free(J.bucket[t][p]);
        free(J.bucket[t]);
        free(J.bucket_n ? J.bucket_n[t] : NULL);
        free(J.bucket_cap ? J.bucket_cap[t] : NULL);
    }
    free(J.bucket), free(J.bucket_n), free(J.bucket_cap);
    free(J.spl), free(J.want), free(J.parts), free(J.mine), free(J.addrs);
    free(names);
    free(samp);
    free(all_samp);
    return rc;
}

static void report(const report_t *r, const char *verdict, int ok)
{
    uint64_t total = total_records(), largest = 0;
    for (uint32_t p = 0; p < o.partitions; p++)
        if (J.parts[p].records > largest)
            largest = J.parts[p].records;
    double mean = (double)total / o.partitions, skew = mean > 0 ? (double)largest / mean : 0;
    double gbps = r->total_s > 0 ? (double)(total * REC_LEN) * 8 / r->total_s / 1e9 : 0;
    const char *exch = o.local_exchange ? "none" : "rshuffle";
    printf("sort %s%s%s: %.2f GiB, %llu records, %u processes x %u threads, %u map tasks each, "
           "%u partitions, keys %s, exchange %s, %s sort\n",
           ok ? "valid" : "INVALID (", ok ? "" : verdict, ok ? "" : ")",
           (double)(total * REC_LEN) / (1 << 30), (unsigned long long)total, n_procs, o.threads,
           o.tasks, o.partitions, o.skew, exch, o.use_qsort ? "qsort" : "radix");
    printf("total %.3f s (%.2f Gbit/s): sample %.3f s, map %.3f s (generate %.3f, push %.3f), "
           "reduce %.3f s (read %.3f, sort %.3f, validate %.3f, write %.3f)\n",
           r->total_s, gbps, r->sample_s, r->map_s, r->thread_s[0], r->thread_s[1], r->reduce_s,
           r->thread_s[2], r->thread_s[3], r->thread_s[4], r->thread_s[5]);
    printf("partitions: largest %llu records, mean %.0f (%.3fx); spilled %.1f MiB; read %.1f MiB, "
           "%.1f MiB of it in place; workers started in %.3f s (%.0f MiB arenas)\n",
           (unsigned long long)largest, mean, skew, (double)r->spilled / (1 << 20),
           (double)r->read_bytes / (1 << 20), (double)r->in_place_bytes / (1 << 20), r->start_s,
           o.local_exchange ? 0.0 : (double)o.worker_mem / (1 << 20));
    perf_out_meta(&pout, o.local_exchange ? "-" : "ucx", o.local_exchange ? "-" : o.tls);
    if (o.mpi) {
        snprintf(pout.launcher, sizeof(pout.launcher), "mpi");
        pout.ranks = (int)n_procs;
    }
    perf_row(&pout);
    perf_str(&pout, "exchange", exch);
    perf_str(&pout, "launcher", o.mpi ? "mpi" : "local");
    perf_str(&pout, "algorithm", o.use_qsort ? "qsort" : "msd-radix");
    perf_str(&pout, "skew", o.skew);
    perf_u64(&pout, "procs", n_procs);
    perf_u64(&pout, "tasks", o.tasks);
    perf_u64(&pout, "threads", o.threads);
    perf_u64(&pout, "partitions", o.partitions);
    perf_u64(&pout, "bytes", total * REC_LEN);
    perf_u64(&pout, "records", total);
    perf_num(&pout, "total_s", r->total_s, 4);
    perf_num(&pout, "sample_s", r->sample_s, 4);
    perf_num(&pout, "map_s", r->map_s, 4);
    perf_num(&pout, "reduce_s", r->reduce_s, 4);
    perf_num(&pout, "generate_s", r->thread_s[0], 4);
    perf_num(&pout, "push_s", r->thread_s[1], 4);
    perf_num(&pout, "read_s", r->thread_s[2], 4);
    perf_num(&pout, "sort_s", r->thread_s[3], 4);
    perf_num(&pout, "validate_s", r->thread_s[4], 4);
    perf_num(&pout, "write_s", r->thread_s[5], 4);
    perf_num(&pout, "gbit_s", gbps, 3);
    perf_u64(&pout, "largest_partition", largest);
    perf_num(&pout, "mean_partition", mean, 1);
    perf_num(&pout, "largest_over_mean", skew, 3);
    perf_u64(&pout, "spilled_bytes", r->spilled);
    perf_u64(&pout, "read_bytes", r->read_bytes);
    perf_u64(&pout, "in_place_bytes", r->in_place_bytes);
    perf_u64(&pout, "worker_mem_bytes", o.local_exchange ? 0 : o.worker_mem);
    perf_num(&pout, "start_s", r->start_s, 4);
    perf_str(&pout, "output", o.output != NULL ? o.output : "-");
    perf_str(&pout, "verdict", verdict);
    perf_bool(&pout, "ok", ok);
    if (perf_out_emit(&pout) != 0)
        fprintf(stderr, PROG ": the results could not be written\n");
    fflush(stdout);
}

/* ---------------------------------------------------------------- driver */

static int usage_error(const char *a)
{
    fprintf(stderr, PROG ": bad argument '%s' (see rs-sort --help)\n", a);
    return -1;
}

static int parse_args(int argc, char **argv)
{
    int host_given = getenv("RSHUFFLE_TEST_HOST") != NULL, procs_given = 0;
    static char mpi_host[RS_SHUFFLE_ADDR_MAX];
    o = (opts_t){.size = 1ull << 30,
                 .seed = 1,
                 .procs = 4,
                 .threads = 1,
                 .skew = "none",
                 .tls = "shm",
                 .host = getenv("RSHUFFLE_TEST_HOST") ? getenv("RSHUFFLE_TEST_HOST") : "127.0.0.1"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            return usage_error(a);
        i++;
        if (strcmp(a, "--size") == 0)
            o.size = perf_arg_size(PROG, a, v, REC_LEN, 1ull << 40);
        else if (strcmp(a, "--procs") == 0)
            o.procs = (uint32_t)perf_arg_uint(PROG, a, v, 1, MAX_PROCS), procs_given = 1;
        else if (strcmp(a, "--tasks") == 0)
            o.tasks = (uint32_t)perf_arg_uint(PROG, a, v, 1, 1024);
        else if (strcmp(a, "--threads") == 0)
            o.threads = (uint32_t)perf_arg_uint(PROG, a, v, 1, 256);
        else if (strcmp(a, "--partitions") == 0)
            o.partitions = (uint32_t)perf_arg_uint(PROG, a, v, 1, 100000);
        else if (strcmp(a, "--seed") == 0)
            o.seed = perf_arg_uint(PROG, a, v, 0, UINT64_MAX);
        else if (strcmp(a, "--samples") == 0)
            o.samples = perf_arg_uint(PROG, a, v, 1, 100000000);
        else if (strcmp(a, "--worker-mem") == 0)
            o.worker_mem = perf_arg_size(PROG, a, v, 1 << 20, 1ull << 40);
        else if (strcmp(a, "--skew") == 0 && (o.zipf = sskew_parse(v)) >= 0)
            o.skew = v;
        else if (strcmp(a, "--output") == 0)
            o.output = v;
        else if (strcmp(a, "--exchange") == 0 && strcmp(v, "rshuffle") == 0)
            o.local_exchange = 0;
        else if (strcmp(a, "--exchange") == 0 && strcmp(v, "none") == 0)
            o.local_exchange = 1;
        else if (strcmp(a, "--sort") == 0 && (strcmp(v, "radix") == 0 || strcmp(v, "qsort") == 0))
            o.use_qsort = strcmp(v, "qsort") == 0;
        else if (strcmp(a, "--tls") == 0 && (strcmp(v, "shm") == 0 || strcmp(v, "tcp") == 0))
            o.tls = v;
        else if (strcmp(a, "--host") == 0)
            o.host = v, host_given = 1;
        else if (strcmp(a, "--launcher") == 0 && (strcmp(v, "local") == 0 || strcmp(v, "mpi") == 0))
            o.mpi = strcmp(v, "mpi") == 0;
        else
            return usage_error(a);
    }
    if (o.mpi && (procs_given || o.local_exchange)) {
        fprintf(stderr, PROG ": --launcher mpi runs one process per rank: no --procs, no "
                             "--exchange none\n");
        return -1;
    }
    if (o.mpi) {
        launch_start(PROG, "mpi", &argc, &argv);
        o.procs = (uint32_t)launch_size();
        if (!host_given)
            launch_host(mpi_host, sizeof(mpi_host)), o.host = mpi_host;
    }
    if (o.local_exchange)
        o.procs = 1;
    if (o.tasks == 0)
        o.tasks = o.threads;
    if (o.partitions == 0)
        o.partitions = 4 * o.procs * o.threads;
    if (o.samples == 0)
        o.samples = 1000 * (uint64_t)o.partitions;
    if (o.worker_mem == 0) /* room for the process's share with no spill */
        o.worker_mem = o.size / o.procs * 3 / 2 + (64ull << 20);
    if (o.output != NULL && mkdir(o.output, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, PROG ": --output %s: %s\n", o.output, strerror(errno));
        return -1;
    }
    if (sgen_init(&gen, o.seed, o.zipf) != 0)
        return -1;
    setenv("RSHUFFLE_TRANSPORT", "ucx", 1);
    if (getenv("UCX_TLS") == NULL) {
        /* tcp stays enabled with shm: UCX's connection manager needs it. */
        setenv("UCX_TLS", strcmp(o.tls, "shm") == 0 ? "posix,sysv,cma,self,tcp" : "tcp,self", 1);
        if (strncmp(o.host, "127.", 4) == 0)
            setenv("UCX_NET_DEVICES", "lo", 0);
    }
    return 0;
}

/* Forks the --procs processes, answers their collectives, reaps them: the exit status. */
static int run_local(void)
{
    pid_t pid[MAX_PROCS];
    int from[MAX_PROCS], to[MAX_PROCS], rc = 0;
    uint32_t started = 0;
    n_procs = o.procs;
    for (; started < o.procs; started++) {
        int rd, wr;
        pid[started] = perf_fork_piped(&rd, &wr); /* children die with the driver */
        if (pid[started] < 0)
            break;
        if (pid[started] == 0) {
            for (uint32_t j = 0; j < started; j++)
                close(from[j]), close(to[j]);
            hub_in = rd, hub_out = wr, my_rank = started;
            if (my_rank != 0) /* rank 0 alone reports */
                pout.json = 0, pout.csv_path = NULL, pout.progress = 0;
            _exit(rank_main());
        }
        from[started] = rd;
        to[started] = wr;
    }
    if (started < o.procs || hub_run(o.procs, from, to) != 0) {
        fprintf(stderr, PROG ": a process failed or ended early\n");
        rc = 1;
    }
    for (uint32_t i = 0; i < started; i++) {
        int st;
        close(to[i]);
        close(from[i]);
        if (rc != 0)
            kill(pid[i], SIGKILL);
        if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    perf_std_args(
        argc, argv,
        "usage: rs-sort [--size 1G] [--procs 4] [--tasks C] [--threads C] [--partitions P]\n"
        "               [--skew none|zipf:S] [--seed N] [--output DIR] [--worker-mem BYTES]\n"
        "               [--exchange rshuffle|none] [--sort radix|qsort] [--samples N]\n"
        "               [--tls shm|tcp] [--host H] [--launcher local|mpi]\n"
        "               [--json [FILE]] [--csv FILE] [--progress]\n"
        "A distributed sort of 100-byte records with 10-byte keys (the Sort Benchmark's\n"
        "layout) on rshuffle: sample, range-partition and push, read, sort, validate, write.\n"
        "Every process is a worker, runs --tasks map tasks and reduces its worker's\n"
        "partitions on --threads threads. --launcher mpi: one process per MPI rank.\n"
        "--exchange none: the same sort in one process, no shuffle (the limit).\n"
        "--output DIR: DIR/part-NNNNN, raw records in key order. P defaults to\n"
        "4 x procs x threads. Exit 1 when the output is not valid (man rs-sort).\n");
    perf_out_init(&pout, PROG, &argc, argv);
    if (parse_args(argc, argv) != 0)
        return 2;
    int rc;
    if (o.mpi) {
        n_procs = o.procs, my_rank = (uint32_t)launch_rank();
        if (my_rank != 0)
            pout.json = 0, pout.csv_path = NULL, pout.progress = 0;
        rc = rank_main();
        uint64_t bad = rc != 0;
        launch_sum_u64(&bad, 1);
        rc = bad ? 1 : 0;
    } else if (o.local_exchange || o.procs == 1) {
        n_procs = 1;
        rc = rank_main();
    } else {
        rc = run_local();
    }
    sgen_free(&gen);
    launch_end();
    return rc;
}
