/*
 * rs-bcast-bench: the torrent broadcast study on this machine (public API only).
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
 *   rs-bcast-bench [--json] [--sizes 1K,1M,16M,64M] [--readers 1,2,4,8]
 *                  [--modes torrent,source] [--iters N] [--block-size 4M]
 *                  [--transport ucx|verbs] [--host H]
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf_util.h"
#include <rshuffle/broadcast.h>

#define MAX_LIST    16
#define MAX_READERS 64
#define ANSWER_MS   120000

typedef struct opts {
    int json;
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
    snprintf(bc.host, sizeof(bc.host), "%s", o->host);
    return rs_bcast_node_create(&tc, &bc, &node) == RS_OK ? node : NULL;
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
        rs_bcast_ref_t *ref;
        rs_bcast_stats_t st;
        memset(&a, 0, sizeof(a));
        uint64_t t0 = perf_now_ns();
        a.status = rs_bcast_get(nodes[msg[0] ? 1 : 0], msg + 1, len - 1, &ref);
        a.get_ns = perf_now_ns() - t0;
        if (a.status == RS_OK) {
            a.len = rs_bcast_ref_len(ref);
            a.sample = sample_of(rs_bcast_ref_data(ref), a.len);
            rs_bcast_ref_stats(ref, &st);
            a.round_trips = st.round_trips;
            a.reads = st.reads;
            a.source_reads = st.source_reads;
            a.fallbacks = st.source_fallbacks;
            rs_bcast_release(ref);
        }
        if (perf_write_all(res_fd, &a, sizeof(a)) != 0)
            break;
    }
out:
    rs_bcast_node_destroy(nodes[1]);
    rs_bcast_node_destroy(nodes[0]);
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
    for (int i = 0; i < n; i++) {
        if (perf_write_all(rd[i].cmd_fd, &len, sizeof(len)) != 0 ||
            perf_write_all(rd[i].cmd_fd, msg, len) != 0)
            return 0;
    }
    for (int i = 0; i < n; i++) {
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

static int parse_list(const char *arg, uint64_t *out, int max)
{
    char buf[256];
    int n = 0;
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (n == max || rs_parse_size(t, &out[n]) != RS_OK)
            return -1;
        n++;
    }
    return n;
}

static void usage(void)
{
    fprintf(stderr, "usage: rs-bcast-bench [--json] [--sizes 1K,1M,16M,64M] [--readers 1,2,4,8]\n"
                    "       [--modes torrent,source] [--iters N] [--block-size 4M]\n"
                    "       [--transport ucx|verbs] [--host H]\n");
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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int n;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (val == NULL) {
            usage();
            return -1;
        }
        i++;
        if (strcmp(a, "--sizes") == 0) {
            if ((o->n_sizes = parse_list(val, o->sizes, MAX_LIST)) <= 0)
                return -1;
        } else if (strcmp(a, "--readers") == 0) {
            if ((n = parse_list(val, v, MAX_LIST)) <= 0)
                return -1;
            for (int j = 0; j < n; j++) {
                if (v[j] < 1 || v[j] > MAX_READERS)
                    return -1;
                o->readers[j] = (int)v[j];
            }
            o->n_readers = n;
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

static void print_json(const opts_t *o, const result_t *res, int n)
{
    /* Soft-RoCE numbers are functional only (see perf_util.h). */
    const char *functional = o->transport == RS_TRANSPORT_VERBS && perf_soft_rdma_device()
                                 ? ", \"functional\": true"
                                 : "";
    printf("{\"results\": [");
    for (int i = 0; i < n; i++)
        printf("%s{\"bytes\": %llu, \"readers\": %d, \"mode\": \"%s\", \"median_us\": %.1f, "
               "\"get_us\": %.1f, \"round_trips\": %llu, \"reads\": %llu, \"source_reads\": %llu, "
               "\"fallbacks\": %llu, \"iters\": %d%s}",
               i ? ", " : "", (unsigned long long)res[i].bytes, res[i].readers,
               mode_name(res[i].mode), res[i].median_us, res[i].get_us,
               (unsigned long long)res[i].round_trips, (unsigned long long)res[i].reads,
               (unsigned long long)res[i].source_reads, (unsigned long long)res[i].fallbacks,
               res[i].iters, functional);
    printf("]}\n");
}

int main(int argc, char **argv)
{
    perf_std_args(
        argc, argv,
        "usage: rs-bcast-bench [--json] [--sizes 1K,1M,16M,64M] [--readers 1,2,4,8]\n"
        "                      [--modes torrent,source] [--iters N] [--block-size 4M]\n"
        "                      [--transport ucx|verbs] [--host H]\n"
        "Broadcast time, round trips and reads per object size, reader count and mode.\n");
    opts_t o;
    reader_t rd[MAX_READERS];
    result_t res[MAX_LIST * MAX_LIST * 2];
    int n_res = 0, max_readers = 0, rc = 1;

    if (parse_opts(argc, argv, &o) != 0) {
        usage();
        return 2;
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
    if (spawn_readers(&o, rd, max_readers) != 0)
        return 1;
    rs_bcast_node_t *src = make_node(&o, RS_BCAST_TORRENT);
    if (src == NULL) {
        fprintf(stderr, "rs-bcast-bench: cannot create the source node\n");
        goto out_stop;
    }
    for (int s = 0; s < o.n_sizes; s++) {
        for (int r = 0; r < o.n_readers; r++) {
            for (int m = 0; m < o.n_modes; m++) {
                result_t *x = &res[n_res];
                if (run_case(&o, src, data, rd, o.sizes[s], o.readers[r], o.modes[m], x) != 0)
                    goto out_node;
                n_res++;
                if (!o.json)
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
    stop_readers(rd, max_readers);
    free(data);
    if (rc == 0) {
        if (o.json)
            print_json(&o, res, n_res);
        else
            print_table(&o, res, n_res);
    }
    return rc;
}
