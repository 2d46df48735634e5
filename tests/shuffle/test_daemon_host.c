/*
 * rshuffled against its host: limits the host cannot back and unusable spill
 * directories are refused at once with the figures, and a signal at any time
 * (start-up included) ends it promptly with nothing left in shared memory.
 *
 * The test runs in its own mount and IPC namespaces (when it may: root)
 * with a private tmpfs on /dev/shm, so "nothing left" is exact on a machine
 * other tests share, and /dev/shm's size can be chosen.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>
#include <rshuffle/worker.h>

#include "rshuffled_child.h"

static int private_ns; /* /dev/shm and SysV IPC are this test's own */
static pid_t daemon_pid;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t meminfo_kb(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kb = 0;
    size_t n = strlen(key);
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            sscanf(line + n + 1, "%llu", &kb);
    if (f != NULL)
        fclose(f);
    return kb;
}

/* Entries left in /dev/shm plus SysV segments (/proc/sysvipc/shm lines past its header). */
static int shm_leftovers(void)
{
    int n = 0;
    DIR *d = opendir("/dev/shm");
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            fprintf(stderr, "left in /dev/shm: %s\n", e->d_name);
            n++;
        }
    closedir(d);
    FILE *f = fopen("/proc/sysvipc/shm", "r");
    char line[512];
    for (int i = 0; f != NULL && fgets(line, sizeof(line), f) != NULL; i++)
        if (i > 0) {
            fprintf(stderr, "SysV segment left: %s", line);
            n++;
        }
    if (f != NULL)
        fclose(f);
    return n;
}

/* Forks rshuffled --listen 127.0.0.1:0 args..., its stderr into *err_fd (non-blocking). */
static pid_t spawn(const char *const *args, int *err_fd)
{
    char *argv[16] = {"rshuffled", "--listen", "127.0.0.1:0"};
    int argc = 3;
    for (; args[argc - 3] != NULL; argc++) {
        assert_true(argc < 15);
        memcpy(&argv[argc], &args[argc - 3], sizeof(char *)); /* execv's argv is not const */
    }
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], STDERR_FILENO);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        execv(RSHUFFLED_PATH, argv);
        _exit(127);
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    *err_fd = p[0];
    daemon_pid = pid;
    return pid;
}

/* Reaps pid within limit_s, collecting its stderr; returns the wait status (fails on timeout). */
static int reap(pid_t pid, int err_fd, double limit_s, char *err, size_t cap)
{
    size_t len = 0;
    double end = now_s() + limit_s;
    int st = 0;
    for (;;) {
        ssize_t n;
        while (len + 1 < cap && (n = read(err_fd, err + len, cap - 1 - len)) > 0)
            len += (size_t)n;
        err[len] = '\0';
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (now_s() > end) {
            fprintf(stderr, "rshuffled still running after %.1f s; its stderr:\n%s\n", limit_s,
                    err);
            fail_msg("rshuffled did not exit in time");
        }
        struct pollfd pfd = {.fd = err_fd, .events = POLLIN};
        poll(&pfd, 1, 10);
    }
    while (len + 1 < cap) {
        ssize_t n = read(err_fd, err + len, cap - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    err[len] = '\0';
    close(err_fd);
    daemon_pid = 0;
    return st;
}

/* Runs rshuffled to its end (limit_s at most); returns its wait status. */
static int run(const char *const *args, double limit_s, char *err, size_t cap)
{
    int fd;
    pid_t pid = spawn(args, &fd);
    return reap(pid, fd, limit_s, err, cap);
}

static void expect_refused(int st, const char *err, const char *const *needles)
{
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 1)
        fprintf(stderr, "status %#x, stderr:\n%s\n", st, err);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    for (size_t i = 0; needles[i] != NULL; i++) {
        if (strstr(err, needles[i]) == NULL)
            fail_msg("stderr lacks '%s':\n%s", needles[i], err);
    }
}

static int group_setup(void **state)
{
    (void)state;
    /* Private /dev/shm and IPC: exact leftover checks, and /dev/shm sizes of our choosing. */
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC) == 0 &&
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=4g,mode=1777") == 0)
        private_ns = 1;
    else
        fprintf(stderr, "note: no private namespaces (%s): leftover checks skipped\n",
                strerror(errno));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rsd_kill(&daemon_pid);
    return 0;
}

/* Twice the machine's memory: refused before anything is allocated, naming both figures. */
static void test_mem_beyond_host(void **state)
{
    (void)state;
    char mem[32], err[4096];
    snprintf(mem, sizeof(mem), "%lluG", (unsigned long long)(meminfo_kb("MemTotal") >> 19) + 1);
    const char *const args[] = {"--mem", mem, NULL};
    double t0 = now_s();
    int st = run(args, 10, err, sizeof(err));
    double took = now_s() - t0;
    const char *const needles[] = {"memory limit", "MemAvailable", NULL};
    expect_refused(st, err, needles);
    assert_true(took < 2.0);
    if (private_ns)
        assert_int_equal(shm_leftovers(), 0);
}

/*
 * A /dev/shm smaller than the arena (a container's 64 MiB default): the
 * default arena is private memory, so a 256 MiB worker starts; a shared-memory
 * arena (RSHUFFLE_UCX_MEM=shared) is refused, naming /dev/shm.
 */
static void test_mem_beyond_dev_shm(void **state)
{
    (void)state;
    if (!private_ns)
        skip();
    assert_int_equal(mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m"), 0);
    const char *const big[] = {"--mem", "256M", NULL};
    char addr[RS_SHUFFLE_ADDR_MAX];
    daemon_pid = rsd_start(big, NULL, addr, sizeof(addr));
    /* SIGTERM, not SIGKILL: a killed one would leave UCX's segments for the leftover checks. */
    assert_int_equal(kill(daemon_pid, SIGTERM), 0);
    int term;
    assert_int_equal(waitpid(daemon_pid, &term, 0), daemon_pid);
    daemon_pid = 0;
    assert_true(WIFEXITED(term) && WEXITSTATUS(term) == 0);
    const char *const args[] = {"--mem", "128M", NULL};
    char err[4096];
    setenv("RSHUFFLE_UCX_MEM", "shared", 1);
    int st = run(args, 10, err, sizeof(err));
    unsetenv("RSHUFFLE_UCX_MEM");
    assert_int_equal(umount("/dev/shm"), 0);
    /* Less than 64 MiB free by then: UCX's own segments take a few. */
    const char *const needles[] = {"memory limit 128 MiB", "MiB free in /dev/shm", NULL};
    expect_refused(st, err, needles);
}

/* Command-line errors: exit 2 at once, naming what was wrong and what is allowed. */
static void test_command_line_errors(void **state)
{
    (void)state;
    static const struct {
        const char *opt, *val, *says;
    } cases[] = {
        {"--mem", "512K", "from 1M to 1T"},     {"--mem", "2T", "from 1M to 1T"},
        {"--mem", "lots", "from 1M to 1T"},     {"--log", "loud", "error, warn, info or debug"},
        {"--ready-fd", "1", "descriptor >= 3"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *const args[] = {cases[i].opt, cases[i].val, NULL};
        char err[4096];
        int st = run(args, 10, err, sizeof(err));
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 || strstr(err, cases[i].says) == NULL)
            fail_msg("%s %s: status %#x, stderr: %s", cases[i].opt, cases[i].val, st, err);
    }
}

static void test_spill_dir_missing(void **state)
{
    (void)state;
    const char *const args[] = {"--spill-dir", "/nonexistent/rshuffle-spill", NULL};
    char err[4096];
    int st = run(args, 10, err, sizeof(err));
    const char *const needles[] = {"spill directory /nonexistent/rshuffle-spill", NULL};
    expect_refused(st, err, needles);
}

static void test_spill_dir_not_a_dir(void **state)
{
    (void)state;
    char path[] = "/tmp/rshuffle-test-file-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const char *const args[] = {"--spill-dir", path, NULL};
    char err[4096];
    int st = run(args, 10, err, sizeof(err));
    unlink(path);
    const char *const needles[] = {"is not a directory", NULL};
    expect_refused(st, err, needles);
}

/* A read-only mount: root may write anywhere else, so access(W_OK) would say yes. */
static void test_spill_dir_read_only(void **state)
{
    (void)state;
    if (!private_ns)
        skip();
    char dir[] = "/tmp/rshuffle-test-ro-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(mount("tmpfs", dir, "tmpfs", MS_RDONLY, "size=1m"), 0);
    const char *const args[] = {"--spill-dir", dir, NULL};
    char err[4096];
    int st = run(args, 10, err, sizeof(err));
    assert_int_equal(umount(dir), 0);
    rmdir(dir);
    const char *const needles[] = {"does not take new files", NULL};
    expect_refused(st, err, needles);
}

/*
 * SIGTERM while the arena is being made resident (2 GiB: seconds on a slow
 * host) and at the very start: the process is gone within 2 s with nothing
 * left in /dev/shm or SysV shared memory.
 */
static void test_sigterm_during_startup(void **state)
{
    (void)state;
    if (!private_ns)
        skip();
    if (meminfo_kb("MemAvailable") < (6ull << 20))
        skip(); /* too little memory for a 2 GiB arena next to other tests */
    static const int delays_ms[] = {0, 150, 400};
    for (size_t i = 0; i < sizeof(delays_ms) / sizeof(delays_ms[0]); i++) {
        const char *const args[] = {"--mem", "2G", NULL};
        int fd;
        pid_t pid = spawn(args, &fd);
        usleep((useconds_t)delays_ms[i] * 1000);
        double t0 = now_s();
        assert_int_equal(kill(pid, SIGTERM), 0);
        char err[4096];
        int st = reap(pid, fd, 10, err, sizeof(err));
        double took = now_s() - t0;
        fprintf(stderr, "SIGTERM after %d ms: gone in %.2f s (%s)\n", delays_ms[i], took,
                strstr(err, "start-up")   ? "during start-up"
                : strstr(err, "shutting") ? "once running"
                                          : "before main");
        /* Exit 0, or killed by the signal itself before main could block it (nothing made yet). */
        assert_true((WIFEXITED(st) && WEXITSTATUS(st) == 0) ||
                    (WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM));
        assert_true(took < 2.0);
        assert_int_equal(shm_leftovers(), 0);
    }
}

/*
 * A worker that held a shuffle and spilled: SIGTERM (it drains: still up),
 * then SIGINT (stop now): exit 0, no spill file or segment left.
 */
static void test_sigterm_running_frees_everything(void **state)
{
    (void)state;
    if (!private_ns)
        skip();
    char spill[] = "/tmp/rshuffle-test-spill-XXXXXX";
    assert_non_null(mkdtemp(spill));
    const char *const args[] = {"--mem", "8M", "--spill-dir", spill, "--log", "error", NULL};
    char addr[256];
    daemon_pid = rsd_start(args, NULL, addr, sizeof(addr));
    const char *workers[1] = {addr};
    rs_shuffle_desc_t d = {.shuffle_id = 9, .n_partitions = 4, .n_workers = 1, .workers = workers};
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 0, 0, NULL, &p), RS_OK);
    uint8_t rec[1000];
    for (uint32_t i = 0; i < 20000; i++) { /* 20 MB into an 8 MiB arena: it spills */
        memset(rec, (int)i, sizeof(rec));
        assert_int_equal(rs_pusher_append(p, i % 4, rec, sizeof(rec)), RS_OK);
    }
    assert_int_equal(rs_pusher_close(p, NULL), RS_OK);
    rs_pusher_destroy(p);
    assert_int_equal(kill(daemon_pid, SIGTERM), 0);
    int st;
    usleep(300000);
    assert_int_equal(waitpid(daemon_pid, &st, WNOHANG), 0); /* draining: the shuffle is held */
    assert_int_equal(kill(daemon_pid, SIGINT), 0);
    double t0 = now_s();
    for (;;) {
        pid_t r = waitpid(daemon_pid, &st, WNOHANG);
        if (r == daemon_pid)
            break;
        assert_true(now_s() - t0 < 5.0);
        usleep(10000);
    }
    daemon_pid = 0;
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(rmdir(spill), 0); /* empty: no spill file left */
    rs_client_default_shutdown();      /* the client's own connections (and segments) go too */
    assert_int_equal(shm_leftovers(), 0);
}

/* An embedded worker gets the same checks from rs_worker_create; *worker_p stays untouched. */
static void test_embedded_worker_refused(void **state)
{
    (void)state;
    rs_worker_config_t cfg;
    rs_worker_config_defaults(&cfg);
    rs_worker_t *w = (rs_worker_t *)&cfg; /* a sentinel: must not be overwritten */
    cfg.mem_limit = (meminfo_kb("MemTotal") << 11) + (1ull << 30); /* twice the machine */
    double t0 = now_s();
    assert_int_equal(rs_worker_create(NULL, &cfg, &w), RS_ERR_CONFIG);
    assert_true(now_s() - t0 < 2.0);
    assert_ptr_equal(w, (rs_worker_t *)&cfg);
    rs_worker_config_defaults(&cfg);
    snprintf(cfg.spill_dir, sizeof(cfg.spill_dir), "/nonexistent/rshuffle-spill");
    assert_int_equal(rs_worker_create(NULL, &cfg, &w), RS_ERR_CONFIG);
    assert_ptr_equal(w, (rs_worker_t *)&cfg);
    if (private_ns)
        assert_int_equal(shm_leftovers(), 0);
}

int main(void)
{
    alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_mem_beyond_host, teardown),
        cmocka_unit_test_teardown(test_mem_beyond_dev_shm, teardown),
        cmocka_unit_test_teardown(test_command_line_errors, teardown),
        cmocka_unit_test_teardown(test_spill_dir_missing, teardown),
        cmocka_unit_test_teardown(test_embedded_worker_refused, teardown),
        cmocka_unit_test_teardown(test_spill_dir_not_a_dir, teardown),
        cmocka_unit_test_teardown(test_spill_dir_read_only, teardown),
        cmocka_unit_test_teardown(test_sigterm_during_startup, teardown),
        cmocka_unit_test_teardown(test_sigterm_running_frees_everything, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
