/*
 * Verbs memory: user regions (ibv_reg_mr with access flags per RS_MEM_*),
 * the backend's part of remote-key blobs (the rkey), and pools of small
 * registered buffers the backend itself needs (message copies, atomic
 * results), registered a slab at a time.
 */
#include "transport/verbs/verbs.h"

#include "common/byteorder.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RS_V_RKEY_MAGIC   0x5652u /* "RV" */
#define RS_V_RKEY_VERSION 1
#define RS_V_RKEY_LEN     8

typedef struct rs_vslab {
    rs_list_t link;
    struct ibv_mr *mr;
    void *mem;
    rs_vslot_t slots[]; /* pool->per descriptors */
} rs_vslab_t;

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* ------------------------------------------------------------------ pools */

static int pool_grow(rs_vctx_t *vc, rs_vpool_t *pool)
{
    rs_vslab_t *slab = calloc(1, sizeof(*slab) + pool->per * sizeof(rs_vslot_t));
    if (slab == NULL)
        goto err;
    size_t bytes = pool->size * pool->per;
    if (posix_memalign(&slab->mem, page_size(), bytes) != 0)
        goto err_free_slab;
    slab->mr = ibv_reg_mr(vc->pd, slab->mem, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (slab->mr == NULL) {
        rs_error("verbs: cannot register %zu bytes for %s: %s", bytes, pool->what, strerror(errno));
        free(slab->mem);
        free(slab);
        return -1;
    }
    for (unsigned i = 0; i < pool->per; i++) {
        rs_vslot_t *s = &slab->slots[i];
        s->buf = (char *)slab->mem + (size_t)i * pool->size;
        s->lkey = slab->mr->lkey;
        s->next = pool->free;
        pool->free = s;
    }
    rs_list_add_tail(&pool->slabs, &slab->link);
    return 0;

err_free_slab:
    free(slab);
err:
    rs_error("verbs: out of memory growing the pool of %s", pool->what);
    return -1;
}

rs_status_t rs_verbs_pool_init(rs_vctx_t *vc, rs_vpool_t *pool, size_t size, unsigned per,
                               const char *what)
{
    pool->size = (size + 7) & ~(size_t)7;
    pool->per = per;
    pool->what = what;
    pool->free = NULL;
    rs_list_init(&pool->slabs);
    return pool_grow(vc, pool) == 0 ? RS_OK : RS_ERR_NOMEM;
}

void rs_verbs_pool_destroy(rs_vpool_t *pool)
{
    while (!rs_list_empty(&pool->slabs)) {
        rs_vslab_t *slab = rs_list_first(&pool->slabs, rs_vslab_t, link);
        rs_list_del(&slab->link);
        ibv_dereg_mr(slab->mr);
        free(slab->mem);
        free(slab);
    }
    pool->free = NULL;
}

rs_vslot_t *rs_verbs_slot_get(rs_vctx_t *vc, rs_vpool_t *pool)
{
    if (pool->free == NULL && pool_grow(vc, pool) != 0)
        return NULL;
    rs_vslot_t *s = pool->free;
    pool->free = s->next;
    return s;
}

void rs_verbs_slot_put(rs_vpool_t *pool, rs_vslot_t *slot)
{
    slot->next = pool->free;
    pool->free = slot;
}

/* ------------------------------------------------------- user regions */

static int ibv_access(unsigned access)
{
    int flags = IBV_ACCESS_LOCAL_WRITE; /* gets land in local memory */
    if (access & RS_MEM_REMOTE_READ)
        flags |= IBV_ACCESS_REMOTE_READ;
    if (access & RS_MEM_REMOTE_WRITE)
        flags |= IBV_ACCESS_REMOTE_WRITE;
    if (access & RS_MEM_REMOTE_ATOMIC)
        flags |= IBV_ACCESS_REMOTE_ATOMIC;
    return flags;
}

rs_status_t rs_verbs_mem_reg(rs_ctx_t *ctx, rs_mr_t *mr, void *addr, size_t len, unsigned access)
{
    rs_vctx_t *vc = rs_verbs_vctx(ctx);
    void *mem = addr;
    if (mem == NULL) {
        size_t pg = page_size();
        size_t bytes = (len + pg - 1) / pg * pg;
        if (posix_memalign(&mem, pg, bytes) != 0) {
            rs_error("verbs: out of memory allocating %zu bytes", len);
            return RS_ERR_NOMEM;
        }
        memset(mem, 0, bytes);
    }
    int flags = ibv_access(access);
    struct ibv_mr *imr = ibv_reg_mr(vc->pd, mem, len, flags);
    if (imr == NULL && addr != NULL && (errno == EFAULT || errno == EACCES) &&
        !(access & (RS_MEM_REMOTE_WRITE | RS_MEM_REMOTE_ATOMIC))) {
        /* Read-only memory (e.g. a mapped file) cannot take local writes. */
        imr = ibv_reg_mr(vc->pd, mem, len, flags & ~IBV_ACCESS_LOCAL_WRITE);
    }
    if (imr == NULL) {
        rs_error("verbs: ibv_reg_mr of %zu bytes failed: %s%s", len, strerror(errno),
                 errno == ENOMEM || errno == EAGAIN ? " (check ulimit -l)" : "");
        if (addr == NULL)
            free(mem);
        return errno == ENOMEM ? RS_ERR_NOMEM : RS_ERR_TRANSPORT;
    }
    mr->addr = mem;
    mr->be = imr;
    return RS_OK;
}

void rs_verbs_mem_dereg(rs_mr_t *mr)
{
    struct ibv_mr *imr = mr->be;
    if (imr != NULL) {
        int rc = ibv_dereg_mr(imr);
        if (rc != 0)
            rs_error("verbs: ibv_dereg_mr failed: %s", strerror(rc));
    }
    if (mr->allocated)
        free(mr->addr);
    mr->be = NULL;
}

/* ---------------------------------------------------------- remote keys */

rs_status_t rs_verbs_rkey_pack(const rs_mr_t *mr, void *buf, size_t buflen, size_t *len_p)
{
    const struct ibv_mr *imr = mr->be;
    if (buflen < RS_V_RKEY_LEN)
        return RS_ERR_NO_SPACE;
    unsigned char *p = buf;
    rs_put_le(p, RS_V_RKEY_MAGIC, 2);
    rs_put_le(p + 2, RS_V_RKEY_VERSION, 2);
    rs_put_le(p + 4, imr->rkey, 4);
    *len_p = RS_V_RKEY_LEN;
    return RS_OK;
}

rs_status_t rs_verbs_rkey_unpack(rs_ep_t *ep, rs_rkey_t *rkey, const void *buf, size_t len)
{
    (void)ep;
    const unsigned char *p = buf;
    if (len != RS_V_RKEY_LEN || rs_get_le(p, 2) != RS_V_RKEY_MAGIC ||
        rs_get_le(p + 2, 2) != RS_V_RKEY_VERSION) {
        rs_error("verbs: not a verbs remote key (%zu bytes)", len);
        return RS_ERR_BAD_RKEY;
    }
    rkey->be = (void *)(uintptr_t)rs_get_le(p + 4, 4);
    return RS_OK;
}

void rs_verbs_rkey_release(rs_rkey_t *rkey)
{
    rkey->be = NULL;
}
