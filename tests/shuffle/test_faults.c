/*
 * Shuffle failure semantics with real processes: a corrupted batch, repeated
 * batches, a worker killed under a pusher, and bad requests. The worker runs
 * in a child process; pushers and readers in this one.
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
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/worker.h>

#include "shuffle/proto.h"
#include "pusher/internal.h"
#include "rshuffled_child.h"

static pid_t worker_pid;
static char worker_addr[160];
static const char *addrs[1];
static const char *worker_env; /* one more "NAME=VALUE" for the next worker, or NULL */

/*
 * A worker: rshuffled, started as a program (fork + exec, so the worker
 * never inherits this process's fabric state: verbs does not survive a fork
 * of a process that used it) with its settings in RSHUFFLE_WORKER_*.
 * spill_dir, extent_min and high_water: 0/NULL for the defaults.
 */
static void start_worker_in(uint64_t mem, const char *spill_dir, uint64_t extent_min,
                            uint32_t high_water)
{
    char mem_s[32], dir_e[300], min_e[64], max_e[64], hw_e[48];
    const char *env[6] = {NULL};
    size_t n = 0;
    if (worker_env != NULL)
        env[n++] = worker_env;
    snprintf(mem_s, sizeof(mem_s), "%llu", (unsigned long long)mem);
    if (spill_dir != NULL) {
        snprintf(dir_e, sizeof(dir_e), "RSHUFFLE_WORKER_SPILL_DIR=%s", spill_dir);
        env[n++] = dir_e;
    }
    if (extent_min > 0) {
        snprintf(min_e, sizeof(min_e), "RSHUFFLE_WORKER_EXTENT_MIN=%llu",
                 (unsigned long long)extent_min);
        snprintf(max_e, sizeof(max_e), "RSHUFFLE_WORKER_EXTENT_MAX=%llu",
                 (unsigned long long)extent_min);
        env[n++] = min_e;
        env[n++] = max_e;
    }
    if (high_water > 0) {
        snprintf(hw_e, sizeof(hw_e), "RSHUFFLE_WORKER_HIGH_WATER=%u", high_water);
        env[n++] = hw_e;
    }
    const char *const args[] = {"--mem", mem_s, NULL};
    worker_pid = rsd_start(args, env, worker_addr, sizeof(worker_addr));
    addrs[0] = worker_addr;
}

static void start_worker(uint64_t mem)
{
    start_worker_in(mem, NULL, 0, 0);
}

/* SIGTERM, then SIGINT (no drain wait): the worker must shut down cleanly (exit status 0). */
static void stop_worker(void)
{
    if (worker_pid <= 0)
        return;
    kill(worker_pid, SIGTERM);
    kill(worker_pid, SIGINT);
    int st;
    pid_t pid = worker_pid;
    worker_pid = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static int teardown(void **state)
{
    (void)state;
    rsd_kill(&worker_pid);
    return 0;
}

static rs_shuffle_desc_t desc(uint32_t id, uint32_t parts)
{
    return (rs_shuffle_desc_t){
        .shuffle_id = id, .n_partitions = parts, .n_workers = 1, .workers = addrs};
}

static rs_pusher_config_t small_cfg(void)
{
    rs_pusher_config_t c;
    rs_pusher_config_defaults(&c);
    c.buf_len = 16 << 10;
    c.pool_bytes = 2 << 20;
    c.wait_ms = 10000;
    return c;
}

/* Pushes n 64-byte records over parts partitions; returns close's status. */
static rs_status_t push(uint32_t id, uint32_t parts, uint32_t map, uint32_t attempt, int fault,
                        int every, uint32_t n)
{
    rs_shuffle_desc_t d = desc(id, parts);
    rs_pusher_config_t c = small_cfg();
    rs_pusher_t *p;
    rs_status_t s = rs_pusher_open(&d, map, attempt, &c, &p);
    if (s != RS_OK)
        return s;
    if (fault) {
#ifdef RS_FAULT_INJECTION
        rs_push_fault(p, fault, every);
#else
        (void)every;
        fail_msg("this build has no fault-injection hooks");
#endif
    }
    uint8_t rec[64];
    for (uint32_t i = 0; i < n && s == RS_OK; i++) {
        memset(rec, (int)i, sizeof(rec));
        memcpy(rec, &i, 4);
        s = rs_pusher_append(p, i % parts, rec, sizeof(rec));
    }
    if (s == RS_OK)
        s = rs_pusher_close(p, NULL);
    rs_pusher_destroy(p);
    return s;
}

/* Records of the pressure tests: map, index, and bytes derived from both. */
static void pressure_record(uint32_t map, uint32_t i, uint8_t *rec, size_t len)
{
    uint32_t x = map * 2654435761u ^ i;
    for (size_t k = 0; k < len; k++) {
        x = x * 1103515245u + 12345u;
        rec[k] = (uint8_t)(x >> 16);
    }
    memcpy(rec, &map, 4);
    memcpy(rec + 4, &i, 4);
}

/* Reads one partition through a session and checks every record's bytes; counts them. */
static rs_status_t read_check(rs_reader_session_t *sess, uint32_t part, uint64_t *records)
{
    rs_reader_t *r;
    rs_status_t s = rs_reader_open_in(sess, part, &r);
    if (s != RS_OK)
        return s;
    const void *rec;
    uint32_t len;
    uint8_t want[256];
    while ((s = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL) {
        uint32_t map, i;
        assert_true(len >= 8 && len <= sizeof(want));
        memcpy(&map, rec, 4);
        memcpy(&i, (const uint8_t *)rec + 4, 4);
        pressure_record(map, i, want, len);
        assert_memory_equal(rec, want, len);
        (*records)++;
    }
    rs_reader_close(r);
    return s;
}

/* Reads every partition; returns the status and the records and duplicates seen. */
static rs_status_t read_all(uint32_t id, uint32_t parts, uint32_t attempt, uint64_t *records,
                            uint64_t *dups)
{
    rs_shuffle_desc_t d = desc(id, parts);
    *records = *dups = 0;
    for (uint32_t part = 0; part < parts; part++) {
        rs_reader_t *r;
        rs_status_t s = rs_reader_open(&d, part, 1, &attempt, NULL, &r);
        if (s != RS_OK)
            return s;
        const void *rec;
        uint32_t len;
        while ((s = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL)
            (*records)++;
        rs_reader_stats_t st;
        rs_reader_stats(r, &st);
        *dups += st.duplicates;
        rs_reader_close(r);
        if (s != RS_OK)
            return s;
    }
    return RS_OK;
}

#ifdef RS_FAULT_INJECTION
static void test_corrupted_batch(void **state)
{
    (void)state;
    alarm(60);
    /* Checksums checked on arrival too (RSHUFFLE_WORKER_VERIFY=1). */
    worker_env = "RSHUFFLE_WORKER_VERIFY=1";
    start_worker(64 << 20);
    worker_env = NULL;
    /* Damaged after its checksum: the worker refuses it and the commit fails clearly. */
    assert_int_equal(push(1, 4, 0, 0, RS_FAULT_CORRUPT, 5, 5000), RS_ERR_CHECKSUM);
    /* A checksummed batch numbered past RS_SEQ_MAX is refused, the worker unharmed. */
    assert_int_equal(push(1, 4, 0, 2, RS_FAULT_HUGE_SEQ, 1, 100), RS_ERR_PROTOCOL);
    /* Nothing else disturbed: a clean attempt of the same map commits and reads back. */
    assert_int_equal(push(1, 4, 0, 1, 0, 0, 5000), RS_OK);
    uint64_t records, dups;
    assert_int_equal(read_all(1, 4, 1, &records, &dups), RS_OK);
    assert_int_equal(records, 5000);
    stop_worker();

    /* The default: the worker checks headers only, stores it, and the reader refuses it. */
    start_worker(64 << 20);
    assert_int_equal(push(1, 4, 0, 0, RS_FAULT_CORRUPT, 5, 5000), RS_OK);
    assert_int_equal(read_all(1, 4, 0, &records, &dups), RS_ERR_CHECKSUM);
    /* A header's identity is still checked on arrival. */
    assert_int_equal(push(1, 4, 0, 2, RS_FAULT_HUGE_SEQ, 1, 100), RS_ERR_PROTOCOL);
    assert_int_equal(push(1, 4, 0, 1, 0, 0, 5000), RS_OK);
    assert_int_equal(read_all(1, 4, 1, &records, &dups), RS_OK);
    assert_int_equal(records, 5000);
    stop_worker();
}
#endif

#ifdef RS_FAULT_INJECTION
static void test_duplicates_dropped(void **state)
{
    (void)state;
    alarm(60);
    start_worker(64 << 20);
    /* Every third batch is sent twice (a retry): readers drop the repeats. */
    assert_int_equal(push(2, 3, 0, 0, RS_FAULT_DUPLICATE, 3, 20000), RS_OK);
    /* A speculative attempt of the same map also commits; it loses. */
    assert_int_equal(push(2, 3, 0, 1, 0, 0, 7000), RS_OK);
    uint64_t records, dups;
    assert_int_equal(read_all(2, 3, 0, &records, &dups), RS_OK);
    assert_int_equal(records, 20000);
    assert_true(dups > 0);
    assert_int_equal(read_all(2, 3, 1, &records, &dups), RS_OK);
    assert_int_equal(records, 7000);
    assert_int_equal(dups, 0);
    stop_worker();
}
#endif

static void test_worker_killed(void **state)
{
    (void)state;
    alarm(60);
    start_worker(64 << 20);
    rs_config_t tc;
    assert_int_equal(rs_config_init(&tc), RS_OK);
    tc.peer_timeout_ms = 1000;
    rs_pusher_config_t c = small_cfg();
    c.transport = &tc;
    c.wait_ms = 5000;
    rs_shuffle_desc_t d = desc(3, 2);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 0, 0, &c, &p), RS_OK);
    uint8_t rec[64] = {0};
    for (int i = 0; i < 1000; i++)
        assert_int_equal(rs_pusher_append(p, (uint32_t)i % 2, rec, sizeof(rec)), RS_OK);
    kill(worker_pid, SIGKILL);
    waitpid(worker_pid, NULL, 0);
    worker_pid = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rs_status_t s = RS_OK;
    for (int i = 0; i < 200000 && s == RS_OK; i++)
        s = rs_pusher_append(p, (uint32_t)i % 2, rec, sizeof(rec));
    if (s == RS_OK)
        s = rs_pusher_close(p, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(s == RS_ERR_UNREACHABLE || s == RS_ERR_TIMEOUT);
    assert_true(secs < 8.0); /* within peer_timeout plus the close bound */
    rs_pusher_destroy(p);
}

static void never_called(void *arg, rs_status_t status)
{
    (void)arg;
    (void)status;
    fail_msg("a refused operation completed");
}

typedef struct attach_answer {
    int got;
    rs_smsg_attach_reply_t r;
    uint8_t rkey[RS_RKEY_BLOB_MAX];
    size_t rkey_len;
} attach_answer_t;

static void on_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    attach_answer_t *a = arg;
    assert_int_equal(rs_sproto_attach_reply_decode(data, len, &a->r), RS_OK);
    a->rkey_len = a->r.rkey_len; /* a refusal is the header alone: no key */
    if (a->rkey_len > 0)
        memcpy(a->rkey, a->r.rkey, a->rkey_len);
    a->got = 1;
}

static void test_bad_requests(void **state)
{
    (void)state;
    alarm(60);
    start_worker(16 << 20);
    assert_int_equal(push(4, 4, 0, 0, 0, 0, 1000), RS_OK);
    uint64_t records, dups;
    uint32_t attempt = 0;
    rs_reader_t *r;
    /* Unknown shuffle; a reader that says another partition count than the pushers'. */
    rs_shuffle_desc_t d = desc(99, 4);
    assert_int_equal(rs_reader_open(&d, 0, 1, &attempt, NULL, &r), RS_ERR_NOT_FOUND);
    d = desc(4, 8);
    assert_int_equal(rs_reader_open(&d, 6, 1, &attempt, NULL, &r), RS_ERR_INVALID);
    assert_int_equal(rs_reader_open(&d, 0, 1, &attempt, NULL, &r), RS_ERR_INVALID);
    /* A map attempt that never committed. */
    attempt = 5;
    d = desc(4, 4);
    assert_int_equal(rs_reader_open(&d, 0, 1, &attempt, NULL, &r), RS_ERR_STATE);
    /* A pusher that disagrees on the partition count. */
    assert_int_equal(push(4, 5, 1, 0, 0, 0, 10), RS_ERR_INVALID);
    /* The wrong job token. */
    rs_config_t tc;
    assert_int_equal(rs_config_init(&tc), RS_OK);
    strcpy(tc.job_token, "another-job");
    rs_reader_config_t rc;
    rs_reader_config_defaults(&rc);
    rc.transport = &tc;
    attempt = 0;
    assert_int_equal(rs_reader_open(&d, 0, 1, &attempt, &rc, &r), RS_ERR_AUTH);
    /* A read past the worker's arena is refused before anything is sent. */
    rs_ctx_t *ctx;
    assert_int_equal(rs_ctx_create(NULL, &ctx), RS_OK);
    attach_answer_t ans = {0};
    rs_set_msg_handler(ctx, RS_SMSG_ATTACH_REPLY, on_reply, &ans);
    char h[sizeof(worker_addr)];
    snprintf(h, sizeof(h), "%s", worker_addr);
    *strrchr(h, ':') = '\0';
    rs_ep_t *ep;
    assert_int_equal(rs_connect(ctx, h, (uint16_t)atoi(strrchr(worker_addr, ':') + 1), &ep), RS_OK);
    rs_smsg_attach_t a = {.status = RS_OK, .role = RS_ROLE_READER, .shuffle_id = 4};
    uint8_t abuf[RS_SPROTO_ATTACH_LEN];
    size_t alen;
    assert_int_equal(rs_sproto_attach_encode(&a, abuf, sizeof(abuf), &alen), RS_OK);
    assert_int_equal(rs_msg_send(ep, RS_SMSG_ATTACH, abuf, alen, NULL, NULL), RS_OK);
    for (int i = 0; i < 500 && !ans.got; i++)
        rs_wait(ctx, 10);
    assert_true(ans.got);
    assert_int_equal(ans.r.status, RS_OK);
    assert_int_equal(ans.r.arena_len, 16 << 20);
    rs_rkey_t *rkey;
    assert_int_equal(rs_rkey_unpack(ep, ans.rkey, ans.rkey_len, &rkey), RS_OK);
    rs_mr_t *mr;
    assert_int_equal(rs_mem_alloc(ctx, 8192, RS_MEM_LOCAL, &mr), RS_OK);
    assert_int_equal(
        rs_get(ep, rs_mr_addr(mr), 8192, mr, rkey, ans.r.arena_len - 4096, never_called, NULL),
        RS_ERR_OUT_OF_RANGE);
    /* An attach with an unknown role, then a second attach: refused, the endpoint stays usable. */
    ans.got = 0;
    a.role = 7; /* the encoder writes what it is given; the worker's decoder refuses it */
    assert_int_equal(rs_sproto_attach_encode(&a, abuf, sizeof(abuf), &alen), RS_OK);
    assert_int_equal(rs_msg_send(ep, RS_SMSG_ATTACH, abuf, alen, NULL, NULL), RS_OK);
    for (int i = 0; i < 500 && !ans.got; i++)
        rs_wait(ctx, 10);
    assert_true(ans.got);
    assert_int_equal(ans.r.status, RS_ERR_PROTOCOL);
    rs_rkey_destroy(rkey);
    rs_ep_close(ep);
    rs_mem_free(mr);
    rs_ctx_destroy(ctx);
    /* Nothing else disturbed: the shuffle still reads back whole. */
    assert_int_equal(read_all(4, 4, 0, &records, &dups), RS_OK);
    assert_int_equal(records, 1000);
    stop_worker();
}

/*
 * A worker spills while a reader holds a partition open: the batches the
 * reader was told about stay where they are until it closes (deterministic
 * version of the old spill/read race, over real processes).
 */
static void test_spill_under_open_reader(void **state)
{
    (void)state;
    alarm(90);
    start_worker(8 << 20);
    rs_shuffle_desc_t da = desc(11, 4), db = desc(12, 4);
    rs_pusher_config_t c = small_cfg();
    rs_pusher_t *p;
    uint8_t rec[200];
    /* Shuffle A: ~2 MiB, all in memory. */
    assert_int_equal(rs_pusher_open(&da, 0, 0, &c, &p), RS_OK);
    for (uint32_t i = 0; i < 10000; i++) {
        pressure_record(0, i, rec, sizeof(rec));
        assert_int_equal(rs_pusher_append(p, i % 4, rec, sizeof(rec)), RS_OK);
    }
    assert_int_equal(rs_pusher_close(p, NULL), RS_OK);
    rs_pusher_destroy(p);
    uint32_t attempt = 0;
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&da, 1, &attempt, NULL, &sess), RS_OK);
    rs_reader_t *r;
    assert_int_equal(rs_reader_open_in(sess, 0, &r), RS_OK);
    /* Shuffle B: 24 MiB through the 8 MiB worker: everything unpinned spills, A's too. */
    assert_int_equal(rs_pusher_open(&db, 0, 0, &c, &p), RS_OK);
    for (uint32_t i = 0; i < 120000; i++) {
        pressure_record(1, i, rec, sizeof(rec));
        assert_int_equal(rs_pusher_append(p, i % 4, rec, sizeof(rec)), RS_OK);
    }
    assert_int_equal(rs_pusher_close(p, NULL), RS_OK);
    rs_pusher_destroy(p);
    /* The open reader's partition reads back whole and intact. */
    uint64_t records = 0;
    const void *rv;
    uint32_t len;
    rs_status_t s;
    while ((s = rs_reader_next(r, &rv, &len)) == RS_OK && rv != NULL) {
        uint32_t map, i;
        uint8_t want[200];
        memcpy(&map, rv, 4);
        memcpy(&i, (const uint8_t *)rv + 4, 4);
        pressure_record(map, i, want, sizeof(want));
        assert_int_equal(len, sizeof(want));
        assert_memory_equal(rv, want, len);
        records++;
    }
    assert_int_equal(s, RS_OK);
    assert_int_equal(records, 2500);
    rs_reader_close(r);
    /* The rest of A (spilled by now) and all of B read back too, in the same session. */
    for (uint32_t part = 1; part < 4; part++)
        assert_int_equal(read_check(sess, part, &records), RS_OK);
    assert_int_equal(records, 10000);
    rs_reader_session_close(sess);
    assert_int_equal(rs_reader_session_open(&db, 1, &attempt, NULL, &sess), RS_OK);
    records = 0;
    for (uint32_t part = 0; part < 4; part++)
        assert_int_equal(read_check(sess, part, &records), RS_OK);
    assert_int_equal(records, 120000);
    rs_reader_session_close(sess);
    stop_worker();
}

/*
 * A small worker whose memory another pusher took with bulk grants and
 * 1 MiB extents, then left idle: the busy pusher still gets through (idle
 * room is budgeted, unused extent tails are trimmed, everything else
 * spills), and everything reads back.
 */
static void test_idle_grants_reclaimed(void **state)
{
    (void)state;
    alarm(90);
    start_worker_in(8 << 20, NULL, 1 << 20, 100);
    rs_shuffle_desc_t d = desc(13, 16);
    rs_pusher_config_t c = small_cfg();
    c.pool_bytes = 1 << 20;   /* 16 KiB buffers count as whole ones: bulk grants */
    c.backpressure_ms = 3000; /* failing would be quick and clear */
    rs_pusher_t *idle, *busy;
    assert_int_equal(rs_pusher_open(&d, 0, 0, &c, &idle), RS_OK);
    uint32_t n_idle = 0;
    uint8_t rec[100];
    for (uint32_t part = 0; part < 8; part++) {
        rs_pbuf_t *b;
        assert_int_equal(rs_pusher_buf_get(idle, c.buf_len, &b), RS_OK);
        size_t used = 0;
        while (used + rs_record_size(sizeof(rec)) <= b->len) {
            pressure_record(0, n_idle++, rec, sizeof(rec));
            used += rs_record_put(b->data + used, rec, sizeof(rec));
        }
        rs_pbuf_t *fresh;
        assert_int_equal(rs_pusher_swap(idle, part, b, used, &fresh), RS_OK);
        rs_pusher_buf_put(idle, fresh);
    }
    /* The busy pusher pushes three times the worker's memory into the other partitions. */
    rs_pusher_config_t cb = small_cfg();
    cb.backpressure_ms = 3000;
    assert_int_equal(rs_pusher_open(&d, 1, 0, &cb, &busy), RS_OK);
    uint32_t n_busy = 120000;
    for (uint32_t i = 0; i < n_busy; i++) {
        pressure_record(1, i, rec, sizeof(rec));
        assert_int_equal(rs_pusher_append(busy, 8 + i % 8, rec, sizeof(rec)), RS_OK);
    }
    rs_pusher_stats_t st;
    assert_int_equal(rs_pusher_close(busy, &st), RS_OK);
    rs_pusher_destroy(busy);
    assert_int_equal(rs_pusher_close(idle, &st), RS_OK);
    rs_pusher_destroy(idle);
    uint32_t attempts[2] = {0, 0};
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&d, 2, attempts, NULL, &sess), RS_OK);
    uint64_t records = 0;
    for (uint32_t part = 0; part < 16; part++)
        assert_int_equal(read_check(sess, part, &records), RS_OK);
    assert_int_equal(records, (uint64_t)n_idle + n_busy);
    rs_reader_session_close(sess);
    stop_worker();
}

/* A pusher speaking the protocol by hand: grants it never writes into. */
typedef struct raw_pusher {
    rs_ctx_t *ctx;
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    int attached, got, reclaims, nacks;
    rs_status_t nack_status;
    uint8_t reply[8192];
    size_t reply_len;
} raw_pusher_t;

static void raw_on_msg(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    raw_pusher_t *r = arg;
    rs_smsg_t m;
    assert_true(len >= 4 && len <= sizeof(r->reply));
    unsigned type = (unsigned)((const uint8_t *)data)[2] | (unsigned)((const uint8_t *)data)[3]
                                                               << 8;
    assert_int_equal(rs_sproto_decode(data, len, type, &m), RS_OK);
    if (type == RS_SMSG_ATTACH_REPLY) {
        assert_int_equal(m.status, RS_OK);
        assert_int_equal(
            rs_rkey_unpack(r->ep, m.u.attach_reply.rkey, m.u.attach_reply.rkey_len, &r->rkey),
            RS_OK);
        r->attached = 1;
    } else if (type == RS_SMSG_NACK) {
        r->nacks++;
        r->nack_status = m.status;
    } else if (type == RS_SMSG_RECLAIM) {
        r->reclaims++;
    } else if (type == RS_SMSG_GRANT) {
        memcpy(r->reply, data, len);
        r->reply_len = len;
        r->got = 1;
    }
}

static void raw_open(raw_pusher_t *r, uint32_t shuffle, uint32_t parts, uint32_t map)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(rs_ctx_create(NULL, &r->ctx), RS_OK);
    const unsigned types[] = {RS_SMSG_ATTACH_REPLY, RS_SMSG_GRANT, RS_SMSG_RECLAIM, RS_SMSG_NACK};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(rs_set_msg_handler(r->ctx, types[i], raw_on_msg, r), RS_OK);
    char h[sizeof(worker_addr)];
    snprintf(h, sizeof(h), "%s", worker_addr);
    *strrchr(h, ':') = '\0';
    assert_int_equal(rs_connect(r->ctx, h, (uint16_t)atoi(strrchr(worker_addr, ':') + 1), &r->ep),
                     RS_OK);
    rs_smsg_attach_t a = {.status = RS_OK,
                          .role = RS_ROLE_PUSHER,
                          .shuffle_id = shuffle,
                          .n_partitions = parts,
                          .map_id = map};
    uint8_t abuf[RS_SPROTO_ATTACH_LEN];
    size_t alen;
    assert_int_equal(rs_sproto_attach_encode(&a, abuf, sizeof(abuf), &alen), RS_OK);
    assert_int_equal(rs_msg_send(r->ep, RS_SMSG_ATTACH, abuf, alen, NULL, NULL), RS_OK);
    for (int i = 0; i < 500 && !r->attached; i++)
        rs_wait(r->ctx, 10);
    assert_true(r->attached);
}

/* One grant request of one entry; returns the worker's answer for it. */
static rs_grant_t raw_grant(raw_pusher_t *r, rs_grant_want_t want)
{
    uint8_t buf[RS_SPROTO_GRANT_REQ_LEN + RS_SPROTO_GRANT_WANT_LEN];
    rs_smsg_grant_req_t m = {.status = RS_OK, .req_id = 1, .n = 1};
    size_t len;
    assert_int_equal(rs_sproto_grant_want_put(buf, sizeof(buf), 0, &want), RS_OK);
    assert_int_equal(rs_sproto_grant_req_encode(&m, buf, sizeof(buf), &len), RS_OK);
    r->got = 0;
    assert_int_equal(rs_msg_send(r->ep, RS_SMSG_GRANT_REQ, buf, len, NULL, NULL), RS_OK);
    for (int i = 0; i < 500 && !r->got; i++)
        rs_wait(r->ctx, 10);
    assert_true(r->got);
    rs_smsg_grant_t h;
    assert_int_equal(rs_sproto_grant_decode(r->reply, r->reply_len, &h), RS_OK);
    assert_int_equal(h.status, RS_OK);
    assert_int_equal(h.n, 1);
    return rs_sproto_grant_get(&h, 0);
}

static void raw_close(raw_pusher_t *r)
{
    rs_rkey_destroy(r->rkey);
    rs_ep_close(r->ep);
    rs_ctx_destroy(r->ctx);
}

/*
 * When a request cannot be served, the worker asks every pusher holding
 * grants to give back what it does not use (RECLAIM); their retires free the
 * memory and the next request is served. Spoken by hand so the pushers'
 * grants stay unused for sure.
 */
static void test_reclaim_protocol(void **state)
{
    (void)state;
    alarm(60);
    start_worker(4 << 20);
    raw_pusher_t a, b;
    raw_open(&a, 16, 64, 0);
    raw_open(&b, 16, 64, 1);
    /* A takes bulk grants (room for more batches) in four partitions and goes quiet. */
    rs_grant_t ag[4];
    for (uint32_t p = 0; p < 4; p++) {
        ag[p] = raw_grant(&a, (rs_grant_want_t){.partition = p,
                                                .flags = RS_GRANT_BULK,
                                                .want = 64 << 10,
                                                .retire_slot = RS_SLOT_NONE});
        assert_int_equal(ag[p].status, RS_OK);
        assert_true(p > 0 || ag[p].len > (64 << 10)); /* bulk room, within the worker's budget */
    }
    /* B asks for space it needs (and holds it) until the worker is full. */
    rs_grant_t g;
    uint32_t p = 4;
    do {
        g = raw_grant(&b, (rs_grant_want_t){
                              .partition = p++, .want = 256 << 10, .retire_slot = RS_SLOT_NONE});
    } while (g.status == RS_OK && p < 64);
    assert_int_equal(g.status, RS_ERR_BACKPRESSURE);
    /* Both were asked to give back what they do not use. */
    for (int i = 0; i < 200 && (a.reclaims == 0 || b.reclaims == 0); i++) {
        rs_wait(a.ctx, 5);
        rs_wait(b.ctx, 5);
    }
    assert_int_equal(a.reclaims, 1);
    assert_int_equal(b.reclaims, 1);
    /* A retires its grants unused; then B's request is served. */
    for (uint32_t q = 0; q < 4; q++) {
        rs_grant_t r = raw_grant(
            &a, (rs_grant_want_t){.partition = q, .retire_slot = ag[q].slot, .retire_used = 0});
        assert_int_equal(r.status, RS_OK);
        assert_int_equal(r.len, 0);
    }
    g = raw_grant(
        &b, (rs_grant_want_t){.partition = p, .want = 256 << 10, .retire_slot = RS_SLOT_NONE});
    assert_int_equal(g.status, RS_OK);
    raw_close(&a);
    raw_close(&b);
    stop_worker();
}

typedef struct put_done {
    int done;
    rs_status_t status;
} put_done_t;

static void on_put(void *arg, rs_status_t status)
{
    put_done_t *d = arg;
    d->status = status;
    d->done = 1;
}

/* A notified put of len bytes of buf at roff with imm; waits for the worker's NACK. */
static void raw_bad_put(raw_pusher_t *r, rs_mr_t *mr, uint64_t roff, uint32_t imm,
                        rs_status_t expect)
{
    put_done_t d = {0};
    int nacks = r->nacks;
    assert_int_equal(rs_put_notify(r->ep, rs_mr_addr(mr), 4096, mr, r->rkey, roff, imm, on_put, &d),
                     RS_OK);
    for (int i = 0; i < 500 && (!d.done || r->nacks == nacks); i++)
        rs_wait(r->ctx, 10);
    assert_true(d.done);
    assert_int_equal(d.status, RS_OK);
    assert_int_equal(r->nacks, nacks + 1);
    assert_int_equal(r->nack_status, expect);
}

/*
 * Bad batches and grant requests from a pusher: a notification outside any
 * grant, bytes that are not a frame, a frame of another partition, a retire
 * of a grant that is not open, a grant for a partition that does not exist.
 * Each is refused (NACK or error entry) and nothing else is disturbed.
 */
static void test_bad_batches(void **state)
{
    (void)state;
    alarm(60);
    start_worker(16 << 20);
    raw_pusher_t r;
    raw_open(&r, 17, 4, 0);
    rs_grant_t g =
        raw_grant(&r, (rs_grant_want_t){.partition = 0, .want = 8192, .retire_slot = RS_SLOT_NONE});
    assert_int_equal(g.status, RS_OK);
    rs_mr_t *mr;
    assert_int_equal(rs_mem_alloc(r.ctx, 4096, RS_MEM_LOCAL, &mr), RS_OK);
    memset(rs_mr_addr(mr), 0xab, 4096);
    /* No grant in slot 999; a grant's slot but an offset past it; garbage in the grant. */
    raw_bad_put(&r, mr, g.off, rs_imm_make(999, 0), RS_ERR_OUT_OF_RANGE);
    raw_bad_put(&r, mr, g.off, rs_imm_make(g.slot, g.len), RS_ERR_OUT_OF_RANGE);
    raw_bad_put(&r, mr, g.off, rs_imm_make(g.slot, 0), RS_ERR_BAD_MAGIC);
    /* A well-formed frame that claims partition 1, in partition 0's grant. */
    rs_frame_ids_t ids = {.shuffle_id = 17, .map_id = 0, .attempt = 0, .partition = 1, .seq = 1};
    size_t flen;
    assert_int_equal(rs_frame_seal(rs_mr_addr(mr), 4096, 1024, 0, &ids, &flen), RS_OK);
    raw_bad_put(&r, mr, g.off + 4096, rs_imm_make(g.slot, 4096), RS_ERR_PROTOCOL);
    /* A retire of a slot that is not open, a partition that does not exist. */
    rs_grant_t x = raw_grant(&r, (rs_grant_want_t){.partition = 2, .retire_slot = 1234});
    assert_int_equal(x.status, RS_OK);
    x = raw_grant(&r, (rs_grant_want_t){.partition = 9, .want = 4096, .retire_slot = RS_SLOT_NONE});
    assert_int_equal(x.status, RS_ERR_NOT_FOUND);
    rs_mem_free(mr);
    raw_close(&r);
    /* Nothing else disturbed: a real pusher's map commits and reads back. */
    assert_int_equal(push(17, 4, 0, 1, 0, 0, 3000), RS_OK);
    uint64_t records, dups;
    assert_int_equal(read_all(17, 4, 1, &records, &dups), RS_OK);
    assert_int_equal(records, 3000);
    stop_worker();
}

/*
 * Truly full (spilling impossible): the pusher is told so (the spill
 * failed: RS_ERR_IO, not backpressure) and fails clearly within its bound;
 * dropping the shuffle frees the worker.
 */
static void test_backpressure_when_full(void **state)
{
    (void)state;
    alarm(60);
    /* A spill directory that goes away after start (a missing one is refused at start). */
    char spill[] = "/tmp/rshuffle-test-gone-XXXXXX";
    assert_non_null(mkdtemp(spill));
    start_worker_in(4 << 20, spill, 0, 0);
    assert_int_equal(rmdir(spill), 0);
    rs_shuffle_desc_t d = desc(14, 4);
    rs_pusher_config_t c = small_cfg();
    c.backpressure_ms = 1000;
    c.wait_ms = 5000;
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 0, 0, &c, &p), RS_OK);
    uint8_t rec[100] = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rs_status_t s = RS_OK;
    for (uint32_t i = 0; i < 200000 && s == RS_OK; i++)
        s = rs_pusher_append(p, i % 4, rec, sizeof(rec));
    if (s == RS_OK)
        s = rs_pusher_close(p, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    rs_pusher_destroy(p);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_int_equal(s, RS_ERR_IO); /* the spill failed: waiting for memory would not help */
    assert_true(secs < 8.0);
    /* Nothing else disturbed: once the full shuffle is dropped, another one works. */
    assert_int_equal(rs_shuffle_drop(&d, NULL), RS_OK);
    assert_int_equal(push(15, 4, 0, 0, 0, 0, 5000), RS_OK);
    uint64_t records, dups;
    assert_int_equal(read_all(15, 4, 0, &records, &dups), RS_OK);
    assert_int_equal(records, 5000);
    stop_worker();
}

/* A shuffle dropped while a pusher is still attached stays alive until that pusher is gone. */
static void test_drop_while_pushing(void **state)
{
    (void)state;
    alarm(60);
    start_worker(64 << 20);
    rs_shuffle_desc_t d = desc(16, 4);
    rs_pusher_config_t c = small_cfg();
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 0, 0, &c, &p), RS_OK);
    uint8_t rec[100] = {0};
    rs_status_t s = RS_OK;
    for (uint32_t i = 0; i < 2000 && s == RS_OK; i++)
        s = rs_pusher_append(p, i % 4, rec, sizeof(rec));
    assert_int_equal(s, RS_OK);
    assert_int_equal(rs_shuffle_drop(&d, NULL), RS_OK);
    for (uint32_t i = 0; i < 2000 && s == RS_OK; i++)
        s = rs_pusher_append(p, i % 4, rec, sizeof(rec));
    if (s == RS_OK)
        s = rs_pusher_close(p, NULL);
    rs_pusher_destroy(p); /* the worker releases the dropped shuffle's grants now */
    assert_int_equal(s, RS_ERR_NOT_FOUND);
    /* Nothing else disturbed, and the worker exits cleanly (no use of freed memory). */
    assert_int_equal(push(17, 4, 0, 0, 0, 0, 5000), RS_OK);
    uint64_t records, dups;
    assert_int_equal(read_all(17, 4, 0, &records, &dups), RS_OK);
    assert_int_equal(records, 5000);
    stop_worker();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef RS_FAULT_INJECTION /* the library's hooks damage and repeat batches */
        cmocka_unit_test_teardown(test_corrupted_batch, teardown),
        cmocka_unit_test_teardown(test_duplicates_dropped, teardown),
#endif
        cmocka_unit_test_teardown(test_worker_killed, teardown),
        cmocka_unit_test_teardown(test_bad_requests, teardown),
        cmocka_unit_test_teardown(test_spill_under_open_reader, teardown),
        cmocka_unit_test_teardown(test_idle_grants_reclaimed, teardown),
        cmocka_unit_test_teardown(test_reclaim_protocol, teardown),
        cmocka_unit_test_teardown(test_bad_batches, teardown),
        cmocka_unit_test_teardown(test_backpressure_when_full, teardown),
        cmocka_unit_test_teardown(test_drop_while_pushing, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
