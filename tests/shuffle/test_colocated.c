/*
 * The co-located layout: one process runs a worker, pushes into it and
 * reads its partitions back. Partitions of the process's own worker are read
 * in place (the reader's stats: no one-sided read, every batch local), the
 * others through the transport as always; every record is checked, once.
 * Also: spilled batches staged by the local worker, a batch corrupted on the
 * way (caught by the reader now that the worker checks only headers), and
 * two processes each holding half the partitions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/worker.h>

#include "pusher/internal.h"
#include "tests/records.h"

#define MAX_WORKERS 2
#define MAX_MAPS    2

/* One process's view of a shuffle: its worker and the shuffle's worker addresses. */
typedef struct colo {
    rs_worker_t *worker;
    char addr[MAX_WORKERS][RS_SHUFFLE_ADDR_MAX];
    const char *addrs[MAX_WORKERS];
    rs_shuffle_desc_t desc;
    uint32_t n_maps, n_records; /* records per map */
    uint8_t *seen;              /* [map][record] */
} colo_t;

/* The records c pushed, as the checks see them. */
static trec_grid_t grid(const colo_t *c)
{
    return (trec_grid_t){.n_maps = c->n_maps,
                         .n_records = c->n_records,
                         .n_partitions = c->desc.n_partitions,
                         .seen = c->seen};
}

static rs_status_t worker_start(colo_t *c, uint32_t self, uint64_t mem)
{
    rs_worker_config_t wc;
    rs_worker_config_defaults(&wc);
    wc.mem_limit = mem;
    wc.extent_max = 256 << 10;
    rs_status_t s = rs_worker_create(NULL, &wc, &c->worker);
    if (s == RS_OK)
        s = rs_worker_listen(c->worker, "127.0.0.1", 0);
    if (s == RS_OK)
        snprintf(c->addr[self], sizeof(c->addr[self]), "127.0.0.1:%u", rs_worker_port(c->worker));
    return s;
}

static void colo_desc(colo_t *c, uint32_t id, uint32_t parts, uint32_t n_workers, uint32_t n_maps,
                      uint32_t n_records)
{
    for (uint32_t w = 0; w < n_workers; w++)
        c->addrs[w] = c->addr[w];
    c->desc = (rs_shuffle_desc_t){
        .shuffle_id = id, .n_partitions = parts, .n_workers = n_workers, .workers = c->addrs};
    c->n_maps = n_maps;
    c->n_records = n_records;
    free(c->seen);
    c->seen = calloc((size_t)n_maps * n_records, 1);
}

static rs_status_t push_map(colo_t *c, uint32_t map, rs_codec_t codec, int fault)
{
    rs_pusher_config_t pc;
    rs_pusher_config_defaults(&pc);
    pc.codec = codec;
    pc.buf_len = 32 << 10;
    pc.wait_ms = 20000;
    rs_pusher_t *p;
    rs_status_t s = rs_pusher_open(&c->desc, map, 0, &pc, &p);
    if (s != RS_OK)
        return s;
#ifdef RS_FAULT_INJECTION
    if (fault)
        rs_push_fault(p, fault, 7);
#else
    assert_int_equal(fault, 0); /* only test builds have the hooks */
#endif
    trec_grid_t g = grid(c);
    s = trec_push(p, &g, map);
    rs_pusher_destroy(p);
    return s;
}

/*
 * Reads partition part and checks every record (trec_read_part); adds the
 * reader's stats to *st. Returns 0, or a line number naming the failed
 * check (usable in a child process, where cmocka's asserts are not).
 */
static int read_part(colo_t *c, rs_reader_session_t *sess, uint32_t part, rs_status_t *status,
                     rs_reader_stats_t *st)
{
    trec_grid_t g = grid(c);
    rs_reader_stats_t rs = {0};
    int line = trec_read_part(&g, sess, part, status, &rs);
    trec_stats_add(st, &rs);
    return line;
}

/* Every record of every map seen exactly once? */
static int all_seen(const colo_t *c)
{
    trec_grid_t g = grid(c);
    return trec_all_seen(&g);
}

static rs_reader_session_t *session(colo_t *c, int local_reads)
{
    static const uint32_t attempts[MAX_MAPS] = {0};
    rs_reader_config_t rc;
    rs_reader_config_defaults(&rc);
    rc.local_reads = local_reads;
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&c->desc, c->n_maps, attempts, &rc, &sess), RS_OK);
    return sess;
}

/* Reads every partition with local reads on or off; returns the summed stats. */
static rs_reader_stats_t read_all(colo_t *c, int local_reads)
{
    memset(c->seen, 0, (size_t)c->n_maps * c->n_records);
    rs_reader_session_t *sess = session(c, local_reads);
    rs_reader_stats_t st = {0};
    for (uint32_t p = 0; p < c->desc.n_partitions; p++) {
        rs_status_t s;
        int line = read_part(c, sess, p, &s, &st);
        if (line != 0)
            fail_msg("partition %u: check at line %d failed (%s)", p, line, rs_strerror(s));
    }
    rs_reader_session_close(sess);
    assert_true(all_seen(c));
    return st;
}

static void test_local_in_place(void **state)
{
    (void)state;
    alarm(90);
    colo_t c = {0};
    assert_int_equal(worker_start(&c, 0, 64 << 20), RS_OK);
    rs_codec_t codecs[] = {RS_CODEC_NONE, RS_CODEC_LZ4};
    for (uint32_t k = 0; k < 2; k++) {
        colo_desc(&c, 1 + k, 8, 1, 2, 20000);
        assert_int_equal(push_map(&c, 0, codecs[k], 0), RS_OK);
        assert_int_equal(push_map(&c, 1, codecs[k], 0), RS_OK);
        /* In place: not one read, every batch and byte handed out of the worker's arena. */
        rs_reader_stats_t st = read_all(&c, 1);
        assert_int_equal(st.records, 40000);
        assert_true(st.batches > 8);
        assert_int_equal(st.reads, 0);
        assert_int_equal(st.local_batches, st.batches);
        assert_int_equal(st.zero_copy_bytes, st.bytes);
        /* The same partitions copied through the transport (RSHUFFLE_READ_LOCAL=0). */
        rs_reader_stats_t cp = read_all(&c, 0);
        assert_int_equal(cp.records, 40000);
        assert_int_equal(cp.batches, st.batches);
        assert_int_equal(cp.bytes, st.bytes);
        assert_true(cp.reads >= 8);
        assert_int_equal(cp.local_batches, 0);
        assert_int_equal(cp.zero_copy_bytes, 0);
    }
    rs_worker_destroy(c.worker);
    free(c.seen);
}

/* A worker far below the data spills; the batches it stages are read in place too. */
static void test_local_spilled(void **state)
{
    (void)state;
    alarm(90);
    colo_t c = {0};
    assert_int_equal(worker_start(&c, 0, 4 << 20), RS_OK);
    colo_desc(&c, 7, 4, 1, 2, 60000); /* ~8.4 MiB of frames into a 4 MiB arena */
    assert_int_equal(push_map(&c, 0, RS_CODEC_NONE, 0), RS_OK);
    assert_int_equal(push_map(&c, 1, RS_CODEC_NONE, 0), RS_OK);
    rs_worker_stats_t ws;
    rs_worker_stats(c.worker, &ws);
    assert_true(ws.spilled_bytes > 0);
    assert_int_equal(ws.stray_retires, 0); /* no retire after a commit (which retires all) */
    rs_reader_stats_t st = read_all(&c, 1);
    assert_int_equal(st.records, 120000);
    assert_true(st.spill_loads > 0);
    assert_int_equal(st.reads, 0);
    assert_int_equal(st.local_batches, st.batches);
    assert_int_equal(st.zero_copy_bytes, st.bytes);
    rs_worker_destroy(c.worker);
    free(c.seen);
}

#ifdef RS_FAULT_INJECTION
/*
 * A batch damaged after its checksum: the worker (header checks only, the
 * default) stores it, and the reader, verifying in place, refuses it.
 */
static void test_local_corrupt(void **state)
{
    (void)state;
    alarm(60);
    colo_t c = {0};
    assert_int_equal(worker_start(&c, 0, 64 << 20), RS_OK);
    colo_desc(&c, 9, 4, 1, 1, 5000);
    assert_int_equal(push_map(&c, 0, RS_CODEC_NONE, RS_FAULT_CORRUPT), RS_OK);
    rs_reader_session_t *sess = session(&c, 1);
    rs_status_t worst = RS_OK;
    rs_reader_stats_t st = {0};
    for (uint32_t p = 0; p < 4; p++) {
        rs_status_t s;
        read_part(&c, sess, p, &s, &st);
        if (s != RS_OK)
            worst = s;
    }
    assert_int_equal(worst, RS_ERR_CHECKSUM);
    rs_reader_session_close(sess);
    rs_worker_destroy(c.worker);
    free(c.seen);
}
#endif

/* Writes or reads exactly n bytes of a pipe; 0 on success. */
static int pipe_io(int fd, void *buf, size_t n, int out)
{
    uint8_t *b = buf;
    while (n > 0) {
        ssize_t k = out ? write(fd, b, n) : read(fd, b, n);
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/*
 * One of two processes: its worker holds the partitions of its index (the
 * default placement over two workers: every other one), it pushes map self
 * to both workers, then reads every partition. Returns 0 or the failed check's line.
 */
static int two_proc_side(uint32_t self, int rfd, int wfd)
{
    colo_t c = {0};
    if (worker_start(&c, self, 32 << 20) != RS_OK)
        return __LINE__;
    if (pipe_io(wfd, c.addr[self], RS_SHUFFLE_ADDR_MAX, 1) != 0 ||
        pipe_io(rfd, c.addr[1 - self], RS_SHUFFLE_ADDR_MAX, 0) != 0)
        return __LINE__;
    c.addr[1 - self][RS_SHUFFLE_ADDR_MAX - 1] = '\0';
    colo_desc(&c, 11, 8, 2, 2, 30000);
    if (push_map(&c, self, RS_CODEC_NONE, 0) != RS_OK)
        return __LINE__;
    char b = 'p';
    if (pipe_io(wfd, &b, 1, 1) != 0 || pipe_io(rfd, &b, 1, 0) != 0)
        return __LINE__; /* both maps committed */
    static const uint32_t attempts[MAX_MAPS] = {0};
    rs_reader_session_t *sess;
    if (rs_reader_session_open(&c.desc, 2, attempts, NULL, &sess) != RS_OK)
        return __LINE__;
    int bad = 0;
    rs_reader_stats_t local = {0}, remote = {0};
    for (uint32_t p = 0; p < 8 && !bad; p++) {
        uint32_t w;
        rs_status_t s;
        rs_shuffle_place(&c.desc, p, &w);
        bad = read_part(&c, sess, p, &s, w == self ? &local : &remote);
    }
    rs_reader_session_close(sess);
    if (!bad && !all_seen(&c))
        bad = __LINE__;
    /* Local half in place, remote half copied by one-sided reads, nothing else. */
    if (!bad && (local.batches == 0 || local.reads != 0 || local.local_batches != local.batches ||
                 local.zero_copy_bytes != local.bytes))
        bad = __LINE__;
    if (!bad && (remote.batches == 0 || remote.reads == 0 || remote.local_batches != 0 ||
                 remote.zero_copy_bytes != 0 || local.records + remote.records != 60000))
        bad = __LINE__;
    /* The other side may still be reading from this worker. */
    if (pipe_io(wfd, &b, 1, 1) != 0 || pipe_io(rfd, &b, 1, 0) != 0)
        bad = bad ? bad : __LINE__;
    rs_worker_destroy(c.worker);
    free(c.seen);
    return bad;
}

/* Runs first: the child is forked before this process used any transport. */
static void test_two_processes(void **state)
{
    (void)state;
    alarm(120);
    int to_child[2], to_parent[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(to_parent), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        int line = two_proc_side(1, to_child[0], to_parent[1]);
        if (line != 0)
            fprintf(stderr, "child: check at line %d failed\n", line);
        _exit(line != 0);
    }
    close(to_child[0]);
    close(to_parent[1]);
    int line = two_proc_side(0, to_parent[0], to_child[1]);
    close(to_child[1]);
    close(to_parent[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (line != 0)
        fail_msg("parent: check at line %d failed", line);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_processes),
        cmocka_unit_test(test_local_in_place),
        cmocka_unit_test(test_local_spilled),
#ifdef RS_FAULT_INJECTION /* the damaged batch comes from the library's hooks */
        cmocka_unit_test(test_local_corrupt),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
