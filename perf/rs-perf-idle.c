/*
 * rs-perf-idle: what an idle context's progress round costs with N client
 * connections to peers of this host, each of which has a UCX worker of its
 * own by default (docs/transport.md, RSHUFFLE_UCX_QUEUE=local).
 *
 *   rs-perf-idle [--conns 8] [--rounds 200000] [--json [FILE]] [--csv FILE]
 *
 * One server context, one client context with conns connections to it by
 * address, nothing in flight. Per case, ns per round in this thread's CPU
 * time (user and kernel):
 *   progress_ns        rs_progress alone (a busy poller)
 *   progress_arm_ns    rs_progress then rs_ctx_arm, what rs_wait does before
 *                      each sleep (the sleep left out)
 *   spin_ns            rs_progress, then rs_ctx_arm after every 64th (a progress
 *                      thread's spin before each sleep)
 * The cases are the functions round_*, for callgrind --toggle-collect.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rshuffle/transport.h>

#include "perf_json.h"

#define CONNS_MAX 256

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

__attribute__((noinline)) static void round_progress(rs_ctx_t *c, long rounds)
{
    for (long i = 0; i < rounds; i++)
        rs_progress(c);
}

__attribute__((noinline)) static void round_progress_arm(rs_ctx_t *c, long rounds)
{
    for (long i = 0; i < rounds; i++) {
        rs_progress(c);
        (void)rs_ctx_arm(c);
    }
}

__attribute__((noinline)) static void round_spin(rs_ctx_t *c, long rounds)
{
    for (long i = 0; i < rounds; i++) {
        rs_progress(c);
        if (i % 64 == 63)
            (void)rs_ctx_arm(c);
    }
}

static double per_round(void (*fn)(rs_ctx_t *, long), rs_ctx_t *c, long rounds)
{
    double t = cpu_ns();
    fn(c, rounds);
    return (cpu_ns() - t) / (double)rounds;
}

int main(int argc, char **argv)
{
    perf_out_t po;
    perf_out_init(&po, "rs-perf-idle", &argc, argv);
    int conns = 8;
    long rounds = 200000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--conns") == 0 && i + 1 < argc)
            conns = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: rs-perf-idle [--conns 8] [--rounds 200000] [--json [FILE]] "
                            "[--csv FILE]\n");
            return 2;
        }
    }
    if (conns < 1 || conns > CONNS_MAX || rounds < 1) {
        fprintf(stderr, "rs-perf-idle: --conns 1..%d, --rounds at least 1\n", CONNS_MAX);
        return 2;
    }
    rs_config_t cfg;
    rs_ctx_t *srv, *cli;
    if (rs_config_init(&cfg) != RS_OK || rs_ctx_create(&cfg, &srv) != RS_OK ||
        rs_ctx_create(&cfg, &cli) != RS_OK) {
        fprintf(stderr, "rs-perf-idle: cannot open the contexts\n");
        return 1;
    }
    unsigned char addr[RS_ADDR_BLOB_MAX];
    size_t addr_len;
    static rs_ep_t *eps[CONNS_MAX];
    /* The server answers the connections from its progress thread. */
    if (rs_ctx_address(srv, addr, sizeof(addr), &addr_len) != RS_OK ||
        rs_progress_thread_start(srv) != RS_OK) {
        fprintf(stderr, "rs-perf-idle: no server address\n");
        return 1;
    }
    for (int i = 0; i < conns; i++) {
        if (rs_connect_address(cli, addr, addr_len, &eps[i]) != RS_OK) {
            fprintf(stderr, "rs-perf-idle: connection %d failed\n", i);
            return 1;
        }
    }
    rs_progress_thread_stop(srv);
    round_progress(cli, rounds / 10 + 1); /* warm */
    double busy = per_round(round_progress, cli, rounds);
    double arm = per_round(round_progress_arm, cli, rounds);
    double spin = per_round(round_spin, cli, rounds);
    perf_out_meta(&po, rs_ctx_backend(cli), getenv("UCX_TLS") ? getenv("UCX_TLS") : "default");
    perf_row(&po);
    perf_int(&po, "conns", conns);
    perf_int(&po, "rounds", rounds);
    perf_num(&po, "progress_ns", busy, 1);
    perf_num(&po, "progress_arm_ns", arm, 1);
    perf_num(&po, "spin_ns", spin, 1);
    for (int i = 0; i < conns; i++)
        rs_ep_close(eps[i]);
    rs_ctx_destroy(cli);
    rs_ctx_destroy(srv);
    return perf_out_emit(&po) == 0 ? 0 : 1;
}
