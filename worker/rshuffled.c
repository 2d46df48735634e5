/*
 * rshuffled: the shuffle worker as a daemon.
 *
 *   rshuffled --listen HOST:PORT [--mem BYTES] [--spill-dir DIR] [--log LEVEL]
 *             [--ready-fd N] [--drain-timeout SECONDS] [--help] [--version]
 *
 * Flags override the RSHUFFLE_WORKER_* / RSHUFFLE_LOG environment. Prints
 * "rshuffled: listening on HOST:PORT" once ready (PORT 0 picks a free port);
 * with --ready-fd N it also writes "ready HOST PORT\n" to descriptor N and
 * closes it, the machine-readable signal a launcher waits for. SIGTERM or
 * SIGINT drains it (docs/operations.md, "Draining a worker"): no new
 * shuffles or maps, reads of what it holds go on until every shuffle is
 * dropped or --drain-timeout seconds pass (30; 0: stop at once); a second
 * signal stops it at once. Exit status: 0 after a drain (ended or timed
 * out) or a second signal, 1 when the worker cannot start (limits the host
 * cannot back, a spill directory that takes no files, an address that
 * cannot be listened on), 2 for a bad command line or environment.
 */
#include "sd_notify.h"

#include <rshuffle/worker.h>

#include <rshuffle/version.h>

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: rshuffled --listen HOST:PORT [--mem BYTES] [--spill-dir DIR]\n"
            "                 [--log error|warn|info|debug] [--ready-fd N] [--drain-timeout S]\n"
            "  -l, --listen HOST:PORT  address to listen on (port 0: any free port)\n"
            "  -m, --mem BYTES         the registered arena (RSHUFFLE_WORKER_MEM)\n"
            "  -s, --spill-dir DIR     spill files (RSHUFFLE_WORKER_SPILL_DIR)\n"
            "      --log LEVEL         log level (RSHUFFLE_LOG)\n"
            "      --ready-fd N        write \"ready HOST PORT\" to descriptor N once listening\n"
            "      --drain-timeout S   on SIGTERM, serve reads at most S seconds more (30)\n"
            "  -h, --help              this text\n"
            "  -V, --version           the version\n");
}

/*
 * Signals are taken by one thread (sigwait): during start-up it ends the
 * process at once, since the arena's allocation cannot be interrupted (it
 * makes gigabytes resident) and nothing the worker holds then outlives the
 * process (its shared memory is unlinked or marked for removal when made);
 * once running, it hands each signal to main: the first drains, the next
 * stops.
 */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    sigset_t set;
    int running; /* start-up is over: a signal now means drain, then stop */
    int sig;     /* the first signal received once running */
    int signals; /* how many */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void *signal_main(void *arg)
{
    (void)arg;
    for (;;) {
        int sig = 0;
        while (sigwait(&g.set, &sig) != 0)
            ;
        pthread_mutex_lock(&g.lock);
        if (!g.running) {
            static const char msg[] = "rshuffled: signal during start-up, exiting\n";
            ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
            (void)n;
            _exit(0);
        }
        if (g.signals++ == 0)
            g.sig = sig;
        pthread_cond_signal(&g.cond);
        pthread_mutex_unlock(&g.lock);
    }
    return NULL;
}

/*
 * The first signal's drain: until the worker holds no shuffle, timeout_s
 * passed or a second signal came (checked every 50 ms).
 */
static void drain(rs_worker_t *w, int sig, uint64_t timeout_s)
{
    if (timeout_s == 0)
        return;
    rs_worker_drain(w);
    (void)rsd_notify("STOPPING=1\nSTATUS=draining");
    rs_worker_stats_t st;
    rs_worker_stats(w, &st);
    char cause[32];
    snprintf(cause, sizeof(cause), sig != 0 ? "signal %d" : "drain requested", sig);
    fprintf(stderr, "rshuffled: %s, draining (%llu shuffles held, at most %llu s)\n", cause,
            (unsigned long long)st.shuffles, (unsigned long long)timeout_s);
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += (time_t)timeout_s;
    pthread_mutex_lock(&g.lock);
    for (;;) {
        rs_worker_stats(w, &st);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        const char *why =
            st.shuffles == 0         ? "every shuffle dropped"
            : g.signals > (sig != 0) ? (sig != 0 ? "second signal" : "signal")
            : now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec)
                ? "drain timeout"
                : NULL;
        if (why != NULL) {
            fprintf(stderr, "rshuffled: drain over (%s; %llu shuffles held)\n", why,
                    (unsigned long long)st.shuffles);
            break;
        }
        struct timespec t; /* the condition variable's clock */
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 50 * 1000 * 1000;
        if (t.tv_nsec >= 1000000000L)
            t.tv_sec++, t.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&g.cond, &g.lock, &t);
    }
    pthread_mutex_unlock(&g.lock);
}

/* HOST:PORT with a non-empty host and a port in [0, 65535]; the rest is an error. */
static int parse_listen(const char *s, char *host, size_t cap, uint16_t *port)
{
    const char *colon = s != NULL ? strrchr(s, ':') : NULL;
    uint64_t v;
    int bracket = s != NULL && s[0] == '['; /* "[::1]:7000" */
    if (colon == NULL || colon == s || (size_t)(colon - s) >= cap ||
        (bracket && (colon - s < 3 || colon[-1] != ']')) ||
        (!bracket && memchr(s, ':', (size_t)(colon - s)) != NULL)) {
        fprintf(stderr, "rshuffled: bad --listen '%s': expected HOST:PORT or [IPV6]:PORT\n",
                s ? s : "");
        return -1;
    }
    if (rs_parse_uint(colon + 1, 65535, &v) != RS_OK) {
        fprintf(stderr, "rshuffled: bad port '%s' in --listen: expected 0 to 65535\n", colon + 1);
        return -1;
    }
    snprintf(host, cap, "%.*s", (int)(colon - s) - 2 * bracket, s + bracket);
    *port = (uint16_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    /* Blocked before any thread starts (all inherit the mask), so only signal_main takes them. */
    sigemptyset(&g.set);
    sigaddset(&g.set, SIGTERM);
    sigaddset(&g.set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &g.set, NULL);
    pthread_t sig_thread;
    if (pthread_create(&sig_thread, NULL, signal_main, NULL) != 0) {
        fprintf(stderr, "rshuffled: cannot start the signal thread\n");
        return 1;
    }
    const char *listen = NULL;
    rs_worker_config_t wcfg;
    rs_worker_config_defaults(&wcfg);
    rs_status_t s = rs_worker_config_from_env(&wcfg);
    if (s != RS_OK)
        return 2;
    rs_config_t tcfg;
    if (rs_config_init(&tcfg) != RS_OK)
        return 2;
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"mem", required_argument, NULL, 'm'},
        {"spill-dir", required_argument, NULL, 's'},
        {"log", required_argument, NULL, 'L'},
        {"ready-fd", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {"drain-timeout", required_argument, NULL, 'D'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int ready_fd = -1, c;
    uint64_t drain_s = 30;
    uint64_t v64;
    while ((c = getopt_long(argc, argv, "l:m:s:hV", longopts, NULL)) != -1) {
        const char *v = optarg;
        switch (c) {
            case 'l':
                listen = v;
                break;
            case 'm':
                if (rs_parse_size(v, &wcfg.mem_limit) != RS_OK || wcfg.mem_limit < (1u << 20) ||
                    wcfg.mem_limit > (1ull << 40)) {
                    fprintf(stderr,
                            "rshuffled: bad --mem '%s': expected a size from 1M to 1T (e.g. "
                            "512M, 4G)\n",
                            v);
                    return 2;
                }
                break;
            case 's':
                if (strlen(v) >= sizeof(wcfg.spill_dir)) {
                    fprintf(stderr, "rshuffled: --spill-dir is longer than %zu bytes\n",
                            sizeof(wcfg.spill_dir) - 1);
                    return 2;
                }
                snprintf(wcfg.spill_dir, sizeof(wcfg.spill_dir), "%s", v);
                break;
            case 'L': {
                rs_log_level_t level;
                if (rs_log_level_parse(v, &level) != RS_OK) {
                    fprintf(stderr,
                            "rshuffled: bad --log '%s': expected error, warn, info or debug\n", v);
                    return 2;
                }
                rs_log_set_level(level);
                tcfg.log_level = level;
                break;
            }
            case 'r':
                if (rs_parse_uint(v, 1024 * 1024, &v64) != RS_OK || v64 < 3) {
                    fprintf(stderr, "rshuffled: bad --ready-fd '%s': expected a descriptor >= 3\n",
                            v);
                    return 2;
                }
                ready_fd = (int)v64;
                break;
            case 'D':
                if (rs_parse_uint(v, 86400, &drain_s) != RS_OK) {
                    fprintf(stderr,
                            "rshuffled: bad --drain-timeout '%s': expected seconds, 0 to 86400\n",
                            v);
                    return 2;
                }
                break;
            case 'h':
                usage(stdout);
                return 0;
            case 'V':
                printf("rshuffled (rshuffle) %s\n", rs_version());
                return 0;
            default:
                usage(stderr);
                return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rshuffled: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (listen == NULL) {
        usage(stderr);
        return 2;
    }
    char host[128];
    uint16_t port;
    if (parse_listen(listen, host, sizeof(host), &port) != 0)
        return 2;

    rs_worker_t *w;
    s = rs_worker_create(&tcfg, &wcfg, &w);
    if (s != RS_OK) {
        fprintf(stderr, "rshuffled: cannot start the worker: %s\n", rs_strerror(s));
        return 1;
    }
    s = rs_worker_listen(w, host, port);
    if (s != RS_OK) {
        fprintf(stderr, "rshuffled: cannot listen on %s: %s\n", listen, rs_strerror(s));
        rs_worker_destroy(w);
        return 1;
    }
    pthread_mutex_lock(&g.lock);
    g.running = 1;
    const char *v6 = strchr(host, ':') != NULL ? "[" : "";
    printf("rshuffled: listening on %s%s%s:%u\n", v6, host, *v6 ? "]" : "", rs_worker_port(w));
    fflush(stdout);
    if (ready_fd >= 0) {
        dprintf(ready_fd, "ready %s %u\n", host, rs_worker_port(w));
        close(ready_fd);
    }
    char state[200];
    snprintf(state, sizeof(state), "READY=1\nSTATUS=listening on %s:%u", host, rs_worker_port(w));
    if (rsd_notify(state) != 0)
        fprintf(stderr, "rshuffled: cannot tell NOTIFY_SOCKET that it is ready\n");
    /* A signal, or a peer's drain request (polled: it arrives on the worker's thread). */
    while (g.signals == 0 && !rs_worker_draining(w)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 100 * 1000 * 1000;
        if (t.tv_nsec >= 1000000000L)
            t.tv_sec++, t.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&g.cond, &g.lock, &t);
    }
    int sig = g.sig; /* 0: a drain request */
    pthread_mutex_unlock(&g.lock);
    drain(w, sig, drain_s);
    rs_worker_stats_t st;
    rs_worker_stats(w, &st);
    char cause[32];
    snprintf(cause, sizeof(cause), sig != 0 ? "signal %d" : "drain requested", sig);
    fprintf(stderr,
            "rshuffled: %s, shutting down (%llu batches, %llu bytes, %llu spilled, "
            "%llu refused, %llu stray retires, arena peak %llu)\n",
            cause, (unsigned long long)st.batches, (unsigned long long)st.bytes,
            (unsigned long long)st.spilled_bytes, (unsigned long long)st.refused,
            (unsigned long long)st.stray_retires, (unsigned long long)st.arena_peak);
    rs_worker_destroy(w);
    return 0;
}
