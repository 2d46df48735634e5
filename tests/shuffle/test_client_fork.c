/*
 * fork() and the default client (include/rshuffle/client.h): the parent
 * pushes and reads through the default client (rs_pusher_open,
 * rs_reader_open). A child forked while its lanes are open refuses to
 * push (RS_ERR_STATE) instead of risking a hang inside UCX, and so does
 * that child's own child; after rs_client_default_shutdown a child pushes
 * and reads through a default client of its own while the parent pushes
 * another shuffle through a new one. Every record is read exactly once.
 * The transport comes from the environment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/client.h>
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>

#include "rshuffled_child.h"

#define NW    2
#define PARTS 4
#define REC   48
#define RECS  100
#define MAPS  4

static pid_t pids[NW];
static char addr_buf[NW][160];
static const char *addrs[NW];
static rs_config_t tcfg;

static int teardown(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < NW; i++)
        rsd_kill(&pids[i]);
    return 0;
}

static rs_shuffle_desc_t desc(uint32_t id)
{
    return (rs_shuffle_desc_t){
        .shuffle_id = id, .n_partitions = PARTS, .n_workers = NW, .workers = addrs, .replicas = 1};
}

static void make_rec(uint32_t m, uint32_t i, uint8_t *rec)
{
    uint32_t x = m * 2654435761u ^ i;
    for (size_t k = 8; k < REC; k++) {
        x = x * 1103515245u + 12345u;
        rec[k] = (uint8_t)(x >> 16);
    }
    memcpy(rec, &m, 4);
    memcpy(rec + 4, &i, 4);
}

/* Map m of shuffle id through the default client: RS_OK or the first failure. */
static rs_status_t push_map(uint32_t id, uint32_t m)
{
    rs_shuffle_desc_t d = desc(id);
    rs_pusher_config_t c;
    rs_pusher_config_defaults(&c);
    c.pool_bytes = 1 << 20;
    c.buf_len = 16 << 10;
    c.wait_ms = 10000;
    c.transport = &tcfg;
    rs_pusher_t *p;
    rs_status_t s = rs_pusher_open(&d, m, 0, &c, &p);
    if (s != RS_OK)
        return s;
    uint8_t rec[REC];
    for (uint32_t i = 0; i < RECS && s == RS_OK; i++) {
        make_rec(m, i, rec);
        s = rs_pusher_append(p, i % PARTS, rec, REC);
    }
    if (s == RS_OK)
        s = rs_pusher_close(p, NULL);
    rs_pusher_destroy(p);
    return s;
}

/* Reads every partition of shuffle id's maps 0..n_maps-1 through the default client; each record
 * once. */
static rs_status_t read_all(uint32_t id, uint32_t n_maps)
{
    rs_shuffle_desc_t d = desc(id);
    rs_reader_config_t c;
    rs_reader_config_defaults(&c);
    c.wait_ms = 10000;
    c.transport = &tcfg;
    uint32_t attempts[MAPS] = {0};
    uint8_t seen[MAPS * RECS] = {0};
    uint64_t n = 0;
    for (uint32_t part = 0; part < PARTS; part++) {
        rs_reader_t *r;
        rs_status_t s = rs_reader_open(&d, part, n_maps, attempts, &c, &r);
        if (s != RS_OK)
            return s;
        const void *rec;
        uint32_t len;
        uint8_t want[REC];
        while ((s = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL) {
            uint32_t m, i;
            memcpy(&m, rec, 4);
            memcpy(&i, (const uint8_t *)rec + 4, 4);
            if (len != REC || m >= n_maps || i >= RECS || i % PARTS != part)
                s = RS_ERR_PROTOCOL;
            else
                make_rec(m, i, want);
            if (s == RS_OK && (memcmp(rec, want, REC) != 0 || seen[m * RECS + i]++ != 0))
                s = RS_ERR_CHECKSUM;
            if (s != RS_OK)
                break;
            n++;
        }
        rs_reader_close(r);
        if (s != RS_OK)
            return s;
    }
    return n == (uint64_t)n_maps * RECS ? RS_OK : RS_ERR_PROTOCOL;
}

/* A child's exit status: 0 when its push and read (or its refusal) went as expected. */
static int child_run(uint32_t expect_refused)
{
    alarm(60);
    rs_status_t s = push_map(7, 1);
    if (expect_refused) { /* and so is its own child: it inherits the same locks */
        if (s != RS_ERR_STATE)
            return 1;
        pid_t g = fork();
        if (g == 0)
            _exit(push_map(7, 1) == RS_ERR_STATE ? 0 : 1);
        int gs = 0;
        return g > 0 && waitpid(g, &gs, 0) == g && WIFEXITED(gs) && WEXITSTATUS(gs) == 0 ? 0 : 1;
    }
    if (s == RS_OK)
        s = read_all(7, 2);
    if (s != RS_OK)
        fprintf(stderr, "child: %s\n", rs_strerror(s));
    rs_client_stats_t st;
    rs_client_stats(rs_client_default(), &st);
    return s == RS_OK && st.lanes_made >= 2 ? 0 : 1; /* the child made lanes of its own */
}

static void wait_child(pid_t child)
{
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_fork_with_lanes(void **state)
{
    (void)state;
    alarm(120);
    const char *const args[] = {"--mem", "32M", NULL};
    for (uint32_t i = 0; i < NW; i++) {
        pids[i] = rsd_start(args, NULL, addr_buf[i], sizeof(addr_buf[i]));
        addrs[i] = addr_buf[i];
    }
    assert_int_equal(push_map(7, 0), RS_OK);
    assert_int_equal(read_all(7, 1), RS_OK);
    rs_client_stats_t st;
    rs_client_stats(rs_client_default(), &st);
    assert_true(st.lanes_idle >= 2); /* a push lane and a read lane, kept */

    /* Forked with the lanes' UCX contexts open: the child refuses at once. */
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(child_run(1));
    wait_child(child);

    /* Shut down first: the child pushes and reads, the parent goes on meanwhile. */
    rs_client_default_shutdown();
    child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(child_run(0));
    assert_int_equal(push_map(8, 0), RS_OK);
    wait_child(child);
    assert_int_equal(push_map(8, 1), RS_OK);
    assert_int_equal(read_all(8, 2), RS_OK);
    rs_client_default_shutdown();
}

int main(void)
{
    rs_config_defaults(&tcfg);
    tcfg.peer_timeout_ms = 2000;
    tcfg.connect_timeout_ms = 5000;
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fork_with_lanes, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
