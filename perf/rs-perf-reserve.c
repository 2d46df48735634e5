/*
 * rs-perf-reserve: what reserving worker space costs a pusher, per batch,
 * for the two space-reservation schemes (docs/shuffle.md), over the same transport:
 *
 *   fadd    one remote fetch-and-add on a partition tail per batch; the
 *           batch's write can be posted only once the old tail came back.
 *   credit  one request/grant message round trip per bulk grant of
 *           --per-grant batches (the worker answers from its handler, as
 *           rshuffle's worker does).
 *
 * A target process (the "worker") listens on 127.0.0.1 (RSHUFFLE_TEST_HOST)
 * and keeps progressing; the client connects and times --count
 * reservations of each kind, alternately, --repeat times (median).
 *
 *   rs-perf-reserve [--transport shm,tcp] [--count N] [--per-grant K]
 *                   [--repeat R] [--json [FILE]] [--csv FILE]
 *
 * Output (perf/perf_json.h): results [{"transport", "mode",
 * "batches_per_rtt", "rtt_ns", "batch_ns"}, ...].
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rshuffle/transport.h>

#include "perf_json.h"
#include "perf_util.h"

#define MSG_HELLO 48 /* client -> target: send me the rkey */
#define MSG_RKEY  49 /* target -> client: the packed rkey */
#define MSG_GRANT 50 /* client -> target: space for K batches */
#define MSG_GIVEN 51 /* target -> client: the range (its offset) */

static perf_out_t po;

static void die(const char *what, rs_status_t s)
{
    fprintf(stderr, "rs-perf-reserve: %s: %s\n", what, rs_strerror(s));
    exit(1);
}

static const char *host(void)
{
    const char *h = getenv("RSHUFFLE_TEST_HOST");
    return h != NULL ? h : "127.0.0.1";
}

/* ------------------------------------------------------------- the target */

typedef struct target {
    rs_mr_t *mr;
    uint64_t tail;
} target_t;

static void target_msg(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    target_t *t = arg;
    uint64_t want;
    if (len != sizeof(want))
        return;
    memcpy(&want, data, sizeof(want));
    uint64_t off = t->tail; /* what a worker's grant handler does: carve and answer */
    t->tail += want;
    rs_msg_send(ep, MSG_GIVEN, &off, sizeof(off), NULL, NULL);
}

static void target_hello(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)data;
    (void)len;
    target_t *t = arg;
    uint8_t blob[RS_RKEY_BLOB_MAX];
    size_t blen;
    if (rs_mr_pack_rkey(t->mr, blob, sizeof(blob), &blen) == RS_OK)
        rs_msg_send(ep, MSG_RKEY, blob, blen, NULL, NULL);
}

static volatile sig_atomic_t target_stop;

static void on_term(int sig)
{
    (void)sig;
    target_stop = 1;
}

static void target_main(int fd)
{
    signal(SIGTERM, on_term);
    rs_ctx_t *ctx;
    target_t t = {0};
    rs_status_t s = rs_ctx_create(NULL, &ctx);
    if (s != RS_OK)
        die("target context", s);
    if ((s = rs_mem_alloc(ctx, 4096, RS_MEM_REMOTE_ALL, &t.mr)) != RS_OK)
        die("target memory", s);
    memset(rs_mr_addr(t.mr), 0, 4096);
    rs_set_msg_handler(ctx, MSG_GRANT, target_msg, &t);
    rs_set_msg_handler(ctx, MSG_HELLO, target_hello, &t);
    rs_listener_t *l;
    if ((s = rs_listen(ctx, host(), 0, &l)) != RS_OK)
        die("listen", s);
    uint16_t port = rs_listener_port(l);
    if (write(fd, &port, sizeof(port)) != sizeof(port))
        exit(1);
    while (!target_stop) /* a worker always progresses (atomics over TCP need it) */
        rs_progress(ctx);
    rs_listener_destroy(l);
    rs_mem_free(t.mr);
    rs_ctx_destroy(ctx);
    exit(0);
}

/* ------------------------------------------------------------- the client */

typedef struct client {
    rs_ctx_t *ctx;
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    volatile int got;
    uint8_t blob[RS_RKEY_BLOB_MAX];
    size_t blob_len;
} client_t;

static void client_msg(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    client_t *c = arg;
    if (len <= sizeof(c->blob)) {
        memcpy(c->blob, data, len);
        c->blob_len = len;
    }
    c->got = 1;
}

static void op_done(void *arg, rs_status_t status)
{
    client_t *c = arg;
    if (status != RS_OK)
        die("fetch-and-add", status);
    c->got = 1;
}

static void spin(client_t *c)
{
    while (!c->got)
        rs_progress(c->ctx);
    c->got = 0;
}

/* Seconds for count reservations by fetch-and-add (one round trip each). */
static double run_fadd(client_t *c, uint64_t count)
{
    uint64_t old;
    double t0 = perf_now_s();
    for (uint64_t i = 0; i < count; i++) {
        rs_status_t s = rs_fetch_add(c->ep, c->rkey, 0, 262144, &old, op_done, c);
        if (s != RS_OK)
            die("fetch-and-add", s);
        spin(c);
    }
    return perf_now_s() - t0;
}

/* Seconds for count reservations by bulk grants of per batches each. */
static double run_credit(client_t *c, uint64_t count, uint32_t per)
{
    double t0 = perf_now_s();
    for (uint64_t i = 0; i < count; i += per) {
        uint64_t want = (uint64_t)per * 262144;
        rs_status_t s = rs_msg_send(c->ep, MSG_GRANT, &want, sizeof(want), NULL, NULL);
        if (s != RS_OK)
            die("grant request", s);
        spin(c);
    }
    return perf_now_s() - t0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(int *first, const char *tls, const char *mode, uint32_t per, double *t, int reps,
                   uint64_t count)
{
    qsort(t, (size_t)reps, sizeof(*t), cmp_d);
    double sec = t[reps / 2];
    double rtts = (double)count / per;
    double ns_rtt = sec / rtts * 1e9, ns_batch = sec / (double)count * 1e9;
    printf("%-4s %-7s %9u %12.0f %13.1f\n", tls, mode, per, ns_rtt, ns_batch);
    perf_row(&po);
    perf_str(&po, "transport", tls);
    perf_str(&po, "mode", mode);
    perf_u64(&po, "batches_per_rtt", per);
    perf_num(&po, "rtt_ns", ns_rtt, 0);
    perf_num(&po, "batch_ns", ns_batch, 1);
    *first = 0;
}

static void run_tls(const char *tls, uint64_t count, uint32_t per, int reps, int *first)
{
    setenv("UCX_TLS", strcmp(tls, "shm") == 0 ? "posix,sysv,self,tcp" : "tcp,self", 1);
    int rd, wr;
    pid_t pid = perf_fork_piped(&rd, &wr); /* the target dies with us, whatever happens */
    if (pid < 0)
        exit(1);
    if (pid == 0) {
        close(rd);
        target_main(wr);
    }
    close(wr);
    uint16_t port = 0;
    if (read(rd, &port, sizeof(port)) != sizeof(port) || port == 0) {
        fprintf(stderr, "rs-perf-reserve: target did not start\n");
        exit(1);
    }
    close(rd);
    client_t c = {0};
    rs_status_t s = rs_ctx_create(NULL, &c.ctx);
    if (s != RS_OK)
        die("client context", s);
    rs_set_msg_handler(c.ctx, MSG_RKEY, client_msg, &c);
    rs_set_msg_handler(c.ctx, MSG_GIVEN, client_msg, &c);
    if ((s = rs_connect(c.ctx, host(), port, &c.ep)) != RS_OK)
        die("connect", s);
    if ((s = rs_msg_send(c.ep, MSG_HELLO, NULL, 0, NULL, NULL)) != RS_OK)
        die("hello", s);
    spin(&c);
    if ((s = rs_rkey_unpack(c.ep, c.blob, c.blob_len, &c.rkey)) != RS_OK)
        die("rkey", s);
    run_fadd(&c, count / 10 + 1); /* warm both paths up */
    run_credit(&c, count / 10 + 1, per);
    double tf[64], tc[64];
    for (int r = 0; r < reps; r++) {
        tf[r] = run_fadd(&c, count);
        tc[r] = run_credit(&c, count, per);
    }
    report(first, tls, "fadd", 1, tf, reps, count);
    report(first, tls, "credit", per, tc, reps, count);
    rs_rkey_destroy(c.rkey);
    rs_ep_close(c.ep);
    rs_ctx_destroy(c.ctx);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

int main(int argc, char **argv)
{
    perf_std_args(argc, argv,
                  "usage: rs-perf-reserve [--transport shm,tcp] [--count N] [--per-grant K]\n"
                  "                       [--repeat R] [--json [FILE]] [--csv FILE]\n"
                  "Space reservation: bulk credits vs one fetch-and-add per batch.\n");
    perf_out_init(&po, "rs-perf-reserve", &argc, argv);
    const char *tls_list = "shm,tcp";
    uint64_t count = 20000;
    uint32_t per = 5; /* rshuffle's bulk grant: the batch and four more */
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            goto usage;
        if (strcmp(a, "--transport") == 0)
            tls_list = v;
        else if (strcmp(a, "--count") == 0)
            count = perf_arg_uint("rs-perf-reserve", a, v, 1, UINT64_MAX);
        else if (strcmp(a, "--per-grant") == 0)
            per = (uint32_t)perf_arg_uint("rs-perf-reserve", a, v, 1, UINT32_MAX);
        else if (strcmp(a, "--repeat") == 0)
            reps = (int)perf_arg_uint("rs-perf-reserve", a, v, 1, 64);
        else
            goto usage;
        i++;
    }
    if (count == 0 || per == 0 || reps < 1 || reps > 64)
        goto usage;
    setenv("RSHUFFLE_TRANSPORT", "ucx", 0);
    setenv("UCX_NET_DEVICES", "lo", 0);
    perf_out_meta(&po, "ucx", tls_list);
    printf("fabric mode    batches/rtt   ns/rtt  ns/batch (median of %d)\n", reps);
    int first = 1;
    char list[64];
    snprintf(list, sizeof(list), "%s", tls_list);
    for (char *save, *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "shm") != 0 && strcmp(t, "tcp") != 0)
            goto usage;
        run_tls(t, count, per, reps, &first);
    }
    if (perf_out_emit(&po) != 0)
        return 1;
    return 0;
usage:
    fprintf(stderr, "usage: rs-perf-reserve [--transport shm,tcp] [--count N] [--per-grant K] "
                    "[--repeat R] [--json [FILE]] [--csv FILE]\n");
    return 2;
}
