/* Logging a host can own (rs_log_set_handler) and the unknown-variable warning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/config.h>
#include "common/log.h"

typedef struct captured {
    int lines;
    rs_log_level_t level;
    char file[64];
    char msg[1024];
} captured_t;

static void capture(void *arg, rs_log_level_t level, const char *file, int line, const char *msg)
{
    captured_t *c = arg;
    assert_true(line > 0);
    c->lines++;
    c->level = level;
    snprintf(c->file, sizeof(c->file), "%s", file);
    snprintf(c->msg, sizeof(c->msg), "%s", msg);
}

static void test_handler_receives_lines(void **state)
{
    (void)state;
    captured_t c = {0};
    rs_log_set_level(RS_LOG_INFO);
    rs_log_set_handler(capture, &c);
    rs_warn("disk %d is %s", 3, "full");
    rs_debug("below the level: never formatted");
    assert_int_equal(c.lines, 1);
    assert_int_equal(c.level, RS_LOG_WARN);
    assert_string_equal(c.file, "test_log.c");
    assert_string_equal(c.msg, "disk 3 is full");
    rs_log_set_handler(NULL, NULL); /* back to stderr: the handler hears nothing more */
    rs_warn("to stderr");
    assert_int_equal(c.lines, 1);
    rs_log_set_level(RS_LOG_WARN);
}

/* A misspelt variable is named once per process; RSHUFFLE_TEST_* are the tests' own. */
static void test_unknown_variable_warned_once(void **state)
{
    (void)state;
    setenv("RSHUFFLE_WORKER_MEMORY", "1G", 1);
    setenv("RSHUFFLE_TEST_ANYTHING", "1", 1);
    captured_t c = {0};
    rs_log_set_handler(capture, &c);
    rs_config_t cfg;
    assert_int_equal(rs_config_init(&cfg), RS_OK);
    assert_int_equal(c.lines, 1);
    assert_int_equal(c.level, RS_LOG_WARN);
    assert_non_null(strstr(c.msg, "RSHUFFLE_WORKER_MEMORY"));
    assert_int_equal(rs_config_init(&cfg), RS_OK);
    assert_int_equal(c.lines, 1);
    rs_log_set_handler(NULL, NULL);
    unsetenv("RSHUFFLE_WORKER_MEMORY");
    unsetenv("RSHUFFLE_TEST_ANYTHING");
}

static void test_config_vars_table(void **state)
{
    (void)state;
    const rs_config_var_t *vars;
    size_t n = rs_config_vars(&vars);
    assert_true(n > 40);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(strncmp(vars[i].name, "RSHUFFLE_", 9), 0);
        assert_non_null(vars[i].default_value);
        assert_true(strlen(vars[i].description) > 0);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(vars[i].name, vars[j].name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* first: the once-per-process warning must not have fired yet */
        cmocka_unit_test(test_unknown_variable_warned_once),
        cmocka_unit_test(test_handler_receives_lines),
        cmocka_unit_test(test_config_vars_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
