/*
 * UCX backend: same-host regions a peer may map once it reuses them.
 *
 * Cross-memory attach (attach.c) pins the owner's pages on every call: a
 * put that writes fresh pages once (a shuffle's arena) is cheapest that
 * way, since nothing is mapped or faulted here, but puts into one range
 * again and again (a ring) pay the pinning each time. So an rs_mem_alloc
 * region that peers may reach lives in a sealed memfd the owner keeps open,
 * and a peer's key remembers a bit per page it has written or read: an op
 * whose pages all saw an op before goes through the peer's own mapping of
 * that memfd (mapped at the first such op, faulted in page by page once),
 * every other op attaches.
 *
 * Stale keys: the memfd's trailer page holds a liveness word, a random
 * token the blob carries, which the owner clears before it unmaps at
 * deregistration. A mapped op checks it first (one load from shared
 * memory): a key kept past its region then fails as an attach to an
 * unmapped range would, and never writes into whatever the owner mapped
 * at that address since (attach cannot tell). An op racing the
 * deregistration lands in pages our mapping still holds, never in freed
 * memory. That the owner process lives is checked by attaching to the
 * word at most once per millisecond (ESRCH: the endpoint fails).
 */
#include "transport/ucx/ucx.h"

#include "common/clock.h"
#include "common/log.h"

#include <rshuffle/config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAP_RECHECK_NS  1000000u      /* owner process alive: checked this often while mapped */
#define MAP_MAX_DEFAULT (64ull << 20) /* largest mappable region without shared huge pages */

static size_t page_size(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (size_t)page : 4096;
}

static size_t body_len(uint64_t len)
{
    size_t page = page_size();
    return ((size_t)len + page - 1) & ~(page - 1);
}

/* A nonzero token no earlier region of this process is likely to have had. */
static uint64_t new_token(const void *addr)
{
    uint64_t t = 0;
    if (getrandom(&t, sizeof(t), GRND_NONBLOCK) != (ssize_t)sizeof(t)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) * 0x9e3779b97f4a7c15ull;
        t ^= (uint64_t)(uintptr_t)addr ^ ((uint64_t)getpid() << 32);
    }
    return t != 0 ? t : 1;
}

/* Whether memfd memory may get transparent huge pages here (the bracketed sysfs choice). */
static int shmem_huge(void)
{
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, "[never]") == NULL && strstr(buf, "[deny]") == NULL && strchr(buf, '[');
}

uint64_t rs_ucx_map_max(uint64_t configured)
{
    if (configured != 0)
        return configured;
    /*
     * Without huge pages for shared memory, a large region (an arena, filled
     * once per use) costs 4 KiB faults to make resident as a memfd, against
     * 2 MiB ones as private memory, and is rarely a ring: it stays private.
     */
    return shmem_huge() ? UINT64_MAX : MAP_MAX_DEFAULT;
}

rs_status_t rs_ucx_map_create(rs_ucx_mr_t *umr, size_t len)
{
    size_t body = body_len(len), total = body + page_size();
    int fd = memfd_create("rshuffle-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return RS_ERR_UNSUPPORTED;
    if (ftruncate(fd, (off_t)total) != 0) {
        rs_error("cannot size a %zu-byte region: %s", total, strerror(errno));
        goto err_close;
    }
    /* Its size never changes, so a peer's mapping of it can never SIGBUS. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        rs_error("cannot seal a region's memory: %s", strerror(errno));
        goto err_close;
    }
    void *addr = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        rs_error("cannot map %zu bytes for a region: %s", total, strerror(errno));
        goto err_close;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(addr, total, MADV_HUGEPAGE); /* granted only where shared memory may have them */
#endif
    umr->token = new_token(addr);
    __atomic_store_n((uint64_t *)((uint8_t *)addr + body), umr->token, __ATOMIC_RELEASE);
    umr->memfd = fd;
    umr->owned = addr;
    umr->owned_len = total;
    return RS_OK;

err_close:
    close(fd);
    return RS_ERR_NOMEM;
}

void rs_ucx_map_retire(rs_ucx_mr_t *umr)
{
    if (umr->memfd < 0)
        return;
    /* Before the unmap: a peer's mapping outlives it, and must see the region gone. */
    __atomic_store_n((uint64_t *)((uint8_t *)umr->owned + body_len(umr->len)), 0, __ATOMIC_RELEASE);
    close(umr->memfd);
    umr->memfd = -1;
}

void rs_ucx_map_init_key(rs_ucx_rkey_t *k, const rs_rkey_t *rkey, uint32_t fd, uint64_t token)
{
    k->map_fd = fd <= INT32_MAX && token != 0 ? (int32_t)fd : -1;
    k->map_state = 0;
    k->map_token = token;
    k->base = rkey->base;
    k->len = rkey->len;
    k->map = NULL;
    k->map_len = 0;
    k->seen = NULL;
    k->checked_ns = 0;
}

void rs_ucx_map_release(rs_ucx_rkey_t *k)
{
    if (k->map != NULL)
        munmap(k->map, k->map_len);
    k->map = NULL;
    free(k->seen);
    k->seen = NULL;
}

static int region_live(const rs_ucx_rkey_t *k)
{
    const uint64_t *w = (const uint64_t *)(k->map + k->map_len - page_size());
    return __atomic_load_n(w, __ATOMIC_ACQUIRE) == k->map_token;
}

/* Maps the owner's memfd: 1 on success, 0 when it cannot be (attach stays). */
static int map_region(rs_ucx_rkey_t *k)
{
    size_t total = body_len(k->len) + page_size();
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)k->attach_pid, (int)k->map_fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        rs_debug("cannot open the memory of process %d's region: %s", (int)k->attach_pid,
                 strerror(errno));
        return 0;
    }
    /* The number may name another file by now: only a sealed file of the region's size maps. */
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == total && seals >= 0 &&
        (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW))
        m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return 0;
    k->map = m;
    k->map_len = total;
    if (!region_live(k)) { /* another region's file, or this one already retired */
        munmap(m, total);
        k->map = NULL;
        return 0;
    }
    return 1;
}

/* Marks the pages of [off, off + len) seen; 1 when every one of them had been seen already. */
static int pages_seen(uint64_t *seen, uint64_t off, size_t len)
{
    unsigned shift = (unsigned)__builtin_ctzl(page_size());
    uint64_t p = off >> shift, last = (off + len - 1) >> shift;
    int all = 1;
    for (; p <= last; p++) {
        uint64_t bit = 1ull << (p & 63);
        if ((seen[p >> 6] & bit) == 0) {
            all = 0;
            seen[p >> 6] |= bit;
        }
    }
    return all;
}

/* The key's region is gone: every later op through it fails. */
static rs_status_t key_stale(rs_ucx_rkey_t *k, uint64_t raddr, size_t len)
{
    if (k->map_state != -2)
        rs_error("%zu bytes at 0x%llx: the remote region was freed (a stale key)", len,
                 (unsigned long long)raddr);
    rs_ucx_map_release(k);
    k->map_state = -2;
    return RS_ERR_TRANSPORT;
}

/* The owner process, attached to: RS_OK while it lives with the region registered. */
static rs_status_t owner_check(rs_ucx_ep_t *uep, rs_ucx_rkey_t *k, uint64_t raddr, size_t len)
{
    uint64_t word = 0;
    struct iovec l = {.iov_base = &word, .iov_len = sizeof(word)};
    struct iovec r = {.iov_base = (void *)(uintptr_t)(k->base + body_len(k->len)),
                      .iov_len = sizeof(word)};
    ssize_t n;
    do {
        n = process_vm_readv(k->attach_pid, &l, 1, &r, 1, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == ESRCH) {
        rs_ucx_ep_mark_failed(uep, UCS_ERR_UNREACHABLE);
        return RS_ERR_UNREACHABLE;
    }
    if (n != (ssize_t)sizeof(word) || word != k->map_token)
        return key_stale(k, raddr, len);
    return RS_OK;
}

void *rs_ucx_map_reuse(rs_ucx_ep_t *uep, rs_ucx_rkey_t *k, uint64_t raddr, size_t len,
                       rs_status_t *st_p)
{
    *st_p = RS_OK;
    if (k->map_state == -2) {
        *st_p = key_stale(k, raddr, len);
        return NULL;
    }
    if (k->map_state < 0 || len == 0)
        return NULL;
    if (k->seen == NULL) {
        size_t pages = body_len(k->len) / page_size();
        k->seen = calloc((pages + 63) / 64, sizeof(uint64_t));
        if (k->seen == NULL) {
            k->map_state = -1;
            return NULL;
        }
    }
    uint64_t off = raddr - k->base; /* in range: the generic layer checked */
    if (!pages_seen(k->seen, off, len))
        return NULL;
    if (k->map_state == 0) {
        k->map_state = map_region(k) ? 1 : -1;
        if (k->map_state < 0)
            return NULL;
        k->checked_ns = rs_now_coarse_ns();
    }
    if (!region_live(k)) {
        *st_p = key_stale(k, raddr, len);
        return NULL;
    }
    uint64_t now = rs_now_coarse_ns();
    if (now - k->checked_ns >= MAP_RECHECK_NS) {
        k->checked_ns = now;
        *st_p = owner_check(uep, k, raddr, len);
        if (*st_p != RS_OK)
            return NULL;
    }
    return k->map + off;
}
