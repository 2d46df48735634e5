/*
 * rs-perf-transport: two processes on one host, the public transport API
 * only. Put bandwidth, get bandwidth, notified-put rate and message round
 * trip, per fabric (UCX shared memory, UCX TCP on loopback, or verbs).
 *
 * Methodology follows ucx_perftest's ucp_put_bw: every put writes the same
 * remote bytes from the same local bytes, at most `window` operations are
 * outstanding, and the clock stops when a final flush completed. Bandwidth is
 * in MiB/s (2^20 bytes per second), the unit ucx_perftest prints as "MB/s".
 * The target process busy-progresses its context, like ucx_perftest's
 * responder (UCX over TCP emulates one-sided operations on the target).
 *
 * The client connects by the target's address blob (rs_ctx_address, passed
 * over a pipe, as ucx_perftest exchanges worker addresses out of band), or
 * with --connect listen through rs_listen/rs_connect. UCX 1.13 needs its tcp
 * transport for listener connections, so shm + listen runs with
 * UCX_TLS=posix,sysv,self,tcp (data still over shared memory).
 *
 * Usage: rs-perf-transport [--test put,get,notify,msg] [--size 64,4K,64K,1M]
 *        [--transport shm,tcp | verbs] [--iters N] [--warmup N] [--window W]
 *        [--connect address|listen] [--host ADDR] [--json [FILE]] [--csv FILE]
 * Output: perf/perf_json.h; a result carries mib_s and ops_s (bandwidth
 * tests) or us (msg_rtt).
 */
#include "perf_json.h"
#include "perf_util.h"
#include <rshuffle/transport.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES   16
#define MAX_RESULTS 128
#define MSG_ECHO    1
#define MSG_REPLY   2

enum { TEST_PUT = 1, TEST_GET = 2, TEST_NOTIFY = 4, TEST_MSG = 8 };

typedef struct opts {
    unsigned tests;
    size_t sizes[MAX_SIZES];
    int n_sizes;
    char transports[3][8];
    int n_transports;
    uint64_t iters, warmup; /* 0: automatic */
    unsigned window;
    const char *host;
    bool listen;
} opts_t;

typedef struct result {
    const char *test;
    char transport[8];
    size_t size;
    uint64_t iters;
    unsigned window;
    double mbps, usec, rate; /* usec < 0: a bandwidth result */
    bool functional;
} result_t;

static result_t results[MAX_RESULTS];
static int n_results;
static pid_t server_pid;

#define die(...)       perf_die("rs-perf-transport", __VA_ARGS__)
#define CHECK_RS(call) PERF_CHECK_RS("rs-perf-transport", call)

/* At any exit (die included): the target process goes too. */
static void kill_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
}

/* ---------------------------------------------------- the control pipe */

/* A length-prefixed blob: the target's address (or port) and its region's key. */
static void blob_write(int fd, const void *data, size_t len)
{
    if (perf_blob_write(fd, data, len) != 0)
        die("control pipe: %s", strerror(errno));
}

static size_t blob_read(int fd, void *buf, size_t cap)
{
    size_t len;
    if (perf_blob_read(fd, buf, cap, 30000, &len) != 0)
        die("control pipe: %s", errno == ETIMEDOUT  ? "no answer within 30000 ms"
                                : errno == EMSGSIZE ? "blob too long"
                                                    : "the other process is gone");
    return len;
}

/* ------------------------------------------------------------ the target */

static void server_echo(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)arg;
    CHECK_RS(rs_msg_send(ep, MSG_REPLY, data, len, NULL, NULL));
}

static void server_notify(void *arg, rs_ep_t *ep, uint32_t imm)
{
    (void)ep;
    (void)imm;
    ++*(uint64_t *)arg;
}

/*
 * Serves one region of region_len bytes until the client writes a byte.
 * Publishes its port (listen) or its address blob, then the region's key.
 */
static int server_main(size_t region_len, const char *host, bool listen)
{
    const int rd = 3, wr = 4;
    uint64_t notifies = 0;
    rs_ctx_t *ctx = NULL;
    rs_mr_t *mr = NULL;
    rs_listener_t *l = NULL;
    static uint8_t blob[RS_ADDR_BLOB_MAX];
    size_t len = 0;

    CHECK_RS(rs_ctx_create(NULL, &ctx));
    CHECK_RS(rs_set_msg_handler(ctx, MSG_ECHO, server_echo, NULL));
    rs_set_notify_handler(ctx, server_notify, &notifies);
    CHECK_RS(rs_mem_alloc(ctx, region_len, RS_MEM_REMOTE_ALL, &mr));
    memset(rs_mr_addr(mr), 0, region_len);
    if (listen) {
        CHECK_RS(rs_listen(ctx, host, 0, &l));
        uint16_t port = rs_listener_port(l);
        blob_write(wr, &port, sizeof(port));
    } else {
        CHECK_RS(rs_ctx_address(ctx, blob, sizeof(blob), &len));
        blob_write(wr, blob, len);
    }
    CHECK_RS(rs_mr_pack_rkey(mr, blob, sizeof(blob), &len));
    blob_write(wr, blob, len);

    /* Busy progress (the responder of ucx_perftest does the same). */
    for (unsigned i = 0;; i++) {
        rs_progress(ctx);
        if ((i & 1023) != 0)
            continue;
        struct pollfd pfd = {.fd = rd, .events = POLLIN};
        if (poll(&pfd, 1, 0) > 0)
            break;
    }
    if (l != NULL)
        rs_listener_destroy(l);
    rs_mem_free(mr);
    rs_ctx_destroy(ctx);
    return 0;
}

/* ------------------------------------------------------------ the client */

typedef struct client {
    rs_ctx_t *ctx;
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    rs_mr_t *mr;
    uint64_t done, failed;
    uint64_t replies;
    int rd, wr;
} client_t;

static void op_done(void *arg, rs_status_t status)
{
    client_t *c = arg;
    c->done++;
    if (status != RS_OK)
        c->failed++;
}

static void reply_recv(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    (void)data;
    (void)len;
    ((client_t *)arg)->replies++;
}

static rs_status_t post(client_t *c, int test, size_t size, uint64_t i)
{
    void *buf = rs_mr_addr(c->mr);
    switch (test) {
        case TEST_PUT:
            return rs_put(c->ep, buf, size, c->mr, c->rkey, 0, op_done, c);
        case TEST_GET:
            return rs_get(c->ep, buf, size, c->mr, c->rkey, 0, op_done, c);
        default:
            return rs_put_notify(c->ep, buf, size, c->mr, c->rkey, 0, (uint32_t)i, op_done, c);
    }
}

/* iters operations of one kind with at most window outstanding; seconds taken. */
static double run_ops(client_t *c, int test, size_t size, uint64_t iters, unsigned window)
{
    uint64_t posted = 0;
    c->done = c->failed = 0;
    double t0 = perf_now_s();
    while (c->done < iters) {
        while (posted < iters && posted - c->done < window) {
            rs_status_t st = post(c, test, size, posted);
            if (st == RS_ERR_BUSY)
                break;
            if (st != RS_OK)
                die("posting op %llu: %s", (unsigned long long)posted, rs_strerror(st));
            posted++;
        }
        rs_progress(c->ctx);
    }
    uint64_t before = c->done;
    CHECK_RS(rs_ep_flush(c->ep, op_done, c));
    while (c->done == before)
        rs_progress(c->ctx);
    double t = perf_now_s() - t0;
    if (c->failed != 0)
        die("%llu operations failed", (unsigned long long)c->failed);
    return t;
}

/* iters request/reply round trips; seconds taken. */
static double run_msgs(client_t *c, size_t size, uint64_t iters)
{
    void *buf = rs_mr_addr(c->mr);
    c->replies = 0;
    double t0 = perf_now_s();
    for (uint64_t i = 0; i < iters; i++) {
        rs_status_t st;
        while ((st = rs_msg_send(c->ep, MSG_ECHO, buf, size, NULL, NULL)) == RS_ERR_BUSY)
            rs_progress(c->ctx);
        if (st != RS_OK)
            die("rs_msg_send: %s", rs_strerror(st));
        while (c->replies <= i)
            rs_progress(c->ctx);
    }
    return perf_now_s() - t0;
}

/* ------------------------------------------------------------ the run */

static uint64_t budget_bytes(const char *transport)
{
    if (strcmp(transport, "shm") == 0)
        return 2ull << 30;
    if (strcmp(transport, "tcp") == 0)
        return 256ull << 20;
    return 32ull << 20;
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void set_fabric_env(const char *transport, bool listen)
{
    if (strcmp(transport, "verbs") == 0) {
        setenv("RSHUFFLE_TRANSPORT", "verbs", 1);
        return;
    }
    setenv("RSHUFFLE_TRANSPORT", "ucx", 1);
    if (strcmp(transport, "shm") == 0)
        setenv("UCX_TLS", listen ? "posix,sysv,self,tcp" : "posix,sysv,self", 1);
    else
        setenv("UCX_TLS", "tcp,self", 1);
    /* TCP stays on the loopback device unless the user chose otherwise. */
    setenv("UCX_NET_DEVICES", "lo", 0);
}

static pid_t spawn_server(size_t region_len, const char *host, bool listen, int *rd, int *wr)
{
    /* The real path: exec of /proc/self/exe fails under valgrind. */
    static char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        die("readlink /proc/self/exe: %s", strerror(errno));
    exe[n] = '\0';
    char len_arg[32], host_arg[256];
    snprintf(len_arg, sizeof(len_arg), "%zu", region_len);
    snprintf(host_arg, sizeof(host_arg), "%s", host);
    pid_t pid = perf_fork_piped(rd, wr);
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        int r = fcntl(*rd, F_DUPFD, 100), w = fcntl(*wr, F_DUPFD, 100);
        if (r < 0 || w < 0 || dup2(r, 3) != 3 || dup2(w, 4) != 4)
            _exit(126);
        close_range(5, ~0u, 0);
        char mode[] = "listen",
             *argv[] = {exe, "--server", len_arg, host_arg, listen ? mode : NULL, NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void add_result(const char *test, const char *transport, size_t size, uint64_t iters,
                       unsigned window, double seconds, bool functional)
{
    if (n_results == MAX_RESULTS)
        die("too many results");
    result_t *r = &results[n_results++];
    memset(r, 0, sizeof(*r));
    r->test = test;
    snprintf(r->transport, sizeof(r->transport), "%s", transport);
    r->size = size;
    r->iters = iters;
    r->window = window;
    r->functional = functional;
    r->usec = -1;
    if (strcmp(test, "msg_rtt") == 0) {
        r->usec = seconds * 1e6 / (double)iters;
        return;
    }
    r->mbps = (double)size * (double)iters / seconds / (1024.0 * 1024.0);
    r->rate = (double)iters / seconds;
}

static size_t max_size(const opts_t *o)
{
    size_t m = 8;
    for (int i = 0; i < o->n_sizes; i++)
        m = o->sizes[i] > m ? o->sizes[i] : m;
    return m;
}

static void run_transport(const opts_t *o, const char *transport)
{
    const bool verbs = strcmp(transport, "verbs") == 0;
    const bool functional = verbs && perf_soft_rdma_device();
    const size_t msg_cap = verbs ? 64u << 10 : 1u << 20;
    size_t region = max_size(o);
    size_t msg_max = 64;
    for (int i = 0; i < o->n_sizes; i++)
        if (o->sizes[i] <= msg_cap && o->sizes[i] > msg_max)
            msg_max = o->sizes[i];
    char msg_max_arg[32];
    snprintf(msg_max_arg, sizeof(msg_max_arg), "%zu", msg_max);

    set_fabric_env(transport, o->listen);
    setenv("RSHUFFLE_MSG_MAX", msg_max_arg, 1);
    client_t c = {0};
    server_pid = spawn_server(region, o->host, o->listen, &c.rd, &c.wr);
    static uint8_t addr[RS_ADDR_BLOB_MAX];
    uint8_t blob[RS_RKEY_BLOB_MAX];
    size_t addr_len = blob_read(c.rd, addr, sizeof(addr));
    size_t blob_len = blob_read(c.rd, blob, sizeof(blob));

    CHECK_RS(rs_ctx_create(NULL, &c.ctx));
    CHECK_RS(rs_set_msg_handler(c.ctx, MSG_REPLY, reply_recv, &c));
    if (o->listen) {
        uint16_t port;
        if (addr_len != sizeof(port))
            die("bad port from the target");
        memcpy(&port, addr, sizeof(port));
        CHECK_RS(rs_connect(c.ctx, o->host, port, &c.ep));
    } else {
        CHECK_RS(rs_connect_address(c.ctx, addr, addr_len, &c.ep));
    }
    CHECK_RS(rs_rkey_unpack(c.ep, blob, blob_len, &c.rkey));
    CHECK_RS(rs_mem_alloc(c.ctx, region, RS_MEM_LOCAL, &c.mr));
    memset(rs_mr_addr(c.mr), 0x5a, region);

    static const struct {
        int bit;
        const char *name;
    } tests[] = {{TEST_PUT, "put_bw"},
                 {TEST_GET, "get_bw"},
                 {TEST_NOTIFY, "notify_rate"},
                 {TEST_MSG, "msg_rtt"}};
    for (size_t t = 0; t < sizeof(tests) / sizeof(tests[0]); t++) {
        if ((o->tests & (unsigned)tests[t].bit) == 0)
            continue;
        for (int s = 0; s < o->n_sizes; s++) {
            size_t size = o->sizes[s];
            uint64_t budget = budget_bytes(transport);
            if (tests[t].bit == TEST_MSG) {
                if (size > msg_max) {
                    fprintf(stderr, "rs-perf-transport: %s: msg_rtt skips %zu B (> %zu)\n",
                            transport, size, msg_cap);
                    continue;
                }
                uint64_t iters = o->iters ? o->iters : clamp_u64(budget / 16 / size, 50, 20000);
                uint64_t warm = o->warmup ? o->warmup : clamp_u64(iters / 10, 5, 1000);
                run_msgs(&c, size, warm);
                add_result(tests[t].name, transport, size, iters, 1, run_msgs(&c, size, iters),
                           functional);
                continue;
            }
            uint64_t iters = o->iters ? o->iters : clamp_u64(budget / size, 100, 200000);
            uint64_t warm = o->warmup ? o->warmup : clamp_u64(iters / 10, 10, 10000);
            run_ops(&c, tests[t].bit, size, warm, o->window);
            add_result(tests[t].name, transport, size, iters, o->window,
                       run_ops(&c, tests[t].bit, size, iters, o->window), functional);
        }
    }

    rs_rkey_destroy(c.rkey);
    rs_ep_close(c.ep);
    rs_mem_free(c.mr);
    rs_ctx_destroy(c.ctx);
    if (perf_write_all(c.wr, "q", 1) != 0)
        die("control pipe: %s", strerror(errno));
    int wstatus = 0;
    for (int i = 0; i < 1000 && waitpid(server_pid, &wstatus, WNOHANG) == 0; i++)
        usleep(10000);
    if (waitpid(server_pid, &wstatus, WNOHANG) == 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, &wstatus, 0);
    }
    server_pid = 0;
    close(c.rd);
    close(c.wr);
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
        die("the target process failed (status %d)", wstatus);
}

/* ------------------------------------------------------------ output */

static void print_table(void)
{
    printf("%-9s %-12s %9s %8s %6s %14s %14s\n", "fabric", "test", "size", "iters", "window",
           "MiB/s", "result");
    for (int i = 0; i < n_results; i++) {
        const result_t *r = &results[i];
        char extra[64] = "";
        if (r->usec >= 0)
            snprintf(extra, sizeof(extra), "%.2f us rtt", r->usec);
        else if (strcmp(r->test, "notify_rate") == 0)
            snprintf(extra, sizeof(extra), "%.3f Mnotif/s", r->rate / 1e6);
        else
            snprintf(extra, sizeof(extra), "%.3f Mops/s", r->rate / 1e6);
        printf("%-9s %-12s %9zu %8llu %6u %14.1f %14s%s\n", r->transport, r->test, r->size,
               (unsigned long long)r->iters, r->window, r->usec >= 0 ? 0.0 : r->mbps, extra,
               r->functional ? "  (functional: software RDMA)" : "");
    }
}

static void put_results(perf_out_t *po, const opts_t *o)
{
    const char *tls = getenv("UCX_TLS");
    int verbs = o->n_transports == 1 && strcmp(o->transports[0], "verbs") == 0;
    perf_out_meta(po, verbs ? "verbs" : "ucx", tls != NULL && !verbs ? tls : o->transports[0]);
    for (int i = 0; i < n_results; i++) {
        const result_t *r = &results[i];
        perf_row(po);
        perf_str(po, "test", r->test);
        perf_str(po, "transport", r->transport);
        perf_u64(po, "size", r->size);
        perf_u64(po, "iters", r->iters);
        perf_u64(po, "window", r->window);
        if (r->usec >= 0) {
            perf_num(po, "us", r->usec, 3);
        } else {
            perf_num(po, "mib_s", r->mbps, 2);
            perf_num(po, "ops_s", r->rate, 1);
        }
        if (r->functional)
            perf_bool(po, "functional", 1);
    }
}

/* ------------------------------------------------------------ options */

static void usage(FILE *f)
{
    fprintf(f, "usage: rs-perf-transport [--test put,get,notify,msg] [--size 64,4K,64K,1M]\n"
               "       [--transport shm,tcp|verbs] [--iters N] [--warmup N] [--window W]\n"
               "       [--connect address|listen] [--host ADDR] [--json [FILE]] [--csv FILE]\n"
               "Bandwidth in MiB/s (2^20 B/s, ucx_perftest's \"MB/s\"); msg_rtt: round trip.\n");
}

static size_t parse_size(const char *s)
{
    uint64_t v;
    if (rs_parse_size(s, &v) != RS_OK)
        die("bad size '%s'", s);
    if (v == 0 || v > (64ull << 20))
        die("size '%s' out of range (1 B .. 64 MiB)", s);
    return (size_t)v;
}

static void parse_opts(opts_t *o, int argc, char **argv)
{
    static const struct option longs[] = {
        {"test", required_argument, NULL, 't'},      {"size", required_argument, NULL, 's'},
        {"transport", required_argument, NULL, 'x'}, {"iters", required_argument, NULL, 'n'},
        {"warmup", required_argument, NULL, 'w'},    {"window", required_argument, NULL, 'W'},
        {"host", required_argument, NULL, 'H'},      {"help", no_argument, NULL, 'h'},
        {"connect", required_argument, NULL, 'c'},   {NULL, 0, NULL, 0},
    };
    const char *env_host = getenv("RSHUFFLE_TEST_HOST");
    *o = (opts_t){.tests = TEST_PUT | TEST_GET | TEST_NOTIFY | TEST_MSG,
                  .sizes = {64, 4096, 65536, 1u << 20},
                  .n_sizes = 4,
                  .transports = {"shm", "tcp"},
                  .n_transports = 2,
                  .window = 32,
                  .host = env_host != NULL && env_host[0] ? env_host : "127.0.0.1"};
    char *tok, *save;
    int c;
    while ((c = getopt_long(argc, argv, "t:s:x:n:w:W:H:c:h", longs, NULL)) != -1) {
        switch (c) {
            case 't':
                o->tests = 0;
                for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                    if (strcmp(tok, "put") == 0)
                        o->tests |= TEST_PUT;
                    else if (strcmp(tok, "get") == 0)
                        o->tests |= TEST_GET;
                    else if (strcmp(tok, "notify") == 0)
                        o->tests |= TEST_NOTIFY;
                    else if (strcmp(tok, "msg") == 0)
                        o->tests |= TEST_MSG;
                    else if (strcmp(tok, "all") == 0)
                        o->tests = TEST_PUT | TEST_GET | TEST_NOTIFY | TEST_MSG;
                    else
                        die("unknown test '%s' (put, get, notify, msg, all)", tok);
                }
                break;
            case 's':
                o->n_sizes = 0;
                for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                    if (o->n_sizes == MAX_SIZES)
                        die("at most %d sizes", MAX_SIZES);
                    o->sizes[o->n_sizes++] = parse_size(tok);
                }
                break;
            case 'x':
                o->n_transports = 0;
                for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                    if (strcmp(tok, "all") == 0) {
                        strcpy(o->transports[0], "shm");
                        strcpy(o->transports[1], "tcp");
                        o->n_transports = 2;
                        continue;
                    }
                    if (strcmp(tok, "shm") != 0 && strcmp(tok, "tcp") != 0 &&
                        strcmp(tok, "verbs") != 0)
                        die("unknown transport '%s' (shm, tcp, verbs)", tok);
                    if (o->n_transports == 3)
                        die("too many transports");
                    strcpy(o->transports[o->n_transports++], tok);
                }
                break;
            case 'n':
                o->iters = perf_arg_uint("rs-perf-transport", "--iters", optarg, 1, UINT64_MAX);
                break;
            case 'w':
                o->warmup = perf_arg_uint("rs-perf-transport", "--warmup", optarg, 0, UINT64_MAX);
                break;
            case 'W':
                o->window =
                    (unsigned)perf_arg_uint("rs-perf-transport", "--window", optarg, 1, UINT32_MAX);
                if (o->window == 0)
                    die("--window must be at least 1");
                break;
            case 'H':
                o->host = optarg;
                break;
            case 'c':
                if (strcmp(optarg, "listen") != 0 && strcmp(optarg, "address") != 0)
                    die("--connect takes address or listen");
                o->listen = strcmp(optarg, "listen") == 0;
                break;
            case 'h':
                usage(stdout);
                exit(0);
            default:
                usage(stderr);
                exit(2);
        }
    }
    if (optind != argc || o->n_sizes == 0 || o->n_transports == 0 || o->tests == 0) {
        usage(stderr);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    perf_std_args(
        argc, argv,
        "usage: rs-perf-transport [--test put,get,notify,msg] [--size 64,4K,64K,1M]\n"
        "                         [--transport shm,tcp | verbs] [--iters N] [--warmup N] [--window "
        "W]\n"
        "                         [--connect address|listen] [--host ADDR] [--json [FILE]]\n"
        "                         [--csv FILE]\n"
        "Put and get bandwidth, notified-put rate and message round trip between two processes.\n");
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "--server") == 0)
        return server_main(
            (size_t)perf_arg_size("rs-perf-transport", "--server", argv[2], 1, SIZE_MAX), argv[3],
            argc == 5);
    opts_t o;
    perf_out_t po;
    perf_out_init(&po, "rs-perf-transport", &argc, argv);
    parse_opts(&o, argc, argv);
    atexit(kill_server);
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < o.n_transports; i++)
        run_transport(&o, o.transports[i]);
    fflush(stdout);
    print_table();
    put_results(&po, &o);
    return perf_out_emit(&po) == 0 ? 0 : 1;
}
