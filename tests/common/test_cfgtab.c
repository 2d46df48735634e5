/*
 * Configuration tables (common/cfgtab.c): every table's defaults parse and
 * pass its own check and are what the module's *_defaults writes; a bad
 * variable is refused naming it, leaving the config as it was; ranges are
 * checked on configs built in code; man/rshuffle.7 gives each variable the
 * table's default; the UCX backend's knobs are refused when bogus.
 * Usage: test_cfgtab MAN_PAGE
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/broadcast.h>
#include <rshuffle/config.h>
#include <rshuffle/log.h>
#include <rshuffle/transport.h>
#include "common/cfgtab.h"

static const char *man_path;
static char logged[4096];

static void capture(void *arg, rs_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg;
    (void)level;
    (void)file;
    (void)line;
    strncat(logged, msg, sizeof(logged) - strlen(logged) - 1);
    strncat(logged, "\n", sizeof(logged) - strlen(logged) - 1);
}

static void log_start(void)
{
    logged[0] = '\0';
    rs_log_set_handler(capture, NULL);
}

static void log_stop(void)
{
    rs_log_set_handler(NULL, NULL);
}

static const rs_cfg_table_t *const tables[] = {&rs_config_table, &rs_ucx_config_table,
                                               &rs_bc_config_table};

static void test_defaults_pass_their_check(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        uint8_t cfg[4096];
        memset(cfg, 0, sizeof(cfg));
        assert_int_equal(rs_cfg_defaults(tables[t], cfg), RS_OK);
        assert_int_equal(rs_cfg_check(tables[t], cfg), RS_OK);
        for (size_t i = 0; i < tables[t]->n; i++) {
            const rs_cfg_row_t *r = &tables[t]->rows[i];
            assert_true(strncmp(r->env, "RSHUFFLE_", 9) == 0);
            assert_true(r->offset + r->size <= sizeof(cfg));
            assert_non_null(r->desc);
        }
    }
}

/* The *_defaults functions write exactly the table's defaults. */
static void test_module_defaults_are_the_tables(void **state)
{
    (void)state;
    rs_bcast_config_t b, bt;
    rs_bcast_config_defaults(&b);
    memset(&bt, 0, sizeof(bt));
    assert_int_equal(rs_cfg_defaults(&rs_bc_config_table, &bt), RS_OK);
    assert_memory_equal(&b, &bt, sizeof(b));
    assert_int_equal(b.block_size, 4u << 20);
    assert_int_equal(b.mode, RS_BCAST_TORRENT);
    assert_int_equal(b.addr_kind, RS_BCAST_ADDR_BLOB);
    assert_string_equal(b.host, "127.0.0.1");

    rs_config_t c;
    rs_config_defaults(&c);
    assert_int_equal(c.peer_timeout_ms, 10000);
    assert_int_equal(c.transport, RS_TRANSPORT_AUTO);
    assert_string_equal(c.job_token, "rshuffle");
    assert_int_equal(c.verbs_cq_depth, 4096);
}

/* A bad value names its variable and leaves every field as it was, even ones set before it. */
static void test_apply_refuses_and_keeps(void **state)
{
    (void)state;
    rs_bcast_config_t b, before;
    rs_bcast_config_defaults(&b);
    before = b;
    setenv("RSHUFFLE_BCAST_BLOCK_SIZE", "64K", 1); /* good */
    setenv("RSHUFFLE_BCAST_MODE", "flood", 1);     /* bad */
    log_start();
    assert_int_equal(rs_bcast_config_from_env(&b), RS_ERR_CONFIG);
    log_stop();
    assert_memory_equal(&b, &before, sizeof(b));
    assert_non_null(strstr(logged, "RSHUFFLE_BCAST_MODE='flood'"));
    assert_non_null(strstr(logged, "torrent|source"));
    setenv("RSHUFFLE_BCAST_MODE", "source", 1);
    assert_int_equal(rs_bcast_config_from_env(&b), RS_OK);
    assert_int_equal(b.block_size, 64u << 10);
    assert_int_equal(b.mode, RS_BCAST_SOURCE);
    unsetenv("RSHUFFLE_BCAST_MODE");
    unsetenv("RSHUFFLE_BCAST_BLOCK_SIZE");

    /* Below the range, and a host the row's own check refuses. */
    setenv("RSHUFFLE_BCAST_BLOCK_SIZE", "1K", 1);
    assert_int_equal(rs_bcast_config_from_env(&b), RS_ERR_CONFIG);
    unsetenv("RSHUFFLE_BCAST_BLOCK_SIZE");
    setenv("RSHUFFLE_BCAST_HOST", "no spaces", 1);
    assert_int_equal(rs_bcast_config_from_env(&b), RS_ERR_CONFIG);
    unsetenv("RSHUFFLE_BCAST_HOST");
    setenv("RSHUFFLE_JOB_TOKEN", "", 1);
    rs_config_t c;
    rs_config_defaults(&c);
    assert_int_equal(rs_config_from_env(&c), RS_ERR_CONFIG);
    unsetenv("RSHUFFLE_JOB_TOKEN");
}

static void test_check_ranges_in_code(void **state)
{
    (void)state;
    rs_bcast_config_t b;
    rs_bcast_config_defaults(&b);
    b.reads_per_ep = 0;
    log_start();
    assert_int_equal(rs_bcast_config_validate(&b), RS_ERR_CONFIG);
    log_stop();
    assert_non_null(strstr(logged, "reads_per_ep"));
    rs_bcast_config_defaults(&b);
    b.mode = (rs_bcast_mode_t)7;
    assert_int_equal(rs_bcast_config_validate(&b), RS_ERR_CONFIG);
    rs_bcast_config_defaults(&b);
    memset(b.host, 'x', sizeof(b.host)); /* no NUL */
    assert_int_equal(rs_bcast_config_validate(&b), RS_ERR_CONFIG);

    rs_config_t c;
    rs_config_defaults(&c);
    c.msg_max = 63;
    assert_int_equal(rs_config_validate(&c), RS_ERR_CONFIG);
    rs_config_defaults(&c);
    c.job_token[0] = '\0';
    assert_int_equal(rs_config_validate(&c), RS_ERR_CONFIG);
    rs_config_defaults(&c);
    assert_int_equal(rs_config_validate(&c), RS_OK);
}

/* man/rshuffle.7 says "Default: X." with each listed variable's default ("(empty)" for ""). */
static void test_man_page_defaults(void **state)
{
    (void)state;
    FILE *f = fopen(man_path, "r");
    assert_non_null(f);
    static char man[1 << 16];
    size_t len = fread(man, 1, sizeof(man) - 1, f);
    fclose(f);
    man[len] = '\0';
    const rs_config_var_t *vars;
    size_t n = rs_config_vars(&vars);
    for (size_t i = 0; i < n; i++) {
        char key[128], want[160];
        if (strstr(vars[i].name, "_FAULT") != NULL)
            continue; /* test hooks: only test builds list them, the man page does not */
        snprintf(key, sizeof(key), ".B %s\n", vars[i].name);
        const char *at = strstr(man, key);
        if (at == NULL)
            fail_msg("%s is not in %s", vars[i].name, man_path);
        const char *end = strstr(at + strlen(key), ".TP");
        if (end == NULL)
            end = at + strlen(at);
        snprintf(want, sizeof(want), "Default: %s.",
                 vars[i].default_value[0] != '\0' ? vars[i].default_value : "(empty)");
        const char *d = strstr(at, want);
        if (d == NULL || d > end)
            fail_msg("%s: %s does not say '%s'", man_path, vars[i].name, want);
    }
}

/* The UCX backend's knobs go through its table: a bogus one fails the context, naming it. */
static void test_ucx_knob_refused(void **state)
{
    (void)state;
    rs_config_t c;
    rs_ctx_t *ctx = NULL;
    rs_config_defaults(&c);
    c.transport = RS_TRANSPORT_UCX;
    setenv("RSHUFFLE_UCX_RMA", "bogus", 1);
    log_start();
    assert_int_equal(rs_ctx_create(&c, &ctx), RS_ERR_CONFIG);
    log_stop();
    assert_null(ctx);
    assert_non_null(strstr(logged, "RSHUFFLE_UCX_RMA='bogus'"));
    assert_non_null(strstr(logged, "auto|ucx|am"));
    setenv("RSHUFFLE_UCX_RMA", "am", 1);
    assert_int_equal(rs_ctx_create(&c, &ctx), RS_OK);
    rs_ctx_destroy(ctx);
    unsetenv("RSHUFFLE_UCX_RMA");
    setenv("RSHUFFLE_UCX_MEM", "Shared", 1); /* names are exact, as every other choice */
    ctx = NULL;
    assert_int_equal(rs_ctx_create(&c, &ctx), RS_ERR_CONFIG);
    assert_null(ctx);
    unsetenv("RSHUFFLE_UCX_MEM");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_cfgtab MAN_PAGE\n");
        return 2;
    }
    man_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_pass_their_check),
        cmocka_unit_test(test_module_defaults_are_the_tables),
        cmocka_unit_test(test_apply_refuses_and_keeps),
        cmocka_unit_test(test_check_ranges_in_code),
        cmocka_unit_test(test_man_page_defaults),
        cmocka_unit_test(test_ucx_knob_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
