/*
 * One output schema for every perf driver (docs/perf.md). With --json the
 * driver's last stdout line (or FILE with --json FILE / --json=FILE) is
 *
 *   {"meta": {"program", "version", "commit", "host", "backend", "transport",
 *             "ucx_version", "command", "launcher", "ranks", "time"},
 *    "results": [{...}, ...]}
 *
 * and --csv FILE writes the same results as CSV (a header of every key in
 * first-seen order, then one line per result). Result keys carry their unit:
 * _gbit_s (10^9 bit/s), _mib_s (2^20 B/s), _s, _ms, _us, _ns, _bytes; plain
 * counts have none. --progress turns on progress lines with rate and ETA on
 * stderr (on by default when stderr is a terminal, never on stdout).
 *
 * Header-only and free of rshuffle symbols, so the MPI yardsticks
 * (mpi-shuffle, mpi-bcast), which do not link the library, use it too.
 */
#ifndef RS_PERF_JSON_H
#define RS_PERF_JSON_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rshuffle/version.h>

#ifndef PERF_COMMIT
#define PERF_COMMIT "unknown" /* perf/common.cmake bakes in `git rev-parse --short HEAD` */
#endif

/* UCX's version when the program links UCX (through librshuffle), else not there. */
extern void ucp_get_version(unsigned *major, unsigned *minor, unsigned *release)
    __attribute__((weak));

#define PERF_KEYS_MAX 64

typedef struct perf_row {
    const char *key[PERF_KEYS_MAX]; /* string literals */
    char *val[PERF_KEYS_MAX];       /* JSON text of each value */
    unsigned n;
} perf_row_t;

typedef struct perf_out {
    const char *prog;
    int json;              /* --json given */
    const char *json_path; /* --json FILE, else stdout */
    const char *csv_path;  /* --csv FILE */
    int progress;          /* --progress, or stderr is a terminal */
    char backend[16], transport[64], launcher[16];
    int ranks;
    char command[2048];
    perf_row_t *rows;
    size_t n_rows, cap;
} perf_out_t;

/* A value's JSON text (the caller frees it). */
static inline char *perf_json_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline char *perf_json_fmt(const char *fmt, ...)
{
    va_list ap;
    char tmp[64], *s;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    s = n < 0 ? NULL : malloc((size_t)n + 1);
    if (s != NULL && (size_t)n < sizeof(tmp))
        memcpy(s, tmp, (size_t)n + 1);
    else if (s != NULL) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (s == NULL) {
        fputs("perf: out of memory\n", stderr);
        exit(1);
    }
    return s;
}

/* s as a JSON string (quotes, backslashes and control bytes escaped). */
static inline char *perf_json_quote(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *q = malloc(n * 6 + 3);
    if (q == NULL) {
        fputs("perf: out of memory\n", stderr);
        exit(1);
    }
    q[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            q[o++] = '\\', q[o++] = (char)*p;
        else if (*p < 0x20)
            o += (size_t)sprintf(q + o, "\\u%04x", *p);
        else
            q[o++] = (char)*p;
    }
    q[o++] = '"';
    q[o] = '\0';
    return q;
}

/*
 * Takes the output options out of argv (the driver parses the rest as
 * before) and remembers the command line: --json, --json FILE (a next
 * argument not starting with '-'), --json=FILE, --csv FILE, --csv=FILE,
 * --progress, --no-progress.
 */
static inline void perf_out_init(perf_out_t *po, const char *prog, int *argc, char **argv)
{
    int out = 1;
    memset(po, 0, sizeof(*po));
    po->prog = prog;
    po->progress = isatty(STDERR_FILENO);
    snprintf(po->backend, sizeof(po->backend), "-");
    snprintf(po->transport, sizeof(po->transport), "-");
    snprintf(po->launcher, sizeof(po->launcher), "local");
    po->ranks = 1;
    for (int i = 0; i < *argc; i++) {
        size_t len = strlen(po->command);
        snprintf(po->command + len, sizeof(po->command) - len, "%s%s", i ? " " : "", argv[i]);
    }
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *next = i + 1 < *argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            po->json = 1;
            if (next != NULL && next[0] != '-' && next[0] != '\0')
                po->json_path = next, i++;
        } else if (strncmp(a, "--json=", 7) == 0) {
            po->json = 1;
            po->json_path = a + 7;
        } else if (strcmp(a, "--csv") == 0 && next != NULL) {
            po->csv_path = next, i++;
        } else if (strncmp(a, "--csv=", 6) == 0) {
            po->csv_path = a + 6;
        } else if (strcmp(a, "--progress") == 0) {
            po->progress = 1;
        } else if (strcmp(a, "--no-progress") == 0) {
            po->progress = 0;
        } else {
            argv[out++] = argv[i];
        }
    }
    argv[out] = NULL;
    *argc = out;
}

/* What the results ran on: backend (ucx, verbs, mpi) and transport (UCX_TLS, a device). */
static inline void perf_out_meta(perf_out_t *po, const char *backend, const char *transport)
{
    snprintf(po->backend, sizeof(po->backend), "%s", backend != NULL ? backend : "-");
    snprintf(po->transport, sizeof(po->transport), "%s", transport != NULL ? transport : "-");
}

/* Starts a result; the perf_* setters below add its keys in order. */
static inline void perf_row(perf_out_t *po)
{
    if (po->n_rows == po->cap) {
        size_t cap = po->cap ? po->cap * 2 : 16;
        perf_row_t *r = realloc(po->rows, cap * sizeof(*r));
        if (r == NULL) {
            fputs("perf: out of memory\n", stderr);
            exit(1);
        }
        po->rows = r;
        po->cap = cap;
    }
    po->rows[po->n_rows++].n = 0;
}

static inline void perf_put(perf_out_t *po, const char *key, char *val)
{
    perf_row_t *r = po->n_rows > 0 ? &po->rows[po->n_rows - 1] : NULL;
    if (r == NULL || r->n == PERF_KEYS_MAX) {
        fprintf(stderr, "%s: perf_put(%s) without room\n", po->prog, key);
        exit(1);
    }
    r->key[r->n] = key;
    r->val[r->n++] = val;
}

static inline void perf_str(perf_out_t *po, const char *key, const char *v)
{
    perf_put(po, key, perf_json_quote(v));
}
static inline void perf_u64(perf_out_t *po, const char *key, unsigned long long v)
{
    perf_put(po, key, perf_json_fmt("%llu", v));
}
static inline void perf_int(perf_out_t *po, const char *key, long long v)
{
    perf_put(po, key, perf_json_fmt("%lld", v));
}
/* A number with `decimals` digits after the point. */
static inline void perf_num(perf_out_t *po, const char *key, double v, int decimals)
{
    perf_put(po, key, perf_json_fmt("%.*f", decimals, v));
}
static inline void perf_bool(perf_out_t *po, const char *key, int v)
{
    perf_put(po, key, perf_json_fmt("%s", v ? "true" : "false"));
}

static inline void perf_out_write_json(const perf_out_t *po, FILE *f)
{
    char host[256] = "unknown", ucx[32] = "";
    char *q;
    time_t now = time(NULL);
    struct tm tm;
    char when[32];
    gethostname(host, sizeof(host) - 1);
    if (ucp_get_version != NULL) {
        unsigned ma, mi, re;
        ucp_get_version(&ma, &mi, &re);
        snprintf(ucx, sizeof(ucx), "%u.%u.%u", ma, mi, re);
    }
    gmtime_r(&now, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "{\"meta\": {\"program\": \"%s\", \"version\": \"%d.%d.%d\", \"commit\": \"%s\", ",
            po->prog, RS_VERSION_MAJOR, RS_VERSION_MINOR, RS_VERSION_PATCH, PERF_COMMIT);
    q = perf_json_quote(host);
    fprintf(f, "\"host\": %s, ", q);
    free(q);
    fprintf(f, "\"backend\": \"%s\", ", po->backend);
    q = perf_json_quote(po->transport);
    fprintf(f, "\"transport\": %s, \"ucx_version\": \"%s\", ", q, ucx);
    free(q);
    q = perf_json_quote(po->command);
    fprintf(f, "\"command\": %s, \"launcher\": \"%s\", \"ranks\": %d, \"time\": \"%s\"}, ", q,
            po->launcher, po->ranks, when);
    free(q);
    fprintf(f, "\"results\": [");
    for (size_t i = 0; i < po->n_rows; i++) {
        const perf_row_t *r = &po->rows[i];
        fprintf(f, "%s{", i ? ", " : "");
        for (unsigned k = 0; k < r->n; k++)
            fprintf(f, "%s\"%s\": %s", k ? ", " : "", r->key[k], r->val[k]);
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
}

/* CSV: every key of any result, in first-seen order; a result without one leaves it empty. */
static inline void perf_out_write_csv(const perf_out_t *po, FILE *f)
{
    const char *cols[PERF_KEYS_MAX * 2];
    unsigned n = 0;
    for (size_t i = 0; i < po->n_rows; i++)
        for (unsigned k = 0; k < po->rows[i].n; k++) {
            unsigned c = 0;
            while (c < n && strcmp(cols[c], po->rows[i].key[k]) != 0)
                c++;
            if (c == n && n < PERF_KEYS_MAX * 2)
                cols[n++] = po->rows[i].key[k];
        }
    for (unsigned c = 0; c < n; c++)
        fprintf(f, "%s%s", c ? "," : "", cols[c]);
    fprintf(f, "\n");
    for (size_t i = 0; i < po->n_rows; i++) {
        for (unsigned c = 0; c < n; c++) {
            const char *v = "";
            for (unsigned k = 0; k < po->rows[i].n; k++)
                if (strcmp(po->rows[i].key[k], cols[c]) == 0)
                    v = po->rows[i].val[k];
            /* JSON strings are quoted; CSV quotes the same way (no commas inside ours) */
            fprintf(f, "%s%s", c ? "," : "", v);
        }
        fprintf(f, "\n");
    }
}

/*
 * Writes what was asked (--json to stdout or FILE, --csv FILE) and frees
 * the results: 0, or -1 when a file cannot be written (said on stderr).
 */
static inline int perf_out_emit(perf_out_t *po)
{
    int rc = 0;
    if (po->json && po->json_path == NULL) {
        fflush(stdout);
        perf_out_write_json(po, stdout);
        fflush(stdout);
    }
    const char *paths[2] = {po->json ? po->json_path : NULL, po->csv_path};
    for (int i = 0; i < 2; i++) {
        if (paths[i] == NULL)
            continue;
        FILE *f = fopen(paths[i], "w");
        if (f == NULL) {
            fprintf(stderr, "%s: cannot write %s\n", po->prog, paths[i]);
            rc = -1;
            continue;
        }
        if (i == 0)
            perf_out_write_json(po, f);
        else
            perf_out_write_csv(po, f);
        if (fclose(f) != 0) {
            fprintf(stderr, "%s: cannot write %s\n", po->prog, paths[i]);
            rc = -1;
        }
    }
    for (size_t i = 0; i < po->n_rows; i++)
        for (unsigned k = 0; k < po->rows[i].n; k++)
            free(po->rows[i].val[k]);
    free(po->rows);
    po->rows = NULL;
    po->n_rows = po->cap = 0;
    return rc;
}

/*
 * One progress line on stderr ("\r" rewritten in place): what, done of
 * total (unit: "B" for bytes, else a count), the rate since t0_s and the
 * time left at that rate. Silent unless po->progress, and during a run's
 * first 2 s (short runs print nothing). final: end the line.
 */
static inline void perf_progress(const perf_out_t *po, const char *what, double done, double total,
                                 const char *unit, double t0_s, double now_s, int final)
{
    static int shown;
    double el = now_s - t0_s;
    if (!po->progress || (!shown && (el < 2.0 || final)))
        return;
    shown = 1;
    double rate = el > 0 ? done / el : 0, left = rate > 0 ? (total - done) / rate : 0;
    if (strcmp(unit, "B") == 0)
        fprintf(stderr, "\r%s: %5.1f%% of %.2f GiB, %.2f Gbit/s, %.0f s, ETA %.0f s   ", what,
                total > 0 ? 100.0 * done / total : 0, total / (1 << 30), rate * 8 / 1e9, el, left);
    else
        fprintf(stderr, "\r%s: %.0f of %.0f %s, %.2f/s, %.0f s, ETA %.0f s   ", what, done, total,
                unit, rate, el, left);
    if (final) {
        fputc('\n', stderr);
        shown = 0;
    }
    fflush(stderr);
}

#endif
