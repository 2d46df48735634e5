/*
 * rs-task-cost: what one task costs an engine that runs many short tasks
 * per process (docs/shuffle.md, "One client per process"). It forks W
 * workers on this host, then in one process runs N map tasks one after
 * another (each opens a pusher, appends K records of 100 bytes over P
 * partitions, commits) and then reduce tasks (each opens a reader session
 * and one partition, reads it, closes), and prints per-task open and
 * commit microseconds (median, p99). The first wave is reported apart
 * (map_first_us, reduce_first_us: the slowest of each thread's), not in
 * the median and p99, which are those of tasks on a warm client: each
 * thread's first map task (it makes the push lane and its connections to
 * every worker) and its first W reduce tasks (the read lane connects to a
 * worker when a partition it holds is first read).
 *
 *   rs-task-cost [--workers 8] [--tasks 200] [--records 0] [--partitions 64]
 *                [--threads 1] [--mode both|client|none|default] [--json [FILE]]
 *                [--csv FILE]
 *
 * Mode client runs the tasks on one rs_client_t (lanes reused); mode none
 * on a client that keeps no idle lane, so every task makes and tears down
 * its own context, pool, engine thread and connections: the cost of a
 * task before the client. "both" runs none then client in one run, on the
 * same workers, and prints their ratios. Mode default calls what a program
 * written before the client calls (rs_pusher_open, rs_reader_session_open
 * and rs_reader_open_in on the process's default client), shut down at the
 * end. Public headers only.
 */
#include <rshuffle/client.h>
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/worker.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf_json.h"
#include "perf_util.h"

#define PROG    "rs-task-cost"
#define REC_LEN 100
#define W_MAX   64

static struct {
    uint32_t workers, tasks, records, partitions, threads;
    const char *mode;
} o = {8, 200, 0, 64, 1, "both"};

static char addrs[W_MAX][64];
static const char *addr_ptrs[W_MAX];

static void worker_child(int fd)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    rs_worker_config_t wc;
    rs_worker_config_defaults(&wc);
    rs_status_t s = rs_worker_config_from_env(&wc);
    wc.mem_limit = 64 << 20;
    rs_worker_t *w = NULL;
    if (s == RS_OK)
        s = rs_worker_create(NULL, &wc, &w);
    if (s == RS_OK && (s = rs_worker_listen(w, "127.0.0.1", 0)) != RS_OK)
        rs_worker_destroy(w);
    uint16_t port = s == RS_OK ? rs_worker_port(w) : 0;
    perf_write_all(fd, &port, sizeof(port));
    if (s != RS_OK)
        _exit(1);
    int sig;
    sigwait(&set, &sig);
    rs_worker_destroy(w);
    _exit(0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, uint32_t n, double q)
{
    qsort(v, n, sizeof(*v), cmp_double);
    uint32_t i = (uint32_t)(q * (n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

typedef struct run {
    rs_client_t *client; /* NULL: the calls without a client (the default one) */
    rs_shuffle_desc_t desc;
    uint32_t first, n; /* map ids (and reduce partitions) of this thread */
    double *open_us, *commit_us, *read_us;
    uint32_t n_reads;
    rs_status_t status;
    uint64_t records_read;
} run_t;

static void *map_thread(void *arg)
{
    run_t *r = arg;
    uint8_t rec[REC_LEN];
    memset(rec, 0x5a, sizeof(rec));
    for (uint32_t i = 0; i < r->n && r->status == RS_OK; i++) {
        uint32_t m = r->first + i;
        rs_pusher_t *p;
        uint64_t t0 = perf_now_ns();
        rs_status_t s = r->client != NULL ? rs_pusher_open_in(r->client, &r->desc, m, 0, NULL, &p)
                                          : rs_pusher_open(&r->desc, m, 0, NULL, &p);
        uint64_t t1 = perf_now_ns();
        for (uint32_t k = 0; s == RS_OK && k < o.records; k++) {
            memcpy(rec, &k, sizeof(k));
            s = rs_pusher_append(p, (m + k) % o.partitions, rec, REC_LEN);
        }
        uint64_t t2 = perf_now_ns();
        if (s == RS_OK)
            s = rs_pusher_close(p, NULL);
        rs_pusher_destroy(s == RS_OK || p != NULL ? p : NULL);
        uint64_t t3 = perf_now_ns();
        r->open_us[i] = (double)(t1 - t0) / 1e3;
        r->commit_us[i] = (double)(t3 - t2) / 1e3;
        r->status = s;
    }
    return NULL;
}

static void *reduce_thread(void *arg)
{
    run_t *r = arg;
    uint32_t n_maps = o.tasks, *attempts = calloc(n_maps, sizeof(*attempts));
    if (attempts == NULL) {
        r->status = RS_ERR_NOMEM;
        return NULL;
    }
    for (uint32_t i = 0; i < r->n_reads && r->status == RS_OK; i++) {
        uint32_t part = (r->first + i) % o.partitions;
        rs_reader_session_t *sess;
        rs_reader_t *rd = NULL;
        uint64_t t0 = perf_now_ns();
        rs_status_t s =
            r->client != NULL
                ? rs_reader_session_open_in(r->client, &r->desc, n_maps, attempts, NULL, &sess)
                : rs_reader_session_open(&r->desc, n_maps, attempts, NULL, &sess);
        if (s == RS_OK && (s = rs_reader_open_in(sess, part, &rd)) != RS_OK)
            rs_reader_session_close(sess);
        uint64_t t1 = perf_now_ns();
        if (s == RS_OK) {
            const void *rec;
            uint32_t len;
            while ((s = rs_reader_next(rd, &rec, &len)) == RS_OK && rec != NULL)
                r->records_read++;
            rs_reader_close(rd);
            rs_reader_session_close(sess);
        }
        r->read_us[i] = (double)(t1 - t0) / 1e3;
        r->status = s;
    }
    free(attempts);
    return NULL;
}

typedef struct result {
    double open_med, open_p99, commit_med, commit_p99, map_med, map_p99, read_med, read_p99;
    double map_first, read_first; /* each thread's first task, the slowest thread's */
    uint64_t lanes_made;
    rs_status_t status;
} result_t;

/*
 * Moves each thread's first wave (what an engine pays once: its first map
 * task, its first W reduce tasks, see above) out of the arrays, its
 * slowest task's times into res. Keeps the other tasks at the front:
 * *n_maps map tasks and *n_reads reduce tasks.
 */
static void warm_only(const run_t *runs, uint32_t T, double *open_us, double *commit_us,
                      double *map_us, double *read_us, uint32_t *n_maps, uint32_t *n_reads,
                      result_t *res)
{
    uint32_t k = 0, kr = 0;
    for (uint32_t t = 0; t < T; t++) {
        const run_t *r = &runs[t];
        uint32_t m0 = (uint32_t)(r->open_us - open_us), r0 = (uint32_t)(r->read_us - read_us);
        uint32_t rskip = r->n_reads > o.workers ? o.workers : r->n_reads - 1;
        if (r->n > 0 && map_us[m0] > res->map_first)
            res->map_first = map_us[m0];
        for (uint32_t i = 0; i < rskip; i++)
            if (read_us[r0 + i] > res->read_first)
                res->read_first = read_us[r0 + i];
        for (uint32_t i = 1; i < r->n; i++, k++) {
            open_us[k] = open_us[m0 + i];
            commit_us[k] = commit_us[m0 + i];
            map_us[k] = map_us[m0 + i];
        }
        for (uint32_t i = rskip; i < r->n_reads; i++)
            read_us[kr++] = read_us[r0 + i];
    }
    *n_maps = k;
    *n_reads = kr;
}

static result_t measure(const char *mode, uint32_t shuffle_id)
{
    result_t res = {0};
    rs_client_config_t cc;
    rs_client_config_defaults(&cc);
    if (strcmp(mode, "none") == 0)
        cc.max_idle = 0;
    int deflt = strcmp(mode, "default") == 0;
    rs_client_t *client = NULL;
    if (!deflt && (res.status = rs_client_create(&cc, &client)) != RS_OK)
        return res;
    rs_shuffle_desc_t desc = {.shuffle_id = shuffle_id,
                              .n_partitions = o.partitions,
                              .n_workers = o.workers,
                              .workers = addr_ptrs,
                              .replicas = 1};
    uint32_t T = o.threads, n = o.tasks;
    run_t runs[64];
    double *open_us = calloc(n, sizeof(double)), *commit_us = calloc(n, sizeof(double));
    double *map_us = calloc(n, sizeof(double));
    uint32_t n_reads = n;
    double *read_us = calloc(n_reads, sizeof(double));
    pthread_t th[64];
    uint32_t off = 0, roff = 0;
    for (uint32_t t = 0; t < T; t++) {
        uint32_t cnt = n / T + (t < n % T), rcnt = n_reads / T + (t < n_reads % T);
        runs[t] = (run_t){.client = client,
                          .desc = desc,
                          .first = off,
                          .n = cnt,
                          .open_us = open_us + off,
                          .commit_us = commit_us + off,
                          .read_us = read_us + roff,
                          .n_reads = rcnt};
        off += cnt;
        roff += rcnt;
    }
    for (uint32_t t = 0; t < T; t++)
        pthread_create(&th[t], NULL, map_thread, &runs[t]);
    for (uint32_t t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    for (uint32_t t = 0; t < T; t++) {
        if (runs[t].status != RS_OK)
            res.status = runs[t].status;
        runs[t].first = runs[t].read_us - read_us; /* reduce partitions of this thread */
    }
    if (res.status == RS_OK) {
        for (uint32_t t = 0; t < T; t++)
            pthread_create(&th[t], NULL, reduce_thread, &runs[t]);
        for (uint32_t t = 0; t < T; t++)
            pthread_join(th[t], NULL);
        for (uint32_t t = 0; t < T; t++)
            if (runs[t].status != RS_OK)
                res.status = runs[t].status;
    }
    rs_client_stats_t cs;
    rs_client_stats(deflt ? rs_client_default() : client, &cs);
    res.lanes_made = cs.lanes_made;
    if (deflt)
        rs_client_default_shutdown();
    else
        rs_client_destroy(client);
    if (res.status == RS_OK) {
        for (uint32_t i = 0; i < n; i++)
            map_us[i] = open_us[i] + commit_us[i];
        warm_only(runs, T, open_us, commit_us, map_us, read_us, &n, &n_reads, &res);
        res.open_med = pct(open_us, n, 0.5);
        res.open_p99 = pct(open_us, n, 0.99);
        res.commit_med = pct(commit_us, n, 0.5);
        res.commit_p99 = pct(commit_us, n, 0.99);
        res.map_med = pct(map_us, n, 0.5);
        res.map_p99 = pct(map_us, n, 0.99);
        res.read_med = pct(read_us, n_reads, 0.5);
        res.read_p99 = pct(read_us, n_reads, 0.99);
    }
    free(open_us);
    free(commit_us);
    free(map_us);
    free(read_us);
    return res;
}

int main(int argc, char **argv)
{
    static const char usage[] =
        "usage: rs-task-cost [--workers 8] [--tasks 200] [--records 0] [--partitions 64]\n"
        "                    [--threads 1] [--mode both|client|none|default] [--json [FILE]]\n"
        "                    [--csv FILE]\n"
        "Per-task cost of map (open + commit) and reduce (open) tasks run one after another.\n";
    perf_std_args(argc, argv, usage);
    perf_out_t po;
    perf_out_init(&po, PROG, &argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            fputs(usage, stderr);
            return 2;
        }
        i++;
        if (strcmp(a, "--workers") == 0)
            o.workers = (uint32_t)perf_arg_uint(PROG, a, v, 1, W_MAX);
        else if (strcmp(a, "--tasks") == 0)
            o.tasks = (uint32_t)perf_arg_uint(PROG, a, v, 1, 1000000);
        else if (strcmp(a, "--records") == 0)
            o.records = (uint32_t)perf_arg_uint(PROG, a, v, 0, 100000000);
        else if (strcmp(a, "--partitions") == 0)
            o.partitions = (uint32_t)perf_arg_uint(PROG, a, v, 1, 1000000);
        else if (strcmp(a, "--threads") == 0)
            o.threads = (uint32_t)perf_arg_uint(PROG, a, v, 1, 64);
        else if (strcmp(a, "--mode") == 0 && (strcmp(v, "both") == 0 || strcmp(v, "client") == 0 ||
                                              strcmp(v, "none") == 0 || strcmp(v, "default") == 0))
            o.mode = v;
        else {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (o.threads > o.tasks / 2)
        o.threads = o.tasks / 2 > 0 ? o.tasks / 2 : 1; /* a first task apart, and one measured */
    if (o.tasks < 2) {
        fputs(usage, stderr);
        return 2;
    }
    pid_t pids[W_MAX];
    for (uint32_t i = 0; i < o.workers; i++) {
        int rd, wr;
        pids[i] = perf_fork_piped(&rd, &wr);
        if (pids[i] < 0)
            perf_die(PROG, "fork failed");
        if (pids[i] == 0) {
            close(rd);
            worker_child(wr);
        }
        close(wr);
        uint16_t port = 0;
        if (perf_read_all(rd, &port, sizeof(port), 30000) != 0 || port == 0)
            perf_die(PROG, "worker %u did not start", i);
        close(rd);
        snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%u", port);
        addr_ptrs[i] = addrs[i];
    }
    const char *modes[2];
    int n_modes = 0;
    if (strcmp(o.mode, "default") == 0) {
        modes[n_modes++] = "default";
    } else {
        if (strcmp(o.mode, "client") != 0)
            modes[n_modes++] = "none";
        if (strcmp(o.mode, "none") != 0)
            modes[n_modes++] = "client";
    }
    result_t res[2];
    int rc = 0;
    printf("%-7s %10s %10s %10s %10s %10s %10s %10s %6s\n", "mode", "open_med", "open_p99",
           "commit_med", "commit_p99", "map_med", "map_p99", "reduce_med", "lanes");
    for (int m = 0; m < n_modes; m++) {
        res[m] = measure(modes[m], 100 + (uint32_t)m);
        if (res[m].status != RS_OK) {
            fprintf(stderr, "%s: mode %s: %s\n", PROG, modes[m], rs_strerror(res[m].status));
            rc = 1;
            continue;
        }
        printf("%-7s %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %6llu\n", modes[m],
               res[m].open_med, res[m].open_p99, res[m].commit_med, res[m].commit_p99,
               res[m].map_med, res[m].map_p99, res[m].read_med,
               (unsigned long long)res[m].lanes_made);
    }
    for (uint32_t i = 0; i < o.workers; i++)
        kill(pids[i], SIGTERM);
    for (uint32_t i = 0; i < o.workers; i++)
        waitpid(pids[i], NULL, 0);
    if (rc != 0)
        return rc;
    perf_out_meta(&po, "ucx", getenv("UCX_TLS") ? getenv("UCX_TLS") : "default");
    for (int m = 0; m < n_modes; m++) {
        perf_row(&po);
        perf_str(&po, "mode", modes[m]);
        perf_u64(&po, "workers", o.workers);
        perf_u64(&po, "tasks", o.tasks);
        perf_u64(&po, "threads", o.threads);
        perf_u64(&po, "records", o.records);
        perf_u64(&po, "partitions", o.partitions);
        perf_num(&po, "map_open_us_median", res[m].open_med, 1);
        perf_num(&po, "map_open_us_p99", res[m].open_p99, 1);
        perf_num(&po, "map_commit_us_median", res[m].commit_med, 1);
        perf_num(&po, "map_commit_us_p99", res[m].commit_p99, 1);
        perf_num(&po, "map_task_us_median", res[m].map_med, 1);
        perf_num(&po, "map_task_us_p99", res[m].map_p99, 1);
        perf_num(&po, "reduce_open_us_median", res[m].read_med, 1);
        perf_num(&po, "reduce_open_us_p99", res[m].read_p99, 1);
        perf_num(&po, "map_first_us", res[m].map_first, 1);
        perf_num(&po, "reduce_first_us", res[m].read_first, 1);
        perf_u64(&po, "lanes_made", res[m].lanes_made);
    }
    if (n_modes == 2) {
        printf("ratio none/client: map task %.1fx, reduce open %.1fx\n",
               res[0].map_med / res[1].map_med, res[0].read_med / res[1].read_med);
        perf_row(&po);
        perf_str(&po, "mode", "ratio_none_over_client");
        perf_num(&po, "map_task_median", res[0].map_med / res[1].map_med, 2);
        perf_num(&po, "reduce_open_median", res[0].read_med / res[1].read_med, 2);
    }
    return perf_out_emit(&po) == 0 ? 0 : 1;
}
