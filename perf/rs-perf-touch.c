/*
 * rs-perf-touch: what this machine charges for first touches and pinning,
 * the costs that decide between copying through a mapping and attaching
 * (docs/transport-perf.md), so a ratio measured here can be told apart
 * from one a machine with cheaper or dearer page faults would give.
 *
 *   rs-perf-touch [--size 256M] [--rounds 3] [--json [FILE]] [--csv FILE]
 *
 * Per case, the median over rounds of ns per 4 KiB page (or GiB/s), in
 * this thread's CPU time (user and kernel), so load elsewhere on a shared
 * machine does not count:
 *   anon_touch_ns      write one byte per page of fresh private memory
 *   populate_ns        MADV_POPULATE_WRITE of fresh private memory
 *   populated_touch_ns the same write after that populate (on a hypervisor
 *                      with shadow page tables it still faults)
 *   thp_touch_ns       fresh memory with MADV_HUGEPAGE (when the kernel
 *                      allows; thp_enabled says whether it was)
 *   shared_map_touch_ns a second mapping of resident memfd memory, as a
 *                      same-host peer maps a region
 *   memcpy_gib_s, vm_writev_gib_s  64 KiB copies into resident memory, by
 *                      memcpy and by process_vm_writev (pins on every call)
 * Standalone: no rshuffle, only perf_json.h.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "perf_json.h"

#define PAGE   4096u
#define CHUNK  (64u << 10)
#define ROUNDS 3

/* This thread's CPU time: faults are kernel time spent here; a loaded machine's waits are not. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double touch(volatile uint8_t *p, size_t len)
{
    double t0 = now_s();
    for (size_t off = 0; off < len; off += PAGE)
        p[off] = (uint8_t)off;
    return now_s() - t0;
}

static void *fresh(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "rs-perf-touch: mmap of %zu bytes: %s\n", len, strerror(errno));
        exit(1);
    }
    return p;
}

/* One round of every page-cost case; ns per page into out[0..4]. */
static void page_round(size_t len, double *out, int *thp)
{
    double pages = (double)(len / PAGE);
    uint8_t *a = fresh(len);
    out[0] = touch(a, len) / pages * 1e9;
    munmap(a, len);

    a = fresh(len);
    double t0 = now_s();
#ifdef MADV_POPULATE_WRITE
    int populated = madvise(a, len, MADV_POPULATE_WRITE) == 0;
#else
    int populated = 0;
#endif
    out[1] = populated ? (now_s() - t0) / pages * 1e9 : -1;
    out[2] = populated ? touch(a, len) / pages * 1e9 : -1;
    munmap(a, len);

    /* 2 MiB-aligned, so the kernel can back it by huge pages. */
    size_t huge = 2u << 20;
    uint8_t *raw = fresh(len + huge);
    uint8_t *h = (uint8_t *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    *thp = madvise(h, len, MADV_HUGEPAGE) == 0;
    out[3] = touch(h, len) / pages * 1e9;
    munmap(raw, len + huge);

    int fd = memfd_create("rs-perf-touch", MFD_CLOEXEC);
    out[4] = -1;
    if (fd >= 0 && ftruncate(fd, (off_t)len) == 0) {
        uint8_t *own = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        uint8_t *peer = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (own != MAP_FAILED && peer != MAP_FAILED) {
            touch(own, len);
            out[4] = touch(peer, len) / pages * 1e9;
        }
        if (own != MAP_FAILED)
            munmap(own, len);
        if (peer != MAP_FAILED)
            munmap(peer, len);
    }
    if (fd >= 0)
        close(fd);
}

/* GiB/s of 64 KiB copies cycling through len resident bytes: memcpy, then process_vm_writev. */
static void copy_round(size_t len, double *out)
{
    uint8_t *dst = fresh(len), *src = fresh(CHUNK);
    memset(dst, 1, len);
    memset(src, 2, CHUNK);
    size_t n = (size_t)4 << 30 >> 16; /* 4 GiB of copies */
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        memcpy(dst + (i * CHUNK) % len, src, CHUNK);
    out[0] = 4.0 / (now_s() - t0);
    n /= 4;
    t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        struct iovec l = {.iov_base = src, .iov_len = CHUNK};
        struct iovec r = {.iov_base = dst + (i * CHUNK) % len, .iov_len = CHUNK};
        if (process_vm_writev(getpid(), &l, 1, &r, 1, 0) != (ssize_t)CHUNK) {
            out[1] = -1;
            break;
        }
    }
    if (out[1] == 0)
        out[1] = 1.0 / (now_s() - t0);
    munmap(dst, len);
    munmap(src, CHUNK);
}

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K')
        v <<= 10;
    else if (*end == 'm' || *end == 'M')
        v <<= 20;
    else if (*end == 'g' || *end == 'G')
        v <<= 30;
    return (size_t)v;
}

int main(int argc, char **argv)
{
    perf_out_t po;
    perf_out_init(&po, "rs-perf-touch", &argc, argv);
    size_t len = 256u << 20;
    int rounds = ROUNDS;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
            len = parse_size(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: rs-perf-touch [--size 256M] [--rounds 3] [--json [FILE]] "
                            "[--csv FILE]\n");
            return 2;
        }
    }
    len &= ~(size_t)(CHUNK - 1);
    if (len < CHUNK || rounds < 1 || rounds > 99) {
        fprintf(stderr, "rs-perf-touch: --size at least 64K, --rounds 1..99\n");
        return 2;
    }
    double pages[5][99], copies[2][99];
    int thp = 0;
    for (int r = 0; r < rounds; r++) {
        double out[5], c[2] = {0, 0};
        page_round(len, out, &thp);
        copy_round(len < (64u << 20) ? len : (64u << 20), c);
        for (int k = 0; k < 5; k++)
            pages[k][r] = out[k];
        copies[0][r] = c[0];
        copies[1][r] = c[1];
    }
    static const char *names[5] = {"anon_touch_ns", "populate_ns", "populated_touch_ns",
                                   "thp_touch_ns", "shared_map_touch_ns"};
    perf_out_meta(&po, "none", "-");
    perf_row(&po);
    perf_u64(&po, "bytes", len);
    perf_int(&po, "rounds", rounds);
    perf_int(&po, "thp_enabled", thp);
    printf("%-20s %10s\n", "case (median)", "value");
    for (int k = 0; k < 5; k++) {
        double m = median(pages[k], rounds);
        perf_num(&po, names[k], m, 1);
        printf("%-20s %10.1f ns/page\n", names[k], m);
    }
    double mc = median(copies[0], rounds), vw = median(copies[1], rounds);
    perf_num(&po, "memcpy_gib_s", mc, 2);
    perf_num(&po, "vm_writev_gib_s", vw, 2);
    printf("%-20s %10.2f GiB/s\n%-20s %10.2f GiB/s\n", "memcpy_gib_s", mc, "vm_writev_gib_s", vw);
    return perf_out_emit(&po) == 0 ? 0 : 1;
}
