/*
 * Configuration tables (common/cfgtab.c): every table's defaults parse and
 * pass its own check and are what the module's *_defaults writes; a bad
 * variable of each table is refused naming it, leaving the config as it
 * was; ranges and the rules between fields are checked on configs built
 * in code; man/rshuffle.7 gives each variable the table's default, range
 * and choices, and the public headers' field comments its default; the
 * UCX backend's knobs are refused when bogus.
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
#include <rshuffle/client.h>
#include <rshuffle/config.h>
#include <rshuffle/log.h>
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/shuffle.h>
#include <rshuffle/transport.h>
#include <rshuffle/worker.h>
#include "common/cfgtab.h"
#include "common/env.h"
#include "reader/config.h"

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

static const rs_cfg_table_t *const tables[] = {
    &rs_config_table,        &rs_ucx_config_table,    &rs_shuffle_env_table,
    &rs_client_config_table, &rs_pusher_config_table, &rs_worker_config_table,
    &rs_reader_config_table, &rs_bc_config_table,
};
#define N_TABLES (sizeof(tables) / sizeof(tables[0]))

static void test_defaults_pass_their_check(void **state)
{
    (void)state;
    for (size_t t = 0; t < N_TABLES; t++) {
        uint8_t cfg[4096];
        memset(cfg, 0, sizeof(cfg));
        assert_int_equal(rs_cfg_defaults(tables[t], cfg), RS_OK);
        assert_int_equal(rs_cfg_check(tables[t], cfg), RS_OK);
        assert_true(tables[t]->n <= RS_CFG_ROWS_MAX); /* rs_cfg_apply reads them at once */
        for (size_t i = 0; i < tables[t]->n; i++) {
            const rs_cfg_row_t *r = &tables[t]->rows[i];
            assert_true(strncmp(r->env, "RSHUFFLE_", 9) == 0);
            assert_true(r->offset + r->size <= sizeof(cfg));
            assert_non_null(r->desc);
        }
    }
}

/*
 * One pass over the environment finds what getenv finds, name by name: a
 * name that is another's prefix, names without a common prefix, unset and
 * empty values.
 */
static void test_env_raw_many_is_getenv(void **state)
{
    (void)state;
    setenv("RSHUFFLE_TEST_A", "1", 1);
    setenv("RSHUFFLE_TEST_AB", "2", 1);
    setenv("RSHUFFLE_TEST_EMPTY", "", 1);
    setenv("OTHER_TEST_X", "x", 1);
    unsetenv("RSHUFFLE_TEST_UNSET");
    const char *const names[][4] = {
        {"RSHUFFLE_TEST_AB", "RSHUFFLE_TEST_A", "RSHUFFLE_TEST_EMPTY", "RSHUFFLE_TEST_UNSET"},
        {"RSHUFFLE_TEST_A", "OTHER_TEST_X", "RSHUFFLE_TEST_AB", "PATH"},
        {"RSHUFFLE_TEST_UNSET", "RSHUFFLE_TEST_", "RSHUFFLE_TEST_AB", "RSHUFFLE_TEST_A"},
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        const char *vals[4];
        rs_env_raw_many(names[k], 4, vals);
        for (size_t i = 0; i < 4; i++) {
            const char *want = getenv(names[k][i]);
            if (want == NULL)
                assert_null(vals[i]);
            else
                assert_string_equal(vals[i], want);
        }
    }
    assert_string_equal(getenv("RSHUFFLE_TEST_A"), "1"); /* the test's own premise */
    unsetenv("RSHUFFLE_TEST_A");
    unsetenv("RSHUFFLE_TEST_AB");
    unsetenv("RSHUFFLE_TEST_EMPTY");
    unsetenv("OTHER_TEST_X");
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

    /* The shuffle modules: the table's rows, plus the fields no variable sets. */
    rs_pusher_config_t p, pt;
    rs_pusher_config_defaults(&p);
    memset(&pt, 0, sizeof(pt));
    assert_int_equal(rs_cfg_defaults(&rs_pusher_config_table, &pt), RS_OK);
    pt.min_buf = 4 << 10;
    pt.queue_depth = 16;
    assert_memory_equal(&p, &pt, sizeof(p));
    assert_int_equal(p.buf_len, 256u << 10);
    assert_int_equal(p.pool_bytes, 32u << 20);
    assert_int_equal(p.codec, RS_CODEC_NONE);

    rs_reader_config_t r, rt;
    rs_reader_config_defaults(&r);
    memset(&rt, 0, sizeof(rt));
    assert_int_equal(rs_cfg_defaults(&rs_reader_config_table, &rt), RS_OK);
    assert_memory_equal(&r, &rt, sizeof(r));
    assert_int_equal(r.read_max, 16u << 20);
    assert_int_equal(r.local_reads, 1);

    rs_worker_config_t w, wt;
    rs_worker_config_defaults(&w);
    memset(&wt, 0, sizeof(wt));
    assert_int_equal(rs_cfg_defaults(&rs_worker_config_table, &wt), RS_OK);
    wt.commit_wait_ms = 5000;
    wt.retry_ms = 20;
    assert_memory_equal(&w, &wt, sizeof(w));
    assert_string_equal(w.spill_dir, "/tmp");
    assert_int_equal(w.extent_max, 8u << 20);

    rs_client_config_t cl;
    rs_client_config_defaults(&cl);
    assert_int_equal(cl.max_idle, 64);
}

/* Sets name=value, runs the reader, and expects RS_ERR_CONFIG with a line naming the variable. */
#define REFUSED(name, value, call)                                                    \
    do {                                                                              \
        setenv(name, value, 1);                                                       \
        log_start();                                                                  \
        assert_int_equal((call), RS_ERR_CONFIG);                                      \
        log_stop();                                                                   \
        unsetenv(name);                                                               \
        if (strstr(logged, name) == NULL)                                             \
            fail_msg("%s=%s: the refusal does not name it: %s", name, value, logged); \
    } while (0)

/* A bad value of each shuffle module's table is refused naming it; the config stays as it was. */
static void test_shuffle_tables_refuse(void **state)
{
    (void)state;
    rs_pusher_config_t p, p0;
    rs_pusher_config_defaults(&p);
    p0 = p;
    REFUSED("RSHUFFLE_CODEC", "lz5", rs_pusher_config_from_env(&p));
    assert_non_null(strstr(logged, "none|lz4|snappy"));
    REFUSED("RSHUFFLE_PUSH_BUF", "512", rs_pusher_config_from_env(&p));
    REFUSED("RSHUFFLE_PUSH_BUF", "16M",
            rs_pusher_config_from_env(&p)); /* its batch is over a grant */
    REFUSED("RSHUFFLE_PUSH_POOL", "4K", rs_pusher_config_from_env(&p));
    REFUSED("RSHUFFLE_PUSH_INFLIGHT", "0", rs_pusher_config_from_env(&p));
    REFUSED("RSHUFFLE_PUSH_WAIT_MS", "5", rs_pusher_config_from_env(&p));
    REFUSED("RSHUFFLE_PUSH_BACKPRESSURE_MS", "1h", rs_pusher_config_from_env(&p));
    assert_memory_equal(&p, &p0, sizeof(p));

    rs_reader_config_t r, r0;
    rs_reader_config_defaults(&r);
    r0 = r;
    /* Below one batch: was accepted and then raised to 16M; now refused. */
    REFUSED("RSHUFFLE_READ_MAX", "8M", rs_reader_config_from_env(&r));
    assert_non_null(strstr(logged, "[16777216, "));
    REFUSED("RSHUFFLE_READ_WAIT_MS", "0", rs_reader_config_from_env(&r));
    REFUSED("RSHUFFLE_READ_LOCAL", "maybe", rs_reader_config_from_env(&r));
    assert_memory_equal(&r, &r0, sizeof(r));
    setenv("RSHUFFLE_READ_MAX", "32M", 1);
    assert_int_equal(rs_reader_config_from_env(&r), RS_OK);
    assert_int_equal(r.read_max, 32u << 20);
    unsetenv("RSHUFFLE_READ_MAX");

    rs_worker_config_t w, w0;
    rs_worker_config_defaults(&w);
    w0 = w;
    REFUSED("RSHUFFLE_WORKER_MEM", "512K", rs_worker_config_from_env(&w));
    REFUSED("RSHUFFLE_WORKER_HIGH_WATER", "101", rs_worker_config_from_env(&w));
    REFUSED("RSHUFFLE_WORKER_EXTENT_MIN", "2K", rs_worker_config_from_env(&w));
    REFUSED("RSHUFFLE_WORKER_EXTENT_MAX", "2G", rs_worker_config_from_env(&w));
    REFUSED("RSHUFFLE_WORKER_GRANT_BULK", "32M", rs_worker_config_from_env(&w));
    REFUSED("RSHUFFLE_WORKER_VERIFY", "2", rs_worker_config_from_env(&w));
    REFUSED("RSHUFFLE_WORKER_SINK", "yes please", rs_worker_config_from_env(&w));
    char dir[RS_SPILL_DIR_MAX + 8];
    memset(dir, 'd', sizeof(dir) - 1);
    dir[0] = '/';
    dir[sizeof(dir) - 1] = '\0';
    REFUSED("RSHUFFLE_WORKER_SPILL_DIR", dir, rs_worker_config_from_env(&w));
    assert_memory_equal(&w, &w0, sizeof(w));

    rs_client_config_t cl, cl0;
    rs_client_config_defaults(&cl);
    cl0 = cl;
    REFUSED("RSHUFFLE_CLIENT_LANES", "70000", rs_client_config_from_env(&cl));
    assert_memory_equal(&cl, &cl0, sizeof(cl));

    static const char *const two[] = {"127.0.0.1:1", "127.0.0.1:2"};
    rs_shuffle_desc_t d = {.n_partitions = 1, .n_workers = 2, .workers = two};
    uint32_t rep = 7;
    REFUSED("RSHUFFLE_REPLICAS", "0", rs_shuffle_replicas(&d, &rep));
    REFUSED("RSHUFFLE_REPLICAS", "4", rs_shuffle_replicas(&d, &rep));
    assert_int_equal(rep, 7);
    assert_int_equal(rs_shuffle_replicas(&d, &rep), RS_OK);
    assert_int_equal(rep, 1);
}

/*
 * Configs built in code meet the same rows and the rules between fields at
 * the call that uses them, before anything is connected or allocated; the
 * refusal names the field and its variable.
 */
static void test_shuffle_checks_in_code(void **state)
{
    (void)state;
    static const char *const one[] = {"127.0.0.1:1"};
    rs_shuffle_desc_t d = {.shuffle_id = 1, .n_partitions = 1, .n_workers = 1, .workers = one};

    rs_pusher_config_t p;
    rs_pusher_t *pusher = (rs_pusher_t *)&p; /* a sentinel: must not be overwritten */
    rs_pusher_config_defaults(&p);
    p.buf_len = 8u << 20; /* 4 of them do not fit the default 32M pool */
    log_start();
    assert_int_equal(rs_pusher_open(&d, 0, 0, &p, &pusher), RS_ERR_CONFIG);
    log_stop();
    assert_ptr_equal(pusher, (rs_pusher_t *)&p);
    assert_non_null(strstr(logged, "RSHUFFLE_PUSH_POOL"));
    assert_non_null(strstr(logged, "RSHUFFLE_PUSH_BUF"));
    rs_pusher_config_defaults(&p);
    p.codec = (rs_codec_t)9;
    log_start();
    assert_int_equal(rs_pusher_open(&d, 0, 0, &p, &pusher), RS_ERR_CONFIG);
    log_stop();
    assert_non_null(strstr(logged, "RSHUFFLE_CODEC"));
    rs_pusher_config_defaults(&p);
    p.min_buf = 0;
    assert_int_equal(rs_pusher_open(&d, 0, 0, &p, &pusher), RS_ERR_CONFIG);

    /* The reader raises a small read_max (documented); one above the range is refused. */
    rs_reader_config_t r;
    rs_reader_config_defaults(&r);
    r.read_max = 1u << 20;
    r.wait_ms = 0;
    assert_int_equal(rs_rd_config_check(&r), RS_OK);
    assert_int_equal(r.read_max, 16u << 20);
    assert_int_equal(r.wait_ms, 30000);
    rs_reader_session_t *sess = (rs_reader_session_t *)&r;
    rs_reader_config_defaults(&r);
    r.read_max = (size_t)8 << 30;
    log_start();
    assert_int_equal(rs_reader_session_open(&d, 0, NULL, &r, &sess), RS_ERR_CONFIG);
    log_stop();
    assert_ptr_equal(sess, (rs_reader_session_t *)&r);
    assert_non_null(strstr(logged, "RSHUFFLE_READ_MAX"));

    rs_worker_config_t w;
    rs_worker_t *worker = (rs_worker_t *)&w;
    rs_worker_config_defaults(&w);
    w.extent_min = 1u << 20;
    w.extent_max = 64u << 10;
    log_start();
    assert_int_equal(rs_worker_create(NULL, &w, &worker), RS_ERR_CONFIG);
    log_stop();
    assert_ptr_equal(worker, (rs_worker_t *)&w);
    assert_non_null(strstr(logged, "RSHUFFLE_WORKER_EXTENT_MIN"));
    assert_non_null(strstr(logged, "RSHUFFLE_WORKER_EXTENT_MAX"));
    rs_worker_config_defaults(&w);
    w.high_water_pct = 0;
    log_start();
    assert_int_equal(rs_worker_create(NULL, &w, &worker), RS_ERR_CONFIG);
    log_stop();
    assert_non_null(strstr(logged, "RSHUFFLE_WORKER_HIGH_WATER"));

    rs_client_config_t cl;
    rs_client_t *client = (rs_client_t *)&cl;
    rs_client_config_defaults(&cl);
    cl.max_idle = 70000;
    log_start();
    assert_int_equal(rs_client_create(&cl, &client), RS_ERR_CONFIG);
    log_stop();
    assert_ptr_equal(client, (rs_client_t *)&cl);
    assert_non_null(strstr(logged, "RSHUFFLE_CLIENT_LANES"));
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
    /* Each numeric row's range as the row has it, each choice row's names. */
    for (size_t t = 0; t < N_TABLES; t++) {
        for (size_t i = 0; i < tables[t]->n; i++) {
            const rs_cfg_row_t *r = &tables[t]->rows[i];
            char key[128], want[160], range[96];
            snprintf(key, sizeof(key), ".B %s\n", r->env);
            const char *at = strstr(man, key);
            assert_non_null(at);
            const char *end = strstr(at + strlen(key), ".TP");
            if (end == NULL)
                end = at + strlen(at);
            rs_cfg_range(r, range, sizeof(range));
            if (range[0] != '\0') {
                snprintf(want, sizeof(want), "Range: %s.", range);
                const char *d = strstr(at, want);
                if (d == NULL || d > end)
                    fail_msg("%s: %s does not say '%s'", man_path, r->env, want);
            }
            for (int c = 0; r->kind == RS_CFG_CHOICE && r->choices[c] != NULL; c++) {
                const char *d = strstr(at, r->choices[c]);
                if (d == NULL || d > end)
                    fail_msg("%s: %s does not name its choice '%s'", man_path, r->env,
                             r->choices[c]);
            }
        }
    }
}

/* The default a value text names: "256 KiB" as "256K", quotes dropped; *out[cap]. */
static void default_text(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    while (n > 0 && *s == ' ')
        s++, n--;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        if (s[i] == '"')
            continue;
        if (s[i] == ' ' && i + 4 <= n && strchr("KMG", s[i + 1]) != NULL &&
            strncmp(s + i + 2, "iB", 2) == 0) {
            out[o++] = s[i + 1];
            i += 3;
            continue;
        }
        if (s[i] == ' ' || s[i] == ':' || s[i] == ';' || s[i] == ',')
            break;
        out[o++] = s[i];
    }
    out[o] = '\0';
}

/*
 * A public header's field comment that names a variable ("RSHUFFLE_X: ...
 * (default)") gives the table's default in one of its parentheses.
 */
static void test_header_defaults(void **state)
{
    (void)state;
    static const char *const headers[] = {"config.h", "pusher.h", "reader.h",
                                          "worker.h", "client.h", "broadcast.h"};
    const rs_config_var_t *vars;
    size_t n = rs_config_vars(&vars), checked = 0;
    char root[512];
    snprintf(root, sizeof(root), "%s", man_path);
    char *slash = strstr(root, "man/rshuffle.7");
    assert_non_null(slash);
    *slash = '\0';
    for (size_t h = 0; h < sizeof(headers) / sizeof(headers[0]); h++) {
        char path[600];
        static char text[1 << 17];
        snprintf(path, sizeof(path), "%sinclude/rshuffle/%s", root, headers[h]);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        size_t len = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[len] = '\0';
        for (const char *c = strstr(text, "/* RSHUFFLE_"); c != NULL;
             c = strstr(c + 1, "/* RSHUFFLE_")) {
            const char *end = strstr(c, "*/");
            assert_non_null(end);
            size_t name_len = strspn(c + 3, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
            const rs_config_var_t *v = NULL;
            for (size_t i = 0; i < n && v == NULL; i++)
                if (strlen(vars[i].name) == name_len && strncmp(vars[i].name, c + 3, name_len) == 0)
                    v = &vars[i];
            if (v == NULL)
                fail_msg("%s: %.*s is not a variable rs_config_vars lists", path, (int)name_len,
                         c + 3);
            int found = 0;
            for (const char *o = memchr(c, '(', (size_t)(end - c)); o != NULL && o < end && !found;
                 o = memchr(o + 1, '(', (size_t)(end - o - 1))) {
                char got[64];
                default_text(o + 1, strcspn(o + 1, ")"), got, sizeof(got));
                found = strcmp(got, v->default_value) == 0;
            }
            if (!found)
                fail_msg("%s: the comment of %s gives no '(%s)', its default", path, v->name,
                         v->default_value);
            checked++;
        }
    }
    assert_true(checked >= 30);
}

/* rshuffle_info -c's descriptions carry the rows' ranges. */
static void test_listed_ranges(void **state)
{
    (void)state;
    const rs_config_var_t *vars;
    size_t n = rs_config_vars(&vars);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(vars[i].name, "RSHUFFLE_READ_MAX") == 0) {
            assert_non_null(strstr(vars[i].description, "(16M .. 4G)"));
            seen++;
        }
        if (strcmp(vars[i].name, "RSHUFFLE_PUSH_BUF") == 0) {
            assert_non_null(strstr(vars[i].description, "(1024 .. 16777168)"));
            seen++;
        }
        if (strcmp(vars[i].name, "RSHUFFLE_BCAST_CACHE_BYTES") == 0) {
            assert_non_null(strstr(vars[i].description, "(any)"));
            seen++;
        }
    }
    assert_int_equal(seen, 3);
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
        cmocka_unit_test(test_env_raw_many_is_getenv),
        cmocka_unit_test(test_apply_refuses_and_keeps),
        cmocka_unit_test(test_shuffle_tables_refuse),
        cmocka_unit_test(test_shuffle_checks_in_code),
        cmocka_unit_test(test_check_ranges_in_code),
        cmocka_unit_test(test_man_page_defaults),
        cmocka_unit_test(test_listed_ranges),
        cmocka_unit_test(test_header_defaults),
        cmocka_unit_test(test_ucx_knob_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
