/*
 * Backend selection around the verbs backend: with an active RDMA device
 * RSHUFFLE_TRANSPORT=verbs works and auto picks verbs; without one, verbs
 * fails cleanly with RS_ERR_UNSUPPORTED (writing no context) and auto falls
 * back to UCX. Runs on the host (no device) and in the Soft-RoCE guest.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <rshuffle/transport.h>

/* Some /sys/class/infiniband/<dev>/ports/<n>/state says ACTIVE. */
static int active_device(void)
{
    DIR *devs = opendir("/sys/class/infiniband");
    if (devs == NULL)
        return 0;
    int found = 0;
    struct dirent *d;
    while (!found && (d = readdir(devs)) != NULL) {
        for (int port = 1; port <= 4 && !found; port++) {
            char path[512], state[64] = "";
            snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/state", d->d_name,
                     port);
            FILE *f = fopen(path, "r");
            if (f == NULL)
                continue;
            found = fgets(state, sizeof(state), f) != NULL && strstr(state, "ACTIVE") != NULL;
            fclose(f);
        }
    }
    closedir(devs);
    return found;
}

static void config(rs_config_t *cfg, rs_transport_kind_t kind)
{
    assert_int_equal(rs_config_init(cfg), RS_OK);
    cfg->transport = kind;
    cfg->progress_thread = 0;
}

static void test_explicit_verbs(void **state)
{
    (void)state;
    rs_config_t cfg;
    config(&cfg, RS_TRANSPORT_VERBS);
    rs_ctx_t *sentinel = (rs_ctx_t *)&cfg, *ctx = sentinel;
    rs_status_t st = rs_ctx_create(&cfg, &ctx);
    if (active_device()) {
        assert_int_equal(st, RS_OK);
        assert_string_equal(rs_ctx_backend(ctx), "verbs");
        rs_ctx_destroy(ctx);
    } else {
        assert_int_equal(st, RS_ERR_UNSUPPORTED);
        assert_ptr_equal(ctx, sentinel); /* output written only on success */
    }
}

static void test_auto_picks_what_works(void **state)
{
    (void)state;
    rs_config_t cfg;
    config(&cfg, RS_TRANSPORT_AUTO);
    rs_ctx_t *ctx = NULL;
    assert_int_equal(rs_ctx_create(&cfg, &ctx), RS_OK);
    assert_string_equal(rs_ctx_backend(ctx), active_device() ? "verbs" : "ucx");
    rs_ctx_destroy(ctx);
}

/* A device's contexts come and go cleanly (nothing left open, under ASan too). */
static void test_verbs_contexts_repeat(void **state)
{
    (void)state;
    rs_config_t cfg;
    config(&cfg, RS_TRANSPORT_VERBS);
    for (int i = 0; i < 3; i++) {
        rs_ctx_t *ctx = NULL;
        rs_status_t st = rs_ctx_create(&cfg, &ctx);
        assert_int_equal(st, active_device() ? RS_OK : RS_ERR_UNSUPPORTED);
        if (st == RS_OK) {
            rs_mr_t *mr = NULL;
            assert_int_equal(rs_mem_alloc(ctx, 12345, RS_MEM_REMOTE_ALL, &mr), RS_OK);
            assert_int_equal(rs_mr_len(mr), 12345);
            assert_int_equal((uintptr_t)rs_mr_addr(mr) % 4096, 0);
            rs_mem_free(mr);
            rs_ctx_destroy(ctx);
        }
    }
}

int main(void)
{
    alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_explicit_verbs),
        cmocka_unit_test(test_auto_picks_what_works),
        cmocka_unit_test(test_verbs_contexts_repeat),
    };
    return cmocka_run_group_tests_name(active_device() ? "verbs selection (RDMA device present)"
                                                       : "verbs selection (no RDMA device)",
                                       tests, NULL, NULL);
}
