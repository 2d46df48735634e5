/*
 * UCX backend: memory. rs_mem_alloc maps private memory of our own, makes
 * it resident (rs_resident_make) and registers it: same-host peers reach it by
 * cross-memory attach (attach.c: one kernel copy, nothing mapped in the
 * peer), remote ones by RDMA or our messages. RSHUFFLE_UCX_MEM=shared lets
 * UCX allocate a shared segment instead (UCP_MEM_MAP_ALLOCATE), which
 * same-host peers map: a put is then a plain memcpy, but every peer pays a
 * page fault per page at its first touch (docs/transport.md has the
 * measurements). rs_mem_reg registers the caller's memory.
 *
 * Remote-key blobs carry the owner's host key (kernel and pid namespace)
 * and pid before UCX's packed key: an unpacker on the same host attaches.
 */
#include "transport/ucx/ucx.h"

#include "common/byteorder.h"
#include "common/log.h"
#include "common/resident.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * Before UCX's packed key, little-endian: host key (8 bytes), pid (4), the
 * memfd's number in the owner (4, all ones: none) and the region's liveness
 * token (8), for same-host peers (attach.c, attach_map.c).
 */
#define HOST_KEY_LEN 24
#define NO_MEMFD     0xffffffffu

#define HUGE_LEN (2u << 20)

/*
 * Private memory; with RSHUFFLE_UCX_HUGE=1 (the default), 2 MiB-aligned
 * and advised for huge pages when it spans one: one fault per 2 MiB, and a
 * peer's attach pins 2 MiB folios, so pushes into an arena cost less CPU on
 * every machine measured; only making it resident at start was dearer on
 * one (docs/shuffle.md, "Huge pages").
 */
static rs_status_t private_mapping(const rs_ucx_ctx_t *uc, rs_ucx_mr_t *umr, size_t len)
{
    size_t extra = uc->mem_huge && len >= HUGE_LEN ? HUGE_LEN : 0;
    uint8_t *raw =
        mmap(NULL, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        rs_error("cannot map %zu bytes for a region: %s", len, strerror(errno));
        return RS_ERR_NOMEM;
    }
    uint8_t *addr = raw;
    if (extra != 0) {
        long page = sysconf(_SC_PAGESIZE);
        size_t body =
            (len + (size_t)(page > 0 ? page : 4096) - 1) & ~((size_t)(page > 0 ? page : 4096) - 1);
        addr = (uint8_t *)(((uintptr_t)raw + HUGE_LEN - 1) & ~(uintptr_t)(HUGE_LEN - 1));
        if (addr > raw)
            munmap(raw, (size_t)(addr - raw));
        if (raw + len + extra > addr + body)
            munmap(addr + body, (size_t)(raw + len + extra - (addr + body)));
#ifdef MADV_HUGEPAGE
        (void)madvise(addr, body, MADV_HUGEPAGE); /* a hint: the kernel may not have them */
#endif
    }
    umr->owned = addr;
    umr->owned_len = len;
    return RS_OK;
}

/*
 * Only RSHUFFLE_UCX_MEM=shared allocates in /dev/shm: our own mapping is
 * private or a memfd, and /dev/shm's size does not bound a memfd.
 */
int rs_ucx_mem_alloc_shm(const rs_ctx_t *ctx)
{
    return rs_ucx_ctx(ctx)->mem_shared;
}

/*
 * rs_mem_alloc's memory, unless UCX allocates (RSHUFFLE_UCX_MEM=shared):
 * resident on success. A region peers may reach lives in a memfd they can
 * map once they reuse its pages (attach_map.c), unless RSHUFFLE_UCX_MEM=attach
 * or it is larger than uc->map_max (where shared memory gets no huge pages,
 * a large region such as an arena is cheaper private: see ctx.c); the rest
 * is private.
 */
static rs_status_t own_mapping(rs_ucx_ctx_t *uc, rs_ucx_mr_t *umr, size_t len, unsigned access)
{
    rs_status_t s = RS_ERR_UNSUPPORTED;
    if (!uc->mem_attach && (access & (RS_MEM_REMOTE_READ | RS_MEM_REMOTE_WRITE)) != 0 &&
        len <= uc->map_max && uc->memfd_n < RS_UCX_MEMFD_MAX)
        s = rs_ucx_map_create(umr, len);
    if (s == RS_OK && umr->memfd >= 0)
        uc->memfd_n++;
    if (s == RS_ERR_UNSUPPORTED)
        s = private_mapping(uc, umr, len);
    if (s != RS_OK)
        return s;
    s = (access & RS_MEM_LAZY) ? RS_OK : rs_resident_make(umr->owned, len);
    if (s != RS_OK) {
        if (umr->memfd >= 0)
            uc->memfd_n--;
        rs_ucx_map_retire(umr);
        munmap(umr->owned, umr->owned_len);
        umr->owned = NULL;
        return s;
    }
    return RS_OK;
}

rs_status_t rs_ucx_mem_reg(rs_ctx_t *ctx, rs_mr_t *mr, void *addr, size_t len, unsigned access)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    rs_ucx_mr_t *umr = calloc(1, sizeof(*umr));
    if (umr == NULL) {
        rs_error("out of memory allocating a region");
        return RS_ERR_NOMEM;
    }
    umr->memfd = -1;
    int ucx_allocates = addr == NULL && uc->mem_shared;
    if (addr == NULL && !ucx_allocates) {
        rs_status_t st = own_mapping(uc, umr, len, access);
        if (st != RS_OK) {
            free(umr);
            return st;
        }
        addr = umr->owned;
    }
    unsigned prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE;
    if (access & RS_MEM_REMOTE_READ)
        prot |= UCP_MEM_MAP_PROT_REMOTE_READ;
    if (access & (RS_MEM_REMOTE_WRITE | RS_MEM_REMOTE_ATOMIC))
        prot |= UCP_MEM_MAP_PROT_REMOTE_WRITE;
    ucp_mem_map_params_t p = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS | UCP_MEM_MAP_PARAM_FIELD_PROT,
        .address = addr,
        .length = len,
        .flags = ucx_allocates ? UCP_MEM_MAP_ALLOCATE : 0,
        .prot = prot,
    };
    ucs_status_t s = ucp_mem_map(uc->context, &p, &umr->memh);
    if (s != UCS_OK) {
        rs_error("ucp_mem_map of %zu bytes failed: %s", len, ucs_status_string(s));
        goto err_free;
    }
    ucp_mem_attr_t attr = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS};
    s = ucp_mem_query(umr->memh, &attr);
    if (s != UCS_OK) {
        rs_error("ucp_mem_query failed: %s", ucs_status_string(s));
        goto err_unmap;
    }
    if (ucx_allocates && rs_resident_make(attr.address, len) != RS_OK) {
        s = UCS_ERR_NO_MEMORY;
        goto err_unmap;
    }
    void *buf;
    s = ucp_rkey_pack(uc->context, umr->memh, &buf, &umr->rkey_len);
    if (s != UCS_OK) {
        rs_error("ucp_rkey_pack failed: %s", ucs_status_string(s));
        goto err_unmap;
    }
    umr->rkey_buf = malloc(HOST_KEY_LEN + umr->rkey_len);
    if (umr->rkey_buf == NULL) {
        ucp_rkey_buffer_release(buf);
        rs_error("out of memory keeping a packed key");
        s = UCS_ERR_NO_MEMORY;
        goto err_unmap;
    }
    rs_put_le64(umr->rkey_buf, uc->host_key);
    rs_put_le32((uint8_t *)umr->rkey_buf + 8, (uint32_t)getpid());
    rs_put_le32((uint8_t *)umr->rkey_buf + 12, umr->memfd >= 0 ? (uint32_t)umr->memfd : NO_MEMFD);
    rs_put_le64((uint8_t *)umr->rkey_buf + 16, umr->memfd >= 0 ? umr->token : 0);
    memcpy((uint8_t *)umr->rkey_buf + HOST_KEY_LEN, buf, umr->rkey_len);
    umr->rkey_len += HOST_KEY_LEN;
    ucp_rkey_buffer_release(buf);
    mr->addr = attr.address;
    mr->be = umr;
    umr->base = (uint64_t)(uintptr_t)attr.address;
    umr->len = len;
    umr->access = access;
    rs_list_add_tail(&uc->regions, &umr->link);
    return RS_OK;

err_unmap:
    ucp_mem_unmap(uc->context, umr->memh);
err_free:
    if (umr->memfd >= 0)
        uc->memfd_n--;
    rs_ucx_map_retire(umr);
    if (umr->owned != NULL)
        munmap(umr->owned, umr->owned_len);
    free(umr);
    return s == UCS_ERR_NO_MEMORY ? RS_ERR_NOMEM : RS_ERR_TRANSPORT;
}

void rs_ucx_mem_dereg(rs_mr_t *mr)
{
    rs_ucx_mr_t *umr = mr->be;
    rs_list_del(&umr->link);
    ucp_mem_unmap(rs_ucx_ctx(mr->ctx)->context, umr->memh);
    if (umr->memfd >= 0)
        rs_ucx_ctx(mr->ctx)->memfd_n--;
    rs_ucx_map_retire(umr);
    if (umr->owned != NULL)
        munmap(umr->owned, umr->owned_len);
    free(umr->rkey_buf);
    free(umr);
    mr->be = NULL;
}

rs_status_t rs_ucx_rkey_pack(const rs_mr_t *mr, void *buf, size_t buflen, size_t *len_p)
{
    const rs_ucx_mr_t *umr = mr->be;
    if (buflen < umr->rkey_len) {
        rs_error("rs_mr_pack_rkey: buffer too small for a %zu-byte UCX key", umr->rkey_len);
        return RS_ERR_NO_SPACE;
    }
    memcpy(buf, umr->rkey_buf, umr->rkey_len);
    *len_p = umr->rkey_len;
    return RS_OK;
}

rs_status_t rs_ucx_rkey_unpack(rs_ep_t *ep, rs_rkey_t *rkey, const void *buf, size_t len)
{
    rs_ucx_ep_t *uep = ep->be;
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ep->ctx);
    if (uep == NULL || uep->uep == NULL)
        return RS_ERR_UNREACHABLE;
    if (len <= HOST_KEY_LEN)
        return RS_ERR_BAD_RKEY;
    uint64_t host_key = rs_get_le64(buf);
    pid_t pid = (pid_t)rs_get_le32((const uint8_t *)buf + 8);
    uint32_t memfd = rs_get_le32((const uint8_t *)buf + 12);
    uint64_t token = rs_get_le64((const uint8_t *)buf + 16);
    rs_ucx_rkey_t *k = malloc(sizeof(*k));
    if (k == NULL) {
        rs_error("out of memory unpacking a remote key");
        return RS_ERR_NOMEM;
    }
    ucs_status_t s = ucp_ep_rkey_unpack(uep->uep, (const uint8_t *)buf + HOST_KEY_LEN, &k->rk);
    if (s != UCS_OK) {
        rs_error("ucp_ep_rkey_unpack failed: %s", ucs_status_string(s));
        free(k);
        return RS_ERR_BAD_RKEY;
    }
    /*
     * Mapped (shared memory) or reachable by an RDMA transport: UCX does
     * the ops natively. Otherwise UCX would emulate them, and its emulation
     * can abort a target (ucx_amrma.c): we carry them ourselves, put and
     * get by cross-memory attach when the region's owner runs on this
     * kernel and in our pid namespace.
     */
    void *ptr;
    int mapped = ucp_rkey_ptr(k->rk, rkey->base, &ptr) == UCS_OK;
    k->am = uc->force_am > 0 || (uc->force_am == 0 && !mapped && !uc->native_remote);
    k->attach_pid = 0;
    if (uc->force_am == 0 && !mapped && uc->host_key != 0 && host_key == uc->host_key && pid > 0)
        k->attach_pid = pid;
    k->own_process = k->attach_pid != 0 && k->attach_pid == getpid();
    rs_ucx_map_init_key(k, rkey, uc->mem_attach || k->attach_pid == 0 ? NO_MEMFD : memfd, token);
    rkey->be = k;
    return RS_OK;
}

void rs_ucx_rkey_release(rs_rkey_t *rkey)
{
    rs_ucx_rkey_t *k = rkey->be;
    if (k != NULL) {
        rs_ucx_map_release(k);
        ucp_rkey_destroy(k->rk);
        free(k);
    }
    rkey->be = NULL;
}
