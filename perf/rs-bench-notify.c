/*
 * rs-bench-notify: how UCX orders a notified put's notification after its
 * data, measured end to end. UCX has no write-with-immediate; the backend
 * sends the notification as an active message after either
 * ucp_worker_fence (RSHUFFLE_UCX_NOTIFY=fence, the default) or an endpoint
 * flush (RSHUFFLE_UCX_NOTIFY=flush). For each fabric and size this runs both
 * modes alternately, --repeat times, in fresh client contexts against one
 * target process, and reports the median rate at which notifications reach
 * the target's handler (which checks that each notification finds its data).
 *
 *   rs-bench-notify [--transport shm,tcp] [--size 64,4K,64K] [--count N]
 *                   [--window W] [--repeat R] [--json [FILE]] [--csv FILE]
 *
 * Output (perf/perf_json.h): results [{"test": "notify_e2e", "transport",
 * "mode", "size", "count", "mib_s", "us", "cpu_us"}, ...]: median wall time
 * per notification and the putter's CPU time per notification.
 */
#include <errno.h>
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

#include "perf_json.h"
#include "perf_util.h"
#include <rshuffle/transport.h>

#define SLOT     (64u << 10) /* one slot per notification in flight */
#define SLOTS    64
#define MAX_ROWS 64

#define die(...)       perf_die("rs-bench-notify", __VA_ARGS__)
#define CHECK_RS(call) PERF_CHECK_RS("rs-bench-notify", call)

static void xwrite(int fd, const void *p, size_t n)
{
    if (perf_write_all(fd, p, n) != 0)
        die("pipe write failed");
}

static void xread(int fd, void *p, size_t n)
{
    if (perf_read_all(fd, p, n, -1) != 0)
        die("pipe read failed (peer gone)");
}

/*
 * A put carries its immediate in its first and last 4 bytes. The putter
 * reuses a slot once the put's local completion came, which may be before
 * the target handled the notification, so the handler accepts the slot's
 * own immediate or a later one of the same slot, never an older one.
 */
static inline void mark(uint8_t *slot, size_t size, uint32_t imm)
{
    memcpy(slot, &imm, 4);
    memcpy(slot + size - 4, &imm, 4);
}

static inline int marked_ok(const uint8_t *slot, size_t size, uint32_t imm)
{
    uint32_t a, b;
    memcpy(&a, slot, 4);
    memcpy(&b, slot + size - 4, 4);
    return a >= imm && b >= imm && a % SLOTS == imm % SLOTS && b % SLOTS == imm % SLOTS;
}

/* ------------------------------------------------------------- the target */

typedef struct target {
    rs_mr_t *mr;
    uint64_t seen, bad;
    size_t size; /* of the current run (set over the pipe) */
} target_t;

static void on_notify(void *arg, rs_ep_t *ep, uint32_t imm)
{
    target_t *t = arg;
    (void)ep;
    const uint8_t *slot = (const uint8_t *)rs_mr_addr(t->mr) + (size_t)(imm % SLOTS) * SLOT;
    if (!marked_ok(slot, t->size, imm))
        t->bad++;
    t->seen++;
}

/* Commands from the parent: size (u64) then count (u64); 0 count = stop. */
static int run_target(int rd, int wr)
{
    target_t t = {0};
    rs_ctx_t *ctx;
    uint8_t blob[RS_RKEY_BLOB_MAX], addr[RS_ADDR_BLOB_MAX];
    size_t len, alen;

    CHECK_RS(rs_ctx_create(NULL, &ctx));
    CHECK_RS(rs_mem_alloc(ctx, (size_t)SLOT * SLOTS, RS_MEM_REMOTE_ALL, &t.mr));
    rs_set_notify_handler(ctx, on_notify, &t);
    CHECK_RS(rs_ctx_address(ctx, addr, sizeof(addr), &alen));
    CHECK_RS(rs_mr_pack_rkey(t.mr, blob, sizeof(blob), &len));
    if (perf_blob_write(wr, addr, alen) != 0 || perf_blob_write(wr, blob, len) != 0)
        die("pipe write failed");

    for (;;) {
        uint64_t cmd[2];
        /* Busy progress while waiting for a command (the putter needs it on TCP). */
        for (;;) {
            struct pollfd pfd = {.fd = rd, .events = POLLIN};
            if (poll(&pfd, 1, 0) > 0)
                break;
            for (int i = 0; i < 256; i++)
                rs_progress(ctx);
        }
        xread(rd, cmd, sizeof(cmd));
        if (cmd[1] == 0)
            break;
        t.size = cmd[0];
        t.seen = t.bad = 0;
        uint64_t ack = 1;
        xwrite(wr, &ack, sizeof(ack));
        while (t.seen < cmd[1])
            rs_progress(ctx);
        uint64_t res[2] = {t.seen, t.bad};
        xwrite(wr, res, sizeof(res));
    }
    rs_ctx_destroy(ctx);
    return 0;
}

/* ------------------------------------------------------------- the putter */

typedef struct putter {
    uint64_t done, failed;
} putter_t;

static void op_done(void *arg, rs_status_t st)
{
    putter_t *p = arg;
    p->done++;
    if (st != RS_OK)
        p->failed++;
}

/*
 * One run: count notified puts of size with window in flight. Returns the
 * seconds until the target saw them all; *cpu_p gets the putter's CPU
 * seconds over the same span (unlike wall time, not inflated when the
 * scheduler parks one of the two busy processes on a shared machine).
 */
static double run_once(const uint8_t *addr, size_t alen, const uint8_t *blob, size_t blen, int rd,
                       int wr, size_t size, uint64_t count, unsigned window, double *cpu_p)
{
    rs_ctx_t *ctx;
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    rs_mr_t *mr;
    putter_t p = {0};

    CHECK_RS(rs_ctx_create(NULL, &ctx));
    CHECK_RS(rs_mem_alloc(ctx, (size_t)SLOT * SLOTS, RS_MEM_LOCAL, &mr));
    uint8_t *buf = rs_mr_addr(mr);
    CHECK_RS(rs_connect_address(ctx, addr, alen, &ep));
    CHECK_RS(rs_rkey_unpack(ep, blob, blen, &rkey));

    uint64_t cmd[2] = {size, count}, ack;
    xwrite(wr, cmd, sizeof(cmd));
    xread(rd, &ack, sizeof(ack));

    double t0 = perf_now_s(), c0 = perf_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t posted = 0;
    while (posted < count) {
        while (posted < count && posted - p.done < window && posted - p.done < SLOTS) {
            uint32_t imm = (uint32_t)posted;
            uint8_t *src = buf + (size_t)(imm % SLOTS) * SLOT;
            mark(src, size, imm);
            CHECK_RS(rs_put_notify(ep, src, size, mr, rkey, (uint64_t)(imm % SLOTS) * SLOT, imm,
                                   op_done, &p));
            posted++;
        }
        rs_progress(ctx);
    }
    uint64_t res[2];
    /* Keep progressing (TCP needs it) until the target has them all. */
    for (;;) {
        struct pollfd pfd = {.fd = rd, .events = POLLIN};
        if (poll(&pfd, 1, 0) > 0)
            break;
        rs_progress(ctx);
    }
    xread(rd, res, sizeof(res));
    double t = perf_now_s() - t0;
    *cpu_p = perf_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    while (p.done < posted)
        rs_progress(ctx);
    if (p.failed != 0 || res[1] != 0)
        die("%llu puts failed, %llu notifications found wrong data", (unsigned long long)p.failed,
            (unsigned long long)res[1]);
    rs_rkey_destroy(rkey);
    rs_ep_close(ep);
    rs_mem_free(mr);
    rs_ctx_destroy(ctx);
    return t;
}

/* ------------------------------------------------------------------ main */

typedef struct row {
    char transport[8], mode[8];
    size_t size;
    uint64_t count;
    double sec; /* median wall time */
    double cpu; /* median putter CPU time */
} row_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void set_fabric(const char *fabric)
{
    setenv("RSHUFFLE_TRANSPORT", "ucx", 1);
    /* Connected by worker address: no connection manager, so shm needs no tcp. */
    setenv("UCX_TLS", strcmp(fabric, "shm") == 0 ? "posix,sysv,self" : "tcp,self", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
}

int main(int argc, char **argv)
{
    perf_std_args(argc, argv,
                  "usage: rs-bench-notify [--transport shm,tcp] [--size 64,4K,64K] [--count N]\n"
                  "                       [--window W] [--repeat R] [--json [FILE]] [--csv FILE]\n"
                  "Notified put over UCX: fence vs flush.\n");
    perf_out_t po;
    perf_out_init(&po, "rs-bench-notify", &argc, argv);
    char transports[64] = "shm,tcp", sizes[128] = "64,4K,64K";
    uint64_t count = 0;
    unsigned window = 32, repeat = 3;
    static const struct option opts[] = {
        {"transport", required_argument, NULL, 't'}, {"size", required_argument, NULL, 's'},
        {"count", required_argument, NULL, 'n'},     {"window", required_argument, NULL, 'w'},
        {"repeat", required_argument, NULL, 'r'},    {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
            case 't':
                snprintf(transports, sizeof(transports), "%s", optarg);
                break;
            case 's':
                snprintf(sizes, sizeof(sizes), "%s", optarg);
                break;
            case 'n':
                count = perf_arg_uint("rs-bench-notify", "--count", optarg, 1, UINT64_MAX);
                break;
            case 'w':
                window = (unsigned)perf_arg_uint("rs-bench-notify", "--window", optarg, 1, SLOTS);
                break;
            case 'r':
                repeat = (unsigned)perf_arg_uint("rs-bench-notify", "--repeat", optarg, 1, 15);
                break;
            default:
                fprintf(stderr, "usage: rs-bench-notify [--transport shm,tcp] [--size 64,4K,64K]"
                                " [--count N] [--window W] [--repeat R] [--json [FILE]]"
                                " [--csv FILE]\n");
                return 2;
        }
    }
    if (window == 0 || window > SLOTS || repeat == 0 || repeat > 15)
        die("--window must be 1..%u and --repeat 1..15", SLOTS);
    perf_out_meta(&po, "ucx", transports); /* before strtok_r cuts the list */
    signal(SIGPIPE, SIG_IGN);

    row_t rows[MAX_ROWS];
    int nrows = 0;
    char *tsave, *fabric;
    for (fabric = strtok_r(transports, ",", &tsave); fabric != NULL;
         fabric = strtok_r(NULL, ",", &tsave)) {
        if (strcmp(fabric, "shm") != 0 && strcmp(fabric, "tcp") != 0)
            die("unknown transport %s (shm, tcp)", fabric);
        set_fabric(fabric);
        int rd, wr;
        pid_t pid = perf_fork_piped(&rd, &wr);
        if (pid < 0)
            die("fork failed");
        if (pid == 0)
            _exit(run_target(rd, wr));
        size_t blen, alen;
        uint8_t blob[RS_RKEY_BLOB_MAX], addr[RS_ADDR_BLOB_MAX];
        if (perf_blob_read(rd, addr, sizeof(addr), -1, &alen) != 0)
            die("reading the target's address: %s", strerror(errno));
        if (perf_blob_read(rd, blob, sizeof(blob), -1, &blen) != 0)
            die("reading the target's rkey: %s", strerror(errno));

        char sizes_copy[128], *ssave, *s;
        snprintf(sizes_copy, sizeof(sizes_copy), "%s", sizes);
        for (s = strtok_r(sizes_copy, ",", &ssave); s != NULL; s = strtok_r(NULL, ",", &ssave)) {
            uint64_t size;
            if (rs_parse_size(s, &size) != RS_OK || size < 8 || size > SLOT)
                die("size %s must be 8..%u", s, SLOT);
            uint64_t n = count ? count : (strcmp(fabric, "shm") == 0 ? 20000 : 4000);
            if (!count && size >= (64u << 10))
                n /= 4;
            double secs[2][16], cpus[2][16];
            for (unsigned r = 0; r < repeat; r++) {
                for (int k = 0; k < 2; k++) {
                    int m = (int)((k + r) % 2); /* alternate which mode goes first */
                    setenv("RSHUFFLE_UCX_NOTIFY", m == 0 ? "fence" : "flush", 1);
                    secs[m][r] =
                        run_once(addr, alen, blob, blen, rd, wr, size, n, window, &cpus[m][r]);
                }
            }
            for (int m = 0; m < 2 && nrows < MAX_ROWS; m++) {
                qsort(secs[m], repeat, sizeof(double), cmp_double);
                qsort(cpus[m], repeat, sizeof(double), cmp_double);
                row_t *row = &rows[nrows++];
                snprintf(row->transport, sizeof(row->transport), "%s", fabric);
                snprintf(row->mode, sizeof(row->mode), "%s", m == 0 ? "fence" : "flush");
                row->size = size;
                row->count = n;
                row->sec = secs[m][repeat / 2];
                row->cpu = cpus[m][repeat / 2];
            }
        }
        uint64_t stop[2] = {0, 0};
        xwrite(wr, stop, sizeof(stop));
        int status;
        waitpid(pid, &status, 0);
        close(rd);
        close(wr);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            die("target process failed");
    }

    printf("%-6s %-6s %9s %8s %12s %12s %14s\n", "fabric", "mode", "size", "count", "MiB/s",
           "usec/notif", "cpu usec/notif");
    for (int i = 0; i < nrows; i++)
        printf("%-6s %-6s %9zu %8llu %12.1f %12.3f %14.3f\n", rows[i].transport, rows[i].mode,
               rows[i].size, (unsigned long long)rows[i].count,
               (double)rows[i].size * (double)rows[i].count / rows[i].sec / (1 << 20),
               rows[i].sec * 1e6 / (double)rows[i].count,
               rows[i].cpu * 1e6 / (double)rows[i].count);
    printf("(median of %u runs per mode, modes alternating; wall time end to end, until the\n"
           " target's handler has seen every notification; cpu: the putter's CPU time)\n",
           repeat);
    for (int i = 0; i < nrows; i++) {
        perf_row(&po);
        perf_str(&po, "test", "notify_e2e");
        perf_str(&po, "transport", rows[i].transport);
        perf_str(&po, "mode", rows[i].mode);
        perf_u64(&po, "size", rows[i].size);
        perf_u64(&po, "count", rows[i].count);
        perf_num(&po, "mib_s",
                 (double)rows[i].size * (double)rows[i].count / rows[i].sec / (1 << 20), 3);
        perf_num(&po, "us", rows[i].sec * 1e6 / (double)rows[i].count, 4);
        perf_num(&po, "cpu_us", rows[i].cpu * 1e6 / (double)rows[i].count, 4);
    }
    if (perf_out_emit(&po) != 0)
        return 1;
    return 0;
}
