/*
 * What a context's rs_mem_alloc memory is made of, for callers that must
 * check a host limit before they allocate (the worker's arena).
 */
#ifndef RS_TRANSPORT_MEM_CAPS_H
#define RS_TRANSPORT_MEM_CAPS_H

#include <rshuffle/transport.h>

/* 1 when rs_mem_alloc(ctx, ...) takes shared memory (SysV or /dev/shm), else 0. */
int rs_tp_mem_alloc_shm(const rs_ctx_t *ctx);

#endif
