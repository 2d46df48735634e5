/*
 * Workers named by address blob (rs_worker_name): a verified shuffle through
 * a worker named "blob:HEX" (its reader in the same process reads in place,
 * the registry matching the arena's key), the name's errors, and malformed
 * names refused before any connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/worker.h>

#include "shuffle_check.h"

static rs_worker_t *worker_new(void)
{
    rs_worker_config_t wc;
    rs_worker_config_defaults(&wc);
    wc.mem_limit = 32u << 20;
    rs_worker_t *w = NULL;
    assert_int_equal(rs_worker_create(NULL, &wc, &w), RS_OK);
    return w;
}

static void test_blob_name_shuffle(void **state)
{
    (void)state;
    static char name[RS_SHUFFLE_NAME_MAX];
    char small[16];
    rs_worker_t *w = worker_new();
    assert_int_equal(rs_worker_name(w, name, sizeof(name)), RS_ERR_STATE); /* not listening */
    assert_int_equal(rs_worker_listen(w, "127.0.0.1", 0), RS_OK);
    assert_int_equal(rs_worker_name(w, small, sizeof(small)), RS_ERR_NO_SPACE);
    assert_int_equal(rs_worker_name(NULL, name, sizeof(name)), RS_ERR_INVALID);
    assert_int_equal(rs_worker_name(w, name, sizeof(name)), RS_OK);
    assert_memory_equal(name, "blob:", 5);
    assert_true(strlen(name) > 5 && strlen(name) % 2 == 1);

    const char *workers[1] = {name};
    rs_shuffle_desc_t d = {.shuffle_id = 5, .n_partitions = 4, .n_workers = 1, .workers = workers};
    rs_pusher_t *p = sc_push(&d, 20000, 40);
    rs_pusher_destroy(p);
    sc_read_check(&d, 20000, 40);
    rs_worker_destroy(w);
}

/* A worker on IPv6 loopback named by a bracketed literal, "[::1]:PORT". */
static void test_ipv6_literal_name(void **state)
{
    (void)state;
    rs_worker_t *w = worker_new();
    rs_status_t s = rs_worker_listen(w, "::1", 0);
    if (s != RS_OK) { /* a host without IPv6 loopback */
        rs_worker_destroy(w);
        skip();
    }
    char name[64];
    snprintf(name, sizeof(name), "[::1]:%u", rs_worker_port(w));
    const char *workers[1] = {name};
    rs_shuffle_desc_t d = {.shuffle_id = 7, .n_partitions = 4, .n_workers = 1, .workers = workers};
    rs_pusher_t *p = sc_push(&d, 5000, 40);
    rs_pusher_destroy(p);
    sc_read_check(&d, 5000, 40);
    rs_worker_destroy(w);
}

static void test_malformed_names(void **state)
{
    (void)state;
    static const char *const bad[] = {"blob:",    "blob:abc",  "blob:zz", "nohostport", "blob:0g",
                                      "::1:7000", "[::1:7000", "[]:7000", "[::1]7000"};
    rs_pusher_config_t pc;
    rs_pusher_config_defaults(&pc);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *workers[1] = {bad[i]};
        rs_shuffle_desc_t d = {
            .shuffle_id = 6, .n_partitions = 4, .n_workers = 1, .workers = workers};
        rs_pusher_t *p = NULL;
        assert_int_equal(rs_pusher_open(&d, 0, 0, &pc, &p), RS_ERR_INVALID);
        assert_null(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blob_name_shuffle),
        cmocka_unit_test(test_ipv6_literal_name),
        cmocka_unit_test(test_malformed_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
