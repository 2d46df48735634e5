/* Helpers shared by the perf drivers (public API only, like the drivers). */
#ifndef RS_PERF_UTIL_H
#define RS_PERF_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <rshuffle/config.h>
#include <rshuffle/status.h>
#include <rshuffle/version.h>

/*
 * True when the machine's RDMA devices include a software one (Soft-RoCE
 * rxe*, soft-iWARP siw*): numbers measured on it are functional only and
 * say nothing about hardware, so drivers label them "functional": true.
 */
static inline bool perf_soft_rdma_device(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    struct dirent *e;
    bool soft = false;
    if (d == NULL)
        return false;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "rxe", 3) == 0 || strncmp(e->d_name, "siw", 3) == 0)
            soft = true;
    closedir(d);
    return soft;
}

/* The monotonic clock in nanoseconds. */
static inline uint64_t perf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Prints "<prog>: <message>" on stderr and exits 1 (atexit handlers run: a
 * driver reaps its child processes there).
 */
static inline void perf_die(const char *prog, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));
static inline void perf_die(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/*
 * Strict command-line numbers for flag: a plain decimal (perf_arg_uint) or a
 * size with an optional K/M/G suffix (perf_arg_size), in [min, max].
 * Anything else ("abc", "-1", "12x", 99999 for a port) prints what the flag
 * takes and exits 2: a run with a number nobody asked for measures nothing.
 */
static inline uint64_t perf_arg_uint(const char *prog, const char *flag, const char *s,
                                     uint64_t min, uint64_t max)
{
    uint64_t v;
    if (rs_parse_uint(s, max, &v) != RS_OK || v < min) {
        fprintf(stderr, "%s: bad %s '%s': expected an integer from %llu to %llu\n", prog, flag,
                s != NULL ? s : "", (unsigned long long)min, (unsigned long long)max);
        exit(2);
    }
    return v;
}

static inline uint64_t perf_arg_size(const char *prog, const char *flag, const char *s,
                                     uint64_t min, uint64_t max)
{
    uint64_t v;
    if (rs_parse_size(s, &v) != RS_OK || v < min || v > max) {
        fprintf(stderr, "%s: bad %s '%s': expected a size from %llu to %llu (K, M, G allowed)\n",
                prog, flag, s != NULL ? s : "", (unsigned long long)min, (unsigned long long)max);
        exit(2);
    }
    return v;
}

/*
 * A comma list of sizes (K, M, G allowed; plain counts too) into
 * out[0..max-1]: how many, or -1 for an item that is not one, more than
 * max items, or none. The caller checks their range.
 */
static inline int perf_parse_sizes(const char *arg, uint64_t *out, int max)
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
    return n > 0 ? n : -1;
}

/* Dies naming the call, its place and the status when an rs_* call does not return RS_OK. */
#define PERF_CHECK_RS(prog, call)                                                           \
    do {                                                                                    \
        rs_status_t st_ = (call);                                                           \
        if (st_ != RS_OK)                                                                   \
            perf_die((prog), "%s:%d: %s: %s", __FILE__, __LINE__, #call, rs_strerror(st_)); \
    } while (0)

/* A clock (CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID, ...) in seconds. */
static inline double perf_clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The monotonic clock in seconds. */
static inline double perf_now_s(void)
{
    return perf_clock_s(CLOCK_MONOTONIC);
}

/* Writes all len bytes to fd (a pipe to another process): 0, or -1 with errno set. */
static inline int perf_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EPIPE;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/*
 * Reads exactly len bytes from fd within timeout_ms (< 0: no limit): 0, or
 * -1 with errno ETIMEDOUT (not all came in time) or EPIPE (the writer is gone).
 */
static inline int perf_read_all(int fd, void *buf, size_t len, int timeout_ms)
{
    char *p = buf;
    uint64_t end = timeout_ms < 0 ? UINT64_MAX : perf_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (len > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = perf_now_ns();
        if (now >= end) {
            errno = ETIMEDOUT;
            return -1;
        }
        uint64_t left_ms = (end - now) / 1000000;
        int r = poll(&pfd, 1, left_ms < 1000 ? (int)left_ms : 1000);
        if (r <= 0)
            continue;
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            errno = EPIPE;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A blob (an address, a packed key) as a u32 length and its bytes: 0, or -1 with errno. */
static inline int perf_blob_write(int fd, const void *data, size_t len)
{
    uint32_t n = (uint32_t)len;
    return perf_write_all(fd, &n, sizeof(n)) == 0 && perf_write_all(fd, data, len) == 0 ? 0 : -1;
}

/* Reads a blob of at most cap bytes: 0 with *len_p set, or -1 with errno (EMSGSIZE: too long). */
static inline int perf_blob_read(int fd, void *buf, size_t cap, int timeout_ms, size_t *len_p)
{
    uint32_t n;
    if (perf_read_all(fd, &n, sizeof(n), timeout_ms) != 0)
        return -1;
    if (n > cap) {
        errno = EMSGSIZE;
        return -1;
    }
    if (perf_read_all(fd, buf, n, timeout_ms) != 0)
        return -1;
    *len_p = n;
    return 0;
}

/*
 * fork() with a pipe each way: returns the child's pid in the parent and 0
 * in the child, and *rd, *wr get that side's ends. The child asks for
 * SIGKILL when the parent dies (PR_SET_PDEATHSIG). -1 with errno on failure.
 */
static inline pid_t perf_fork_piped(int *rd, int *wr)
{
    int down[2], up[2];
    pid_t parent = getpid(), pid;
    if (pipe(down) != 0)
        return -1;
    if (pipe(up) != 0)
        goto err_close_down;
    fflush(NULL); /* what stdio holds is written once, not once per process */
    pid = fork();
    if (pid < 0)
        goto err_close_up;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        close(down[1]);
        close(up[0]);
        *rd = down[0];
        *wr = up[1];
        return 0;
    }
    close(down[0]);
    close(up[1]);
    *rd = up[0];
    *wr = down[1];
    return pid;

err_close_up:
    close(up[0]);
    close(up[1]);
err_close_down:
    close(down[0]);
    close(down[1]);
    return -1;
}

/*
 * --help (the usage on stdout, exit 0) and --version (exit 0), answered
 * before any other argument is looked at, as every program here does.
 */
static inline void perf_std_args(int argc, char **argv, const char *usage)
{
    const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("%s (rshuffle) %s\n", name, rs_version());
            exit(0);
        }
    }
}

#endif
