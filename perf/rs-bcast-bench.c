/*
 * rs-bcast-bench: the torrent broadcast study on one host (public API only).
 *
 * One source (this process) and up to R reader processes (forked before any
 * fabric state exists, each with a torrent node and a source-only node). Per
 * case (object size x readers x mode) and iteration: publish the object,
 * hand its descriptor to the readers, wait until every reader holds the
 * bytes, destroy it. The time of a broadcast runs from the publish call to
 * the last reader's answer (median_us); get_us is the slowest reader's own
 * rs_bcast_get call (median over iterations). Also reports the round trips and reads a reader
 * issued (the largest over readers and iterations) and the block reads the
 * source served (sum over readers, largest over iterations).
 *
 *   rs-bcast-bench [--json [FILE]] [--csv FILE] [--sizes 1K,1M,16M,64M]
 *                  [--readers 1,2,4,8] [--modes torrent,source] [--iters N]
 *                  [--block-size 4M] [--transport ucx|verbs] [--host H]
 *                  [--launcher local|mpi] [--progress]
 *
 * --launcher mpi (under mpirun or srun): rank 0 is the source and ranks
 * 1..N-1 the readers, on any hosts; the descriptor goes out by MPI_Bcast
 * and the answers come back by MPI_Allgather (perf/launch.h). Output:
 * perf/perf_json.h.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch.h"
#include "perf_json.h"
#include "perf_util.h"
#include <rshuffle/broadcast.h>

#define MAX_LIST    16
#define MAX_READERS 64
#define ANSWER_MS   120000

typedef struct opts {
    int mpi; /* 1: --launcher mpi; 2: --readers given */
    uint64_t sizes[MAX_LIST];
    int n_sizes;
    int readers[MAX_LIST];
    int n_readers;
    int modes[2];
    int n_modes;
    int iters; /* 0: by size */
    uint64_t block_size;
    rs_transport_kind_t transport;
    char host[RS_BCAST_HOST_MAX + 1];
    int host_given; /* host set: --host, RSHUFFLE_TEST_HOST, or under MPI launch_host's pick */
} opts_t;

/* A reader's answer to one get. */
typedef struct answer {
    int32_t status;
    uint32_t pad;
    uint64_t len;
    uint64_t sample; /* a few bytes of the object, to catch gross corruption cheaply */
    uint64_t round_trips, reads, source_reads, fallbacks;
    uint64_t get_ns;
} answer_t;

typedef struct reader {
    pid_t pid;
    int cmd_fd, res_fd;
} reader_t;

/* --launcher mpi: rank 0's command to the readers, by broadcast (len 0: stop). */
typedef struct launch_cmd {
    uint32_t len;
    unsigned char msg[RS_BCAST_DESC_MAX + 1];
} launch_cmd_t;

static perf_out_t pout;
static int launched; /* --launcher mpi */

static uint64_t sample_of(const void *data, size_t len)
{
    uint64_t s = len;
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i += len / 61 + 1)
        s = s * 1099511628211ull + p[i];
    if (len > 0)
        s = s * 1099511628211ull + p[len - 1];
    return s;
}

/* ---------------------------------------------------------------- readers */

static rs_bcast_node_t *make_node(const opts_t *o, rs_bcast_mode_t mode)
{
    rs_config_t tc;
    rs_bcast_config_t bc;
    rs_bcast_node_t *node;
    if (rs_config_init(&tc) != RS_OK || rs_bcast_config_init(&bc) != RS_OK)
        return NULL;
    tc.transport = o->transport;
    bc.block_size = o->block_size;
    bc.mode = mode;
    bc.timeout_ms = 60000;
    if (o->host_given) /* else RSHUFFLE_BCAST_HOST, or the default */
        snprintf(bc.host, sizeof(bc.host), "%s", o->host);
    return rs_bcast_node_create(&tc, &bc, &node) == RS_OK ? node : NULL;
}

/* One get of the descriptor msg[1..len) (msg[0]: 1 for the source-only node), answered in a. */
static void get_one(rs_bcast_node_t **nodes, const unsigned char *msg, uint32_t len, answer_t *a)
{
    rs_bcast_ref_t *ref;
    rs_bcast_stats_t st;
    memset(a, 0, sizeof(*a));
    uint64_t t0 = perf_now_ns();
    a->status = rs_bcast_get(nodes[msg[0] ? 1 : 0], msg + 1, len - 1, &ref);
    a->get_ns = perf_now_ns() - t0;
    if (a->status == RS_OK) {
        a->len = rs_bcast_ref_len(ref);
        a->sample = sample_of(rs_bcast_ref_data(ref), a->len);
        rs_bcast_ref_stats(ref, &st);
        a->round_trips = st.round_trips;
        a->reads = st.reads;
        a->source_reads = st.source_reads;
        a->fallbacks = st.source_fallbacks;
        rs_bcast_release(ref);
    }
}

/* Commands: u32 length + (u8 mode, descriptor); length 0 ends. */
static void reader_main(const opts_t *o, int cmd_fd, int res_fd)
{
    rs_bcast_node_t *nodes[2] = {make_node(o, RS_BCAST_TORRENT), make_node(o, RS_BCAST_SOURCE)};
    unsigned char msg[RS_BCAST_DESC_MAX + 1];
    uint32_t len;
    int ok = nodes[0] != NULL && nodes[1] != NULL;
    if (perf_write_all(res_fd, &ok, sizeof(ok)) != 0 || !ok)
        goto out;
    for (;;) {
        if (perf_read_all(cmd_fd, &len, sizeof(len), -1) != 0 || len == 0 || len > sizeof(msg) ||
            perf_read_all(cmd_fd, msg, len, ANSWER_MS) != 0)
            break;
        answer_t a;
        get_one(nodes, msg, len, &a);
        if (perf_write_all(res_fd, &a, sizeof(a)) != 0)
            break;
    }
out:
    rs_bcast_node_destroy(nodes[1]);
    rs_bcast_node_destroy(nodes[0]);
}

/* --launcher mpi, ranks 1..N-1: a reader each, until rank 0 says stop. 0, or 1 if a node failed. */
static int serve_launched(const opts_t *o)
{
    rs_bcast_node_t *nodes[2] = {make_node(o, RS_BCAST_TORRENT), make_node(o, RS_BCAST_SOURCE)};
    static launch_cmd_t c;
    static answer_t all[MAX_READERS + 1];
    uint64_t bad = nodes[0] == NULL || nodes[1] == NULL;
    launch_sum_u64(&bad, 1);
    while (bad == 0) {
        answer_t a;
        launch_bcast(&c, sizeof(c), 0);
        if (c.len == 0 || c.len > sizeof(c.msg))
            break;
        get_one(nodes, c.msg, c.len, &a);
        launch_allgather(&a, all, sizeof(a));
    }
    rs_bcast_node_destroy(nodes[1]);
    rs_bcast_node_destroy(nodes[0]);
    return bad != 0;
}

static int spawn_readers(const opts_t *o, reader_t *rd, int n)
{
    for (int i = 0; i < n; i++) {
        int in, out;
        pid_t pid = perf_fork_piped(&in, &out);
        if (pid < 0)
            return -1;
        if (pid == 0) {
            for (int j = 0; j < i; j++) {
                close(rd[j].cmd_fd);
                close(rd[j].res_fd);
            }
            reader_main(o, in, out);
            exit(0);
        }
        rd[i] = (reader_t){.pid = pid, .cmd_fd = out, .res_fd = in};
    }
    for (int i = 0; i < n; i++) {
        int ok = 0;
        if (perf_read_all(rd[i].res_fd, &ok, sizeof(ok), ANSWER_MS) != 0 || !ok) {
            fprintf(stderr, "rs-bcast-bench: reader %d could not start its nodes\n", i);
            return -1;
        }
    }
    return 0;
}

static void stop_readers(reader_t *rd, int n)
{
    uint32_t zero = 0;
    for (int i = 0; i < n; i++) {
        perf_write_all(rd[i].cmd_fd, &zero, sizeof(zero));
        close(rd[i].cmd_fd);
    }
    for (int i = 0; i < n; i++) {
        int status;
        waitpid(rd[i].pid, &status, 0);
        close(rd[i].res_fd);
    }
}

/* ------------------------------------------------------------------ cases */

typedef struct result {
    uint64_t bytes;
    int readers;
    int mode;
    double median_us;
    double get_us;
    uint64_t round_trips, reads, source_reads;
    uint64_t fallbacks; /* patience ran out (all readers, all iterations) */
    int iters;
} result_t;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof(v[0]), cmp_u64);
    return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2;
}

static int iters_for(const opts_t *o, uint64_t bytes)
{
    if (o->iters > 0)
        return o->iters;
    return bytes <= (64u << 10) ? 40 : bytes <= (4u << 20) ? 15 : bytes <= (16u << 20) ? 7 : 5;
}

/* One broadcast: publish, readers get, destroy. Returns its time in ns (0 on failure). */
static uint64_t broadcast_once(rs_bcast_node_t *src, const unsigned char *data, uint64_t bytes,
                               reader_t *rd, int n, int mode, answer_t *ans)
{
    unsigned char msg[RS_BCAST_DESC_MAX + 1];
    size_t dlen;
    rs_bcast_t *bc;
    uint64_t t0 = perf_now_ns();
    if (rs_bcast_publish(src, data, bytes, &bc) != RS_OK ||
        rs_bcast_descriptor(bc, msg + 1, sizeof(msg) - 1, &dlen) != RS_OK) {
        fprintf(stderr, "rs-bcast-bench: publish failed\n");
        return 0;
    }
    msg[0] = (unsigned char)mode;
    uint32_t len = (uint32_t)dlen + 1;
    if (launched) { /* the descriptor by broadcast, the answers by allgather (rank 0's unused) */
        static launch_cmd_t c;
        static answer_t all[MAX_READERS + 1];
        c.len = len;
        memcpy(c.msg, msg, len);
        launch_bcast(&c, sizeof(c), 0);
        launch_allgather(&all[0], all, sizeof(all[0]));
        memcpy(ans, all + 1, (size_t)n * sizeof(*ans));
        n = 0;
    }
    for (int i = 0; i < n; i++) {
        if (perf_write_all(rd[i].cmd_fd, &len, sizeof(len)) != 0 ||
            perf_write_all(rd[i].cmd_fd, msg, len) != 0)
            return 0;
    }
    for (int i = 0; i < n && !launched; i++) {
        if (perf_read_all(rd[i].res_fd, &ans[i], sizeof(ans[i]), ANSWER_MS) != 0) {
            fprintf(stderr, "rs-bcast-bench: reader %d did not answer\n", i);
            return 0;
        }
    }
    uint64_t t = perf_now_ns() - t0;
    rs_bcast_destroy(bc);
    return t;
}

static int run_case(const opts_t *o, rs_bcast_node_t *src, const unsigned char *data, reader_t *rd,
                    uint64_t bytes, int n, int mode, result_t *res)
{
    int iters = iters_for(o, bytes);
    uint64_t times[256], gets[256];
    answer_t ans[MAX_READERS];
    uint64_t want = sample_of(data, bytes);
    memset(res, 0, sizeof(*res));
    res->bytes = bytes;
    res->readers = n;
    res->mode = mode;
    res->iters = iters;
    if (iters > 256)
        iters = 256;
    for (int it = -1; it < iters; it++) { /* iteration -1 warms connections up */
        uint64_t t = broadcast_once(src, data, bytes, rd, n, mode, ans);
        if (t == 0)
            return -1;
        uint64_t src_reads = 0, slowest = 0;
        for (int i = 0; i < n; i++) {
            if (ans[i].get_ns > slowest)
                slowest = ans[i].get_ns;
            if (ans[i].status != RS_OK || ans[i].len != bytes || ans[i].sample != want) {
                fprintf(stderr, "rs-bcast-bench: reader %d got %s (%llu bytes)\n", i,
                        rs_strerror(ans[i].status), (unsigned long long)ans[i].len);
                return -1;
            }
            src_reads += ans[i].source_reads;
            if (it >= 0) {
                res->fallbacks += ans[i].fallbacks;
                if (ans[i].round_trips > res->round_trips)
                    res->round_trips = ans[i].round_trips;
                if (ans[i].reads > res->reads)
                    res->reads = ans[i].reads;
            }
        }
        if (it >= 0) {
            times[it] = t;
            gets[it] = slowest;
            if (src_reads > res->source_reads)
                res->source_reads = src_reads;
        }
    }
    res->median_us = median(times, iters) / 1000.0;
    res->get_us = median(gets, iters) / 1000.0;
    return 0;
}

/* ---------------------------------------------------------------- options */

#define USAGE                                                                          \
    "usage: rs-bcast-bench [--json [FILE]] [--csv FILE] [--sizes 1K,1M,16M,64M]\n"     \
    "                      [--readers 1,2,4,8] [--modes torrent,source] [--iters N]\n" \
    "                      [--block-size 4M] [--transport ucx|verbs] [--host H]\n"     \
    "                      [--launcher local|mpi] [--progress]\n"

static void usage(void)
{
    fputs(USAGE, stderr);
}

static int parse_opts(int argc, char **argv, opts_t *o)
{
    uint64_t v[MAX_LIST];
    const char *h = getenv("RSHUFFLE_TEST_HOST");
    memset(o, 0, sizeof(*o));
    o->sizes[0] = 1u << 10;
    o->sizes[1] = 1u << 20;
    o->sizes[2] = 16u << 20;
    o->sizes[3] = 64u << 20;
    o->n_sizes = 4;
    for (int i = 0; i < 4; i++)
        o->readers[i] = 1 << i;
    o->n_readers = 4;
    o->modes[0] = RS_BCAST_TORRENT;
    o->modes[1] = RS_BCAST_SOURCE;
    o->n_modes = 2;
    o->block_size = 4u << 20;
    o->transport = RS_TRANSPORT_UCX;
    snprintf(o->host, sizeof(o->host), "%s", h != NULL && *h ? h : "127.0.0.1");
    o->host_given = h != NULL && *h;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int n;
        if (val == NULL) {
            usage();
            return -1;
        }
        i++;
        if (strcmp(a, "--sizes") == 0) {
            if ((o->n_sizes = perf_parse_sizes(val, o->sizes, MAX_LIST)) <= 0)
                return -1;
        } else if (strcmp(a, "--readers") == 0) {
            if ((n = perf_parse_sizes(val, v, MAX_LIST)) <= 0)
                return -1;
            for (int j = 0; j < n; j++) {
                if (v[j] < 1 || v[j] > MAX_READERS)
                    return -1;
                o->readers[j] = (int)v[j];
            }
            o->n_readers = n;
            o->mpi |= 2; /* --readers given: not with --launcher mpi */
        } else if (strcmp(a, "--launcher") == 0 && strcmp(val, "mpi") == 0) {
            o->mpi |= 1;
        } else if (strcmp(a, "--launcher") == 0 && strcmp(val, "local") == 0) {
            o->mpi &= ~1;
        } else if (strcmp(a, "--modes") == 0) {
            o->n_modes = 0;
            if (strstr(val, "torrent") != NULL)
                o->modes[o->n_modes++] = RS_BCAST_TORRENT;
            if (strstr(val, "source") != NULL)
                o->modes[o->n_modes++] = RS_BCAST_SOURCE;
            if (o->n_modes == 0)
                return -1;
        } else if (strcmp(a, "--iters") == 0) {
            o->iters = (int)perf_arg_uint("rs-bcast-bench", a, val, 1, 1000000);
        } else if (strcmp(a, "--block-size") == 0) {
            if (rs_parse_size(val, &o->block_size) != RS_OK)
                return -1;
        } else if (strcmp(a, "--transport") == 0) {
            if (strcmp(val, "ucx") == 0)
                o->transport = RS_TRANSPORT_UCX;
            else if (strcmp(val, "verbs") == 0)
                o->transport = RS_TRANSPORT_VERBS;
            else
                return -1;
        } else if (strcmp(a, "--host") == 0) {
            snprintf(o->host, sizeof(o->host), "%s", val);
            o->host_given = 1;
        } else {
            usage();
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------- main */

static const char *mode_name(int m)
{
    return m == RS_BCAST_TORRENT ? "torrent" : "source";
}

static void print_table(const opts_t *o, const result_t *res, int n)
{
    printf("%10s %7s %8s %11s %11s %11s %6s %12s %9s\n", "bytes", "readers", "mode", "median_us",
           "get_us", "round_trips", "reads", "source_reads", "fallbacks");
    for (int i = 0; i < n; i++)
        printf("%10llu %7d %8s %11.1f %11.1f %11llu %6llu %12llu %9llu\n",
               (unsigned long long)res[i].bytes, res[i].readers, mode_name(res[i].mode),
               res[i].median_us, res[i].get_us, (unsigned long long)res[i].round_trips,
               (unsigned long long)res[i].reads, (unsigned long long)res[i].source_reads,
               (unsigned long long)res[i].fallbacks);
    printf("# median_us: publish to the last reader's answer; get_us: the slowest reader's\n"
           "# rs_bcast_get; round_trips and reads: most issued by one reader for one broadcast;\n"
           "# source_reads:\n"
           "# block reads the source served for one broadcast (all readers); fallbacks: times a\n"
           "# reader's patience ran out (all readers and iterations); block size %llu\n",
           (unsigned long long)o->block_size);
}

static void put_results(const opts_t *o, const result_t *res, int n)
{
    const char *tls = getenv("UCX_TLS");
    int verbs = o->transport == RS_TRANSPORT_VERBS;
    perf_out_meta(&pout, verbs ? "verbs" : "ucx", !verbs && tls ? tls : "-");
    for (int i = 0; i < n; i++) {
        perf_row(&pout);
        perf_u64(&pout, "bytes", res[i].bytes);
        perf_int(&pout, "readers", res[i].readers);
        perf_str(&pout, "mode", mode_name(res[i].mode));
        perf_num(&pout, "median_us", res[i].median_us, 1);
        perf_num(&pout, "get_us", res[i].get_us, 1);
        perf_u64(&pout, "round_trips", res[i].round_trips);
        perf_u64(&pout, "reads", res[i].reads);
        perf_u64(&pout, "source_reads", res[i].source_reads);
        perf_u64(&pout, "fallbacks", res[i].fallbacks);
        perf_int(&pout, "iters", res[i].iters);
        if (verbs && perf_soft_rdma_device())
            perf_bool(&pout, "functional", 1); /* Soft-RoCE: functional only (perf_util.h) */
    }
}

int main(int argc, char **argv)
{
    perf_std_args(argc, argv,
                  USAGE "Broadcast time, round trips and reads per object size, reader count and "
                        "mode\n(one reader per MPI rank but 0 with --launcher mpi).\n");
    perf_out_init(&pout, "rs-bcast-bench", &argc, argv);
    opts_t o;
    reader_t rd[MAX_READERS];
    result_t res[MAX_LIST * MAX_LIST * 2];
    int n_res = 0, max_readers = 0, rc = 1;

    if (parse_opts(argc, argv, &o) != 0) {
        usage();
        return 2;
    }
    if (o.mpi == 3) {
        fprintf(stderr, "rs-bcast-bench: with --launcher mpi the readers are ranks 1..N-1: "
                        "no --readers\n");
        return 2;
    }
    if (o.mpi & 1) { /* rank 0 the source, the others readers */
        launch_start("rs-bcast-bench", "mpi", &argc, &argv);
        launched = 1;
        /* hostport addresses: one the other ranks reach (every rank takes part) */
        if (!o.host_given && getenv("RSHUFFLE_BCAST_HOST") == NULL) {
            launch_host(o.host, sizeof(o.host));
            o.host_given = 1;
        }
        snprintf(pout.launcher, sizeof(pout.launcher), "mpi");
        pout.ranks = launch_size();
        if (launch_size() < 2 || launch_size() > MAX_READERS + 1) {
            if (launch_rank() == 0)
                fprintf(stderr, "rs-bcast-bench: --launcher mpi needs 2 to %d ranks\n",
                        MAX_READERS + 1);
            launch_end();
            return 2;
        }
        if (launch_rank() != 0) {
            rc = serve_launched(&o);
            launch_end();
            return rc;
        }
        o.readers[0] = launch_size() - 1;
        o.n_readers = 1;
    }
    for (int i = 0; i < o.n_readers; i++)
        if (o.readers[i] > max_readers)
            max_readers = o.readers[i];
    uint64_t max_bytes = 0;
    for (int i = 0; i < o.n_sizes; i++)
        if (o.sizes[i] > max_bytes)
            max_bytes = o.sizes[i];
    unsigned char *data = malloc(max_bytes + 1);
    if (data == NULL)
        return 1;
    for (uint64_t i = 0; i < max_bytes; i++)
        data[i] = (unsigned char)(i * 2654435761u >> 13);

    /* Readers first: no fabric state may exist in a process that forks. */
    if (!launched && spawn_readers(&o, rd, max_readers) != 0)
        return 1;
    rs_bcast_node_t *src = make_node(&o, RS_BCAST_TORRENT);
    uint64_t bad = src == NULL;
    launch_sum_u64(&bad, 1); /* --launcher mpi: every rank's nodes are up */
    if (src == NULL)
        fprintf(stderr, "rs-bcast-bench: cannot create the source node\n");
    if (bad)
        goto out_stop;
    double t0 = perf_now_s(), done = 0, cases = o.n_sizes * o.n_readers * o.n_modes;
    for (int s = 0; s < o.n_sizes; s++) {
        for (int r = 0; r < o.n_readers; r++) {
            for (int m = 0; m < o.n_modes; m++) {
                result_t *x = &res[n_res];
                if (run_case(&o, src, data, rd, o.sizes[s], o.readers[r], o.modes[m], x) != 0)
                    goto out_node;
                n_res++;
                done++;
                perf_progress(&pout, "broadcast", done, cases, "cases", t0, perf_now_s(),
                              done == cases);
                if (!pout.json)
                    fprintf(stderr, "# %llu bytes, %d readers, %s: %.1f us\n",
                            (unsigned long long)x->bytes, x->readers, mode_name(x->mode),
                            x->median_us);
            }
        }
    }
    rc = 0;
out_node:
    rs_bcast_node_destroy(src);
out_stop:
    if (launched) { /* stop the readers */
        static launch_cmd_t stop;
        launch_bcast(&stop, sizeof(stop), 0);
    } else {
        stop_readers(rd, max_readers);
    }
    free(data);
    if (rc == 0) {
        if (!pout.json || pout.json_path != NULL)
            print_table(&o, res, n_res);
        put_results(&o, res, n_res);
        if (perf_out_emit(&pout) != 0)
            rc = 1;
    }
    launch_end();
    return rc;
}
