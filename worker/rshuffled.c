/*
 * rshuffled: the shuffle worker as a daemon.
 *
 *   rshuffled --listen HOST:PORT [--mem BYTES] [--spill-dir DIR] [--log LEVEL]
 *
 * Flags override the RSHUFFLE_WORKER_* / RSHUFFLE_LOG environment. Prints
 * "rshuffled: listening on HOST:PORT" once ready (PORT 0 picks a free port)
 * and shuts down cleanly on SIGTERM or SIGINT.
 */
#include <rshuffle/worker.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    fprintf(stderr, "usage: rshuffled --listen HOST:PORT [--mem BYTES] [--spill-dir DIR] "
                    "[--log error|warn|info|debug]\n");
}

int main(int argc, char **argv)
{
    /* SIGTERM/SIGINT are taken synchronously: blocked first, before any thread starts, so one
     * arriving during start-up still ends in a clean shutdown. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
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
                fprintf(stderr, "rshuffled: bad --mem '%s'\n", v);
                return 2;
            }
        } else if (strcmp(a, "--spill-dir") == 0 && v != NULL) {
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
    const char *colon = listen != NULL ? strrchr(listen, ':') : NULL;
    if (colon == NULL) {
        usage();
        return 2;
    }
    char host[128];
    snprintf(host, sizeof(host), "%.*s", (int)(colon - listen), listen);
    int port = atoi(colon + 1);

    rs_worker_t *w;
    s = rs_worker_create(&tcfg, &wcfg, &w);
    if (s != RS_OK) {
        fprintf(stderr, "rshuffled: cannot start the worker: %s\n", rs_strerror(s));
        return 1;
    }
    s = rs_worker_listen(w, host, (uint16_t)port);
    if (s != RS_OK) {
        fprintf(stderr, "rshuffled: cannot listen on %s: %s\n", listen, rs_strerror(s));
        rs_worker_destroy(w);
        return 1;
    }
    printf("rshuffled: listening on %s:%u\n", host, rs_worker_port(w));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    rs_worker_stats_t st;
    rs_worker_stats(w, &st);
    fprintf(stderr,
            "rshuffled: signal %d, shutting down (%llu batches, %llu bytes, %llu spilled)\n", sig,
            (unsigned long long)st.batches, (unsigned long long)st.bytes,
            (unsigned long long)st.spilled_bytes);
    rs_worker_destroy(w);
    return 0;
}
