/*
 * rshuffled as a user runs it: started as a program, a shuffle pushed into
 * it and read back, then SIGTERM: a clean exit (status 0) within a bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>

#include "rshuffled_child.h"

static pid_t daemon_pid;

static int teardown(void **state)
{
    (void)state;
    rsd_kill(&daemon_pid);
    return 0;
}

static void test_daemon_shuffle_and_sigterm(void **state)
{
    (void)state;
    alarm(60);
    char addr[256];
    static const char *const args[] = {"--mem", "32M", "--log", "error", NULL};
    daemon_pid = rsd_start(args, NULL, addr, sizeof(addr));
    const char *workers[1] = {addr};
    rs_shuffle_desc_t d = {.shuffle_id = 3, .n_partitions = 4, .n_workers = 1, .workers = workers};
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 0, 0, NULL, &p), RS_OK);
    uint8_t rec[50];
    for (uint32_t i = 0; i < 20000; i++) {
        memset(rec, (int)i, sizeof(rec));
        memcpy(rec, &i, sizeof(i));
        assert_int_equal(rs_pusher_append(p, i % 4, rec, sizeof(rec)), RS_OK);
    }
    assert_int_equal(rs_pusher_close(p, NULL), RS_OK);
    /* After the commit nothing more is taken: it would land after it. */
    assert_int_equal(rs_pusher_append(p, 0, "late", 4), RS_ERR_STATE);
    rs_pusher_destroy(p);
    uint32_t attempt = 0;
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&d, 1, &attempt, NULL, &sess), RS_OK);
    uint64_t records = 0;
    for (uint32_t part = 0; part < 4; part++) {
        rs_reader_t *r;
        assert_int_equal(rs_reader_open_in(sess, part, &r), RS_OK);
        const void *rv;
        uint32_t len;
        rs_status_t s;
        while ((s = rs_reader_next(r, &rv, &len)) == RS_OK && rv != NULL) {
            uint32_t i;
            memcpy(&i, rv, sizeof(i));
            assert_int_equal(len, sizeof(rec));
            assert_int_equal(i % 4, part);
            assert_int_equal(((const uint8_t *)rv)[len - 1], (uint8_t)i);
            records++;
        }
        assert_int_equal(s, RS_OK);
        rs_reader_close(r);
    }
    rs_reader_session_close(sess);
    assert_int_equal(records, 20000);
    assert_int_equal(rs_shuffle_drop(&d, NULL), RS_OK);
    /* SIGTERM: the daemon shuts down cleanly and promptly. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(kill(daemon_pid, SIGTERM), 0);
    int st;
    assert_int_equal(waitpid(daemon_pid, &st, 0), daemon_pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    daemon_pid = 0;
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_true((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9 < 5.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_daemon_shuffle_and_sigterm, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
