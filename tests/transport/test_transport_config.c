/* Context creation: configuration errors, backend selection, argument checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/log.h>
#include <rshuffle/transport.h>
#include "transport/internal.h"
#include "transport/rkey_blob.h"
#include "tests/resident.h"

typedef struct {
    int ucx_lines;
    char first[512];
} caught_t;

static void catch_line(void *arg, rs_log_level_t level, const char *file, int line, const char *msg)
{
    caught_t *c = arg;
    (void)level;
    (void)file;
    (void)line;
    if (strncmp(msg, "ucx: ", 5) == 0 && c->ucx_lines++ == 0)
        snprintf(c->first, sizeof(c->first), "%s", msg);
}

/*
 * A UCX context made under UCX_TLS=tls (restored after) at log level
 * warn, UCX's lines caught into *c: rs_ctx_create's status, *ctx_p as it set it.
 */
static rs_status_t ucx_ctx_under(const char *tls, caught_t *c, rs_ctx_t **ctx_p)
{
    const char *old = getenv("UCX_TLS");
    char *saved = old != NULL ? strdup(old) : NULL;
    setenv("UCX_TLS", tls, 1);
    rs_log_set_handler(catch_line, c);
    rs_config_t cfg;
    rs_config_defaults(&cfg);
    cfg.transport = RS_TRANSPORT_UCX;
    cfg.log_level = RS_LOG_WARN;
    rs_status_t s = rs_ctx_create(&cfg, ctx_p);
    rs_log_set_handler(NULL, NULL);
    if (saved != NULL) {
        setenv("UCX_TLS", saved, 1);
        free(saved);
    } else {
        unsetenv("UCX_TLS");
    }
    return s;
}

/* UCX's own warnings and errors reach rs_log_set_handler's callback, not stdout. */
static void test_ucx_lines_routed(void **state)
{
    (void)state;
    caught_t c = {0};
    rs_ctx_t *ctx = NULL;
    assert_int_not_equal(ucx_ctx_under("bogus", &c, &ctx), RS_OK);
    assert_null(ctx);
    assert_true(c.ucx_lines > 0);
    assert_non_null(strstr(c.first, "bogus"));
}

/*
 * The UCX settings the backend presets (shm error handling and receive
 * chunks, tcp's non-blocking connects, keepalive) are names UCX takes: a
 * name it does not know is a warning ("invalid configuration") and a
 * setting silently not made.
 */
static void test_ucx_presets_taken(void **state)
{
    (void)state;
    static const char *const tls[] = {
        "posix,sysv,self,tcp", "tcp,self", "posix,sysv,self", "sm,self", "^tcp", "^posix,sysv"};
    for (size_t i = 0; i < sizeof(tls) / sizeof(tls[0]); i++) {
        caught_t c = {0};
        rs_ctx_t *ctx = NULL;
        rs_status_t s = ucx_ctx_under(tls[i], &c, &ctx);
        rs_ctx_destroy(ctx);
        assert_int_equal(s, RS_OK);
        if (c.ucx_lines != 0)
            fail_msg("UCX_TLS=%s: UCX said: %s", tls[i], c.first);
    }
}

static void test_bad_environment(void **state)
{
    (void)state;
    rs_ctx_t *ctx = (rs_ctx_t *)0x1;
    setenv("RSHUFFLE_TRANSPORT", "infiniband", 1);
    assert_int_equal(rs_ctx_create(NULL, &ctx), RS_ERR_CONFIG);
    assert_ptr_equal(ctx, (rs_ctx_t *)0x1); /* untouched on error */
    setenv("RSHUFFLE_TRANSPORT", "ucx", 1);
    setenv("RSHUFFLE_PEER_TIMEOUT_MS", "0", 1);
    assert_int_equal(rs_ctx_create(NULL, &ctx), RS_ERR_CONFIG);
    unsetenv("RSHUFFLE_PEER_TIMEOUT_MS");
    assert_int_equal(rs_ctx_create(NULL, &ctx), RS_OK);
    assert_string_equal(rs_ctx_backend(ctx), "ucx");
    rs_ctx_destroy(ctx);
    unsetenv("RSHUFFLE_TRANSPORT");
}

static void test_bad_config_struct(void **state)
{
    (void)state;
    rs_config_t cfg;
    rs_ctx_t *ctx = NULL;
    rs_config_defaults(&cfg);
    cfg.transport = (rs_transport_kind_t)7;
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_ERR_CONFIG);
    rs_config_defaults(&cfg);
    cfg.msg_max = 1;
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_ERR_CONFIG);
    rs_config_defaults(&cfg);
    cfg.job_token[0] = '\0';
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_ERR_CONFIG);
    assert_null(ctx);
    assert_int_equal(rs_ctx_create(&cfg, NULL), RS_ERR_INVALID);
}

static void test_backend_selection(void **state)
{
    (void)state;
    rs_config_t cfg;
    rs_ctx_t *ctx = NULL;
    rs_config_defaults(&cfg);

    /* Without an RDMA device (or without the verbs backend) verbs fails cleanly. */
    cfg.transport = RS_TRANSPORT_VERBS;
    if (!rs_tp_rdma_device_active())
        assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_ERR_UNSUPPORTED);

    /* auto: UCX unless a device with an active port exists. */
    cfg.transport = RS_TRANSPORT_AUTO;
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
    if (!rs_tp_rdma_device_active())
        assert_string_equal(rs_ctx_backend(ctx), "ucx");
    assert_int_equal(rs_ctx_config(ctx)->peer_timeout_ms, cfg.peer_timeout_ms);
    rs_ctx_destroy(ctx);

    cfg.transport = RS_TRANSPORT_UCX;
    cfg.progress_thread = 1; /* started by create, stopped by destroy */
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
    assert_string_equal(rs_ctx_backend(ctx), "ucx");
    assert_int_equal(rs_progress_thread_start(ctx), RS_OK); /* idempotent */
    rs_ctx_destroy(ctx);
}

static void test_arguments(void **state)
{
    (void)state;
    rs_config_t cfg;
    rs_ctx_t *ctx;
    rs_mr_t *mr = NULL;
    rs_config_defaults(&cfg);
    cfg.transport = RS_TRANSPORT_UCX;
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);

    assert_int_equal(rs_set_msg_handler(ctx, RS_MSG_TYPES, NULL, NULL), RS_ERR_INVALID);
    assert_int_equal(rs_mem_alloc(ctx, 0, RS_MEM_REMOTE_ALL, &mr), RS_ERR_INVALID);
    assert_int_equal(rs_mem_alloc(ctx, 4096, 1u << 7, &mr), RS_ERR_INVALID);
    assert_int_equal(rs_mem_reg(ctx, NULL, 4096, RS_MEM_REMOTE_ALL, &mr), RS_ERR_INVALID);
    assert_null(mr);

    /* Caller memory: registered where it is, left to the caller on free. */
    char *buf = malloc(8192);
    assert_int_equal(rs_mem_reg(ctx, buf, 8192, RS_MEM_REMOTE_ALL, &mr), RS_OK);
    assert_ptr_equal(rs_mr_addr(mr), buf);
    assert_int_equal(rs_mr_len(mr), 8192);
    unsigned char blob[RS_RKEY_BLOB_MAX];
    size_t len = 0;
    assert_int_equal(rs_mr_pack_rkey(mr, blob, 16, &len), RS_ERR_NO_SPACE);
    assert_int_equal(rs_mr_pack_rkey(mr, blob, sizeof(blob), &len), RS_OK);
    assert_true(len > 40 && len <= RS_RKEY_BLOB_MAX);
    rs_mem_free(mr);
    buf[0] = 1; /* still ours */
    free(buf);

    /* Allocated memory is writable and stays valid until freed. */
    assert_int_equal(rs_mem_alloc(ctx, 1 << 20, RS_MEM_REMOTE_ALL, &mr), RS_OK);
    memset(rs_mr_addr(mr), 0xab, 1 << 20);
    assert_int_equal(rs_mr_len(mr), 1 << 20);
    /* Left registered on purpose: destroy releases it. */

    unsigned char addr[RS_ADDR_BLOB_MAX];
    assert_int_equal(rs_ctx_address(ctx, addr, 4, &len), RS_ERR_NO_SPACE);
    assert_int_equal(rs_ctx_address(ctx, addr, sizeof(addr), &len), RS_OK);
    assert_true(len > 0 && len <= RS_ADDR_BLOB_MAX);

    rs_ep_t *ep = NULL;
    assert_int_equal(rs_connect(ctx, "127.0.0.1", 0, &ep), RS_ERR_INVALID);
    assert_int_equal(rs_connect_address(ctx, addr, 0, &ep), RS_ERR_INVALID);
    assert_null(ep);

    /* Nothing to do: progress reports nothing, a wait times out in time. */
    assert_int_equal(rs_progress(ctx), 0);
    assert_int_equal(rs_wait(ctx, 20), RS_ERR_TIMEOUT);
    assert_true(rs_ctx_fd(ctx) >= 0);
    rs_ctx_destroy(ctx);
}

/* Allocated memory is resident at once; RS_MEM_LAZY memory as it is touched. */
static void test_lazy_memory(void **state)
{
    (void)state;
    rs_config_t cfg;
    rs_ctx_t *ctx;
    rs_mr_t *eager = NULL, *lazy = NULL;
    const size_t len = 4u << 20;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    rs_config_defaults(&cfg);
    cfg.transport = RS_TRANSPORT_UCX;
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
    assert_int_equal(rs_mem_alloc(ctx, len, RS_MEM_LOCAL, &eager), RS_OK);
    assert_int_equal(resident_pages(rs_mr_addr(eager), len), len / page);
    assert_int_equal(rs_mem_alloc(ctx, len, RS_MEM_LOCAL | RS_MEM_LAZY, &lazy), RS_OK);
    uint8_t *p = rs_mr_addr(lazy);
    assert_int_equal(resident_pages(p, len), 0);
    p[0] = 1;
    size_t touched = resident_pages(p, len);
    assert_true(touched >= 1 && touched < len / page); /* a page, or a huge one */
    /* The laziness is not a right: a remote region's key carries only its rights. */
    rs_mr_t *rlazy = NULL;
    assert_int_equal(rs_mem_alloc(ctx, len, RS_MEM_REMOTE_READ | RS_MEM_LAZY, &rlazy), RS_OK);
    unsigned char blob[RS_RKEY_BLOB_MAX];
    size_t blen = 0;
    assert_int_equal(rs_mr_pack_rkey(rlazy, blob, sizeof(blob), &blen), RS_OK);
    rs_rkey_hdr_t hdr;
    assert_int_equal(rs_tp_rkey_blob_parse(blob, blen, RS_RKEY_BACKEND_UCX, &hdr), RS_OK);
    assert_int_equal(hdr.access, RS_MEM_REMOTE_READ);
    rs_mem_free(rlazy);
    rs_mem_free(lazy);
    rs_mem_free(eager);
    rs_ctx_destroy(ctx);
}

/* The VmFlags line of the mapping that holds addr (/proc/self/smaps), or "" if not found. */
static void vm_flags(const void *addr, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512];
    int in = 0;
    out[0] = '\0';
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(out, cap, "%s", line + 8);
            break;
        }
    }
    fclose(f);
}

/*
 * Private regions of 2 MiB or more are 2 MiB-aligned and advised for huge
 * pages by default (the kernel's "hg" flag on the mapping); with
 * RSHUFFLE_UCX_HUGE=0 they are not. Smaller regions are never advised.
 */
static void test_huge_advice(void **state)
{
    (void)state;
    char flags[512];
    int thp = access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0;
    for (int huge = 1; huge >= 0; huge--) {
        if (!huge)
            setenv("RSHUFFLE_UCX_HUGE", "0", 1);
        rs_config_t cfg;
        rs_ctx_t *ctx;
        rs_mr_t *big = NULL, *small = NULL;
        rs_config_defaults(&cfg);
        cfg.transport = RS_TRANSPORT_UCX;
        assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
        assert_int_equal(rs_mem_alloc(ctx, 4u << 20, RS_MEM_LOCAL, &big), RS_OK);
        assert_int_equal(rs_mem_alloc(ctx, 1u << 20, RS_MEM_LOCAL, &small), RS_OK);
        if (huge)
            assert_int_equal((uintptr_t)rs_mr_addr(big) & ((2u << 20) - 1), 0);
        vm_flags(rs_mr_addr(big), flags, sizeof(flags));
        if (thp) /* without THP in the kernel the advice is refused, and no flag shows */
            assert_int_equal(strstr(flags, " hg") != NULL, huge);
        vm_flags(rs_mr_addr(small), flags, sizeof(flags));
        assert_null(strstr(flags, " hg"));
        rs_mem_free(small);
        rs_mem_free(big);
        rs_ctx_destroy(ctx);
    }
    unsetenv("RSHUFFLE_UCX_HUGE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ucx_lines_routed),  cmocka_unit_test(test_ucx_presets_taken),
        cmocka_unit_test(test_bad_environment),   cmocka_unit_test(test_bad_config_struct),
        cmocka_unit_test(test_backend_selection), cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_lazy_memory),       cmocka_unit_test(test_huge_advice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
