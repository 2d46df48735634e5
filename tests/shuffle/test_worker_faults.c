/*
 * Faults a long-lived worker must survive, with rshuffled children:
 *  - a shuffle id reused by another job (another generation) while the
 *    worker still holds the first: RS_ERR_EXISTS for the second job's
 *    pushers and readers, never a record of the first (the first's readers
 *    still read theirs), and the id is the second's once dropped;
 *  - descriptor exhaustion over TCP: 40 clients against a worker whose
 *    limit is 64 get in or get RS_ERR_BUSY, and a new shuffle afterwards
 *    succeeds (UCX's own listener never runs out);
 *  - one worker's spill directory full (a 1 MiB tmpfs mounted in the
 *    worker's own mount namespace): with R = 2 the maps commit and every
 *    record is read; with R = 1 the push fails with RS_ERR_IO within a few
 *    seconds, not after the backpressure bound.
 * The transport comes from the environment (ctest: shared memory and TCP);
 * the descriptor test runs over TCP only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sched.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/client.h>
#include <rshuffle/log.h>
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>

#include "rshuffled_child.h"

#define NW    2
#define PARTS 4
#define REC   200

static pid_t pids[NW];
static char addr_buf[NW][160];
static const char *addrs[NW];
static rs_config_t tcfg;
static char spill_dir[64];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int tcp_only(void)
{
    const char *tls = getenv("UCX_TLS");
    return tls != NULL && strstr(tls, "posix") == NULL && strstr(tls, "sysv") == NULL;
}

static int teardown(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < NW; i++)
        rsd_kill(&pids[i]);
    if (spill_dir[0] != '\0') {
        rmdir(spill_dir);
        spill_dir[0] = '\0';
    }
    return 0;
}

/* Record i of map m of job j: j, m, i first, then bytes derived from all three. */
static void make_rec(uint32_t j, uint32_t m, uint32_t i, uint8_t *rec)
{
    uint32_t x = (j * 40503u + m) * 2654435761u ^ i;
    for (size_t k = 12; k < REC; k++) {
        x = x * 1103515245u + 12345u;
        rec[k] = (uint8_t)(x >> 16);
    }
    memcpy(rec, &j, 4);
    memcpy(rec + 4, &m, 4);
    memcpy(rec + 8, &i, 4);
}

static rs_shuffle_desc_t desc(uint32_t id, uint32_t n_workers, uint32_t replicas, uint64_t gen)
{
    return (rs_shuffle_desc_t){.shuffle_id = id,
                               .n_partitions = PARTS,
                               .n_workers = n_workers,
                               .workers = addrs,
                               .replicas = replicas,
                               .generation = gen};
}

/* Map m of job j appends n records (record i to partition i % PARTS). */
static rs_status_t push(const rs_shuffle_desc_t *d, uint32_t j, uint32_t m, uint32_t n,
                        uint64_t *lost_p)
{
    rs_pusher_config_t c;
    rs_pusher_config_defaults(&c);
    c.buf_len = 64 << 10;
    c.pool_bytes = 4 << 20;
    c.wait_ms = 20000;
    c.transport = &tcfg;
    rs_pusher_t *p;
    rs_status_t s = rs_pusher_open(d, m, 0, &c, &p);
    if (s != RS_OK)
        return s;
    uint8_t rec[REC];
    for (uint32_t i = 0; i < n && s == RS_OK; i++) {
        make_rec(j, m, i, rec);
        s = rs_pusher_append(p, i % PARTS, rec, REC);
    }
    rs_pusher_stats_t st = {0};
    if (s == RS_OK)
        s = rs_pusher_close(p, &st);
    rs_pusher_destroy(p);
    if (lost_p != NULL)
        *lost_p = st.workers_lost;
    return s;
}

/*
 * Reads every partition of d (maps 0..n_maps-1 of job j, n records each):
 * a record of another job, one twice or one missing fails the test.
 * Returns the first error (before anything is checked), else RS_OK.
 */
static rs_status_t read_all(const rs_shuffle_desc_t *d, uint32_t j, uint32_t n_maps, uint32_t n)
{
    rs_reader_config_t c;
    rs_reader_config_defaults(&c);
    c.wait_ms = 20000;
    c.transport = &tcfg;
    uint32_t attempts[4] = {0};
    rs_reader_session_t *sess;
    rs_status_t s = rs_reader_session_open(d, n_maps, attempts, &c, &sess);
    if (s != RS_OK)
        return s;
    uint8_t *seen = calloc((size_t)n_maps * n, 1);
    assert_non_null(seen);
    uint64_t records = 0;
    uint8_t want[REC];
    for (uint32_t part = 0; part < PARTS && s == RS_OK; part++) {
        rs_reader_t *r;
        s = rs_reader_open_in(sess, part, &r);
        if (s != RS_OK)
            break;
        const void *rec;
        uint32_t len;
        while ((s = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL) {
            uint32_t rj, m, i;
            assert_int_equal(len, REC);
            memcpy(&rj, rec, 4);
            memcpy(&m, (const uint8_t *)rec + 4, 4);
            memcpy(&i, (const uint8_t *)rec + 8, 4);
            assert_int_equal(rj, j); /* never another job's record */
            assert_true(m < n_maps && i < n && i % PARTS == part);
            make_rec(j, m, i, want);
            assert_memory_equal(rec, want, REC);
            assert_int_equal(seen[(size_t)m * n + i], 0);
            seen[(size_t)m * n + i] = 1;
            records++;
        }
        rs_reader_close(r);
    }
    rs_reader_session_close(sess);
    free(seen);
    if (s == RS_OK)
        assert_int_equal(records, (uint64_t)n_maps * n);
    return s;
}

/*
 * rshuffled listening on `listen` (NULL: the test host, port 0) with an
 * arena of mem; nofile > 0: with RLIMIT_NOFILE nofile (soft and hard), as
 * `ulimit -n` starts it; small_disk: its spill directory (spill_dir) a 1 MiB
 * tmpfs mounted in its own mount namespace (gone with it). Writes its
 * "host:port" into addr. Returns its pid, or 0 when the tmpfs cannot be
 * mounted here.
 */
static pid_t start_worker(const char *listen, const char *mem, int nofile, int small_disk,
                          char *addr, size_t cap)
{
    const char *host = getenv("RSHUFFLE_TEST_HOST") ? getenv("RSHUFFLE_TEST_HOST") : "127.0.0.1";
    char any[128];
    snprintf(any, sizeof(any), "%s:0", host);
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], STDOUT_FILENO);
        close(p[0]);
        close(p[1]);
        struct rlimit rl = {.rlim_cur = (rlim_t)nofile, .rlim_max = (rlim_t)nofile};
        if (nofile > 0 && setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(125);
        if (small_disk &&
            (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
             mount("rs-spill-test", spill_dir, "tmpfs", 0, "size=1m") != 0)) {
            printf("nomount %s\n", strerror(errno));
            fflush(stdout);
            _exit(77);
        }
        execl(RSHUFFLED_PATH, "rshuffled", "--listen", listen != NULL ? listen : any, "--mem", mem,
              "--spill-dir", small_disk ? spill_dir : "/tmp", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    FILE *f = fdopen(p[0], "r");
    char line[256] = {0};
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    if (strncmp(line, "nomount", 7) == 0) {
        printf("cannot mount a small tmpfs here (%.*s): needs CAP_SYS_ADMIN\n",
               (int)strcspn(line + 8, "\n"), line + 8);
        waitpid(pid, NULL, 0);
        return 0;
    }
    const char *pfx = "rshuffled: listening on ";
    assert_memory_equal(line, pfx, strlen(pfx));
    snprintf(addr, cap, "%.*s", (int)strcspn(line + strlen(pfx), "\n"), line + strlen(pfx));
    return pid;
}

/* ------------------------------------------------------- a reused shuffle id */

static void test_reused_id(void **state)
{
    (void)state;
    alarm(120);
    const char *const args[] = {"--mem", "32M", NULL};
    pids[0] = rsd_start(args, NULL, addr_buf[0], sizeof(addr_buf[0]));
    addrs[0] = addr_buf[0];
    const uint32_t n = 2000;
    /* Job 1 (generation 11) pushes shuffle 7 and is never dropped. */
    rs_shuffle_desc_t d1 = desc(7, 1, 1, 11);
    for (uint32_t m = 0; m < 2; m++)
        assert_int_equal(push(&d1, 1, m, n, NULL), RS_OK);
    /* Job 2 (generation 22) reuses id 7 and the same (map, attempt)s: refused at open. */
    rs_shuffle_desc_t d2 = desc(7, 1, 1, 22);
    assert_int_equal(push(&d2, 2, 0, n, NULL), RS_ERR_EXISTS);
    /* Its readers get no record of job 1 (read_all fails the test on one). */
    assert_int_equal(read_all(&d2, 2, 2, n), RS_ERR_EXISTS);
    /* A descriptor that never set the generation (0) is another registration too. */
    rs_shuffle_desc_t d0 = desc(7, 1, 1, 0);
    assert_int_equal(push(&d0, 3, 0, n, NULL), RS_ERR_EXISTS);
    /* Job 1's readers are not disturbed: all of theirs, once each. */
    assert_int_equal(read_all(&d1, 1, 2, n), RS_OK);
    /*
     * On the connection job 1's readers kept, job 2's attach goes with its
     * first open and is refused just the same; the next session connects
     * again.
     */
    assert_int_equal(read_all(&d2, 2, 2, n), RS_ERR_EXISTS);
    assert_int_equal(read_all(&d1, 1, 2, n), RS_OK);
    assert_int_equal(read_all(&d1, 1, 2, n), RS_OK);
    /* Once dropped, the id is job 2's: its records only. */
    assert_int_equal(rs_shuffle_drop(&d1, &tcfg), RS_OK);
    for (uint32_t m = 0; m < 2; m++)
        assert_int_equal(push(&d2, 2, m, n, NULL), RS_OK);
    assert_int_equal(read_all(&d2, 2, 2, n), RS_OK);
    assert_int_equal(read_all(&d1, 1, 2, n), RS_ERR_EXISTS);
}

/* ------------------------------------------------------ descriptor exhaustion */

#define CLIENTS 40
#define FD_MAX  64

/*
 * A client: opens a pusher for map m (reports the status on out), waits for
 * a byte on in, then pushes, commits and reports close's status.
 */
static void client_main(uint32_t m, int in, int out)
{
    rs_shuffle_desc_t d = desc(3, 1, 1, 5);
    rs_pusher_config_t c;
    rs_pusher_config_defaults(&c);
    c.buf_len = 16 << 10;
    c.pool_bytes = 1 << 20;
    c.transport = &tcfg;
    rs_pusher_t *p;
    int32_t s = rs_pusher_open(&d, m, 0, &c, &p);
    if (write(out, &s, sizeof(s)) != sizeof(s))
        _exit(3);
    char go;
    if (read(in, &go, 1) != 1)
        _exit(4);
    if (s == RS_OK) {
        uint8_t rec[REC];
        for (uint32_t i = 0; i < 100 && s == RS_OK; i++) {
            make_rec(5, m, i, rec);
            s = rs_pusher_append(p, i % PARTS, rec, REC);
        }
        if (s == RS_OK)
            s = rs_pusher_close(p, NULL);
        rs_pusher_destroy(p);
    }
    if (write(out, &s, sizeof(s)) != sizeof(s))
        _exit(3);
    _exit(0);
}

static void test_descriptor_limit_tcp(void **state)
{
    (void)state;
    if (!tcp_only()) {
        printf("over TCP only (UCX_TLS=tcp): shared memory costs the worker no socket\n");
        skip();
    }
    alarm(180);
    /* The clients are forked, not exec'd: UCX does not carry the default
     * client's live contexts (the tests before) into a child. */
    rs_client_default_shutdown();
    pids[0] = start_worker(NULL, "16M", FD_MAX, 0, addr_buf[0], sizeof(addr_buf[0]));
    addrs[0] = addr_buf[0];
    pid_t kids[CLIENTS];
    int to[CLIENTS], from[CLIENTS];
    for (uint32_t i = 0; i < CLIENTS; i++) {
        int a[2], b[2];
        assert_int_equal(pipe(a), 0);
        assert_int_equal(pipe(b), 0);
        fflush(NULL);
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(a[1]);
            close(b[0]);
            client_main(i, a[0], b[1]);
        }
        close(a[0]);
        close(b[1]);
        to[i] = a[1];
        from[i] = b[0];
    }
    /* All 40 hold their connection at once: each got in or got a clear RS_ERR_BUSY. */
    uint32_t in = 0, busy = 0, other = 0;
    int32_t open_s[CLIENTS];
    for (uint32_t i = 0; i < CLIENTS; i++) {
        assert_int_equal(read(from[i], &open_s[i], sizeof(open_s[i])), sizeof(open_s[i]));
        if (open_s[i] == RS_OK)
            in++;
        else if (open_s[i] == RS_ERR_REFUSED)
            busy++;
        else
            printf("client %u: open gave %s\n", i, rs_strerror((rs_status_t)open_s[i])), other++;
    }
    printf("descriptor limit %d, %d clients at once: %u in, %u refused (RS_ERR_REFUSED), %u "
           "other\n",
           FD_MAX, CLIENTS, in, busy, other);
    assert_int_equal(waitpid(pids[0], NULL, WNOHANG), 0);
    assert_int_equal(other, 0); /* a clear answer each, never a timeout */
    assert_true(in > 0);
    assert_true(busy > 0); /* 40 clients at two descriptors each do not fit 64 */
    for (uint32_t i = 0; i < CLIENTS; i++) {
        assert_int_equal(write(to[i], "g", 1), 1);
        int32_t s;
        assert_int_equal(read(from[i], &s, sizeof(s)), sizeof(s));
        if (open_s[i] == RS_OK)
            assert_int_equal(s, RS_OK); /* those let in commit */
        close(to[i]);
        close(from[i]);
        waitpid(kids[i], NULL, 0);
    }
    /* The worker is alive, and a new shuffle after the storm succeeds. */
    assert_int_equal(waitpid(pids[0], NULL, WNOHANG), 0);
    double t0 = now_s();
    rs_shuffle_desc_t d = desc(4, 1, 1, 6);
    assert_int_equal(push(&d, 6, 0, 1000, NULL), RS_OK);
    assert_int_equal(read_all(&d, 6, 1, 1000), RS_OK);
    printf("a new shuffle after the storm: pushed and read in %.2f s\n", now_s() - t0);
}

/* The TCP port pid listens on besides skip (its transport's own listener), or 0. */
static uint16_t other_listen_port(pid_t pid, uint16_t skip)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    unsigned long ino[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 256) {
        char link[64];
        ssize_t len = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
        if (len > 0) {
            link[len] = '\0';
            n += sscanf(link, "socket:[%lu]", &ino[n]) == 1;
        }
    }
    closedir(d);
    uint16_t found = 0;
    for (int t = 0; t < 2 && found == 0; t++) {
        snprintf(path, sizeof(path), "/proc/%d/net/%s", (int)pid, t ? "tcp6" : "tcp");
        FILE *f = fopen(path, "r");
        char line[512];
        while (f != NULL && found == 0 && fgets(line, sizeof(line), f) != NULL) {
            unsigned port, state;
            unsigned long inode;
            if (sscanf(
                    line,
                    " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu",
                    &port, &state, &inode) != 3 ||
                state != 0x0a || port == skip)
                continue;
            for (size_t i = 0; i < n; i++)
                if (ino[i] == inode)
                    found = (uint16_t)port;
        }
        if (f != NULL)
            fclose(f);
    }
    return found;
}

/*
 * The transport's own listener made to fail anyway: raw connections to it
 * (no front door) until the worker's descriptors run out. Afterwards a new
 * shuffle succeeds, or the worker exits with status 3 (its watch saw the
 * listener accept nothing); never a live worker that refuses everything.
 */
static void test_listener_lost_tcp(void **state)
{
    (void)state;
    if (!tcp_only()) {
        printf("over TCP only (UCX_TLS=tcp)\n");
        skip();
    }
    alarm(180);
    pids[0] = start_worker(NULL, "16M", FD_MAX, 0, addr_buf[0], sizeof(addr_buf[0]));
    addrs[0] = addr_buf[0];
    uint16_t front = (uint16_t)atoi(strrchr(addr_buf[0], ':') + 1);
    uint16_t ucx_port = other_listen_port(pids[0], front);
    assert_true(ucx_port != 0);
    int socks[2 * FD_MAX];
    for (int i = 0; i < 2 * FD_MAX; i++) {
        socks[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(socks[i] >= 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(ucx_port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        (void)connect(socks[i], (struct sockaddr *)&sa, sizeof(sa));
    }
    usleep(500 * 1000); /* the worker accepts what it can */
    for (int i = 0; i < 2 * FD_MAX; i++)
        close(socks[i]);
    rs_shuffle_desc_t d = desc(5, 1, 1, 7);
    double t0 = now_s();
    int status = -1;
    rs_status_t s = RS_ERR_TIMEOUT;
    while (now_s() - t0 < 60.0) {
        pid_t r = waitpid(pids[0], &status, WNOHANG);
        if (r == pids[0]) {
            pids[0] = 0;
            break;
        }
        s = push(&d, 7, 0, 1000, NULL);
        if (s == RS_OK)
            break;
        sleep(1);
    }
    if (pids[0] == 0) {
        printf("the transport's listener was lost: the worker exited with status %d after %.1f s\n",
               WIFEXITED(status) ? WEXITSTATUS(status) : -100 - WTERMSIG(status), now_s() - t0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    } else {
        printf("the transport's listener survived: a new shuffle succeeded after %.1f s\n",
               now_s() - t0);
        assert_int_equal(s, RS_OK);
        assert_int_equal(read_all(&d, 7, 1, 1000), RS_OK);
    }
}

/* ------------------------------------------------------------ a full spill disk */

/* 2 maps x 40,000 records of 200 bytes: 16 MB, twice an 8 MiB arena, 16 times the disk. */
#define SPILL_N 40000

static void spill_setup(void)
{
    snprintf(spill_dir, sizeof(spill_dir), "/tmp/rs-spill-full-XXXXXX");
    assert_non_null(mkdtemp(spill_dir));
    pids[0] = start_worker(NULL, "8M", 0, 1, addr_buf[0], sizeof(addr_buf[0]));
    if (pids[0] == 0)
        skip();
    addrs[0] = addr_buf[0];
}

static void test_r2_spill_disk_full(void **state)
{
    (void)state;
    alarm(180);
    spill_setup();
    const char *const args[] = {"--mem", "96M", NULL};
    pids[1] = rsd_start(args, NULL, addr_buf[1], sizeof(addr_buf[1]));
    addrs[1] = addr_buf[1];
    rs_shuffle_desc_t d = desc(0, 2, 2, 1);
    double t0 = now_s();
    uint64_t lost = 0, lost_total = 0;
    for (uint32_t m = 0; m < 2; m++) {
        assert_int_equal(push(&d, 1, m, SPILL_N, &lost), RS_OK);
        lost_total += lost;
    }
    double push_s = now_s() - t0;
    assert_int_equal(read_all(&d, 1, 2, SPILL_N), RS_OK);
    printf("R = 2, worker 0's spill disk full: both maps committed in %.2f s (%llu worker "
           "losses), every record read\n",
           push_s, (unsigned long long)lost_total);
    assert_true(lost_total >= 1); /* worker 0 was given up, by at least the map that filled it */
}

static void test_r1_spill_disk_full(void **state)
{
    (void)state;
    alarm(180);
    spill_setup();
    rs_shuffle_desc_t d = desc(0, 1, 1, 1);
    double t0 = now_s();
    rs_status_t s = RS_OK;
    for (uint32_t m = 0; m < 2 && s == RS_OK; m++)
        s = push(&d, 1, m, SPILL_N, NULL);
    double dt = now_s() - t0;
    printf("R = 1, the spill disk full: %s after %.2f s\n", rs_strerror(s), dt);
    assert_int_equal(s, RS_ERR_IO); /* the disk, not "out of memory (backpressure)" */
    assert_true(dt < 20.0);         /* the spill bound (2 s), not the backpressure one (30 s) */
}

/* ------------------------------------------------------ a worker that goes */

/* Log lines of this process holding each of two strings (a handler while counting). */
static const char *log_what[2];
static unsigned log_n[2];

static void log_counter(void *arg, rs_log_level_t level, const char *file, int line,
                        const char *msg)
{
    (void)arg;
    fprintf(stderr, "[%d] %s:%d: %s\n", (int)level, file, line, msg); /* still shown */
    for (int i = 0; i < 2; i++)
        if (strstr(msg, log_what[i]) != NULL)
            __atomic_add_fetch(&log_n[i], 1, __ATOMIC_RELAXED);
}

/*
 * R = 2, worker 0 restarted empty on its port after the push: the readers
 * read every record from worker 1, and say so once, not once per partition.
 */
static void test_r2_worker_restarted_empty(void **state)
{
    (void)state;
    alarm(120);
    for (uint32_t i = 0; i < NW; i++) {
        pids[i] = start_worker(NULL, "32M", 0, 0, addr_buf[i], sizeof(addr_buf[i]));
        addrs[i] = addr_buf[i];
    }
    rs_shuffle_desc_t d = desc(0, 2, 2, 1);
    for (uint32_t m = 0; m < 2; m++)
        assert_int_equal(push(&d, 1, m, 4000, NULL), RS_OK);
    rsd_kill(&pids[0]);
    pids[0] = start_worker(addr_buf[0], "32M", 0, 0, addr_buf[0], sizeof(addr_buf[0]));
    log_what[0] = "refused read";
    log_what[1] = "does not hold shuffle";
    log_n[0] = log_n[1] = 0;
    rs_config_t was = tcfg;
    tcfg.log_level = RS_LOG_WARN; /* the line said once is a warning (contexts set the level) */
    rs_log_set_handler(log_counter, NULL);
    rs_status_t s = read_all(&d, 1, 2, 4000);
    rs_log_set_handler(NULL, NULL); /* no library thread is left: read_all closed all */
    tcfg = was;
    rs_log_set_level(was.log_level);
    unsigned n[2] = {log_n[0], log_n[1]};
    assert_int_equal(s, RS_OK);
    printf("R = 2, worker 0 restarted empty: every record read; %u refusal lines, %u 'does not "
           "hold' lines for %d partitions\n",
           n[0], n[1], PARTS);
    assert_int_equal(n[0], 0);
    assert_int_equal(n[1], 1);
}

/*
 * R = 1: the worker SIGTERMed while a partition is read: the partitions
 * after it fail with RS_ERR_UNREACHABLE (the worker is gone), never a
 * transport error.
 */
static void test_r1_worker_terminated_mid_read(void **state)
{
    (void)state;
    alarm(120);
    pids[0] = start_worker(NULL, "64M", 0, 0, addr_buf[0], sizeof(addr_buf[0]));
    addrs[0] = addr_buf[0];
    rs_shuffle_desc_t d = desc(0, 1, 1, 1);
    assert_int_equal(push(&d, 1, 0, 20000, NULL), RS_OK);
    rs_reader_config_t c;
    rs_reader_config_defaults(&c);
    c.wait_ms = 20000;
    c.transport = &tcfg;
    uint32_t attempts[1] = {0};
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&d, 1, attempts, &c, &sess), RS_OK);
    rs_status_t s = RS_OK;
    uint64_t got = 0;
    for (uint32_t part = 0; part < PARTS && s == RS_OK; part++) {
        rs_reader_t *r;
        s = rs_reader_open_in(sess, part, &r);
        if (s != RS_OK)
            break;
        const void *rec;
        uint32_t len;
        while ((s = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL) {
            if (++got == 1000) {
                kill(pids[0], SIGTERM);
                waitpid(pids[0], NULL, 0);
                pids[0] = 0;
            }
        }
        rs_reader_close(r);
    }
    rs_reader_session_close(sess);
    printf("R = 1, worker SIGTERMed after 1000 records: %s after %llu records\n", rs_strerror(s),
           (unsigned long long)got);
    assert_true(got < 20000);                /* it did not finish */
    assert_int_equal(s, RS_ERR_UNREACHABLE); /* the worker is gone, not "transport error" */
}

int main(void)
{
    rs_config_init(&tcfg);
    tcfg.peer_timeout_ms = 2000;
    tcfg.connect_timeout_ms = 5000;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_reused_id, teardown),
        cmocka_unit_test_teardown(test_descriptor_limit_tcp, teardown),
        cmocka_unit_test_teardown(test_listener_lost_tcp, teardown),
        cmocka_unit_test_teardown(test_r2_spill_disk_full, teardown),
        cmocka_unit_test_teardown(test_r1_spill_disk_full, teardown),
        cmocka_unit_test_teardown(test_r2_worker_restarted_empty, teardown),
        cmocka_unit_test_teardown(test_r1_worker_terminated_mid_read, teardown),
    };
    const char *only = getenv("RS_TEST_ONLY");
    if (only != NULL)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
