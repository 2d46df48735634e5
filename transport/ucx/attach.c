/*
 * UCX backend: one-sided ops on a same-host peer's memory by cross-memory
 * attach (process_vm_writev/readv: one kernel copy through the peer's page
 * tables; nothing is mapped or faulted in this process), and puts into our
 * own process's memory by memcpy. UCX 1.13 does not do this for registered
 * user memory: with cma enabled it still emulated puts through its
 * shared-memory FIFO in 8 KiB fragments (ucp_put_handler in a profile).
 *
 * Pages a key already used go through a mapping of the owner's memory
 * instead (attach_map.c). Both complete before returning, so a notified
 * put needs no fence: the data is in place before the notification is even
 * posted.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Why a cross-memory call moved nothing (n <= 0, errno set when n < 0), done bytes in. */
static rs_status_t attach_failed(rs_ucx_ep_t *uep, rs_ucx_rkey_t *k, int write, size_t len,
                                 uint64_t raddr, ssize_t n, size_t done)
{
    if (n < 0 && errno == ESRCH) { /* the peer process is gone: so is the endpoint */
        rs_ucx_ep_mark_failed(uep, UCS_ERR_UNREACHABLE);
        return RS_ERR_UNREACHABLE;
    }
    if (n < 0 && (errno == EPERM || errno == ENOSYS) && done == 0)
        return RS_ERR_UNSUPPORTED;
    if (n < 0 && errno == EFAULT) {
        /* Inside the key's range, so the peer unmapped it: it is exiting (or exited). */
        rs_error("cross-memory %s of process %d: its memory is gone (the peer is shutting "
                 "down or exited)",
                 write ? "write" : "read", (int)k->attach_pid);
        rs_ucx_ep_mark_failed(uep, UCS_ERR_UNREACHABLE);
        return RS_ERR_UNREACHABLE;
    }
    rs_error("cross-memory %s of %zu bytes at 0x%llx failed: %s", write ? "write" : "read", len,
             (unsigned long long)raddr, n < 0 ? strerror(errno) : "no progress");
    return RS_ERR_TRANSPORT;
}

/* Moves len bytes between local and the peer's raddr; RS_OK or why not (errno-based). */
static rs_status_t attach_copy(rs_ucx_ep_t *uep, rs_ucx_rkey_t *k, void *local, size_t len,
                               uint64_t raddr, int write)
{
    /*
     * A put into our own process's region: a memcpy, no system call (a put
     * targets room its owner granted). A get goes through the kernel even
     * here: a stale key (a broadcast descriptor kept past its object's
     * region) then fails with EFAULT instead of faulting this process.
     */
    if (write && k->own_process) {
        memcpy((void *)(uintptr_t)raddr, local, len);
        return RS_OK;
    }
    if (k->map_fd >= 0) { /* pages this key used before: through our mapping (attach_map.c) */
        rs_status_t st;
        uint8_t *p = rs_ucx_map_reuse(uep, k, raddr, len, &st);
        if (p != NULL) {
            if (write)
                memcpy(p, local, len);
            else
                memcpy(local, p, len);
            __atomic_thread_fence(__ATOMIC_RELEASE); /* the data before a notification */
            return RS_OK;
        }
        if (st != RS_OK)
            return st;
    }
    size_t done = 0;
    while (done < len) {
        struct iovec l = {.iov_base = (uint8_t *)local + done, .iov_len = len - done};
        struct iovec r = {.iov_base = (void *)(uintptr_t)(raddr + done), .iov_len = len - done};
        ssize_t n = write ? process_vm_writev(k->attach_pid, &l, 1, &r, 1, 0)
                          : process_vm_readv(k->attach_pid, &l, 1, &r, 1, 0);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return attach_failed(uep, k, write, len, raddr, n, done);
    }
    return RS_OK;
}

/* Not permitted here (ptrace rules, seccomp): this key goes by messages from now on. */
static void attach_refused(rs_ucx_rkey_t *k)
{
    rs_warn("cross-memory attach to process %d refused: one-sided ops go as messages",
            (int)k->attach_pid);
    k->attach_pid = 0;
    k->own_process = 0;
    k->am = 1;
    rs_ucx_map_release(k);
    k->map_fd = -1;
}

rs_status_t rs_ucx_attach_put(rs_ucx_ep_t *uep, rs_op_t *op, rs_ucx_rkey_t *k, const void *src,
                              size_t len, uint64_t raddr, int notify, uint32_t imm)
{
    /* process_vm_writev takes a non-const iovec; it only reads the local side */
    rs_status_t st = attach_copy(uep, k, (void *)(uintptr_t)src, len, raddr, 1);
    if (st == RS_ERR_UNSUPPORTED) {
        attach_refused(k);
        return rs_ucx_amrma_put(uep, op, src, len, raddr, notify, imm);
    }
    if (st == RS_ERR_UNREACHABLE) { /* posted and failed, as a put to a dead UCX peer */
        rs_tp_op_complete(op, st);
        return RS_OK;
    }
    if (st != RS_OK)
        return st;
    if (!notify) {
        rs_tp_op_complete(op, RS_OK);
        return RS_OK;
    }
    rs_ucx_notify_alone(uep, op, imm);
    return RS_OK;
}

rs_status_t rs_ucx_attach_get(rs_ucx_ep_t *uep, rs_op_t *op, rs_ucx_rkey_t *k, void *dst,
                              size_t len, uint64_t raddr)
{
    rs_status_t st = attach_copy(uep, k, dst, len, raddr, 0);
    if (st == RS_ERR_UNSUPPORTED) {
        attach_refused(k);
        return rs_ucx_amrma_get(uep, op, dst, len, raddr);
    }
    if (st == RS_OK || st == RS_ERR_UNREACHABLE) {
        rs_tp_op_complete(op, st);
        return RS_OK;
    }
    return st;
}

/*
 * Reads all n segments in as few process_vm_readv calls as the kernel
 * allows (a partial transfer stops at an iovec element: the rest goes
 * again). Keys through our own mapping (pages seen before) read segment by
 * segment as rs_ucx_attach_get does.
 */
static rs_status_t attach_readv(rs_ucx_ep_t *uep, rs_ucx_rkey_t *k, const rs_get_seg_t *seg,
                                unsigned n, uint64_t base)
{
    struct iovec l[RS_GETV_MAX], r[RS_GETV_MAX];
    unsigned first = 0;
    size_t skip = 0; /* bytes of seg[first] already in */
    for (;;) {
        while (first < n && seg[first].len == skip) { /* done, or empty: nothing to ask for */
            first++;
            skip = 0;
        }
        if (first == n)
            break;
        unsigned c = 0;
        for (unsigned i = first; i < n; i++, c++) {
            size_t at = i == first ? skip : 0;
            l[c] =
                (struct iovec){.iov_base = (uint8_t *)seg[i].dst + at, .iov_len = seg[i].len - at};
            r[c] = (struct iovec){.iov_base = (void *)(uintptr_t)(base + seg[i].roff + at),
                                  .iov_len = seg[i].len - at};
        }
        ssize_t got = process_vm_readv(k->attach_pid, l, c, r, c, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return attach_failed(uep, k, 0, l[0].iov_len, (uint64_t)(uintptr_t)r[0].iov_base, got,
                                 first > 0 || skip > 0);
        size_t left = (size_t)got;
        while (first < n && left >= seg[first].len - skip) {
            left -= seg[first].len - skip;
            skip = 0;
            first++;
        }
        skip += left;
    }
    return RS_OK;
}

rs_status_t rs_ucx_attach_getv(rs_ucx_ep_t *uep, rs_op_t *op, rs_ucx_rkey_t *k,
                               const rs_get_seg_t *seg, unsigned n, uint64_t base)
{
    rs_status_t st = RS_OK;
    if (k->map_fd >= 0) {
        for (unsigned i = 0; i < n && st == RS_OK; i++)
            st = attach_copy(uep, k, seg[i].dst, seg[i].len, base + seg[i].roff, 0);
    } else {
        st = attach_readv(uep, k, seg, n, base);
    }
    if (st == RS_ERR_UNSUPPORTED) {
        attach_refused(k);
        return st; /* nothing read: the generic layer reads segment by segment */
    }
    if (st == RS_OK || st == RS_ERR_UNREACHABLE) {
        rs_tp_op_complete(op, st);
        return RS_OK;
    }
    return st;
}
