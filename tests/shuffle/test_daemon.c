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
#include "shuffle_check.h"

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
    rs_pusher_t *p = sc_push(&d, 20000, 50);
    /* After the commit nothing more is taken: it would land after it. */
    assert_int_equal(rs_pusher_append(p, 0, "late", 4), RS_ERR_STATE);
    rs_pusher_destroy(p);
    sc_read_check(&d, 20000, 50);
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
