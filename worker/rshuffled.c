/*
 * rshuffled: the shuffle worker as a daemon.
 *
 *   rshuffled --listen HOST:PORT [--mem BYTES] [--spill-dir DIR] [--log LEVEL]
 *
 * Flags override the RSHUFFLE_WORKER_* / RSHUFFLE_LOG environment. Prints
 * "rshuffled: listening on HOST:PORT" once ready (PORT 0 picks a free port)
 * and shuts down cleanly on SIGTERM or SIGINT, at any time. Exit status: 0
 * after a signal, 1 when the worker cannot start (limits the host cannot
 * back, a spill directory that takes no files, an address that cannot be
 * listened on), 2 for a bad command line or environment.
 */
#include <rshuffle/worker.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void)
{
    fprintf(stderr, "usage: rshuffled --listen HOST:PORT [--mem BYTES] [--spill-dir DIR] "
                    "[--log error|warn|info|debug]\n");
}

/*
 * Signals are taken by one thread (sigwait): during start-up it ends the
 * process at once, since the arena's allocation cannot be interrupted (it
 * makes gigabytes resident) and nothing the worker holds then outlives the
 * process (its shared memory is unlinked or marked for removal when made);
 * once running, it hands the signal to main for an orderly shutdown.
 */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    sigset_t set;
    int running; /* start-up is over: a signal now means shut down */
    int sig;     /* the signal received once running */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void *signal_main(void *arg)
{
    (void)arg;
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
    g.sig = sig;
    pthread_cond_signal(&g.cond);
    pthread_mutex_unlock(&g.lock);
    return NULL;
}

/* HOST:PORT with a non-empty host and a port in [0, 65535]; the rest is an error. */
static int parse_listen(const char *s, char *host, size_t cap, uint16_t *port)
{
    const char *colon = s != NULL ? strrchr(s, ':') : NULL;
    uint64_t v;
    if (colon == NULL || colon == s || (size_t)(colon - s) >= cap) {
        fprintf(stderr, "rshuffled: bad --listen '%s': expected HOST:PORT\n", s ? s : "");
        return -1;
    }
    if (rs_parse_uint(colon + 1, 65535, &v) != RS_OK) {
        fprintf(stderr, "rshuffled: bad port '%s' in --listen: expected 0 to 65535\n", colon + 1);
        return -1;
    }
    snprintf(host, cap, "%.*s", (int)(colon - s), s);
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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--listen") == 0 && v != NULL) {
            listen = v;
        } else if (strcmp(a, "--mem") == 0 && v != NULL) {
            if (rs_parse_size(v, &wcfg.mem_limit) != RS_OK) {
                fprintf(stderr, "rshuffled: bad --mem '%s': expected a size (e.g. 512M, 4G)\n", v);
                return 2;
            }
        } else if (strcmp(a, "--spill-dir") == 0 && v != NULL) {
            if (strlen(v) >= sizeof(wcfg.spill_dir)) {
                fprintf(stderr, "rshuffled: --spill-dir is longer than %zu bytes\n",
                        sizeof(wcfg.spill_dir) - 1);
                return 2;
            }
            snprintf(wcfg.spill_dir, sizeof(wcfg.spill_dir), "%s", v);
        } else if (strcmp(a, "--log") == 0 && v != NULL) {
            rs_log_level_t level;
            if (rs_log_level_parse(v, &level) != RS_OK) {
                fprintf(stderr, "rshuffled: bad --log '%s'\n", v);
                return 2;
            }
            rs_log_set_level(level);
            tcfg.log_level = level;
        } else {
            usage();
            return 2;
        }
        i++;
    }
    if (listen == NULL) {
        usage();
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
    printf("rshuffled: listening on %s:%u\n", host, rs_worker_port(w));
    fflush(stdout);
    while (g.sig == 0)
        pthread_cond_wait(&g.cond, &g.lock);
    int sig = g.sig;
    pthread_mutex_unlock(&g.lock);
    pthread_join(sig_thread, NULL);
    rs_worker_stats_t st;
    rs_worker_stats(w, &st);
    fprintf(stderr,
            "rshuffled: signal %d, shutting down (%llu batches, %llu bytes, %llu spilled)\n", sig,
            (unsigned long long)st.batches, (unsigned long long)st.bytes,
            (unsigned long long)st.spilled_bytes);
    rs_worker_destroy(w);
    return 0;
}
