/*
 * rs-shuffle-bench: a whole shuffle on a local cluster of processes.
 * Forks W workers, then M mappers that push generated 100-byte records
 * (perf/records.h), then R reducers that read every partition back and
 * verify each record (content, exactly once); prints a summary and, with
 * --json, one object.
 *
 *   rs-shuffle-bench [--size 1G] [--layout split|colocated]
 *                    [--mappers 2] [--workers 2] [--reducers 2] | [--procs 2]
 *                    [--partitions 200] [--codec none|lz4|snappy]
 *                    [--transport ucx|verbs] [--tls shm|tcp] [--host H]
 *                    [--buf BYTES] [--worker-mem BYTES] [--speculative]
 *                    [--sink [--sink-bufs N]] [--worker-addr HOST:PORT]...
 *                    [--launcher local|mpi] [--json [FILE]] [--csv FILE] [--progress]
 *                    [--replicas R] [--kill-worker push|read@FRACTION]
 *                    [--tasks N] [--threads C] [--warm] [--append copy|reserve]
 *
 * The transport defaults to RSHUFFLE_TRANSPORT (else ucx), the host to
 * RSHUFFLE_TEST_HOST (else 127.0.0.1); --tls picks UCX_TLS unless it is set.
 * --speculative runs every map twice (attempts 0 and 1; 1 wins). --sink
 * measures the push protocol alone: one mapper swaps pre-filled registered
 * buffers (codec none; N of them, default 8) into one worker that frees each
 * batch once committed. start_s: the workers' start-up, not in "seconds".
 * --layout split (the default) runs each role in processes of its own;
 * --layout colocated --procs N runs N processes that are each a worker, a
 * mapper and the reducer of the partitions their own worker holds (as an
 * MPI rank is both; perf/compare-mpi): "seconds" then runs from handing
 * out the workers' addresses to the last reducer's answer, no process start.
 * Throughputs are in gigabits per second (10^9 bit/s) of record bytes.
 * --worker-addr (repeatable; split layout, not with --sink) uses running
 * workers (rshuffled, say on another host) instead of forking them: their
 * count replaces --workers, their statistics are not read (rshuffle_info
 * --worker has them), the shuffle is dropped there at the end, and
 * UCX_NET_DEVICES=lo is set only if they are all on loopback.
 * --launcher mpi (run under mpirun or srun): every MPI rank is a worker, a
 * mapper and the reducer of its worker's partitions (the colocated layout
 * across ranks and hosts); run_launched. Output: perf/perf_json.h.
 * --replicas R (1..3, <= workers) writes every batch to R workers;
 * --kill-worker PHASE@F (split layout, forked workers) SIGKILLs worker 0 once
 * the fraction F of the bytes has been pushed (push) or read (read); every
 * record must still be read exactly once ("killed" in the results).
 * --tasks N --threads C (an engine's executors; forked layouts): each mapper
 * process runs N map tasks (maps m * N .. m * N + N - 1, each its own
 * pusher and commit) over C threads, and each reducer process reads every
 * partition it owns as a reduce task of its own (a reader session and a
 * reader) over C threads; the results gain tasks, threads and the per-task
 * open and commit microseconds (median, p99). Colocated, each process is
 * such an executor with its worker in-process, mapper then reducer.
 * Forked layouts also report each role's CPU-seconds (user + system) and
 * context switches (cpu_map_s, csw_map, ...; colocated: cpu_procs_s), from
 * wait4, and cpu_start_s: the workers' (colocated: the processes') CPU at
 * the start of the timed run, their start-up, included in their role's.
 * --warm: each mapper and reducer process readies its client before the
 * timed run, as an executor does at start (rs_pusher_warm: one push lane
 * per thread, connected to every worker, its pool resident; rs_reader_warm:
 * one read lane per thread, connected, a read buffer resident; the split
 * layout forks its reducers before the clock and starts them at the end of
 * the push), the way an MPI code has MPI_Init and a first touch of its
 * buffers behind it (perf/mpi-shuffle touches them before its clock
 * starts); the wait for every process's warm-up is warm_s, in neither
 * start_s nor "seconds".
 * --append reserve: mappers build each record in place in the pusher's
 * buffer (rs_pusher_reserve), as perf/mpi-shuffle builds its records in
 * its send buffer; copy (the default) builds it aside and appends it.
 */
#include "launch.h"
#include "perf_json.h"
#include "perf_util.h"
#include "records.h"
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/worker.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 256

typedef struct opts {
    uint64_t size;
    uint32_t mappers, workers, reducers, partitions, sink_bufs;
    rs_codec_t codec;
    const char *transport, *tls, *host;
    uint64_t buf, worker_mem;
    int speculative, sink, json;
    uint32_t n_ext; /* --worker-addr given: external workers in addrs[] */
    int colocated;  /* --layout colocated: o.mappers = o.workers = o.reducers = --procs */
    int mpi;        /* --launcher mpi: one colocated process per MPI rank */
    uint32_t replicas, killed;
    int kill_phase; /* --kill-worker: 0 none, 1 push, 2 read; at kill_frac of the bytes */
    double kill_frac, kill_s;
    uint32_t tasks, threads; /* --tasks, --threads: map tasks per mapper, threads per process */
    int task_mode;           /* either given: per-task pushers and reader sessions */
    int warm;                /* --warm: processes ready their clients before the timed run */
    int reserve;             /* --append reserve: records built in place (rs_pusher_reserve) */
} opts_t;

/* Shared with the children (MAP_SHARED before fork): progress counters. */
typedef struct shared {
    volatile uint64_t pushed[MAX_PROCS];
    volatile uint64_t read[MAX_PROCS];
    /* --warm: processes ready; the timed run starts; the read phase starts (split) */
    volatile uint32_t warmed, go, read_go;
} shared_t;

static opts_t o;
static perf_out_t pout;
static shared_t *sh;
static char addrs[MAX_PROCS][RS_SHUFFLE_NAME_MAX]; /* host:port, or a blob name (MPI) */
static const char *addr_ptrs[MAX_PROCS];

/* Maps: o.tasks per mapper process (1 unless --tasks). */
static uint32_t n_maps(void)
{
    return o.mappers * o.tasks;
}

static uint64_t records_of(uint32_t m)
{
    return rec_count(o.size / REC_LEN, n_maps(), m);
}

static uint64_t first_of(uint32_t m)
{
    return rec_first(o.size / REC_LEN, n_maps(), m);
}

static inline uint32_t partition_of(uint64_t seed)
{
    return rec_partition(seed, o.partitions);
}

static rs_shuffle_desc_t desc(void)
{
    rs_shuffle_desc_t d = {.shuffle_id = 7,
                           .n_partitions = o.partitions,
                           .n_workers = o.workers,
                           .workers = addr_ptrs,
                           .replicas = o.replicas};
    return d;
}

/* ---------------------------------------------------------------- worker */

/* Creates a worker listening on o.host: the worker and its port, or NULL (said on stderr). */
static rs_worker_t *worker_start(uint16_t *port_p)
{
    rs_worker_config_t wc;
    rs_worker_config_defaults(&wc);
    rs_status_t s = rs_worker_config_from_env(&wc);
    wc.mem_limit = o.worker_mem;
    wc.sink = o.sink;
    rs_worker_t *w = NULL;
    if (s == RS_OK)
        s = rs_worker_create(NULL, &wc, &w);
    if (s == RS_OK && (s = rs_worker_listen(w, o.host, 0)) != RS_OK)
        rs_worker_destroy(w);
    if (s != RS_OK) {
        fprintf(stderr, "rs-shuffle-bench: worker: %s\n", rs_strerror(s));
        return NULL;
    }
    *port_p = rs_worker_port(w);
    return w;
}

static void worker_main(int fd)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    uint16_t port = 0;
    rs_worker_t *w = worker_start(&port);
    perf_write_all(fd, &port, sizeof(port));
    if (w == NULL)
        _exit(1);
    int sig;
    sigwait(&set, &sig);
    rs_worker_stats_t st;
    rs_worker_stats(w, &st);
    perf_write_all(fd, &st, sizeof(st));
    rs_worker_destroy(w);
    _exit(0);
}

/* ---------------------------------------------------------------- mapper */

typedef struct map_result {
    int32_t status;
    uint64_t bytes, batches, grant_requests, merged_writes;
    double seconds; /* from the first record (or swap) to the end of close */
} map_result_t;

/* Map m's records; progress goes to sh->pushed[slot] (its process's; threads add). */
static rs_status_t map_append(rs_pusher_t *p, uint32_t m, uint32_t slot, pcount_t *counts)
{
    uint8_t rec[REC_LEN];
    uint64_t first = first_of(m), n = records_of(m), told = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id = first + i, seed = rec_seed(id);
        uint32_t part = partition_of(seed);
        rs_status_t s;
        if (o.reserve) { /* built in place, as a serializer would */
            void *at;
            if ((s = rs_pusher_reserve(p, part, REC_LEN, &at)) != RS_OK)
                return s;
            rec_make(id, seed, at);
        } else {
            rec_make(id, seed, rec);
            if ((s = rs_pusher_append(p, part, rec, REC_LEN)) != RS_OK)
                return s;
        }
        counts[part].records++;
        counts[part].sum += seed;
        if ((i & 4095) == 4095) {
            __atomic_fetch_add(&sh->pushed[slot], (i + 1 - told) * REC_LEN, __ATOMIC_RELAXED);
            told = i + 1;
        }
    }
    __atomic_fetch_add(&sh->pushed[slot], (n - told) * REC_LEN, __ATOMIC_RELAXED);
    return RS_OK;
}

/*
 * Sink mode: pre-filled buffers, swapped again and again (the records
 * repeat). The pool holds exactly these (--sink-bufs), so every buffer the
 * writer gets back is a pre-filled one and they all stay in cache.
 */
#define SINK_BUFS_MAX 64
static rs_status_t map_swap(rs_pusher_t *p, uint32_t m, uint64_t *pushed, double *t0)
{
    const uint32_t NBUF = o.sink_bufs;
    rs_pbuf_t *bufs[SINK_BUFS_MAX];
    size_t per = o.buf / rs_record_size(REC_LEN), used = per * rs_record_size(REC_LEN);
    uint8_t rec[REC_LEN];
    for (uint32_t b = 0; b < NBUF; b++) {
        rs_status_t s = rs_pusher_buf_get(p, o.buf, &bufs[b]);
        if (s != RS_OK)
            return s;
        for (size_t i = 0; i < per; i++) {
            rec_make(i, rec_seed(i), rec);
            rs_record_put(bufs[b]->data + i * rs_record_size(REC_LEN), rec, REC_LEN);
        }
    }
    for (uint32_t b = 1; b < NBUF; b++)
        rs_pusher_buf_put(p, bufs[b]);
    rs_pbuf_t *buf = bufs[0];
    uint64_t n = o.size / o.buf;
    *t0 = perf_now_s();
    for (uint64_t i = 0; i < n; i++) {
        rs_status_t s = rs_pusher_swap(p, 0, buf, used, &buf);
        if (s != RS_OK)
            return s;
        *pushed += used;
        sh->pushed[m] = *pushed;
    }
    rs_pusher_buf_put(p, buf);
    return RS_OK;
}

/* Per-task microseconds: open, and close + destroy (the commit). */
typedef struct task_us {
    double open_us, commit_us;
} task_us_t;

/* A map task's pusher configuration. */
static rs_status_t map_config(rs_pusher_config_t *pc)
{
    rs_pusher_config_defaults(pc);
    rs_status_t s = rs_pusher_config_from_env(pc);
    pc->codec = o.codec;
    pc->buf_len = o.buf;
    if (o.sink) /* the pre-filled buffers and nothing else (see map_swap) */
        pc->pool_bytes = o.sink_bufs * (o.buf + RS_PBUF_HEAD_ROOM + 64);
    return s;
}

/* Waits (bounded: 600 s) until the parent sets *flag (go_set). */
static void go_wait(volatile uint32_t *flag)
{
    double limit = perf_now_s() + 600;
    while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE) && perf_now_s() < limit) {
        struct timespec ts = {.tv_sec = 1};
        syscall(SYS_futex, flag, FUTEX_WAIT, 0, &ts, NULL, 0);
    }
}

static void go_set(volatile uint32_t *flag)
{
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, flag, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/*
 * --warm: readies this process's client (push_lanes push lanes, read_lanes
 * read lanes), tells the parent, and waits for *go unless go is NULL. A
 * failed warm-up is said and the tasks go on without it.
 */
static void proc_warm(uint32_t push_lanes, uint32_t read_lanes, volatile uint32_t *go)
{
    rs_status_t s = RS_OK;
    rs_shuffle_desc_t d = desc();
    if (push_lanes > 0) {
        rs_pusher_config_t pc;
        s = map_config(&pc);
        if (s == RS_OK)
            s = rs_pusher_warm(&d, &pc, push_lanes);
    }
    if (s == RS_OK && read_lanes > 0)
        s = rs_reader_warm(&d, NULL, read_lanes);
    if (s != RS_OK)
        fprintf(stderr, "rs-shuffle-bench: warming the client: %s\n", rs_strerror(s));
    __atomic_fetch_add(&sh->warmed, 1, __ATOMIC_SEQ_CST);
    if (go != NULL)
        go_wait(go);
}

/* One map task (map m, attempt): pushes its records into counts, adds to *r. */
static rs_status_t map_task(uint32_t m, uint32_t slot, uint32_t attempt, pcount_t *counts,
                            map_result_t *r, task_us_t *us)
{
    rs_pusher_config_t pc;
    rs_status_t s = map_config(&pc);
    rs_shuffle_desc_t d = desc();
    rs_pusher_t *p = NULL;
    double t_open = perf_now_s();
    if (s == RS_OK)
        s = rs_pusher_open(&d, m, attempt, &pc, &p);
    uint64_t pushed = 0;
    double t0 = perf_now_s();
    us->open_us = (t0 - t_open) * 1e6;
    if (s == RS_OK)
        s = o.sink ? map_swap(p, slot, &pushed, &t0) : map_append(p, m, slot, counts);
    rs_pusher_stats_t ps = {0};
    double t_close = perf_now_s();
    if (s == RS_OK)
        s = rs_pusher_close(p, &ps);
    rs_pusher_destroy(p);
    double t1 = perf_now_s();
    us->commit_us = (t1 - t_close) * 1e6;
    r->seconds += t1 - t0;
    if (s != RS_OK)
        fprintf(stderr, "rs-shuffle-bench: map %u attempt %u: %s\n", m, attempt, rs_strerror(s));
    r->bytes += o.sink ? pushed : ps.raw_bytes;
    r->batches += ps.batches;
    r->grant_requests += ps.grant_requests;
    r->merged_writes += ps.merged_writes;
    return s;
}

typedef struct map_thread {
    uint32_t proc, attempt, first, n; /* tasks first, first + threads, ... of the process */
    pcount_t *counts;
    map_result_t r;
    task_us_t *us; /* per task of the process */
    rs_status_t s;
} map_thread_t;

static void *map_thread_main(void *arg)
{
    map_thread_t *t = arg;
    for (uint32_t k = t->first; k < o.tasks && t->s == RS_OK; k += o.threads)
        t->s = map_task(t->proc * o.tasks + k, t->proc, t->attempt, t->counts, &t->r, &t->us[k]);
    return NULL;
}

/*
 * Runs mapper process m's tasks (attempt) over o.threads threads and sends
 * its result, counts and per-task microseconds on fd: 0, or 1 if one failed.
 */
static int map_run(int fd, uint32_t m, uint32_t attempt)
{
    uint32_t nt = o.threads < o.tasks ? o.threads : o.tasks;
    pcount_t *counts = calloc((size_t)o.partitions * nt, sizeof(*counts));
    task_us_t *us = calloc(o.tasks, sizeof(*us));
    map_thread_t th[64];
    pthread_t tid[64];
    map_result_t r = {0};
    rs_status_t s = counts != NULL && us != NULL ? RS_OK : RS_ERR_NOMEM;
    if (o.warm && !o.mpi) /* launched ranks warm before their barrier (run_launched) */
        proc_warm(nt, o.colocated ? o.threads : 0, &sh->go); /* colocated: it reads too */
    double t0 = perf_now_s();
    for (uint32_t i = 0; i < nt && s == RS_OK; i++) {
        th[i] = (map_thread_t){.proc = m,
                               .attempt = attempt,
                               .first = i,
                               .counts = counts + (size_t)i * o.partitions,
                               .us = us};
        if (nt == 1)
            map_thread_main(&th[0]); /* no thread of its own: as one map process always ran */
        else if (pthread_create(&tid[i], NULL, map_thread_main, &th[i]) != 0)
            th[i].s = RS_ERR_NOMEM, nt = i + 1;
    }
    for (uint32_t i = 0; i < nt && s == RS_OK; i++) {
        if (nt > 1 && th[i].s != RS_ERR_NOMEM)
            pthread_join(tid[i], NULL);
        if (th[i].s != RS_OK)
            r.status = th[i].s;
        r.bytes += th[i].r.bytes;
        r.batches += th[i].r.batches;
        r.grant_requests += th[i].r.grant_requests;
        r.merged_writes += th[i].r.merged_writes;
        if (i > 0) {
            for (uint32_t p = 0; p < o.partitions; p++) {
                counts[p].records += counts[(size_t)i * o.partitions + p].records;
                counts[p].sum += counts[(size_t)i * o.partitions + p].sum;
            }
        }
    }
    /* One task: its own push time as before; several: the process's, open to last commit. */
    if (s != RS_OK)
        r.status = s;
    else
        r.seconds = o.task_mode ? perf_now_s() - t0 : th[0].r.seconds;
    perf_write_all(fd, &r, sizeof(r));
    perf_write_all(fd, counts, o.partitions * sizeof(*counts));
    if (o.task_mode)
        perf_write_all(fd, us, o.tasks * sizeof(*us));
    free(counts);
    free(us);
    return r.status == RS_OK ? 0 : 1;
}

/* --------------------------------------------------------------- reducer */

typedef struct red_result {
    int32_t status;
    uint64_t records, bad, dups, bytes;
} red_result_t;

/*
 * Does reducer r read partition part? split: every o.reducers-th one;
 * colocated: those its own process's worker holds, so reads stay local.
 */
static int reduces(uint32_t r, uint32_t part)
{
    if (!o.colocated)
        return part % o.reducers == r;
    rs_shuffle_desc_t d = desc();
    uint32_t w;
    return rs_shuffle_place(&d, part, &w) == RS_OK && w == r;
}

/* What one reducer process's threads share: its partitions, the bitmap of ids read. */
typedef struct red_ctx {
    uint32_t r;
    uint64_t total;
    uint8_t *seen;
    pcount_t *counts;
    uint32_t *attempts;
    task_us_t *us; /* per partition: a reduce task's open */
} red_ctx_t;

typedef struct red_thread {
    red_ctx_t *c;
    uint32_t first; /* this thread's share: the first-th, first + threads-th, ... partition */
    uint8_t *seen;  /* the ids this thread read: its own bitmap, merged into c->seen at the end
                     * (a shared one, updated atomically, bounced its lines between cores) */
    red_result_t res;
    rs_status_t s;
} red_thread_t;

/*
 * Reads partition part in sess, verifying every record into t->res and t->c;
 * task mode: the reduce task's open (since t_open) is timed.
 */
static rs_status_t read_partition(red_thread_t *t, rs_reader_session_t *sess, uint32_t part,
                                  double t_open)
{
    red_ctx_t *c = t->c;
    rs_reader_t *rd;
    rs_status_t s = rs_reader_open_in(sess, part, &rd);
    if (o.task_mode)
        c->us[part].open_us = (perf_now_s() - t_open) * 1e6;
    if (s != RS_OK)
        return s;
    const void *rec;
    uint32_t len;
    uint64_t n = 0;
    while ((s = rs_reader_next(rd, &rec, &len)) == RS_OK && rec != NULL) {
        uint64_t id = 0, seed = 0;
        if (len >= 8)
            memcpy(&id, rec, 8);
        if (len == REC_LEN)
            seed = rec_seed(id);
        if (len != REC_LEN || id >= c->total || !rec_ok(rec, id, seed) ||
            partition_of(seed) != part) {
            t->res.bad++;
            continue;
        }
        uint8_t bit = (uint8_t)(1u << (id % 8));
        if (t->seen[id / 8] & bit)
            t->res.dups++;
        t->seen[id / 8] |= bit;
        c->counts[part].records++; /* one thread per partition */
        c->counts[part].sum += seed;
        t->res.records++;
        t->res.bytes += REC_LEN;
        if ((++n & 4095) == 0)
            __atomic_fetch_add(&sh->read[c->r], 4096 * REC_LEN, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&sh->read[c->r], (n & 4095) * REC_LEN, __ATOMIC_RELAXED);
    rs_reader_close(rd);
    return s;
}

/*
 * The thread's partitions: one session for them all, or (task mode) each a
 * reduce task of its own: a session and a reader, the open timed.
 */
static void *red_thread_main(void *arg)
{
    red_thread_t *t = arg;
    red_ctx_t *c = t->c;
    rs_shuffle_desc_t d = desc();
    rs_reader_session_t *sess = NULL;
    if (!o.task_mode)
        t->s = rs_reader_session_open(&d, n_maps(), c->attempts, NULL, &sess);
    uint32_t k = 0;
    for (uint32_t part = 0; part < o.partitions && t->s == RS_OK; part++) {
        if (!reduces(c->r, part) || k++ % o.threads != t->first)
            continue;
        double t0 = perf_now_s();
        if (o.task_mode)
            t->s = rs_reader_session_open(&d, n_maps(), c->attempts, NULL, &sess);
        if (t->s == RS_OK)
            t->s = read_partition(t, sess, part, t0);
        if (o.task_mode) {
            rs_reader_session_close(sess);
            sess = NULL;
        }
    }
    rs_reader_session_close(sess);
    return NULL;
}

/* Reads reducer r's partitions, verifies them and sends the result on fd: 0, or 1 if it failed. */
static int reduce_run(int fd, uint32_t r)
{
    if (o.warm && !o.colocated && !o.mpi) /* split: forked before the clock, read at t1 */
        proc_warm(0, o.threads, &sh->read_go);
    red_ctx_t c = {.r = r, .total = o.size / REC_LEN};
    c.seen = calloc(c.total / 8 + 1, 1);
    c.counts = calloc(o.partitions, sizeof(*c.counts));
    c.attempts = calloc(n_maps(), sizeof(*c.attempts));
    c.us = calloc(o.partitions, sizeof(*c.us));
    red_result_t res = {0};
    rs_status_t s = c.seen && c.counts && c.attempts && c.us ? RS_OK : RS_ERR_NOMEM;
    for (uint32_t m = 0; s == RS_OK && m < n_maps(); m++)
        c.attempts[m] = o.speculative ? 1 : 0;
    red_thread_t th[64];
    pthread_t tid[64];
    uint32_t nt = s == RS_OK ? o.threads : 0;
    const size_t bitmap = c.total / 8 + 1;
    for (uint32_t i = 0; i < nt; i++) {
        th[i] = (red_thread_t){.c = &c, .first = i, .seen = i == 0 ? c.seen : calloc(bitmap, 1)};
        if (th[i].seen == NULL)
            th[i].s = RS_ERR_NOMEM;
        else if (nt == 1)
            red_thread_main(&th[0]);
        else if (pthread_create(&tid[i], NULL, red_thread_main, &th[i]) != 0)
            th[i].s = RS_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < nt; i++) {
        if (nt > 1 && th[i].s != RS_ERR_NOMEM)
            pthread_join(tid[i], NULL);
        if (th[i].s != RS_OK)
            s = th[i].s;
        res.records += th[i].res.records;
        res.bad += th[i].res.bad;
        res.dups += th[i].res.dups;
        res.bytes += th[i].res.bytes;
        if (i == 0 || th[i].seen == NULL)
            continue;
        for (size_t b = 0; b < bitmap; b++) { /* an id two threads read is a duplicate too */
            res.dups += (uint64_t)__builtin_popcount(c.seen[b] & th[i].seen[b]);
            c.seen[b] |= th[i].seen[b];
        }
        free(th[i].seen);
    }
    sh->read[r] = res.bytes;
    if (s != RS_OK)
        fprintf(stderr, "rs-shuffle-bench: reducer %u: %s\n", r, rs_strerror(s));
    res.status = s;
    perf_write_all(fd, &res, sizeof(res));
    perf_write_all(fd, c.counts, o.partitions * sizeof(*c.counts));
    perf_write_all(fd, c.seen, bitmap);
    if (o.task_mode)
        perf_write_all(fd, c.us, o.partitions * sizeof(*c.us));
    free(c.attempts);
    free(c.counts);
    free(c.seen);
    free(c.us);
    return s == RS_OK ? 0 : 1;
}

/* ---------------------------------------------------------------- parent */

static pid_t spawn(int *fd_p, void (*fn)(int, uint32_t, uint32_t), uint32_t a, uint32_t b)
{
    int rd, wr;
    pid_t pid = perf_fork_piped(&rd, &wr); /* children die with the bench */
    if (pid == 0) {
        close(rd);
        fn(wr, a, b);
        _exit(0);
    }
    if (pid > 0) {
        close(wr);
        *fd_p = rd;
    }
    return pid;
}

static void worker_fn(int fd, uint32_t a, uint32_t b)
{
    (void)a;
    (void)b;
    worker_main(fd);
}
static void mapper_fn(int fd, uint32_t m, uint32_t attempt)
{
    _exit(map_run(fd, m, attempt));
}
static void reducer_fn(int fd, uint32_t r, uint32_t b)
{
    (void)b;
    _exit(reduce_run(fd, r));
}

/*
 * Progress of a phase until each child's result pipe (fds) has bytes or was
 * closed: a child that writes its result is done. (Waiting for it to exit
 * would deadlock: a reducer's result, its bitmap, outgrows the pipe.)
 */
static void progress(const char *what, volatile uint64_t *v, uint32_t n, uint64_t total,
                     const int *fds, uint32_t nfds)
{
    double t0 = perf_now_s();
    if (!pout.progress)
        return;
    for (;;) {
        int running = 0;
        for (uint32_t i = 0; i < nfds; i++) {
            struct pollfd pfd = {.fd = fds[i], .events = POLLIN};
            if (poll(&pfd, 1, 0) == 0)
                running = 1;
        }
        uint64_t sum = 0;
        for (uint32_t i = 0; i < n; i++)
            sum += v[i];
        perf_progress(&pout, what, (double)sum, (double)total, "B", t0, perf_now_s(), !running);
        if (!running)
            break;
        usleep(200000);
    }
}

/* --kill-worker PHASE@FRACTION: 0, or -1 when malformed. */
static int parse_kill(const char *v)
{
    char *end;
    const char *at = strchr(v, '@');
    if (at == NULL)
        return -1;
    if ((size_t)(at - v) == 4 && strncmp(v, "push", 4) == 0)
        o.kill_phase = 1;
    else if ((size_t)(at - v) == 4 && strncmp(v, "read", 4) == 0)
        o.kill_phase = 2;
    else
        return -1;
    o.kill_frac = strtod(at + 1, &end);
    return *end == '\0' && o.kill_frac > 0 && o.kill_frac < 1 ? 0 : -1;
}

/*
 * --kill-worker: SIGKILLs worker 0 (pid victim) once the children's counters
 * v[0..n) reach the fraction of total, or all of pids[0..npids) ended.
 */
static void kill_hook(volatile uint64_t *v, uint32_t n, uint64_t total, pid_t *pids, uint32_t npids,
                      pid_t victim)
{
    uint64_t at = (uint64_t)(o.kill_frac * (double)total);
    double t0 = perf_now_s();
    for (int running = 1; running;) {
        uint64_t sum = 0;
        for (uint32_t i = 0; i < n; i++)
            sum += v[i];
        if (sum >= at)
            break;
        running = 0;
        for (uint32_t i = 0; i < npids; i++)
            running |= kill(pids[i], 0) == 0 && waitpid(pids[i], NULL, WNOHANG) == 0;
        usleep(500);
    }
    kill(victim, SIGKILL);
    o.killed = 1;
    o.kill_s = perf_now_s() - t0;
}

static int parse_args(int argc, char **argv)
{
    int roles = 0; /* --mappers, --workers or --reducers given */
    int split = 0, host_given = getenv("RSHUFFLE_TEST_HOST") != NULL;
    static char mpi_host[RS_SHUFFLE_ADDR_MAX];
    uint32_t procs = 2;
    o = (opts_t){.size = 1ull << 30,
                 .tasks = 1,
                 .threads = 1,
                 .mappers = 2,
                 .workers = 2,
                 .reducers = 2,
                 .partitions = 200, /* an engine's default, not a benchmark's */
                 .codec = RS_CODEC_NONE,
                 .transport = getenv("RSHUFFLE_TRANSPORT") ? getenv("RSHUFFLE_TRANSPORT") : "ucx",
                 .tls = "shm",
                 .host = getenv("RSHUFFLE_TEST_HOST") ? getenv("RSHUFFLE_TEST_HOST") : "127.0.0.1",
                 .buf = 256 << 10,
                 .sink_bufs = 8,
                 .replicas = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        int val = 1;
        if (strcmp(a, "--speculative") == 0)
            o.speculative = 1, val = 0;
        else if (strcmp(a, "--sink") == 0)
            o.sink = 1, val = 0;
        else if (strcmp(a, "--warm") == 0)
            o.warm = 1, val = 0;
        else if (strcmp(a, "--append") == 0 &&
                 (strcmp(v, "copy") == 0 || strcmp(v, "reserve") == 0))
            o.reserve = strcmp(v, "reserve") == 0;
        else if (strcmp(a, "--size") == 0)
            val = rs_parse_size(v, &o.size) == RS_OK ? 1 : -1;
        else if (strcmp(a, "--buf") == 0)
            val = rs_parse_size(v, &o.buf) == RS_OK ? 1 : -1;
        else if (strcmp(a, "--worker-mem") == 0)
            val = rs_parse_size(v, &o.worker_mem) == RS_OK ? 1 : -1;
        else if (strcmp(a, "--mappers") == 0)
            o.mappers = (uint32_t)perf_arg_uint("rs-shuffle-bench", a, v, 1, UINT32_MAX), roles = 1;
        else if (strcmp(a, "--workers") == 0)
            o.workers = (uint32_t)perf_arg_uint("rs-shuffle-bench", a, v, 1, UINT32_MAX), roles = 1;
        else if (strcmp(a, "--reducers") == 0)
            o.reducers = (uint32_t)perf_arg_uint("rs-shuffle-bench", a, v, 1, UINT32_MAX),
            roles = 1;
        else if (strcmp(a, "--procs") == 0)
            procs = (uint32_t)perf_arg_uint("rs-shuffle-bench", a, v, 1, MAX_PROCS / 2), roles |= 2;
        else if (strcmp(a, "--layout") == 0 && strcmp(v, "colocated") == 0)
            o.colocated = 1;
        else if (strcmp(a, "--layout") == 0 && strcmp(v, "split") == 0)
            o.colocated = 0, split = 1;
        else if (strcmp(a, "--launcher") == 0 && (strcmp(v, "local") == 0 || strcmp(v, "mpi") == 0))
            o.mpi = strcmp(v, "mpi") == 0;
        else if (strcmp(a, "--sink-bufs") == 0)
            o.sink_bufs = (uint32_t)perf_arg_uint("rs-shuffle-bench", a, v, 1, UINT32_MAX);
        else if (strcmp(a, "--partitions") == 0)
            o.partitions = (uint32_t)perf_arg_uint("rs-shuffle-bench", a, v, 1, UINT32_MAX);
        else if (strcmp(a, "--tasks") == 0)
            o.tasks = (uint32_t)perf_arg_uint("rs-shuffle-bench", a, v, 1, 1u << 20),
            o.task_mode = 1;
        else if (strcmp(a, "--threads") == 0)
            o.threads = (uint32_t)perf_arg_uint("rs-shuffle-bench", a, v, 1, 64), o.task_mode = 1;
        else if (strcmp(a, "--codec") == 0)
            val = rs_codec_from_name(v, &o.codec) == RS_OK ? 1 : -1;
        else if (strcmp(a, "--transport") == 0)
            o.transport = v;
        else if (strcmp(a, "--tls") == 0)
            o.tls = v;
        else if (strcmp(a, "--host") == 0)
            o.host = v, host_given = 1;
        else if (strcmp(a, "--replicas") == 0)
            o.replicas = (uint32_t)perf_arg_uint("rs-shuffle-bench", a, v, 1, 3);
        else if (strcmp(a, "--kill-worker") == 0)
            val = parse_kill(v) == 0 ? 1 : -1;
        else if (strcmp(a, "--worker-addr") == 0) {
            if (o.n_ext >= MAX_PROCS || strlen(v) >= sizeof(addrs[0]) || strchr(v, ':') == NULL)
                val = -1;
            else
                snprintf(addrs[o.n_ext], sizeof(addrs[0]), "%s", v), o.n_ext++;
        } else
            val = -1;
        if (val < 0 || (val == 1 && i + 1 >= argc)) {
            fprintf(stderr,
                    "rs-shuffle-bench: bad argument '%s' (see the header of "
                    "perf/rs-shuffle-bench.c)\n",
                    a);
            return -1;
        }
        i += val;
    }
    if (o.task_mode && (o.mpi || o.sink)) {
        fprintf(stderr, "rs-shuffle-bench: --tasks and --threads are for forked layouts, "
                        "without --sink or --launcher mpi\n");
        return -1;
    }
    if (o.mpi && ((roles & 3) || split || o.sink || o.speculative || o.n_ext > 0)) {
        fprintf(stderr, "rs-shuffle-bench: --launcher mpi runs one colocated process per rank: "
                        "no --procs, --mappers, --workers, --reducers, --layout split, --sink, "
                        "--speculative or --worker-addr\n");
        return -1;
    }
    if (o.mpi) { /* MPI_Init; the rank count is --procs; listen where the other ranks reach us */
        launch_start("rs-shuffle-bench", "mpi", &argc, &argv);
        o.colocated = 1, procs = (uint32_t)launch_size();
        if (!host_given)
            launch_host(mpi_host, sizeof(mpi_host)), o.host = mpi_host;
        snprintf(pout.launcher, sizeof(pout.launcher), "mpi");
        pout.ranks = launch_size();
    }
    if (o.colocated && ((roles & 1) || o.sink || o.speculative || procs > MAX_PROCS / 2)) {
        fprintf(stderr,
                "rs-shuffle-bench: --layout colocated takes --procs N (at most %d), not "
                "--mappers, --workers, --reducers, --sink or --speculative\n",
                MAX_PROCS / 2);
        return -1;
    }
    if (!o.colocated && (roles & 2)) {
        fprintf(stderr, "rs-shuffle-bench: --procs is for --layout colocated\n");
        return -1;
    }
    if (o.colocated)
        o.mappers = o.workers = o.reducers = procs;
    if (o.n_ext > 0 && (o.sink || o.colocated)) {
        fprintf(stderr, "rs-shuffle-bench: --sink and --layout colocated need their own workers, "
                        "not --worker-addr\n");
        return -1;
    }
    if (o.n_ext > 0)
        o.workers = o.n_ext;
    if (o.sink)
        o.mappers = 1, o.workers = 1, o.reducers = 0, o.partitions = 1, o.codec = RS_CODEC_NONE;
    if (o.mappers == 0 || o.mappers > MAX_PROCS / 2 || o.workers == 0 || o.workers > MAX_PROCS ||
        o.reducers > MAX_PROCS || (!o.sink && o.reducers == 0) || o.partitions == 0 ||
        o.size < REC_LEN || o.buf < 4096 || o.sink_bufs < 4 || o.sink_bufs > SINK_BUFS_MAX) {
        fprintf(stderr, "rs-shuffle-bench: invalid sizes or counts\n");
        return -1;
    }
    if (o.replicas > o.workers ||
        (o.kill_phase && (o.colocated || o.mpi || o.sink || o.n_ext > 0 || o.workers < 2))) {
        fprintf(stderr, "rs-shuffle-bench: --replicas is at most --workers; --kill-worker needs "
                        "the split layout with 2 or more forked workers, and no --sink\n");
        return -1;
    }
    if (o.worker_mem == 0) { /* room for the data (each batch on R workers) with no spill */
        o.worker_mem =
            o.sink ? 64ull << 20 : (o.size * o.replicas / o.workers) * 3 / 2 + (64ull << 20);
        if (o.speculative)
            o.worker_mem += (o.size * o.replicas / o.workers) * 3 / 2;
    }
    if (strcmp(o.transport, "ucx") != 0 && strcmp(o.transport, "verbs") != 0 &&
        strcmp(o.transport, "auto") != 0) {
        fprintf(stderr, "rs-shuffle-bench: --transport is ucx, verbs or auto\n");
        return -1;
    }
    setenv("RSHUFFLE_TRANSPORT", o.transport, 1);
    if (strcmp(o.transport, "ucx") != 0)
        o.tls = "-"; /* UCX_TLS means nothing to the verbs backend */
    if (strcmp(o.transport, "ucx") == 0 && getenv("UCX_TLS") == NULL) {
        /* tcp stays enabled with shm: UCX's connection manager needs it. */
        if (strcmp(o.tls, "shm") == 0)
            setenv("UCX_TLS", "posix,sysv,cma,self,tcp", 1);
        else if (strcmp(o.tls, "tcp") == 0)
            setenv("UCX_TLS", "tcp,self", 1);
        /* lo only when every worker is on loopback: --host is not used with --worker-addr */
        int loopback = strncmp(o.host, "127.", 4) == 0;
        for (uint32_t i = 0; i < o.n_ext; i++)
            loopback = (i == 0 || loopback) && strncmp(addrs[i], "127.", 4) == 0;
        if (loopback)
            setenv("UCX_NET_DEVICES", "lo", 0);
    }
    return 0;
}

/* What the parent gathers from its children. */
/* What one role's processes spent, from wait4 (forked layouts only). */
typedef struct role_cpu {
    double cpu_s; /* user + system */
    uint64_t csw; /* context switches, voluntary and involuntary */
} role_cpu_t;

enum { ROLE_MAP, ROLE_WORKER, ROLE_REDUCE, ROLE_PROC, ROLES }; /* PROC: a colocated process */

static const char *const role_name[ROLES] = {"mappers", "workers", "reducers", "processes"};
static const char *const role_cpu_key[ROLES] = {"cpu_map_s", "cpu_worker_s", "cpu_reduce_s",
                                                "cpu_procs_s"};
static const char *const role_csw_key[ROLES] = {"csw_map", "csw_worker", "csw_reduce", "csw_procs"};

typedef struct totals {
    uint64_t total; /* records */
    pcount_t *want, *got, *tmp;
    uint8_t *seen, *seen_all;
    uint64_t pushed_bytes, map_batches, grant_requests, merged_writes;
    uint64_t got_records, dups, bad, read_bytes;
    double map_s; /* the slowest mapper's own push time (no process start or connect) */
    double start_s, t0, t1, t2; /* workers' start-up; start, end of push, end of read */
    double warm_s;              /* --warm: from the workers' start-up to every process ready */
    rs_worker_stats_t wst;
    int failed;
    double *open_us, *commit_us, *red_us; /* --tasks: per map task, per reduce task */
    uint32_t n_tasks, n_red;
    role_cpu_t cpu[ROLES];
    double start_cpu_s; /* the workers' CPU-seconds at t0: their start-up (arenas made resident) */
    int cpu_known;      /* forked children, all reaped by reap() */
} totals_t;

/* Waits for pid and adds its CPU-seconds and context switches to role's. */
static void reap(totals_t *t, pid_t pid, int role)
{
    struct rusage ru;
    if (wait4(pid, NULL, 0, &ru) != pid)
        return;
    t->cpu[role].cpu_s += (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                          (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    t->cpu[role].csw += (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
}

/* A running child's CPU-seconds so far (Linux /proc; clock ticks), 0 if unknown. */
static double proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* One map attempt's result from fd; winning: its counts are what the reducers must see. */
static void take_map(totals_t *t, int fd, int winning)
{
    map_result_t r = {.status = RS_ERR_IO};
    if (perf_read_all(fd, &r, sizeof(r), -1) != 0 ||
        perf_read_all(fd, t->tmp, o.partitions * sizeof(*t->tmp), -1) != 0 || r.status != RS_OK)
        t->failed = 1;
    task_us_t *us = o.task_mode && !t->failed ? calloc(o.tasks, sizeof(*us)) : NULL;
    if (us != NULL && perf_read_all(fd, us, o.tasks * sizeof(*us), -1) == 0) {
        for (uint32_t k = 0; k < o.tasks; k++, t->n_tasks++) {
            t->open_us[t->n_tasks] = us[k].open_us;
            t->commit_us[t->n_tasks] = us[k].commit_us;
        }
    }
    free(us);
    t->map_batches += r.batches;
    t->grant_requests += r.grant_requests;
    t->merged_writes += r.merged_writes;
    if (r.seconds > t->map_s)
        t->map_s = r.seconds;
    if (!winning)
        return;
    t->pushed_bytes += r.bytes;
    for (uint32_t p = 0; p < o.partitions; p++) {
        t->want[p].records += t->tmp[p].records;
        t->want[p].sum += t->tmp[p].sum;
    }
}

/* One reducer's result from fd; an id two reducers both read is a duplicate. */
static void take_reduce(totals_t *t, int fd)
{
    red_result_t res = {.status = RS_ERR_IO};
    uint64_t bitmap = t->total / 8 + 1;
    if (perf_read_all(fd, &res, sizeof(res), -1) != 0 ||
        perf_read_all(fd, t->tmp, o.partitions * sizeof(*t->tmp), -1) != 0 ||
        perf_read_all(fd, t->seen, bitmap, -1) != 0 || res.status != RS_OK) {
        t->failed = 1;
        return;
    }
    t->got_records += res.records;
    t->dups += res.dups;
    t->bad += res.bad;
    t->read_bytes += res.bytes;
    for (uint32_t p = 0; p < o.partitions; p++) {
        t->got[p].records += t->tmp[p].records;
        t->got[p].sum += t->tmp[p].sum;
    }
    for (uint64_t i = 0; i < bitmap; i++) {
        t->dups += (uint64_t)__builtin_popcount(t->seen_all[i] & t->seen[i]);
        t->seen_all[i] |= t->seen[i];
    }
    task_us_t *us = o.task_mode ? calloc(o.partitions, sizeof(*us)) : NULL;
    if (us != NULL && perf_read_all(fd, us, o.partitions * sizeof(*us), -1) == 0) {
        for (uint32_t p = 0; p < o.partitions; p++)
            if (us[p].open_us > 0) /* a partition this reducer read */
                t->red_us[t->n_red++] = us[p].open_us;
    }
    free(us);
}

/* One worker's counters from fd, added to the totals. */
static void take_worker(totals_t *t, int fd)
{
    rs_worker_stats_t st = {0};
    if (perf_read_all(fd, &st, sizeof(st), -1) != 0)
        t->failed = 1;
    t->wst.batches += st.batches;
    t->wst.spilled_bytes += st.spilled_bytes;
    t->wst.backpressure += st.backpressure;
    if (t->wst.arena_peak < st.arena_peak)
        t->wst.arena_peak = st.arena_peak;
    t->wst.refused += st.refused;
    t->wst.stray_retires += st.stray_retires;
    t->wst.merged_writes += st.merged_writes;
    t->wst.merged_batches += st.merged_batches;
    t->wst.merged_in_place += st.merged_in_place;
}

static void set_addrs(const uint16_t *ports, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        snprintf(addrs[i], sizeof(addrs[i]), "%s:%u", o.host, ports[i]);
        addr_ptrs[i] = addrs[i];
    }
}

/*
 * --warm: waits for n processes to have readied their clients (bounded),
 * then starts the timed run (t->t0) and lets the mappers go.
 */
static void warm_then_go(totals_t *t, uint32_t n)
{
    double ready = perf_now_s(), limit = ready + 120;
    while (__atomic_load_n(&sh->warmed, __ATOMIC_ACQUIRE) < n && perf_now_s() < limit)
        usleep(100);
    if (__atomic_load_n(&sh->warmed, __ATOMIC_ACQUIRE) < n) {
        fprintf(stderr, "rs-shuffle-bench: %u of %u processes warmed up within 120 s\n", sh->warmed,
                n);
        t->failed = 1;
    }
    t->t0 = perf_now_s();
    t->warm_s = t->t0 - ready;
    go_set(&sh->go);
}

/* split: W worker processes, then M mapper processes, then R reducer processes. */
static int run_split(totals_t *t)
{
    pid_t wpid[MAX_PROCS], mpid[MAX_PROCS], rpid[MAX_PROCS];
    int wfd[MAX_PROCS], mfd[MAX_PROCS], rfd[MAX_PROCS];
    uint16_t ports[MAX_PROCS];
    uint32_t n_maps_run = o.mappers * (o.speculative ? 2 : 1);

    /* Workers start in parallel; their start-up (arena allocation, made resident) is timed apart.
     */
    double tw = perf_now_s();
    for (uint32_t i = 0; i < o.n_ext; i++)
        addr_ptrs[i] = addrs[i]; /* --worker-addr: running workers, none forked */
    for (uint32_t i = 0; i < o.workers && o.n_ext == 0; i++)
        wpid[i] = spawn(&wfd[i], worker_fn, i, 0);
    for (uint32_t i = 0; i < o.workers && o.n_ext == 0; i++) {
        ports[i] = 0;
        if (wpid[i] < 0 || perf_read_all(wfd[i], &ports[i], sizeof(ports[i]), -1) != 0 ||
            ports[i] == 0) {
            fprintf(stderr, "rs-shuffle-bench: worker %u did not start\n", i);
            for (uint32_t j = 0; j < o.workers; j++)
                if (wpid[j] > 0)
                    kill(wpid[j], SIGTERM), waitpid(wpid[j], NULL, 0);
            return -1;
        }
    }
    if (o.n_ext == 0)
        set_addrs(ports, o.workers);

    t->t0 = perf_now_s();
    t->start_s = t->t0 - tw;
    for (uint32_t i = 0; i < o.workers && o.n_ext == 0; i++)
        t->start_cpu_s += proc_cpu_s(wpid[i]);
    for (uint32_t i = 0; i < n_maps_run; i++)
        mpid[i] = spawn(&mfd[i], mapper_fn, i % o.mappers, i / o.mappers);
    /* --warm: the reducers too are forked and ready before the clock starts; they read at t1 */
    int pre_reduce = o.warm && !o.sink;
    for (uint32_t r = 0; r < o.reducers && pre_reduce; r++)
        rpid[r] = spawn(&rfd[r], reducer_fn, r, 0);
    if (o.warm)
        warm_then_go(t, n_maps_run + (pre_reduce ? o.reducers : 0));
    if (o.kill_phase == 1)
        kill_hook(sh->pushed, o.mappers, o.size, mpid, n_maps_run, wpid[0]);
    progress("push", sh->pushed, o.mappers, o.sink ? o.size / o.buf * o.buf : o.size, mfd,
             n_maps_run);
    for (uint32_t i = 0; i < n_maps_run; i++) {
        take_map(t, mfd[i], i / o.mappers == (o.speculative ? 1u : 0u)); /* the winning attempts */
        close(mfd[i]);
        reap(t, mpid[i], ROLE_MAP);
    }
    t->t1 = perf_now_s();

    if (pre_reduce && t->failed) { /* nothing to read: the ready reducers go */
        for (uint32_t r = 0; r < o.reducers; r++) {
            kill(rpid[r], SIGTERM);
            close(rfd[r]);
            reap(t, rpid[r], ROLE_REDUCE);
        }
    }
    if (!t->failed && !o.sink) {
        if (pre_reduce)
            go_set(&sh->read_go);
        for (uint32_t r = 0; r < o.reducers && !pre_reduce; r++)
            rpid[r] = spawn(&rfd[r], reducer_fn, r, 0);
        if (o.kill_phase == 2)
            kill_hook(sh->read, o.reducers, t->total * REC_LEN, rpid, o.reducers, wpid[0]);
        progress("read", sh->read, o.reducers, t->total * REC_LEN, rfd, o.reducers);
        for (uint32_t r = 0; r < o.reducers; r++) {
            take_reduce(t, rfd[r]);
            close(rfd[r]);
            reap(t, rpid[r], ROLE_REDUCE);
        }
    }
    t->t2 = perf_now_s();
    if (o.n_ext > 0) { /* running workers keep a shuffle until it is dropped */
        rs_shuffle_desc_t d = desc();
        rs_status_t s = rs_shuffle_drop(&d, NULL);
        if (s != RS_OK) /* the records were verified: a worker that went is no failure here */
            fprintf(stderr, "rs-shuffle-bench: dropping the shuffle: %s\n", rs_strerror(s));
    }

    for (uint32_t i = 0; i < o.workers && o.n_ext == 0; i++) {
        kill(wpid[i], SIGTERM);
        if (i > 0 || !o.killed) /* a killed worker has no counters to give */
            take_worker(t, wfd[i]);
        close(wfd[i]);
        reap(t, wpid[i], ROLE_WORKER);
    }
    t->cpu_known = o.n_ext == 0;
    return 0;
}

/*
 * colocated process i: worker i, map i and the reducer of worker i's
 * partitions in one process. From the parent on in: every worker's port
 * (the start), then 'R' (every map committed: read) or 'S' (stop: send
 * the worker's counters); results go out on out.
 */
static void colo_main(int in, int out, uint32_t i)
{
    uint16_t port = 0, ports[MAX_PROCS];
    rs_worker_t *w = worker_start(&port);
    int rc = 1;
    char cmd = 0;
    perf_write_all(out, &port, sizeof(port));
    if (w == NULL)
        _exit(1);
    if (perf_read_all(in, ports, o.workers * sizeof(ports[0]), -1) != 0)
        goto out_worker;
    set_addrs(ports, o.workers);
    rc = map_run(out, i, 0);
    if (perf_read_all(in, &cmd, 1, -1) != 0)
        goto out_worker;
    if (cmd == 'R') {
        rc |= reduce_run(out, i);
        if (perf_read_all(in, &cmd, 1, -1) != 0)
            goto out_worker;
    }
    if (cmd == 'S') {
        rs_worker_stats_t st;
        rs_worker_stats(w, &st);
        perf_write_all(out, &st, sizeof(st));
    }
out_worker:
    rs_worker_destroy(w);
    _exit(rc);
}

/* colocated: --procs processes, each worker, mapper and reducer at once. */
static int run_colocated(totals_t *t)
{
    const uint32_t n = o.workers;
    pid_t pid[MAX_PROCS];
    int from[MAX_PROCS], to[MAX_PROCS];
    uint16_t ports[MAX_PROCS];
    uint32_t started = 0;
    int rc = 0;

    double tw = perf_now_s();
    for (; started < n; started++) {
        int rd, wr;
        pid[started] = perf_fork_piped(&rd, &wr); /* children die with the bench */
        if (pid[started] < 0)
            break;
        if (pid[started] == 0) {
            for (uint32_t j = 0; j < started; j++)
                close(from[j]), close(to[j]);
            colo_main(rd, wr, started);
        }
        from[started] = rd;
        to[started] = wr;
    }
    for (uint32_t i = 0; i < n; i++) {
        ports[i] = 0;
        if (i >= started || perf_read_all(from[i], &ports[i], sizeof(ports[i]), -1) != 0 ||
            ports[i] == 0) {
            fprintf(stderr, "rs-shuffle-bench: process %u did not start its worker\n", i);
            rc = -1;
            goto out_reap;
        }
    }

    t->t0 = perf_now_s();
    t->start_s = t->t0 - tw;
    for (uint32_t i = 0; i < n; i++)
        if (perf_write_all(to[i], ports, n * sizeof(ports[0])) != 0)
            t->failed = 1;
    if (o.warm) /* the clock starts once every process's client is ready */
        warm_then_go(t, n);
    for (uint32_t i = 0; i < n; i++)
        t->start_cpu_s += proc_cpu_s(pid[i]);
    for (uint32_t i = 0; i < n; i++)
        take_map(t, from[i], 1);
    t->t1 = perf_now_s();
    char cmd = t->failed ? 'S' : 'R';
    for (uint32_t i = 0; i < n; i++)
        perf_write_all(to[i], &cmd, 1);
    if (cmd == 'R')
        for (uint32_t i = 0; i < n; i++)
            take_reduce(t, from[i]);
    t->t2 = perf_now_s();
    cmd = 'S';
    for (uint32_t i = 0; i < n; i++) {
        perf_write_all(to[i], &cmd, 1);
        take_worker(t, from[i]);
    }
out_reap:
    for (uint32_t i = 0; i < started; i++) {
        close(to[i]); /* a child still waiting for a command reads EOF and ends */
        close(from[i]);
        reap(t, pid[i], ROLE_PROC);
    }
    t->cpu_known = rc == 0;
    return rc;
}

/*
 * --launcher mpi: this rank is worker, mapper and reducer launch_rank() of
 * the colocated layout. Addresses go round by allgather; the rank's map
 * and reduce results pass through a temporary file in the format the forked
 * layouts send on their pipes (take_map, take_reduce), then are summed over
 * the ranks, so every rank ends with the totals (rank 0 prints them). A
 * record two ranks both read counts as a duplicate: the ranks' bitmaps'
 * popcounts add up to more than their union's.
 */
static int run_launched(totals_t *t)
{
    uint32_t me = (uint32_t)launch_rank(), n = o.workers;
    static char mine[RS_SHUFFLE_NAME_MAX];
    uint16_t port = 0;
    uint64_t bitmap = t->total / 8 + 1, failed;
    rs_worker_stats_t st;
    double tw = perf_now_s();
    rs_worker_t *w = worker_start(&port);
    FILE *tmp = tmpfile();
    int fd = tmp != NULL ? fileno(tmp) : -1;
    /* Named by address blob: it reaches the worker from any host, nothing to pick. */
    mine[0] = '\0';
    if (w != NULL && tmp != NULL && rs_worker_name(w, mine, sizeof(mine)) != RS_OK)
        mine[0] = '\0';
    launch_allgather(mine, addrs, sizeof(mine));
    failed = 0;
    for (uint32_t i = 0; i < n; i++) {
        addr_ptrs[i] = addrs[i];
        if (addrs[i][0] == '\0' && me == 0)
            fprintf(stderr, "rs-shuffle-bench: rank %u did not start its worker\n", i);
        failed |= addrs[i][0] == '\0';
    }
    if (me != 0) { /* rank 0 alone reports */
        pout.json = 0, pout.csv_path = NULL;
        if (freopen("/dev/null", "w", stdout) == NULL)
            failed = 1;
    }
    launch_sum_u64(&failed, 1);
    if (failed) {
        rs_worker_destroy(w);
        return -1;
    }
    double ready = perf_now_s();
    if (o.warm) /* this rank's client, before the clock starts */
        proc_warm(o.threads < o.tasks ? o.threads : o.tasks, o.threads, NULL);
    launch_barrier();
    t->t0 = perf_now_s();
    t->start_s = ready - tw;
    t->warm_s = t->t0 - ready;
    map_run(fd, me, 0);
    lseek(fd, 0, SEEK_SET);
    take_map(t, fd, 1);
    failed = (uint64_t)t->failed;
    launch_sum_u64(&failed, 1); /* also: every map committed */
    t->t1 = perf_now_s();
    if (failed == 0 && ftruncate(fd, 0) == 0 && lseek(fd, 0, SEEK_SET) == 0) {
        reduce_run(fd, me);
        lseek(fd, 0, SEEK_SET);
        take_reduce(t, fd);
    }
    launch_barrier(); /* every reader done before any worker goes */
    t->t2 = perf_now_s();
    rs_worker_stats(w, &st);
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0 ||
        perf_write_all(fd, &st, sizeof(st)) != 0 || lseek(fd, 0, SEEK_SET) != 0)
        t->failed = 1;
    take_worker(t, fd);
    fclose(tmp);
    launch_barrier();
    rs_worker_destroy(w);

    uint64_t own = 0, sums[18];
    for (uint64_t i = 0; i < bitmap; i++)
        own += (uint64_t)__builtin_popcount(t->seen_all[i]);
    uint64_t *const fields[] = {&t->pushed_bytes,
                                &t->map_batches,
                                &t->grant_requests,
                                &t->got_records,
                                &t->dups,
                                &t->bad,
                                &t->read_bytes,
                                &t->wst.batches,
                                &t->wst.spilled_bytes,
                                &t->wst.backpressure,
                                &t->wst.refused,
                                &t->wst.stray_retires,
                                &t->merged_writes,
                                &t->wst.merged_writes,
                                &t->wst.merged_batches,
                                &t->wst.merged_in_place,
                                &failed,
                                &own};
    failed = (uint64_t)t->failed;
    for (unsigned i = 0; i < 18; i++)
        sums[i] = *fields[i];
    launch_sum_u64(sums, 18);
    for (unsigned i = 0; i < 18; i++)
        *fields[i] = sums[i];
    t->failed = failed != 0;
    double maxes[3] = {t->map_s, t->start_s, (double)t->wst.arena_peak};
    launch_max_f64(maxes, 3);
    t->map_s = maxes[0], t->start_s = maxes[1], t->wst.arena_peak = (uint64_t)maxes[2];
    launch_sum_u64(&t->want[0].records, 2 * (size_t)o.partitions);
    launch_sum_u64(&t->got[0].records, 2 * (size_t)o.partitions);
    launch_or_bytes(t->seen_all, bitmap);
    for (uint64_t i = 0; i < bitmap; i++)
        own -= (uint64_t)__builtin_popcount(t->seen_all[i]);
    t->dups += own;
    if (me != 0 && freopen("/dev/null", "w", stderr) == NULL) /* the totals: rank 0 says them */
        t->failed = 1;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v[0..n) (sorts v); 0 when empty. */
static double pctile(double *v, uint32_t n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    uint32_t i = (uint32_t)(q * (n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* The results as perf/perf_json.h's one row. */
static void put_results(const totals_t *t, uint64_t bytes, uint64_t lost, uint64_t dups,
                        uint64_t bad, const double *secs, const double *gbit_s, uint32_t procs,
                        int failed)
{
    const char *tls = getenv("UCX_TLS");
    perf_out_meta(&pout, o.transport, strcmp(o.transport, "ucx") == 0 && tls ? tls : o.tls);
    perf_row(&pout);
    perf_str(&pout, "transport", o.transport);
    perf_str(&pout, "tls", o.tls);
    perf_str(&pout, "codec", rs_codec_name(o.codec));
    perf_str(&pout, "layout", o.colocated ? "colocated" : "split");
    perf_str(&pout, "launcher", o.mpi ? "mpi" : "local");
    perf_u64(&pout, "procs", procs);
    perf_u64(&pout, "mappers", o.mappers);
    perf_u64(&pout, "workers", o.workers);
    perf_u64(&pout, "reducers", o.reducers);
    perf_u64(&pout, "partitions", o.partitions);
    perf_u64(&pout, "bytes", bytes);
    perf_u64(&pout, "records", o.sink ? 0 : t->total);
    perf_num(&pout, "total_s", secs[2], 4);
    perf_num(&pout, "push_s", secs[0], 4);
    perf_num(&pout, "read_s", secs[1], 4);
    perf_num(&pout, "gbit_s", gbit_s[2], 3);
    perf_num(&pout, "push_gbit_s", gbit_s[0], 3);
    perf_num(&pout, "read_gbit_s", gbit_s[1], 3);
    perf_num(&pout, "map_push_gbit_s", gbit_s[3], 3);
    perf_u64(&pout, "lost", lost);
    perf_u64(&pout, "duplicates", dups);
    perf_u64(&pout, "bad", bad);
    perf_u64(&pout, "replicas", o.replicas);
    perf_u64(&pout, "killed", o.killed);
    perf_u64(&pout, "map_batches", t->map_batches);
    perf_u64(&pout, "grant_requests", t->grant_requests);
    perf_u64(&pout, "merged_writes", t->merged_writes);
    if (o.n_ext == 0) { /* the forked workers' counters; running ones are not read */
        perf_u64(&pout, "spilled_bytes", t->wst.spilled_bytes);
        perf_u64(&pout, "stray_retires", t->wst.stray_retires);
        perf_u64(&pout, "worker_batches", t->wst.batches);
        perf_u64(&pout, "worker_merged_writes", t->wst.merged_writes);
        perf_u64(&pout, "worker_merged_batches", t->wst.merged_batches);
        perf_u64(&pout, "worker_merged_in_place", t->wst.merged_in_place);
        perf_num(&pout, "start_s", t->start_s, 4);
    }
    perf_u64(&pout, "warm", (uint64_t)o.warm);
    perf_str(&pout, "append", o.reserve ? "reserve" : "copy");
    if (o.warm)
        perf_num(&pout, "warm_s", t->warm_s, 4);
    if (t->cpu_known) { /* CPU-seconds (user + system) and context switches by role */
        for (int r = 0; r < ROLES; r++) {
            if (t->cpu[r].cpu_s == 0 && t->cpu[r].csw == 0)
                continue;
            perf_num(&pout, role_cpu_key[r], t->cpu[r].cpu_s, 3);
            perf_u64(&pout, role_csw_key[r], t->cpu[r].csw);
        }
        perf_num(&pout, "cpu_start_s", t->start_cpu_s, 2);
    }
    perf_u64(&pout, "tasks", o.tasks);
    perf_u64(&pout, "threads", o.threads);
    if (o.task_mode) { /* per task, microseconds */
        perf_num(&pout, "task_open_us_median", pctile(t->open_us, t->n_tasks, 0.5), 1);
        perf_num(&pout, "task_open_us_p99", pctile(t->open_us, t->n_tasks, 0.99), 1);
        perf_num(&pout, "task_commit_us_median", pctile(t->commit_us, t->n_tasks, 0.5), 1);
        perf_num(&pout, "task_commit_us_p99", pctile(t->commit_us, t->n_tasks, 0.99), 1);
        perf_num(&pout, "reduce_open_us_median", pctile(t->red_us, t->n_red, 0.5), 1);
        perf_num(&pout, "reduce_open_us_p99", pctile(t->red_us, t->n_red, 0.99), 1);
    }
    perf_bool(&pout, "ok", !failed);
    if (strcmp(o.transport, "verbs") == 0 && perf_soft_rdma_device())
        perf_bool(&pout, "functional", 1); /* Soft-RoCE numbers are functional only */
}

int main(int argc, char **argv)
{
    perf_std_args(
        argc, argv,
        "usage: rs-shuffle-bench [--size 1G] [--layout split|colocated]\n"
        "                        [--mappers 2] [--workers 2] [--reducers 2] | [--procs 2]\n"
        "                        [--partitions 200] [--codec none|lz4|snappy]\n"
        "                        [--transport ucx|verbs] [--tls shm|tcp] [--host H]\n"
        "                        [--buf BYTES] [--worker-mem BYTES] [--speculative]\n"
        "                        [--sink [--sink-bufs N]] [--worker-addr HOST:PORT]...\n"
        "                        [--launcher local|mpi] [--json [FILE]] [--csv FILE] [--progress]\n"
        "                        [--replicas R] [--kill-worker push|read@FRACTION]\n"
        "                        [--tasks N] [--threads C] [--warm]\n"
        "A whole shuffle on local processes (or one per MPI rank: mpirun -np N ... --launcher\n"
        "mpi); every record is verified.\n");
    perf_out_init(&pout, "rs-shuffle-bench", &argc, argv);
    if (parse_args(argc, argv) != 0)
        return 2;
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    memset(sh, 0, sizeof(*sh));
    totals_t t = {.total = o.size / REC_LEN};
    uint64_t total = t.total, bitmap = total / 8 + 1;
    t.want = calloc(o.partitions, sizeof(*t.want));
    t.got = calloc(o.partitions, sizeof(*t.got));
    t.tmp = calloc(o.partitions, sizeof(*t.tmp));
    t.seen = calloc(bitmap, 1);
    t.seen_all = calloc(bitmap, 1);
    size_t n_tasks_run = (size_t)n_maps() * (o.speculative ? 2 : 1);
    t.open_us = calloc(n_tasks_run, sizeof(double));
    t.commit_us = calloc(n_tasks_run, sizeof(double));
    t.red_us = calloc(o.partitions, sizeof(double));
    if (t.want == NULL || t.got == NULL || t.tmp == NULL || t.seen == NULL || t.seen_all == NULL ||
        t.open_us == NULL || t.commit_us == NULL || t.red_us == NULL)
        return 1;
    if ((o.mpi ? run_launched(&t) : o.colocated ? run_colocated(&t) : run_split(&t)) != 0) {
        launch_end();
        return 1;
    }
    int failed = t.failed;
    uint64_t dups = t.dups, bad = t.bad, pushed_bytes = t.pushed_bytes;
    rs_worker_stats_t wst_sum = t.wst;

    uint64_t lost = 0, distinct = 0;
    if (o.sink) {
        /* Every pushed batch must have been committed once at the worker. */
        uint64_t batches =
            pushed_bytes / (o.buf / rs_record_size(REC_LEN) * rs_record_size(REC_LEN));
        lost = batches > wst_sum.batches ? batches - wst_sum.batches : 0;
        dups = wst_sum.batches > batches ? wst_sum.batches - batches : 0;
    } else {
        for (uint64_t i = 0; i < bitmap; i++)
            distinct += (uint64_t)__builtin_popcount(t.seen_all[i]);
        /* lost: ids never read intact (once each); bad: records read damaged */
        lost = total - (distinct < total ? distinct : total);
        for (uint32_t p = 0; p < o.partitions; p++)
            if (!failed &&
                (t.got[p].records != t.want[p].records || t.got[p].sum != t.want[p].sum)) {
                fprintf(stderr, "rs-shuffle-bench: partition %u: wrote %llu records, read %llu\n",
                        p, (unsigned long long)t.want[p].records,
                        (unsigned long long)t.got[p].records);
                failed = 1;
            }
    }
    if (lost || dups || bad)
        failed = 1;
    double push_s = t.t1 - t.t0, read_s = t.t2 - t.t1, secs = t.t2 - t.t0;
    uint64_t bytes = o.sink ? pushed_bytes : total * REC_LEN;
    /* A failed run moved less than bytes: no rates (0 in the JSON, "-" in the text). */
    double push_gbps = push_s > 0 && !failed ? (double)bytes * 8 / push_s / 1e9 : 0;
    double read_gbps =
        read_s > 0 && !o.sink && !failed ? (double)t.read_bytes * 8 / read_s / 1e9 : 0;
    double gbps = secs > 0 && !failed ? (double)bytes * 8 / secs / 1e9 : 0;
    double map_gbps = t.map_s > 0 && !failed ? (double)bytes * 8 / t.map_s / 1e9 : 0;
    char rate[4][32];
    const double rates_of[4] = {push_gbps, read_gbps, gbps, map_gbps};
    for (int i = 0; i < 4; i++)
        snprintf(rate[i], sizeof(rate[i]), failed ? "-" : "%.2f Gbit/s", rates_of[i]);
    const char *layout = o.colocated ? "colocated" : "split";
    uint32_t procs =
        o.colocated ? o.workers : o.workers + o.mappers * (o.speculative ? 2 : 1) + o.reducers;
    printf("shuffle %s: %s/%s, codec %s, %.2f GiB, %llu records, %s layout (%u processes): "
           "%u mappers%s, %u workers, %u reducers, %u partitions\n",
           failed ? "FAILED" : "verified", o.transport, o.tls, rs_codec_name(o.codec),
           (double)bytes / (1 << 30), (unsigned long long)(o.sink ? 0 : total), layout, procs,
           o.mappers, o.speculative ? " (x2 attempts)" : "", o.workers, o.reducers, o.partitions);
    printf("push %.3f s (%s), read %.3f s (%s), total %.3f s (%s); lost %llu, duplicates %llu, "
           "bad %llu",
           push_s, rate[0], read_s, rate[1], secs, rate[2], (unsigned long long)lost,
           (unsigned long long)dups, (unsigned long long)bad);
    if (o.n_ext == 0)
        printf(", spilled %.1f MiB, backpressure %llu", (double)wst_sum.spilled_bytes / (1 << 20),
               (unsigned long long)wst_sum.backpressure);
    printf("\npushers: %.3f s in the slowest mapper (%s), %llu batches, %llu grant requests; ",
           t.map_s, rate[3], (unsigned long long)t.map_batches,
           (unsigned long long)t.grant_requests);
    if (o.n_ext == 0)
        printf("worker arena peak %.1f MiB; workers started in %.3f s (%.0f MiB arenas)\n",
               (double)wst_sum.arena_peak / (1 << 20), t.start_s, (double)o.worker_mem / (1 << 20));
    else
        printf("%u running workers (their counters: rshuffle_info --worker HOST:PORT)\n", o.n_ext);
    if (t.cpu_known) {
        printf("cpu-seconds (user + system):");
        for (int r = 0; r < ROLES; r++)
            if (t.cpu[r].cpu_s > 0 || t.cpu[r].csw > 0)
                printf(" %s %.2f (%llu context switches);", role_name[r], t.cpu[r].cpu_s,
                       (unsigned long long)t.cpu[r].csw);
        printf(" %.2f of them in the workers' start-up\n", t.start_cpu_s);
    }
    if (o.killed)
        printf("replicas %u: worker 0 SIGKILLed %.3f s into the %s\n", o.replicas, o.kill_s,
               o.kill_phase == 1 ? "push" : "read");
    double times[3] = {push_s, read_s, secs}, rates[4] = {push_gbps, read_gbps, gbps, map_gbps};
    put_results(&t, bytes, lost, dups, bad, times, rates, procs, failed);
    if (perf_out_emit(&pout) != 0)
        failed = 1;
    free(t.want);
    free(t.open_us);
    free(t.commit_us);
    free(t.red_us);
    free(t.tmp);
    free(t.got);
    free(t.seen);
    free(t.seen_all);
    launch_end();
    return failed ? 1 : 0;
}
