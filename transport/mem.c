/* Registered memory regions. */
#include "transport/internal.h"

#include "common/log.h"

#include <stdlib.h>

static rs_status_t mem_new(rs_ctx_t *ctx, void *addr, size_t len, unsigned access, rs_mr_t **mr_p)
{
    if (ctx == NULL || mr_p == NULL || len == 0 ||
        (access & ~(unsigned)(RS_MEM_REMOTE_ALL | RS_MEM_LAZY))) {
        rs_error("memory registration: invalid argument (len %zu, access 0x%x)", len, access);
        return RS_ERR_INVALID;
    }
    rs_mr_t *mr = calloc(1, sizeof(*mr));
    if (mr == NULL) {
        rs_error("out of memory allocating a region descriptor");
        return RS_ERR_NOMEM;
    }
    mr->ctx = ctx;
    mr->access = access & RS_MEM_REMOTE_ALL; /* the rights, as remote keys carry them */
    mr->allocated = addr == NULL;
    rs_tp_lock(ctx);
    rs_status_t st =
        ctx->destroying ? RS_ERR_STATE : ctx->be_ops->mem_reg(ctx, mr, addr, len, access);
    if (st == RS_OK) {
        mr->len = len;
        rs_list_add_tail(&ctx->mrs, &mr->link);
    }
    rs_tp_unlock(ctx);
    if (st != RS_OK) {
        free(mr);
        return st;
    }
    *mr_p = mr;
    return RS_OK;
}

rs_status_t rs_mem_alloc(rs_ctx_t *ctx, size_t len, unsigned access, rs_mr_t **mr_p)
{
    return mem_new(ctx, NULL, len, access, mr_p);
}

rs_status_t rs_mem_reg(rs_ctx_t *ctx, void *addr, size_t len, unsigned access, rs_mr_t **mr_p)
{
    if (addr == NULL) {
        rs_error("rs_mem_reg: NULL address");
        return RS_ERR_INVALID;
    }
    return mem_new(ctx, addr, len, access, mr_p);
}

void rs_mem_free(rs_mr_t *mr)
{
    if (mr == NULL)
        return;
    rs_ctx_t *ctx = mr->ctx;
    rs_tp_lock(ctx);
    ctx->be_ops->mem_dereg(mr);
    rs_list_del(&mr->link);
    rs_tp_unlock(ctx);
    free(mr);
}

void *rs_mr_addr(const rs_mr_t *mr)
{
    if (mr == NULL)
        return NULL;
    return mr->addr;
}

size_t rs_mr_len(const rs_mr_t *mr)
{
    if (mr == NULL)
        return 0;
    return mr->len;
}
