#include "bt_agent.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/checksum.h"
#include "perf/perf_util.h"

enum {
    CMD_PUBLISH = 'P',
    CMD_GET = 'G',
    CMD_THREADS = 'T',
    CMD_REHASH = 'H',
    CMD_RELEASE = 'R',
    CMD_DESTROY = 'D',
    CMD_STATS = 'S',
    CMD_QUIT = 'Q',
};

#define BT_MSG_MAX  (RS_BCAST_DESC_MAX + 64)
#define BT_REFS_MAX 64
#define BT_OBJS_MAX 64

static uint64_t now_ms(void)
{
    return perf_now_ns() / 1000000;
}

const char *bt_host(void)
{
    const char *h = getenv("RSHUFFLE_TEST_HOST");
    return h != NULL && *h != '\0' ? h : "127.0.0.1";
}

void bt_alarm(unsigned seconds)
{
    alarm(seconds);
}

/* ------------------------------------------------------------- patterns */

static void pattern_fill(uint8_t *p, uint64_t size, uint64_t seed)
{
    uint64_t st = seed;
    for (uint64_t i = 0; i < size; i += 8) {
        uint64_t z = (st += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        memcpy(p + i, &z, size - i < 8 ? size - i : 8);
    }
}

uint64_t bt_expected_hash(uint64_t size, uint64_t seed)
{
    uint8_t *p = malloc(size + 8);
    assert_non_null(p);
    pattern_fill(p, size, seed);
    uint64_t h = rs_checksum64(p, size);
    free(p);
    return h;
}

/* ---------------------------------------------------------------- agent */

typedef struct agent {
    rs_bcast_node_t *node;
    rs_bcast_ref_t *refs[BT_REFS_MAX];
    uint32_t n_refs;
    rs_bcast_t *objs[BT_OBJS_MAX];
    uint32_t n_objs;
    int res_fd;
} agent_t;

typedef struct thread_get {
    agent_t *ag;
    const uint8_t *desc;
    size_t desc_len;
    rs_status_t st;
    rs_bcast_ref_t *ref;
} thread_get_t;

static void *thread_get_main(void *arg)
{
    thread_get_t *t = arg;
    t->st = rs_bcast_get(t->ag->node, t->desc, t->desc_len, &t->ref);
    return NULL;
}

static void agent_reply(agent_t *ag, const bt_result_t *r)
{
    if (perf_blob_write(ag->res_fd, r, sizeof(*r)) != 0)
        _exit(3);
}

static void agent_keep(agent_t *ag, rs_bcast_ref_t *ref, bt_result_t *r)
{
    r->len = rs_bcast_ref_len(ref);
    r->hash = rs_checksum64(rs_bcast_ref_data(ref), r->len);
    rs_bcast_ref_stats(ref, &r->stats);
    if (ag->n_refs < BT_REFS_MAX)
        ag->refs[ag->n_refs++] = ref;
    else
        rs_bcast_release(ref);
}

static void agent_get(agent_t *ag, const uint8_t *desc, size_t len)
{
    bt_result_t r;
    rs_bcast_ref_t *ref;
    memset(&r, 0, sizeof(r));
    uint64_t t0 = now_ms();
    r.status = rs_bcast_get(ag->node, desc, len, &ref);
    r.ms = now_ms() - t0;
    if (r.status == RS_OK)
        agent_keep(ag, ref, &r);
    agent_reply(ag, &r);
}

static void agent_threads(agent_t *ag, uint32_t n, const uint8_t *desc, size_t len)
{
    thread_get_t t[64];
    pthread_t th[64];
    bt_result_t r;
    memset(&r, 0, sizeof(r));
    if (n > 64)
        n = 64;
    uint64_t t0 = now_ms();
    for (uint32_t i = 0; i < n; i++) {
        t[i] = (thread_get_t){.ag = ag, .desc = desc, .desc_len = len};
        if (pthread_create(&th[i], NULL, thread_get_main, &t[i]) != 0)
            _exit(4);
    }
    for (uint32_t i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    r.ms = now_ms() - t0;
    uint64_t hash0 = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (t[i].st != RS_OK) {
            r.status = t[i].st;
            continue;
        }
        uint64_t h = rs_checksum64(rs_bcast_ref_data(t[i].ref), rs_bcast_ref_len(t[i].ref));
        if (i == 0 || hash0 == 0)
            hash0 = h;
        if (h == hash0)
            r.nthreads++;
        agent_keep(ag, t[i].ref, &r);
    }
    agent_reply(ag, &r);
}

static void agent_publish(agent_t *ag, uint64_t size, uint64_t seed)
{
    uint8_t out[BT_MSG_MAX];
    rs_bcast_t *bc;
    size_t len = 0;
    uint32_t n = 0;
    if (rs_bcast_create(ag->node, size, &bc) == RS_OK) {
        if (size > 0)
            pattern_fill(rs_bcast_buffer(bc), size, seed);
        if (rs_bcast_seal(bc) == RS_OK &&
            rs_bcast_descriptor(bc, out, sizeof(out), &len) == RS_OK && ag->n_objs < BT_OBJS_MAX) {
            ag->objs[ag->n_objs++] = bc;
            n = (uint32_t)len;
        }
    }
    if (perf_blob_write(ag->res_fd, out, n) != 0)
        _exit(3);
}

static void agent_release(agent_t *ag)
{
    for (uint32_t i = 0; i < ag->n_refs; i++)
        rs_bcast_release(ag->refs[i]);
    ag->n_refs = 0;
}

static void agent_main(int cmd_fd, int res_fd, rs_bcast_mode_t mode)
{
    rs_config_t tc;
    rs_bcast_config_t bc;
    agent_t ag;
    uint8_t msg[BT_MSG_MAX];
    size_t len;

    memset(&ag, 0, sizeof(ag));
    ag.res_fd = res_fd;
    if (rs_config_init(&tc) != RS_OK || rs_bcast_config_init(&bc) != RS_OK)
        _exit(2);
    /* UCX unless RSHUFFLE_TRANSPORT says otherwise (verbs in the Soft-RoCE guest). */
    if (getenv("RSHUFFLE_TRANSPORT") == NULL)
        tc.transport = RS_TRANSPORT_UCX;
    tc.peer_timeout_ms = 2000;
    tc.connect_timeout_ms = 2000;
    bc.block_size = BT_BLOCK;
    bc.inline_max = BT_INLINE;
    bc.timeout_ms = 20000;
    bc.grace_ms = 100;
    bc.mode = mode;
    snprintf(bc.host, sizeof(bc.host), "%s", bt_host());
    if (rs_bcast_node_create(&tc, &bc, &ag.node) != RS_OK)
        _exit(2);

    for (;;) {
        if (perf_blob_read(cmd_fd, msg, sizeof(msg), -1, &len) != 0 || len == 0)
            break; /* the parent is gone */
        bt_result_t r;
        uint64_t a, b;
        switch (msg[0]) {
            case CMD_PUBLISH:
                memcpy(&a, msg + 1, 8);
                memcpy(&b, msg + 9, 8);
                agent_publish(&ag, a, b);
                break;
            case CMD_GET:
                agent_get(&ag, msg + 1, len - 1);
                break;
            case CMD_THREADS:
                memcpy(&a, msg + 1, 8);
                agent_threads(&ag, (uint32_t)a, msg + 9, len - 9);
                break;
            case CMD_REHASH:
                memset(&r, 0, sizeof(r));
                for (uint32_t i = 0; i < ag.n_refs; i++) {
                    r.len = rs_bcast_ref_len(ag.refs[i]);
                    r.hash = rs_checksum64(rs_bcast_ref_data(ag.refs[i]), r.len);
                }
                agent_reply(&ag, &r);
                break;
            case CMD_RELEASE:
                agent_release(&ag);
                memset(&r, 0, sizeof(r));
                agent_reply(&ag, &r);
                break;
            case CMD_DESTROY:
                memcpy(&a, msg + 1, 8);
                if (a < ag.n_objs && ag.objs[a] != NULL) {
                    rs_bcast_destroy(ag.objs[a]);
                    ag.objs[a] = NULL;
                }
                memset(&r, 0, sizeof(r));
                agent_reply(&ag, &r);
                break;
            case CMD_STATS:
                memcpy(&a, msg + 1, 8);
                memset(&r, 0, sizeof(r));
                if ((int64_t)a < 0)
                    rs_bcast_node_stats(ag.node, &r.stats);
                else if (a < ag.n_objs && ag.objs[a] != NULL)
                    rs_bcast_source_stats(ag.objs[a], &r.stats);
                agent_reply(&ag, &r);
                break;
            case CMD_QUIT:
                goto out;
        }
    }
out:
    agent_release(&ag);
    for (uint32_t i = 0; i < ag.n_objs; i++)
        if (ag.objs[i] != NULL)
            rs_bcast_destroy(ag.objs[i]);
    rs_bcast_node_destroy(ag.node);
    memset(msg, 0, 1);
    perf_blob_write(res_fd, msg, 1); /* "quit done" */
}

void bt_spawn(bt_agent_t *a, const char *fault, rs_bcast_mode_t mode)
{
    bt_spawn_env(a, fault, mode, NULL);
}

void bt_spawn_env(bt_agent_t *a, const char *fault, rs_bcast_mode_t mode, const char *env)
{
    int in = -1, out = -1;
    pid_t pid = perf_fork_piped(&in, &out);
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(0);
        if (fault != NULL) {
#ifndef RS_FAULT_INJECTION
            fail_msg("this build has no fault-injection hooks (RSHUFFLE_BCAST_FAULT=%s)", fault);
#endif
            setenv("RSHUFFLE_BCAST_FAULT", fault, 1);
        }
        if (env != NULL)
            putenv(strdup(env));
        agent_main(in, out, mode);
        exit(0); /* exit, not _exit: LeakSanitizer checks the agent too */
    }
    a->pid = pid;
    a->cmd_fd = out;
    a->res_fd = in;
}

static void send_cmd(bt_agent_t *a, char cmd, const void *arg, size_t arg_len, const void *tail,
                     size_t tail_len)
{
    uint8_t msg[BT_MSG_MAX];
    assert_true(1 + arg_len + tail_len <= sizeof(msg));
    msg[0] = (uint8_t)cmd;
    if (arg_len > 0)
        memcpy(msg + 1, arg, arg_len);
    if (tail_len > 0)
        memcpy(msg + 1 + arg_len, tail, tail_len);
    assert_int_equal(perf_blob_write(a->cmd_fd, msg, 1 + arg_len + tail_len), 0);
}

/*
 * Fails the test for an answer that did not come, naming why: the agent
 * died (its exit status or signal: a crash inside UCX shows here as
 * SIGABRT), it stayed silent for BT_WAIT_MS, or its answer was malformed.
 */
static void no_answer(bt_agent_t *a, const char *what)
{
    int err = errno, status = 0;
    if (err == EPIPE && waitpid(a->pid, &status, 0) == a->pid) {
        if (WIFSIGNALED(status))
            fail_msg("agent %d died by signal %d before it %s", (int)a->pid, WTERMSIG(status),
                     what);
        fail_msg("agent %d exited with status %d before it %s", (int)a->pid,
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, what);
    }
    if (err == ETIMEDOUT)
        fail_msg("agent %d had not %s after %d ms", (int)a->pid, what, BT_WAIT_MS);
    fail_msg("agent %d: reading what it %s failed: %s", (int)a->pid, what, strerror(err));
}

static void recv_result(bt_agent_t *a, bt_result_t *r)
{
    size_t len = 0;
    if (perf_blob_read(a->res_fd, r, sizeof(*r), BT_WAIT_MS, &len) != 0)
        no_answer(a, "answered");
    assert_int_equal(len, sizeof(*r));
}

void bt_publish(bt_agent_t *a, uint64_t size, uint64_t seed, uint8_t *desc, size_t *desc_len)
{
    uint64_t args[2] = {size, seed};
    size_t len = 0;
    send_cmd(a, CMD_PUBLISH, args, sizeof(args), NULL, 0);
    if (perf_blob_read(a->res_fd, desc, RS_BCAST_DESC_MAX, BT_WAIT_MS, &len) != 0)
        no_answer(a, "published");
    assert_true(len > 0);
    *desc_len = len;
}

void bt_get_start(bt_agent_t *a, const uint8_t *desc, size_t desc_len)
{
    send_cmd(a, CMD_GET, NULL, 0, desc, desc_len);
}

void bt_threads_start(bt_agent_t *a, uint32_t nthreads, const uint8_t *desc, size_t desc_len)
{
    uint64_t n = nthreads;
    send_cmd(a, CMD_THREADS, &n, sizeof(n), desc, desc_len);
}

void bt_get_wait(bt_agent_t *a, bt_result_t *r)
{
    recv_result(a, r);
}

void bt_rehash(bt_agent_t *a, bt_result_t *r)
{
    send_cmd(a, CMD_REHASH, NULL, 0, NULL, 0);
    recv_result(a, r);
}

void bt_release(bt_agent_t *a)
{
    bt_result_t r;
    send_cmd(a, CMD_RELEASE, NULL, 0, NULL, 0);
    recv_result(a, &r);
}

void bt_destroy(bt_agent_t *a, uint32_t i)
{
    bt_result_t r;
    uint64_t idx = i;
    send_cmd(a, CMD_DESTROY, &idx, sizeof(idx), NULL, 0);
    recv_result(a, &r);
}

void bt_stats(bt_agent_t *a, int i, rs_bcast_stats_t *s)
{
    bt_result_t r;
    int64_t idx = i;
    send_cmd(a, CMD_STATS, &idx, sizeof(idx), NULL, 0);
    recv_result(a, &r);
    *s = r.stats;
}

void bt_wait_announces(bt_agent_t *a, int i, uint64_t n)
{
    rs_bcast_stats_t s;
    uint64_t end = now_ms() + 5000;
    do {
        bt_stats(a, i, &s);
        if (s.copies_complete >= n)
            return;
        usleep(2000);
    } while (now_ms() < end);
    fail_msg("only %llu of %llu complete copies were announced",
             (unsigned long long)s.copies_complete, (unsigned long long)n);
}

void bt_quit(bt_agent_t *a)
{
    uint8_t msg[8];
    size_t len;
    int status = 0;
    send_cmd(a, CMD_QUIT, NULL, 0, NULL, 0);
    if (perf_blob_read(a->res_fd, msg, sizeof(msg), BT_WAIT_MS, &len) != 0)
        no_answer(a, "quit");
    close(a->cmd_fd);
    close(a->res_fd);
    assert_int_equal(waitpid(a->pid, &status, 0), a->pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

void bt_kill(bt_agent_t *a)
{
    int status;
    kill(a->pid, SIGKILL);
    waitpid(a->pid, &status, 0);
    close(a->cmd_fd);
    close(a->res_fd);
}
