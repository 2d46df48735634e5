/*
 * A kept connection's attach answered badly (reader/session.c, conn_open's
 * kept branch and rs_rd_sess_attach_end): the ATTACH goes out without a
 * wait and its answer comes with the first open's. An in-process worker
 * over the loopback backend, whose ATTACH_REPLY on the kept connection is
 * refused (by the worker itself, or rewritten on the way as a faulty
 * worker's), malformed, dropped or held past the wait. Each time the open
 * fails with the status it must, within its bound; the connection goes, and
 * the same session, then the next ones of the client, read every record
 * (on a new connection, then on the kept one again). And a warmed lane's
 * connections, made without a key, used by its first session's attach.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/loopback/lb_util.h"

#include <rshuffle/client.h>

#include "common/byteorder.h"
#include "shuffle/proto.h"

#define WAIT_MS  4000 /* the waits of a session whose worker answers: never reached */
#define SHORT_MS 300  /* the wait of a session whose attach goes unanswered */
#define PARTS    4
/* Past RS_READ_CLOSE_HOLD_MS on a coarse clock (ticks of up to 10 ms). */
#define HELD_CLOSES_DUE_MS 30
#define MAPS               2
#define RECORDS            800

/* The ATTACH_REPLY's fields (shuffle/proto.c): header, then arena_len, rkey_len, replicas, rkey. */
enum { AR_VERSION = 0, AR_TYPE = 2, AR_STATUS = 4, AR_ARENA = 8, AR_REPLICAS = 20 };

typedef struct fx {
    lb_shuffle_t s;
    rs_client_t *cl;
    rs_reader_config_t rc;
    uint32_t zero[MAPS];
} fx_t;

static void push_all(lb_shuffle_t *s)
{
    rs_pusher_config_t pc;
    lb_pusher_config(&pc, WAIT_MS);
    for (uint32_t m = 0; m < s->n_maps; m++)
        assert_int_equal(lb_push_map(s, m, 0, &pc), RS_OK);
}

/* The first half of the partitions on worker 0, the rest on worker 1. */
static uint32_t place_halves(void *arg, uint32_t shuffle_id, uint32_t partition, uint32_t n_workers)
{
    (void)arg;
    (void)shuffle_id;
    return partition < PARTS / 2 ? 0 : n_workers - 1;
}

/* workers: 1, or 2 with place_halves. */
static void fx_open(fx_t *f, uint32_t shuffle_id, uint32_t workers)
{
    memset(f, 0, sizeof(*f));
    lb_workers_start(&f->s, workers, NULL);
    lb_shuffle_desc(&f->s, shuffle_id, PARTS, 1, MAPS, RECORDS);
    if (workers > 1)
        f->s.desc.placement = place_halves;
    push_all(&f->s);
    assert_int_equal(rs_client_create(NULL, &f->cl), RS_OK);
    lb_reader_config(&f->rc, 0, WAIT_MS);
}

static void fx_close(fx_t *f)
{
    rs_client_destroy(f->cl);
    lb_workers_stop(&f->s);
    lb_shuffle_free(&f->s);
}

static rs_lb_counts_t counts(void)
{
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    return c;
}

/* Every partition of sess read, every record checked, each seen once. */
static void read_every_part(fx_t *f, rs_reader_session_t *sess)
{
    lb_seen_clear(&f->s);
    for (uint32_t p = 0; p < PARTS; p++)
        lb_read_part_ok(&f->s, sess, p, NULL);
    assert_true(lb_all_seen(&f->s));
}

/*
 * A session of the client whose worker answers: reads everything, making
 * `connects` new connections (0: it attached the kept one again).
 */
static void read_good(fx_t *f, uint64_t connects)
{
    rs_lb_reset();
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open_in(f->cl, &f->s.desc, MAPS, f->zero, &f->rc, &sess),
                     RS_OK);
    read_every_part(f, sess);
    rs_reader_session_close(sess);
    rs_lb_counts_t c = counts();
    assert_int_equal(c.connects, connects);
    assert_int_equal(c.sent[RS_SMSG_ATTACH], f->s.desc.n_workers);
    assert_int_equal(c.delivered[RS_SMSG_ATTACH_REPLY], f->s.desc.n_workers);
}

/*
 * A session (desc, rc) whose first open goes over the kept connection with
 * the fault the caller set (after rs_lb_reset): the open's status, and how
 * long it took in *ms_p. The connection was the kept one: no new connect.
 */
static rs_status_t open_kept(fx_t *f, const rs_shuffle_desc_t *desc, const rs_reader_config_t *rc,
                             rs_reader_session_t **sess_p, uint64_t *ms_p)
{
    assert_int_equal(rs_reader_session_open_in(f->cl, desc, MAPS, f->zero, rc, sess_p), RS_OK);
    rs_reader_t *r = NULL;
    uint64_t t0 = lb_now_ms();
    rs_status_t st = rs_reader_open_in(*sess_p, 0, &r);
    *ms_p = lb_now_ms() - t0;
    assert_int_not_equal(st, RS_OK);
    assert_null(r); /* outputs set only on success */
    rs_lb_counts_t c = counts();
    assert_int_equal(c.connects, 0);
    assert_int_equal(c.sent[RS_SMSG_ATTACH], 1);
    assert_int_equal(c.sent[RS_SMSG_READ_OPEN], 1);
    return st;
}

/*
 * After a failed kept attach the same session goes on: the open asked again
 * makes a new connection (R = 1: the worker is not lost) and reads all.
 */
static void same_session_recovers(fx_t *f, rs_reader_session_t *sess)
{
    rs_lb_reset();
    read_every_part(f, sess);
    rs_lb_counts_t c = counts();
    assert_int_equal(c.connects, 1);
    assert_int_equal(c.sent[RS_SMSG_ATTACH], 1);
    assert_int_equal(c.delivered[RS_SMSG_ATTACH_REPLY], 1);
}

/* How a faulty worker's ATTACH_REPLY is rewritten on its way (rs_lb_mangle). */
typedef enum {
    AR_REFUSE,      /* a refusal: the header alone, carrying v */
    AR_CUT,         /* the first v bytes only */
    AR_SHORT,       /* one byte short of what it was */
    AR_SET_STATUS,  /* the header's status v, the rest as it was */
    AR_SET_TYPE,    /* the header's type v */
    AR_SET_VERSION, /* the header's version v */
    AR_SET_ARENA,   /* arena_len v */
    AR_SET_REPLICAS /* replicas v */
} ar_fault_t;

typedef struct mangle {
    const char *what;
    ar_fault_t how;
    int32_t v;
    rs_status_t want; /* what the reader's open returns */
    unsigned pass;    /* replies left as they are before the one rewritten */
} mangle_t;

static size_t mangle_reply(void *arg, unsigned char *data, size_t len)
{
    mangle_t *m = arg;
    assert_true(len >= RS_SPROTO_ATTACH_REPLY_LEN); /* the worker's answer was good */
    if (m->pass > 0) {
        m->pass--;
        return len;
    }
    switch (m->how) {
        case AR_REFUSE:
            rs_put_le32(data + AR_STATUS, (uint32_t)m->v);
            return RS_SPROTO_HDR_LEN;
        case AR_CUT:
            return (size_t)m->v;
        case AR_SHORT:
            return len - 1;
        case AR_SET_STATUS:
            rs_put_le32(data + AR_STATUS, (uint32_t)m->v);
            return len;
        case AR_SET_TYPE:
            rs_put_le(data + AR_TYPE, (uint16_t)m->v, 2);
            return len;
        case AR_SET_VERSION:
            rs_put_le(data + AR_VERSION, (uint16_t)m->v, 2);
            return len;
        case AR_SET_ARENA:
            rs_put_le64(data + AR_ARENA, (uint64_t)m->v);
            return len;
        case AR_SET_REPLICAS:
            rs_put_le32(data + AR_REPLICAS, (uint32_t)m->v);
            return len;
    }
    return len;
}

/*
 * Each rewrite of the kept connection's ATTACH_REPLY, in turn: the open
 * fails with the status the reply's decoder or the reader gives it, at once
 * (no wait: the answer came); the snapshot the worker opened for it is
 * closed; the session and the client's next ones read everything.
 */
static void run_mangles(mangle_t *cases, size_t n, uint32_t shuffle_id)
{
    fx_t f;
    fx_open(&f, shuffle_id, 1);
    read_good(&f, 1); /* the lane keeps the connection */
    for (size_t i = 0; i < n; i++) {
        mangle_t *m = &cases[i];
        rs_lb_reset();
        rs_lb_mangle(RS_SMSG_ATTACH_REPLY, 1, mangle_reply, m);
        rs_reader_session_t *sess;
        uint64_t ms;
        rs_status_t st = open_kept(&f, &f.s.desc, &f.rc, &sess, &ms);
        if (st != m->want)
            fail_msg("%s: the open returned %s, not %s", m->what, rs_strerror(st),
                     rs_strerror(m->want));
        rs_lb_counts_t c = counts();
        assert_int_equal(c.mangled[RS_SMSG_ATTACH_REPLY], 1);
        assert_int_equal(c.delivered[RS_SMSG_READ_REPLY], 1);
        assert_int_equal(c.sent[RS_SMSG_READ_CLOSE], 1); /* opened on an attach that failed */
        assert_true(ms < WAIT_MS / 2);
        same_session_recovers(&f, sess);
        rs_reader_session_close(sess);
        read_good(&f, 0); /* the new connection was kept, and attaches again */
    }
    fx_close(&f);
}

/* The worker's answer says no: the open returns what it says. */
/*
 * A warmed read lane (rs_reader_warm_in): its connections are made by the
 * warm-up, without a key. A first session that reads worker 0's partition
 * alone keeps worker 1's unused connection; the next session attaches on
 * both (no new connection) and reads everything, the one after on the kept
 * ones again.
 */
static void test_warm_connections_used(void **state)
{
    (void)state;
    fx_t f;
    fx_open(&f, 41, 2);
    rs_lb_reset();
    assert_int_equal(rs_reader_warm_in(f.cl, &f.s.desc, &f.rc, 1), RS_OK);
    rs_lb_counts_t c = counts();
    assert_int_equal(c.connects, 2);
    assert_int_equal(c.sent[RS_SMSG_ATTACH], 0);
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open_in(f.cl, &f.s.desc, MAPS, f.zero, &f.rc, &sess), RS_OK);
    lb_seen_clear(&f.s);
    lb_read_part_ok(&f.s, sess, 0, NULL); /* worker 0's (place_halves) */
    rs_reader_session_close(sess);
    c = counts();
    assert_int_equal(c.connects, 2);
    assert_int_equal(c.sent[RS_SMSG_ATTACH], 1);
    read_good(&f, 0);
    read_good(&f, 0);
    rs_client_stats_t st;
    rs_client_stats(f.cl, &st);
    assert_int_equal(st.lanes_made, 1);
    fx_close(&f);
}

static void test_kept_attach_refused(void **state)
{
    (void)state;
    mangle_t cases[] = {
        {"refused, not found", AR_REFUSE, RS_ERR_NOT_FOUND, RS_ERR_NOT_FOUND, 0},
        {"refused, refused", AR_REFUSE, RS_ERR_REFUSED, RS_ERR_REFUSED, 0},
        {"refused, state", AR_REFUSE, RS_ERR_STATE, RS_ERR_STATE, 0},
        /* an answer with another R than the session's: the reader refuses it (attach_take) */
        {"replicas 2", AR_SET_REPLICAS, 2, RS_ERR_INVALID, 0},
    };
    run_mangles(cases, sizeof(cases) / sizeof(cases[0]), 31);
}

/* A malformed answer: the decoder's status. */
static void test_kept_attach_malformed(void **state)
{
    (void)state;
    mangle_t cases[] = {
        {"empty", AR_CUT, 0, RS_ERR_TRUNCATED, 0},
        {"header cut", AR_CUT, 6, RS_ERR_TRUNCATED, 0},
        {"fixed part cut", AR_CUT, 16, RS_ERR_TRUNCATED, 0},
        {"rkey one byte short", AR_SHORT, 0, RS_ERR_BAD_LENGTH, 0},
        {"refusal with a body", AR_SET_STATUS, RS_ERR_NOT_FOUND, RS_ERR_BAD_LENGTH, 0},
        {"unknown status", AR_SET_STATUS, -999, RS_ERR_PROTOCOL, 0},
        {"another type", AR_SET_TYPE, RS_SMSG_READ_REPLY, RS_ERR_PROTOCOL, 0},
        {"another version", AR_SET_VERSION, 0x7777, RS_ERR_BAD_VERSION, 0},
        {"empty arena", AR_SET_ARENA, 0, RS_ERR_PROTOCOL, 0},
        {"replicas past the maximum", AR_SET_REPLICAS, 9, RS_ERR_PROTOCOL, 0},
    };
    run_mangles(cases, sizeof(cases) / sizeof(cases[0]), 32);
}

/*
 * A real refusal: the worker holds the shuffle for another generation, so
 * it refuses the kept connection's attach (RS_ERR_EXISTS); its READ_OPEN,
 * checked against the connection's last attach, is answered with a snapshot
 * the reader closes. A new connection's attach is refused the same way;
 * the right generation reads everything after.
 */
static void test_kept_attach_other_generation(void **state)
{
    (void)state;
    fx_t f;
    fx_open(&f, 33, 1);
    read_good(&f, 1);
    rs_shuffle_desc_t other = f.s.desc;
    other.generation = 7;
    rs_lb_reset();
    rs_reader_session_t *sess;
    uint64_t ms;
    assert_int_equal(open_kept(&f, &other, &f.rc, &sess, &ms), RS_ERR_EXISTS);
    rs_lb_counts_t c = counts();
    assert_int_equal(c.delivered[RS_SMSG_READ_REPLY], 1);
    assert_int_equal(c.sent[RS_SMSG_READ_CLOSE], 1);
    assert_true(ms < WAIT_MS / 2);
    rs_lb_reset();
    rs_reader_t *r = NULL;
    assert_int_equal(rs_reader_open_in(sess, 1, &r), RS_ERR_EXISTS); /* attached anew: refused */
    assert_null(r);
    c = counts();
    assert_int_equal(c.connects, 1);
    assert_int_equal(c.sent[RS_SMSG_READ_OPEN], 0); /* the attach waited for: nothing asked */
    rs_reader_session_close(sess);
    read_good(&f, 1); /* the refused connection was not kept */
    read_good(&f, 0);
    fx_close(&f);
}

/*
 * The answer never comes (dropped): the open's snapshot came, the attach's
 * wait runs out after the session's wait_ms: RS_ERR_TIMEOUT, the snapshot
 * is closed, the connection goes.
 */
static void test_kept_attach_missing(void **state)
{
    (void)state;
    fx_t f;
    fx_open(&f, 34, 1);
    read_good(&f, 1);
    rs_reader_config_t rc = f.rc;
    rc.wait_ms = SHORT_MS;
    rs_lb_reset();
    rs_lb_drop(RS_SMSG_ATTACH_REPLY, 1);
    rs_reader_session_t *sess;
    uint64_t ms;
    assert_int_equal(open_kept(&f, &f.s.desc, &rc, &sess, &ms), RS_ERR_TIMEOUT);
    rs_lb_counts_t c = counts();
    assert_int_equal(c.dropped[RS_SMSG_ATTACH_REPLY], 1);
    assert_int_equal(c.delivered[RS_SMSG_READ_REPLY], 1);
    assert_int_equal(c.sent[RS_SMSG_READ_CLOSE], 1);
    assert_true(ms + 20 >= SHORT_MS && ms < SHORT_MS + 2000); /* the wait reads a coarse clock */
    same_session_recovers(&f, sess);
    rs_reader_session_close(sess);
    read_good(&f, 0);
    fx_close(&f);
}

/*
 * The answer is late (held at the reader with what follows it: the open's
 * reply too): the open's wait, then the attach's, run out (RS_ERR_TIMEOUT,
 * two waits). Released after, the late answer is never delivered: it went
 * with the connection, and the next attach (a new connection, the same
 * session) gets its own answer, as do the next sessions'.
 */
static void test_kept_attach_late(void **state)
{
    (void)state;
    fx_t f;
    fx_open(&f, 35, 1);
    read_good(&f, 1);
    rs_reader_config_t rc = f.rc;
    rc.wait_ms = SHORT_MS;
    rs_lb_reset();
    rs_lb_hold(RS_SMSG_ATTACH_REPLY);
    rs_reader_session_t *sess;
    uint64_t ms;
    assert_int_equal(open_kept(&f, &f.s.desc, &rc, &sess, &ms), RS_ERR_TIMEOUT);
    assert_true(ms + 40 >= 2 * SHORT_MS && ms < 2 * SHORT_MS + 2000);
    rs_lb_counts_t c = counts();
    assert_int_equal(c.delivered[RS_SMSG_ATTACH_REPLY], 0);
    assert_int_equal(c.delivered[RS_SMSG_READ_REPLY], 0);
    rs_lb_release(RS_SMSG_ATTACH_REPLY);
    same_session_recovers(&f, sess);
    rs_reader_session_close(sess);
    read_good(&f, 0);
    fx_close(&f);
}

/*
 * Two workers, their connections kept. Opens of worker 0's partitions in
 * order read ahead worker 1's on its kept connection before this session
 * attached it; its attach, sent with the first of those opens, is refused:
 * that open fails with the refusal, the snapshots read ahead on the
 * connection go with it, and the next opens (a new connection) read all.
 */
static void test_kept_attach_refused_after_read_ahead(void **state)
{
    (void)state;
    fx_t f;
    fx_open(&f, 36, 2);
    read_good(&f, 2);
    mangle_t m = {"refused, not found", AR_REFUSE, RS_ERR_NOT_FOUND, RS_ERR_NOT_FOUND, 1};
    rs_lb_reset();
    rs_lb_mangle(RS_SMSG_ATTACH_REPLY, 2, mangle_reply, &m); /* worker 0's passes */
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open_in(f.cl, &f.s.desc, MAPS, f.zero, &f.rc, &sess), RS_OK);
    lb_seen_clear(&f.s);
    for (uint32_t p = 0; p < PARTS / 2; p++)
        lb_read_part_ok(&f.s, sess, p, NULL);
    rs_lb_counts_t c = counts();
    assert_int_equal(c.sent[RS_SMSG_ATTACH], 1);
    assert_int_equal(c.sent[RS_SMSG_READ_OPEN], PARTS); /* 0, 1, then the rest read ahead */
    /* Worker 0's closes, held back (reader/closes.c), are due at the next open. */
    lb_sleep_ms(HELD_CLOSES_DUE_MS);
    rs_reader_t *r = NULL;
    assert_int_equal(rs_reader_open_in(sess, PARTS / 2, &r), RS_ERR_NOT_FOUND);
    assert_null(r);
    c = counts();
    assert_int_equal(c.connects, 0);
    assert_int_equal(c.sent[RS_SMSG_ATTACH], 2);
    assert_int_equal(c.mangled[RS_SMSG_ATTACH_REPLY], 2);
    assert_int_equal(c.sent[RS_SMSG_READ_OPEN], PARTS);          /* the open took its read ahead */
    assert_int_equal(c.sent[RS_SMSG_READ_CLOSE], PARTS / 2 + 1); /* and closed it: not ours */
    for (uint32_t p = PARTS / 2; p < PARTS; p++)
        lb_read_part_ok(&f.s, sess, p, NULL);
    assert_true(lb_all_seen(&f.s));
    c = counts();
    assert_int_equal(c.connects, 1);
    assert_int_equal(c.sent[RS_SMSG_ATTACH], 3);
    rs_reader_session_close(sess);
    read_good(&f, 0);
    fx_close(&f);
}

int main(void)
{
    lb_env_defaults();
    lb_alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_connections_used),
        cmocka_unit_test(test_kept_attach_refused),
        cmocka_unit_test(test_kept_attach_malformed),
        cmocka_unit_test(test_kept_attach_other_generation),
        cmocka_unit_test(test_kept_attach_missing),
        cmocka_unit_test(test_kept_attach_late),
        cmocka_unit_test(test_kept_attach_refused_after_read_ahead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
