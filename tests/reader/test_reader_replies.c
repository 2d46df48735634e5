/*
 * The reader's data path answered badly (reader/reader.c, exchange.c,
 * replies.c, ahead.c): an in-process worker over the loopback backend whose
 * READ_REPLY or SPILL_REPLY is refused, malformed, placed outside its
 * arena (rewritten on the way, rs_lb_mangle), dropped or held past the
 * wait; a read-ahead's answer (asked for a partition opened later) the
 * same. Each time the open or the read fails with the status it must (a
 * refusal's own, the decoder's, RS_ERR_PROTOCOL before any read for a range
 * outside the arena, RS_ERR_TIMEOUT after wait_ms), the partitions before
 * it read as usual, and the same session reads every record exactly once
 * after. READ_CLOSE has no answer: nothing to fault.
 *
 * Sized for a loaded host (10 runnable processes on 2 cores): what must
 * come is waited for long (a wait ends when it comes), and every check
 * says what it waited for and what it saw.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/loopback/lb_util.h"

#include "common/byteorder.h"
#include "shuffle/proto.h"

/* A wait for what must come (the test's own, the pusher's, the transport's): ends when it comes. */
#define MUST_MS    20000
#define WAIT_MS    10000         /* the waits of a session whose worker answers: never reached */
#define AT_ONCE_MS (WAIT_MS / 2) /* an answered fault fails well before a wait runs out */
/*
 * The wait of a session whose answer goes missing. It bounds that
 * session's other answers too, which must come within it: a loaded host
 * answers in ~100 ms, so not much shorter.
 */
#define SHORT_MS  1000
#define COARSE_MS 20   /* the reader's waits read a coarse clock: they may end this much early */
#define LATE_MS   5000 /* a wait that ran out ends within this past its bound (the next: 20 s) */
#define TIB       ((uint64_t)1 << 40)

/* Waits until expr (a count) is want; fails saying what it saw. */
#define UNTIL_COUNT(expr, want, what)                                                           \
    do {                                                                                        \
        uint64_t got_ = 0;                                                                      \
        if (!LB_UNTIL((got_ = (expr)) == (uint64_t)(want), MUST_MS))                            \
            fail_msg("%s: %llu after %u ms, not %llu", what, (unsigned long long)got_, MUST_MS, \
                     (unsigned long long)(want));                                               \
    } while (0)

/* The replies' fields (shuffle/proto.c): the header, then the body. */
enum { F_VERSION = 0, F_TYPE = 2, F_STATUS = 4 };
enum { RR_SNAP = 8, RR_TAG = 12, RR_OFF = 16, RR_LEN = 24 };
enum { SR_N = 8, SR_TAG = 12, SR_RETRY = 16, SR_OFF = 24, SR_LEN = 32 };

typedef enum {
    M_REFUSE,    /* status v, the body a refusal's (the tag kept) */
    M_CUT,       /* the first v bytes only */
    M_STATUS,    /* status v, the rest as it was */
    M_TYPE,      /* header type v */
    M_VERSION,   /* header version v */
    M_OFF,       /* READ_REPLY: the index at arena offset off (an inline one moved out) */
    M_SPILL_OFF, /* SPILL_REPLY: staged at off */
    M_SPILL_N    /* SPILL_REPLY: n v */
} fault_t;

typedef struct mangle {
    const char *what;
    fault_t how;
    int64_t v;
    rs_status_t want;
    unsigned pass; /* replies left as they are first */
    uint64_t off;  /* M_OFF, M_SPILL_OFF (0: 1 TiB) */
} mangle_t;

static rs_lb_counts_t counts(void)
{
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    return c;
}

/* what took ms: at once (a fault answered, not a wait run out), or fail saying so */
static void at_once(const char *what, uint64_t ms)
{
    if (ms >= AT_ONCE_MS)
        fail_msg("%s took %llu ms, not at once (< %u ms; the session waits %u ms)", what,
                 (unsigned long long)ms, AT_ONCE_MS, WAIT_MS);
}

/* A wait of SHORT_MS that ran out took ms: about SHORT_MS, or fail saying so. */
static void ran_out(const char *what, uint64_t ms)
{
    if (ms + COARSE_MS < SHORT_MS || ms >= SHORT_MS + LATE_MS)
        fail_msg("%s timed out after %llu ms, not %u ms (-%u, +%u)", what, (unsigned long long)ms,
                 SHORT_MS, COARSE_MS, LATE_MS);
}

static size_t mangle_reply(void *arg, unsigned char *data, size_t len)
{
    mangle_t *m = arg;
    unsigned type = (unsigned)rs_get_le(data + F_TYPE, 2);
    uint64_t off = m->off ? m->off : TIB;
    if (m->pass > 0) {
        m->pass--;
        return len;
    }
    switch (m->how) {
        case M_REFUSE:
            rs_put_le32(data + F_STATUS, (uint32_t)m->v);
            if (type == RS_SMSG_READ_REPLY) {
                rs_put_le32(data + RR_SNAP, 0);
                rs_put_le64(data + RR_OFF, 0);
                rs_put_le64(data + RR_LEN, 0);
                return RS_SPROTO_READ_REPLY_LEN;
            }
            rs_put_le32(data + SR_N, 0);
            rs_put_le32(data + SR_RETRY, 0);
            rs_put_le64(data + SR_OFF, 0);
            rs_put_le64(data + SR_LEN, 0);
            return len;
        case M_CUT:
            return (size_t)m->v;
        case M_STATUS:
            rs_put_le32(data + F_STATUS, (uint32_t)m->v);
            return len;
        case M_TYPE:
            rs_put_le(data + F_TYPE, (uint16_t)m->v, 2);
            return len;
        case M_VERSION:
            rs_put_le(data + F_VERSION, (uint16_t)m->v, 2);
            return len;
        case M_OFF:
            rs_put_le64(data + RR_OFF, off); /* index_len stays: the inline length, if inline */
            return RS_SPROTO_READ_REPLY_LEN;
        case M_SPILL_OFF:
            rs_put_le64(data + SR_OFF, off);
            return len;
        case M_SPILL_N:
            rs_put_le32(data + SR_N, (uint32_t)m->v);
            return len;
    }
    return len;
}

/* Keeps an ATTACH_REPLY's arena_len, the reply as it was. */
static size_t peek_arena(void *arg, unsigned char *data, size_t len)
{
    assert_true(len >= RS_SPROTO_ATTACH_REPLY_LEN);
    *(uint64_t *)arg = rs_get_le64(data + 8);
    return len;
}

typedef struct fx {
    lb_shuffle_t s;
    rs_reader_config_t rc;
    uint32_t zero[8];
    uint32_t parts, maps;
    uint64_t arena_len;
    char dir[32];
} fx_t;

/* mem 0: the test default (nothing spills); else a worker spilling into a directory of /tmp. */
static void fx_open(fx_t *f, uint32_t id, uint32_t parts, uint32_t maps, uint32_t records,
                    uint64_t mem)
{
    memset(f, 0, sizeof(*f));
    rs_worker_config_t wc;
    if (mem != 0) {
        snprintf(f->dir, sizeof(f->dir), "/tmp/rs-lb-rrep-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        lb_worker_config(&wc, mem, f->dir);
        wc.high_water_pct = 50;
    } else {
        lb_worker_config(&wc, 8 << 20, NULL);
    }
    wc.commit_wait_ms = MUST_MS;
    lb_workers_start(&f->s, 1, &wc);
    lb_shuffle_desc(&f->s, id, parts, 1, maps, records);
    f->parts = parts;
    f->maps = maps;
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, MUST_MS);
    for (uint32_t m = 0; m < maps; m++) {
        rs_status_t ps = lb_push_map(&f->s, m, 0, &pc);
        if (ps != RS_OK)
            fail_msg("shuffle %u: the push of map %u returned %s", id, m, rs_strerror(ps));
    }
    lb_reader_config(&f->rc, 0, WAIT_MS);
    rs_worker_stats_t st;
    UNTIL_COUNT((rs_worker_stats(f->s.worker[0], &st), st.commits), maps, "the worker's commits");
    if (mem != 0 && st.spilled_bytes == 0)
        fail_msg("shuffle %u: nothing spilled (%u maps of %u records)", id, maps, records);
    /* The arena's length, as the worker's attach answer says it */
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&f->s.desc, maps, f->zero, &f->rc, &sess), RS_OK);
    rs_lb_reset();
    rs_lb_mangle(RS_SMSG_ATTACH_REPLY, 1, peek_arena, &f->arena_len);
    rs_reader_t *r;
    assert_int_equal(rs_reader_open_in(sess, 0, &r), RS_OK);
    rs_reader_close(r);
    rs_reader_session_close(sess);
    assert_true(f->arena_len > 0);
}

static void fx_close(fx_t *f)
{
    lb_workers_stop(&f->s);
    lb_shuffle_free(&f->s);
    if (f->dir[0] != '\0')
        assert_int_equal(rmdir(f->dir), 0); /* spill files are unlinked at once */
}

static rs_reader_session_t *sess_open(fx_t *f, const rs_reader_config_t *rc)
{
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&f->s.desc, f->maps, f->zero, rc, &sess), RS_OK);
    return sess;
}

/* Every partition of sess read, every record checked, each seen once. */
static void read_every_part(fx_t *f, rs_reader_session_t *sess)
{
    lb_seen_clear(&f->s);
    for (uint32_t p = 0; p < f->parts; p++)
        lb_read_part_ok(&f->s, sess, p, NULL);
    assert_true(lb_all_seen(&f->s));
}

/* rs_reader_open_in of partition p, timed; a failed open leaves *r NULL. */
static rs_status_t open_timed(rs_reader_session_t *sess, uint32_t p, uint64_t *ms_p)
{
    rs_reader_t *r = NULL;
    uint64_t t0 = lb_now_ms();
    rs_status_t st = rs_reader_open_in(sess, p, &r);
    *ms_p = lb_now_ms() - t0;
    if (st == RS_OK)
        rs_reader_close(r);
    else
        assert_null(r);
    return st;
}

/* Opening partition p waits its session's SHORT_MS out: RS_ERR_TIMEOUT, about SHORT_MS. */
static void open_runs_out(rs_reader_session_t *sess, uint32_t p)
{
    uint64_t ms;
    rs_status_t st = open_timed(sess, p, &ms);
    if (st != RS_ERR_TIMEOUT)
        fail_msg("the open returned %s after %llu ms, not %s", rs_strerror(st),
                 (unsigned long long)ms, rs_strerror(RS_ERR_TIMEOUT));
    ran_out("the open", ms);
}

/*
 * The connections the client's next session makes to open partition 0: a
 * worker that answered garbled lost its kept connection (1), one that
 * refused or answered late kept it (0).
 */
static uint64_t next_session_connects(fx_t *f)
{
    rs_lb_reset();
    rs_reader_session_t *sess = sess_open(f, &f->rc);
    uint64_t ms;
    assert_int_equal(open_timed(sess, 0, &ms), RS_OK);
    rs_reader_session_close(sess);
    return counts().connects;
}

static void connects_are(fx_t *f, const char *what, uint64_t want)
{
    uint64_t n = next_session_connects(f);
    if (n != want)
        fail_msg("%s: the next session connected %llu times, not %llu (%s)", what,
                 (unsigned long long)n, (unsigned long long)want,
                 want ? "a garbled answer costs the connection" : "the connection is kept");
}

/*
 * Each rewrite of partition 0's READ_REPLY: the open returns the status it
 * must at once; the same session then reads everything.
 */
static void run_read_mangles(mangle_t *cases, size_t n, uint32_t id)
{
    fx_t f;
    fx_open(&f, id, 4, 2, 800, 0);
    for (size_t i = 0; i < n; i++) {
        mangle_t *m = &cases[i];
        rs_reader_session_t *sess = sess_open(&f, &f.rc);
        rs_lb_reset();
        rs_lb_mangle(RS_SMSG_READ_REPLY, 1, mangle_reply, m);
        uint64_t ms;
        rs_status_t st = open_timed(sess, 0, &ms);
        if (st != m->want)
            fail_msg("%s: the open returned %s, not %s", m->what, rs_strerror(st),
                     rs_strerror(m->want));
        assert_int_equal(counts().mangled[RS_SMSG_READ_REPLY], 1);
        at_once(m->what, ms);
        rs_lb_reset();
        read_every_part(&f, sess);
        rs_reader_session_close(sess);
        connects_are(&f, m->what, lb_status_garbled(m->want) ? 1 : 0);
    }
    fx_close(&f);
}

static void test_read_reply_refused(void **state)
{
    (void)state;
    mangle_t cases[] = {
        {"not found", M_REFUSE, RS_ERR_NOT_FOUND, RS_ERR_NOT_FOUND, 0, 0},
        {"state", M_REFUSE, RS_ERR_STATE, RS_ERR_STATE, 0, 0},
        {"other n_partitions", M_REFUSE, RS_ERR_INVALID, RS_ERR_INVALID, 0, 0},
        {"refused", M_REFUSE, RS_ERR_REFUSED, RS_ERR_REFUSED, 0, 0},
        /* no room for the index once: asked again, answered */
        {"backpressure once", M_REFUSE, RS_ERR_BACKPRESSURE, RS_OK, 0, 0},
    };
    run_read_mangles(cases, sizeof(cases) / sizeof(cases[0]), 41);
}

static void test_read_reply_malformed(void **state)
{
    (void)state;
    mangle_t cases[] = {
        {"empty", M_CUT, 0, RS_ERR_TRUNCATED, 0, 0},
        {"header cut", M_CUT, 6, RS_ERR_TRUNCATED, 0, 0},
        {"fixed part cut", M_CUT, 20, RS_ERR_TRUNCATED, 0, 0},
        {"fixed part one short", M_CUT, RS_SPROTO_READ_REPLY_LEN - 1, RS_ERR_TRUNCATED, 0, 0},
        {"refusal with a body", M_STATUS, RS_ERR_NOT_FOUND, RS_ERR_PROTOCOL, 0, 0},
        {"unknown status", M_REFUSE, -999, RS_ERR_PROTOCOL, 0, 0},
        {"another type", M_TYPE, RS_SMSG_SPILL_REPLY, RS_ERR_PROTOCOL, 0, 0},
        {"another version", M_VERSION, 0x7777, RS_ERR_BAD_VERSION, 0, 0},
    };
    run_read_mangles(cases, sizeof(cases) / sizeof(cases[0]), 42);
}

/* The index placed outside the worker's arena: refused before any read. */
static void test_read_reply_outside_arena(void **state)
{
    (void)state;
    fx_t f;
    fx_open(&f, 43, 4, 2, 800, 0);
    uint64_t gets = 0;
    mangle_t cases[] = {
        {"1 TiB on", M_OFF, 0, RS_ERR_PROTOCOL, 0, 0},
        {"across the end", M_OFF, 0, RS_ERR_PROTOCOL, 0, f.arena_len - 64},
        {"at the end", M_OFF, 0, RS_ERR_PROTOCOL, 0, f.arena_len},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mangle_t *m = &cases[i];
        rs_reader_session_t *sess = sess_open(&f, &f.rc);
        rs_lb_reset();
        rs_lb_mangle(RS_SMSG_READ_REPLY, 1, mangle_reply, m);
        uint64_t ms;
        rs_status_t st = open_timed(sess, 0, &ms);
        if (st != m->want)
            fail_msg("%s: the open returned %s, not %s", m->what, rs_strerror(st),
                     rs_strerror(m->want));
        rs_lb_counts_t c = counts();
        assert_int_equal(c.mangled[RS_SMSG_READ_REPLY], 1);
        gets += c.gets;
        at_once(m->what, ms);
        rs_lb_reset();
        read_every_part(&f, sess);
        rs_reader_session_close(sess);
        connects_are(&f, m->what, 1);
    }
    assert_int_equal(gets, 0); /* nothing read at the offset given */
    fx_close(&f);
}

/* The answer never comes: RS_ERR_TIMEOUT after wait_ms; the session goes on. */
static void test_read_reply_missing(void **state)
{
    (void)state;
    fx_t f;
    fx_open(&f, 44, 4, 2, 800, 0);
    rs_reader_config_t rc = f.rc;
    rc.wait_ms = SHORT_MS;
    rs_reader_session_t *sess = sess_open(&f, &rc);
    rs_lb_reset();
    rs_lb_drop(RS_SMSG_READ_REPLY, 1);
    open_runs_out(sess, 0);
    /* The worker answered, and the answer was dropped (a slow worker may answer after the wait) */
    UNTIL_COUNT(counts().dropped[RS_SMSG_READ_REPLY], 1, "READ_REPLYs dropped");
    read_every_part(&f, sess);
    rs_reader_session_close(sess);
    fx_close(&f);
}

/*
 * Partition 1's answer is late: the open times out. Released, it reaches
 * the reader while partition 0 is opened: its tag is not that open's, so
 * it is dropped, and partition 0 reads its own records (checked).
 */
static void test_read_reply_late(void **state)
{
    (void)state;
    fx_t f;
    fx_open(&f, 45, 4, 2, 800, 0);
    rs_reader_config_t rc = f.rc;
    rc.wait_ms = SHORT_MS;
    rs_reader_session_t *sess = sess_open(&f, &rc);
    uint64_t ms;
    assert_int_equal(open_timed(sess, 3, &ms), RS_OK); /* attached: the hold holds only answers */
    rs_lb_reset();
    rs_lb_hold(RS_SMSG_READ_REPLY);
    open_runs_out(sess, 1);
    /* Answered and held: it reaches the reader first once released, ahead of partition 0's */
    UNTIL_COUNT(counts().sent[RS_SMSG_READ_REPLY], 1, "READ_REPLYs sent");
    assert_int_equal(counts().delivered[RS_SMSG_READ_REPLY], 0);
    rs_lb_release(RS_SMSG_READ_REPLY);
    read_every_part(&f, sess);
    rs_reader_session_close(sess);
    rs_lb_counts_t c = counts();
    if (c.delivered[RS_SMSG_READ_REPLY] != c.sent[RS_SMSG_READ_REPLY])
        fail_msg("%llu READ_REPLYs delivered of %llu sent: the late one never reached the reader",
                 (unsigned long long)c.delivered[RS_SMSG_READ_REPLY],
                 (unsigned long long)c.sent[RS_SMSG_READ_REPLY]);
    fx_close(&f);
}

/*
 * Read-ahead (ahead.c): opens in order ask for the next partitions early.
 * The answer for partition FAULT, asked ahead, is rewritten: the partitions
 * before it read as usual, its open returns the fault's status, and the
 * partitions after it (and the session's next read of it) read all.
 */
#define AH_PARTS 8
#define AH_FAULT 4
static void run_ahead(mangle_t *m, uint32_t id)
{
    fx_t f;
    fx_open(&f, id, AH_PARTS, 2, 800, 0);
    rs_reader_session_t *sess = sess_open(&f, &f.rc);
    rs_lb_reset();
    m->pass = AH_FAULT; /* one READ_OPEN per partition, in order, answered in order */
    rs_lb_mangle(RS_SMSG_READ_REPLY, AH_FAULT + 1, mangle_reply, m);
    lb_seen_clear(&f.s);
    for (uint32_t p = 0; p < AH_FAULT; p++)
        lb_read_part_ok(&f.s, sess, p, NULL);
    rs_lb_counts_t c = counts();
    assert_true(c.sent[RS_SMSG_READ_OPEN] > AH_FAULT); /* asked ahead */
    uint64_t ms;
    rs_status_t st = open_timed(sess, AH_FAULT, &ms);
    if (st != m->want)
        fail_msg("%s: the open returned %s, not %s", m->what, rs_strerror(st),
                 rs_strerror(m->want));
    assert_int_equal(counts().mangled[RS_SMSG_READ_REPLY], AH_FAULT + 1); /* passed, then one */
    assert_int_equal(m->pass, 0);
    at_once(m->what, ms);
    for (uint32_t p = AH_FAULT; p < AH_PARTS; p++)
        lb_read_part_ok(&f.s, sess, p, NULL);
    assert_true(lb_all_seen(&f.s));
    rs_reader_session_close(sess);
    fx_close(&f);
}

static void test_ahead_outside_arena(void **state)
{
    (void)state;
    mangle_t m = {"ahead, 1 TiB on", M_OFF, 0, RS_ERR_PROTOCOL, 0, 0};
    run_ahead(&m, 46);
}

/* A refusal asked ahead is asked again by the open itself (ahead.c): answered, read. */
static void test_ahead_refused(void **state)
{
    (void)state;
    mangle_t m = {"ahead, not found", M_REFUSE, RS_ERR_NOT_FOUND, RS_OK, 0, 0};
    run_ahead(&m, 47);
}

static void test_ahead_malformed(void **state)
{
    (void)state;
    mangle_t m = {"ahead, empty", M_CUT, 0, RS_ERR_TRUNCATED, 0, 0};
    run_ahead(&m, 50);
}

/* ------------------------------------------------------------ spill */

/*
 * Reads the partitions in order, records not checked, until one fails:
 * that failure (RS_OK: none did).
 */
static rs_status_t read_until_error(fx_t *f, rs_reader_session_t *sess, uint64_t *ms_p)
{
    for (uint32_t p = 0; p < f->parts; p++) {
        rs_reader_t *r = NULL;
        rs_status_t st = rs_reader_open_in(sess, p, &r);
        if (st != RS_OK)
            fail_msg("the open of partition %u returned %s", p, rs_strerror(st));
        const void *rec;
        uint32_t len;
        uint64_t t0 = lb_now_ms();
        do {
            st = rs_reader_next(r, &rec, &len);
        } while (st == RS_OK && rec != NULL);
        *ms_p = lb_now_ms() - t0;
        rs_reader_close(r);
        if (st != RS_OK)
            return st;
    }
    return RS_OK;
}

static void run_spill_mangles(mangle_t *cases, size_t n, uint32_t id)
{
    fx_t f;
    fx_open(&f, id, 4, 4, 8000, 1 << 20); /* 4 maps x ~570 KB: well over the 1 MiB arena */
    for (size_t i = 0; i < n; i++) {
        mangle_t *m = &cases[i];
        rs_reader_session_t *sess = sess_open(&f, &f.rc);
        rs_lb_reset();
        rs_lb_mangle(RS_SMSG_SPILL_REPLY, 1, mangle_reply, m);
        uint64_t ms;
        rs_status_t st = read_until_error(&f, sess, &ms);
        if (st != m->want)
            fail_msg("%s: the read returned %s, not %s", m->what, rs_strerror(st),
                     rs_strerror(m->want));
        assert_int_equal(counts().mangled[RS_SMSG_SPILL_REPLY], 1);
        at_once(m->what, ms);
        rs_lb_reset();
        read_every_part(&f, sess);
        if (counts().delivered[RS_SMSG_SPILL_REPLY] == 0)
            fail_msg("%s: the session read on without a spill load", m->what);
        rs_reader_session_close(sess);
        connects_are(&f, m->what, lb_status_garbled(m->want) ? 1 : 0);
    }
    fx_close(&f);
}

static void test_spill_reply_faults(void **state)
{
    (void)state;
    mangle_t cases[] = {
        {"not found", M_REFUSE, RS_ERR_NOT_FOUND, RS_ERR_NOT_FOUND, 0, 0},
        {"no space", M_REFUSE, RS_ERR_NO_SPACE, RS_ERR_NO_SPACE, 0, 0},
        {"backpressure once", M_REFUSE, RS_ERR_BACKPRESSURE, RS_OK, 0, 0},
        {"empty", M_CUT, 0, RS_ERR_TRUNCATED, 0, 0},
        {"fixed part cut", M_CUT, 20, RS_ERR_TRUNCATED, 0, 0},
        {"refusal with a body", M_STATUS, RS_ERR_NOT_FOUND, RS_ERR_PROTOCOL, 0, 0},
        {"unknown status", M_REFUSE, -999, RS_ERR_PROTOCOL, 0, 0},
        {"another version", M_VERSION, 0x7777, RS_ERR_BAD_VERSION, 0, 0},
        {"none staged", M_SPILL_N, 0, RS_ERR_PROTOCOL, 0, 0},
        {"more staged than asked", M_SPILL_N, 100000, RS_ERR_PROTOCOL, 0, 0},
        {"staged 1 TiB on", M_SPILL_OFF, 0, RS_ERR_PROTOCOL, 0, 0},
    };
    run_spill_mangles(cases, sizeof(cases) / sizeof(cases[0]), 48);
}

/* The staging answer never comes: the read returns RS_ERR_TIMEOUT after wait_ms. */
static void test_spill_reply_missing(void **state)
{
    (void)state;
    fx_t f;
    fx_open(&f, 49, 4, 4, 8000, 1 << 20);
    rs_reader_config_t rc = f.rc;
    rc.wait_ms = SHORT_MS;
    rs_reader_session_t *sess = sess_open(&f, &rc);
    rs_lb_reset();
    rs_lb_drop(RS_SMSG_SPILL_REPLY, 1);
    uint64_t ms;
    rs_status_t st = read_until_error(&f, sess, &ms);
    if (st != RS_ERR_TIMEOUT)
        fail_msg("the read returned %s after %llu ms, not %s", rs_strerror(st),
                 (unsigned long long)ms, rs_strerror(RS_ERR_TIMEOUT));
    ran_out("the read", ms);
    UNTIL_COUNT(counts().dropped[RS_SMSG_SPILL_REPLY], 1, "SPILL_REPLYs dropped");
    read_every_part(&f, sess);
    rs_reader_session_close(sess);
    fx_close(&f);
}

int main(void)
{
    /* The transport's bounds (a connect, an answer owed): nothing here waits one out */
    char must[16];
    snprintf(must, sizeof(must), "%u", MUST_MS);
    setenv("RSHUFFLE_PEER_TIMEOUT_MS", must, 0);
    setenv("RSHUFFLE_CONNECT_TIMEOUT_MS", must, 0);
    lb_env_defaults();
    lb_alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_reply_refused),
        cmocka_unit_test(test_read_reply_malformed),
        cmocka_unit_test(test_read_reply_outside_arena),
        cmocka_unit_test(test_read_reply_missing),
        cmocka_unit_test(test_read_reply_late),
        cmocka_unit_test(test_ahead_outside_arena),
        cmocka_unit_test(test_ahead_refused),
        cmocka_unit_test(test_ahead_malformed),
        cmocka_unit_test(test_spill_reply_faults),
        cmocka_unit_test(test_spill_reply_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
