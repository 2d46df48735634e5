/* common/: status strings, log levels, environment and configuration parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/config.h>
#include "common/env.h"
#include "common/list.h"

static void test_strerror_distinct(void **state)
{
    (void)state;
    assert_string_equal(rs_strerror(RS_OK), "success");
    /* Every defined code has its own text, and unknown codes say so. */
    const rs_status_t codes[] = {
        RS_ERR_INVALID,     RS_ERR_NOMEM,        RS_ERR_IO,        RS_ERR_CONFIG,
        RS_ERR_UNSUPPORTED, RS_ERR_BUSY,         RS_ERR_TIMEOUT,   RS_ERR_CANCELED,
        RS_ERR_NOT_FOUND,   RS_ERR_EXISTS,       RS_ERR_NO_SPACE,  RS_ERR_STATE,
        RS_ERR_TRANSPORT,   RS_ERR_UNREACHABLE,  RS_ERR_REFUSED,   RS_ERR_AUTH,
        RS_ERR_BAD_RKEY,    RS_ERR_OUT_OF_RANGE, RS_ERR_MSG_SIZE,  RS_ERR_TRUNCATED,
        RS_ERR_BAD_MAGIC,   RS_ERR_BAD_VERSION,  RS_ERR_BAD_CODEC, RS_ERR_BAD_LENGTH,
        RS_ERR_CHECKSUM,    RS_ERR_DECOMPRESS,   RS_ERR_PROTOCOL,  RS_ERR_BACKPRESSURE,
        RS_ERR_DESTROYED,
    };
    size_t n = sizeof(codes) / sizeof(codes[0]);
    for (size_t i = 0; i < n; i++) {
        assert_true(codes[i] < 0);
        assert_string_not_equal(rs_strerror(codes[i]), "unknown status");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(rs_strerror(codes[i]), rs_strerror(codes[j]));
    }
    assert_string_equal(rs_strerror((rs_status_t)-999), "unknown status");
}

static void test_parse_size(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(rs_parse_size("0", &v), RS_OK);
    assert_int_equal(v, 0);
    assert_int_equal(rs_parse_size("4096", &v), RS_OK);
    assert_int_equal(v, 4096);
    assert_int_equal(rs_parse_size("64K", &v), RS_OK);
    assert_int_equal(v, 65536);
    assert_int_equal(rs_parse_size("3MiB", &v), RS_OK);
    assert_int_equal(v, 3u << 20);
    assert_int_equal(rs_parse_size("2g", &v), RS_OK);
    assert_int_equal(v, 2ull << 30);
    v = 7;
    assert_int_equal(rs_parse_size("", &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_size("-1", &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_size(" -1", &v), RS_ERR_INVALID); /* strtoull would skip the space */
    assert_int_equal(rs_parse_size("12x", &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_size("1KiBx", &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_size("99999999999999999999", &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_size("17179869184G", &v), RS_ERR_INVALID); /* overflows */
    assert_int_equal(v, 7);                                              /* untouched on error */
}

/* Ports and counts on command lines: "99999" must not wrap to 34463, nor "abc" read as 0. */
static void test_parse_uint(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(rs_parse_uint("0", 65535, &v), RS_OK);
    assert_int_equal(v, 0);
    assert_int_equal(rs_parse_uint("65535", 65535, &v), RS_OK);
    assert_int_equal(v, 65535);
    assert_int_equal(rs_parse_uint("18446744073709551615", UINT64_MAX, &v), RS_OK);
    assert_int_equal(v, UINT64_MAX);
    v = 7;
    assert_int_equal(rs_parse_uint("65536", 65535, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint("99999", 65535, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint("9", 5, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint("18446744073709551616", UINT64_MAX, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint("", 10, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint(NULL, 10, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint("abc", 65535, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint("-1", 65535, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint(" 1", 65535, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint("1 ", 65535, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint("+1", 65535, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint("1K", 65535, &v), RS_ERR_INVALID);
    assert_int_equal(rs_parse_uint("0x10", 65535, &v), RS_ERR_INVALID);
    assert_int_equal(v, 7); /* untouched on error */
}

static void test_config_defaults_and_env(void **state)
{
    (void)state;
    rs_config_t cfg;
    unsetenv("RSHUFFLE_MSG_MAX");
    unsetenv("RSHUFFLE_TRANSPORT");
    assert_int_equal(rs_config_init(&cfg), RS_OK);
    assert_int_equal(cfg.transport, RS_TRANSPORT_AUTO);
    assert_int_equal(cfg.msg_max, 8192);
    assert_string_equal(cfg.job_token, "rshuffle");
    assert_int_equal(rs_config_validate(&cfg), RS_OK);

    setenv("RSHUFFLE_TRANSPORT", "ucx", 1);
    setenv("RSHUFFLE_MSG_MAX", "16K", 1);
    setenv("RSHUFFLE_JOB_TOKEN", "job-42", 1);
    setenv("RSHUFFLE_PROGRESS_THREAD", "yes", 1);
    assert_int_equal(rs_config_init(&cfg), RS_OK);
    assert_int_equal(cfg.transport, RS_TRANSPORT_UCX);
    assert_int_equal(cfg.msg_max, 16384);
    assert_string_equal(cfg.job_token, "job-42");
    assert_int_equal(cfg.progress_thread, 1);
    unsetenv("RSHUFFLE_TRANSPORT");
    unsetenv("RSHUFFLE_MSG_MAX");
    unsetenv("RSHUFFLE_JOB_TOKEN");
    unsetenv("RSHUFFLE_PROGRESS_THREAD");
}

/* Each bad value is refused and leaves the config as it was. */
static void test_config_env_rejects(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"RSHUFFLE_TRANSPORT", "infiniband"}, {"RSHUFFLE_LOG", "loud"},
        {"RSHUFFLE_MSG_MAX", "12"},           {"RSHUFFLE_MSG_MAX", "4G"},
        {"RSHUFFLE_PEER_TIMEOUT_MS", "abc"},  {"RSHUFFLE_PROGRESS_THREAD", "maybe"},
        {"RSHUFFLE_JOB_TOKEN", ""},           {"RSHUFFLE_VERBS_SIGNAL_EVERY", "0"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rs_config_t cfg, before;
        rs_config_defaults(&cfg);
        before = cfg;
        setenv(bad[i][0], bad[i][1], 1);
        assert_int_equal(rs_config_from_env(&cfg), RS_ERR_CONFIG);
        assert_memory_equal(&cfg, &before, sizeof(cfg));
        unsetenv(bad[i][0]);
    }
    char longtok[RS_JOB_TOKEN_MAX + 2];
    memset(longtok, 'x', sizeof(longtok) - 1);
    longtok[sizeof(longtok) - 1] = '\0';
    setenv("RSHUFFLE_JOB_TOKEN", longtok, 1);
    rs_config_t cfg;
    assert_int_equal(rs_config_init(&cfg), RS_ERR_CONFIG);
    unsetenv("RSHUFFLE_JOB_TOKEN");
}

static void test_config_validate(void **state)
{
    (void)state;
    rs_config_t cfg;
    rs_config_defaults(&cfg);
    cfg.msg_max = 1;
    assert_int_equal(rs_config_validate(&cfg), RS_ERR_CONFIG);
    rs_config_defaults(&cfg);
    cfg.transport = (rs_transport_kind_t)7;
    assert_int_equal(rs_config_validate(&cfg), RS_ERR_CONFIG);
    rs_config_defaults(&cfg);
    cfg.job_token[0] = '\0';
    assert_int_equal(rs_config_validate(&cfg), RS_ERR_CONFIG);
    rs_config_defaults(&cfg);
    memset(cfg.verbs_device, 'x', sizeof(cfg.verbs_device)); /* no NUL */
    assert_int_equal(rs_config_validate(&cfg), RS_ERR_CONFIG);
    assert_int_equal(rs_config_validate(NULL), RS_ERR_INVALID);
}

static void test_log_level_parse(void **state)
{
    (void)state;
    rs_log_level_t l = RS_LOG_ERROR;
    assert_int_equal(rs_log_level_parse("debug", &l), RS_OK);
    assert_int_equal(l, RS_LOG_DEBUG);
    assert_int_equal(rs_log_level_parse("DEBUG", &l), RS_ERR_INVALID);
    assert_int_equal(rs_log_level_parse(NULL, &l), RS_ERR_INVALID);
    rs_log_set_level(RS_LOG_INFO);
    assert_int_equal(rs_log_level(), RS_LOG_INFO);
    rs_log_set_level(RS_LOG_WARN);
}

typedef struct {
    int v;
    rs_list_t link;
} item_t;

static void test_list(void **state)
{
    (void)state;
    rs_list_t head, *pos, *tmp;
    item_t items[4];
    rs_list_init(&head);
    assert_true(rs_list_empty(&head));
    for (int i = 0; i < 4; i++) {
        items[i].v = i;
        rs_list_add_tail(&head, &items[i].link);
    }
    assert_int_equal(rs_list_first(&head, item_t, link)->v, 0);
    int expect = 0;
    rs_list_for_each_safe(pos, tmp, &head)
    {
        item_t *it = RS_CONTAINER_OF(pos, item_t, link);
        assert_int_equal(it->v, expect++);
        if (it->v % 2 == 0)
            rs_list_del(pos);
    }
    assert_int_equal(rs_list_first(&head, item_t, link)->v, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror_distinct),  cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_uint),         cmocka_unit_test(test_config_defaults_and_env),
        cmocka_unit_test(test_config_env_rejects), cmocka_unit_test(test_config_validate),
        cmocka_unit_test(test_log_level_parse),    cmocka_unit_test(test_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
