/*
 * A warm lane's replies answered badly (pusher/pusher.c attach_all and
 * attach_wait, pusher/answer.c): a client whose lane keeps a connection
 * from an earlier pusher, then a pusher on it whose worker's ATTACH_REPLY,
 * GRANT or COMMIT_REPLY is refused, rewritten on the way as a faulty
 * worker's (rs_lb_mangle), dropped or held past the wait. Each time the
 * open, append or close fails with the status it must, within its bound;
 * the attempt is committed only when the worker committed it (a rewritten
 * or late COMMIT_REPLY: docs/shuffle.md "Map commit"), and the next pusher
 * of the client pushes and commits. At the end a reader session of the
 * failed attempts finds them uncommitted (RS_ERR_STATE) or reads them
 * whole, and one of the winning attempts reads every record once.
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

#define WAIT_MS    4000 /* the waits of a pusher whose worker answers: never reached */
#define SHORT_MS   300  /* close's wait when a COMMIT_REPLY is held */
#define CONNECT_MS 400  /* connect_timeout_ms: the attach's wait */
#define PARTS      4
#define MAPS       48 /* map 0 warms the lane; each case pushes one map */
#define RECORDS    200

/* Offsets in the messages (shuffle/proto.c): the header, then each message's fields. */
enum { H_VERSION = 0, H_TYPE = 2, H_STATUS = 4 };
enum { AR_ARENA = 8, AR_REPLICAS = 20 };
enum { G_N = 12, G_RESERVED = 20, G_E0 = 24 }; /* GRANT: entries of 32 bytes from G_E0 */
enum { GE_PART = 0, GE_STATUS = 4, GE_SLOT = 8, GE_OFF = 16, GE_LEN = 24 };
enum { C_E0 = 24, CE_CHECKSUM = 16 }; /* COMMIT: entries of 24 bytes from C_E0 */

/* Where a case's fault shows: the open, or the close (after the appends). */
typedef enum { AT_OPEN, AT_CLOSE } stage_t;

/* A faulty worker's message (rs_lb_mangle): up to four fields set or added to, then cut. */
typedef struct field {
    int off; /* -1: none */
    int width;
    int add; /* v is added to the field, else it replaces it */
    int64_t v;
} field_t;

typedef struct mangle {
    field_t f[4];
    long cut; /* >= 0: the length delivered; -1: as it was; -2: one byte short */
} mangle_t;

#define F_NONE        ((field_t){-1, 0, 0, 0})
#define SET(o, w, v)  ((field_t){(o), (w), 0, (int64_t)(v)})
#define ADD(o, w, v)  ((field_t){(o), (w), 1, (int64_t)(v)})
#define M1(a, cut)    ((mangle_t){{a, F_NONE, F_NONE, F_NONE}, (cut)})
#define M2(a, b, cut) ((mangle_t){{a, b, F_NONE, F_NONE}, (cut)})
/* A grant entry 0 refused with status st (slot, off and len 0, as a refusal carries). */
#define G_REFUSED(st)                                                     \
    ((mangle_t){{SET(G_E0 + GE_STATUS, 4, st), SET(G_E0 + GE_SLOT, 4, 0), \
                 SET(G_E0 + GE_OFF, 8, 0), SET(G_E0 + GE_LEN, 8, 0)},     \
                -1})

static size_t mangle_msg(void *arg, unsigned char *data, size_t len)
{
    const mangle_t *m = arg;
    for (int i = 0; i < 4; i++) {
        const field_t *f = &m->f[i];
        if (f->off < 0 || (size_t)f->off + (size_t)f->width > len)
            continue;
        uint64_t v = (uint64_t)f->v;
        if (f->add)
            v += rs_get_le(data + f->off, (unsigned)f->width);
        rs_put_le(data + f->off, v, (unsigned)f->width);
    }
    if (m->cut == -2)
        return len - 1;
    return m->cut >= 0 && (size_t)m->cut < len ? (size_t)m->cut : len;
}

typedef struct fx {
    lb_shuffle_t s;
    rs_client_t *cl;
    rs_pusher_config_t pc;
    uint32_t next_map;
    uint32_t win[MAPS];  /* the attempt of each map that a reader reads */
    int8_t failed[MAPS]; /* attempt 0 failed: 1 not committed, 2 committed all the same */
} fx_t;

static rs_lb_counts_t counts(void)
{
    rs_lb_counts_t c;
    rs_lb_counts(&c);
    return c;
}

/* A push of the client: the open's, the appends' and the close's statuses, and times. */
typedef struct push_res {
    rs_status_t open, append, close;
    uint64_t open_ms, close_ms;
} push_res_t;

/* Pushes map (attempt) on the client: its first n records. */
static push_res_t push_in(fx_t *f, uint32_t map, uint32_t attempt, const rs_pusher_config_t *pc,
                          uint32_t n)
{
    push_res_t r = {.append = RS_OK, .close = RS_OK};
    rs_pusher_t *p = NULL;
    uint64_t t0 = lb_now_ms();
    r.open = rs_pusher_open_in(f->cl, &f->s.desc, map, attempt, pc, &p);
    r.open_ms = lb_now_ms() - t0;
    if (r.open != RS_OK) {
        assert_null(p); /* outputs set only on success */
        return r;
    }
    uint8_t rec[TREC_MAX];
    for (uint32_t i = 0; i < n && r.append == RS_OK; i++) {
        uint32_t len = trec_make(map, i, rec);
        r.append = rs_pusher_append(p, i % PARTS, rec, len);
    }
    t0 = lb_now_ms();
    r.close = rs_pusher_close(p, NULL);
    r.close_ms = lb_now_ms() - t0;
    rs_pusher_destroy(p);
    return r;
}

/* A pusher of the client whose worker answers commits, making `connects` connections. */
static void push_good(fx_t *f, uint32_t map, uint32_t attempt, uint64_t connects)
{
    rs_lb_reset();
    push_res_t r = push_in(f, map, attempt, &f->pc, RECORDS);
    assert_int_equal(r.open, RS_OK);
    assert_int_equal(r.append, RS_OK);
    assert_int_equal(r.close, RS_OK);
    rs_lb_counts_t c = counts();
    assert_int_equal(c.connects, connects);
    assert_int_equal(c.delivered[RS_SMSG_ATTACH_REPLY], 1);
    assert_int_equal(c.delivered[RS_SMSG_COMMIT_REPLY], 1); /* no late one of an earlier task */
    f->win[map] = attempt;
}

static void fx_open(fx_t *f, size_t merge_below)
{
    memset(f, 0, sizeof(*f));
    lb_workers_start(&f->s, 1, NULL);
    lb_shuffle_desc(&f->s, 41, PARTS, 1, MAPS, RECORDS);
    assert_int_equal(rs_client_create(NULL, &f->cl), RS_OK);
    lb_pusher_config(&f->pc, WAIT_MS);
    f->pc.merge_below = merge_below;
    push_good(f, 0, 0, 1); /* the lane keeps its connection */
    f->next_map = 1;
}

/* A session of the client reading the maps pushed (attempts att), every record once. */
static void read_all(fx_t *f, const uint32_t *att)
{
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, WAIT_MS);
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open_in(f->cl, &f->s.desc, f->next_map, att, &rc, &sess),
                     RS_OK);
    lb_seen_clear(&f->s);
    f->s.n_maps = f->next_map;
    for (uint32_t p = 0; p < PARTS; p++)
        lb_read_part_ok(&f->s, sess, p, NULL);
    assert_true(lb_all_seen(&f->s));
    f->s.n_maps = MAPS;
    rs_reader_session_close(sess);
}

/*
 * A reader of the client: each failed attempt 0 is uncommitted (RS_ERR_STATE
 * from the first open) or, the worker having committed it, read whole; the
 * winning attempts read every record of every map once.
 */
static void fx_check_close(fx_t *f)
{
    rs_reader_config_t rc;
    lb_reader_config(&rc, 0, WAIT_MS);
    for (uint32_t m = 0; m < f->next_map; m++) {
        if (f->failed[m] == 0)
            continue;
        uint32_t att[MAPS];
        memcpy(att, f->win, sizeof(att));
        att[m] = 0;
        if (f->failed[m] == 2) {
            read_all(f, att);
            continue;
        }
        rs_reader_session_t *sess;
        assert_int_equal(rs_reader_session_open_in(f->cl, &f->s.desc, f->next_map, att, &rc, &sess),
                         RS_OK);
        rs_reader_t *r = NULL;
        rs_status_t st = rs_reader_open_in(sess, 0, &r);
        if (st != RS_ERR_STATE)
            fail_msg("map %u attempt 0: a reader's open returned %s, not RS_ERR_STATE", m,
                     rs_strerror(st));
        assert_null(r);
        rs_reader_session_close(sess);
    }
    read_all(f, f->win);
    rs_client_destroy(f->cl);
    lb_workers_stop(&f->s);
    lb_shuffle_free(&f->s);
}

/* One faulty reply: which message, how, where it shows and with what. */
typedef struct fcase {
    const char *what;
    unsigned type;
    mangle_t m;
    stage_t at;
    rs_status_t want;
    int committed;    /* the worker committed attempt 0 all the same (its reply was faulty) */
    int fault;        /* F_MANGLE, F_DROP, F_HOLD */
    uint32_t wait_ms; /* the pusher's wait_ms (0: WAIT_MS) */
    uint32_t min_ms;  /* the stage's least time (0: the answer came: well below WAIT_MS) */
    int cold;         /* no prefetch at open: the lane's last task pushed nothing */
} fcase_t;

enum { F_MANGLE, F_DROP, F_HOLD };

/*
 * Map k's attempt 0 with the fault, on the warm lane's connection: the
 * status at its stage (the appends return RS_OK or it), in bounded time;
 * then attempt 1 of that map on the same client commits: on a new
 * connection when the attach or the commit failed (pusher.c conn_reusable:
 * a late reply goes with the old one), on the same one when a grant did
 * (its next attach ends the failed attempt at the worker); and the next
 * map's pusher attaches that connection again.
 */
static void run_case(fx_t *f, fcase_t *c)
{
    uint32_t empty = 0;
    if (c->cold) { /* commits with nothing sent: no hint left for the next open */
        empty = f->next_map++;
        rs_lb_reset();
        assert_int_equal(push_in(f, empty, 9, &f->pc, 0).close, RS_OK);
    }
    uint32_t map = f->next_map++;
    assert_true(f->next_map + 2 <= MAPS);
    rs_pusher_config_t pc = f->pc;
    if (c->wait_ms)
        pc.wait_ms = c->wait_ms;
    rs_lb_reset();
    if (c->fault == F_MANGLE)
        rs_lb_mangle(c->type, 1, mangle_msg, &c->m);
    else if (c->fault == F_DROP)
        rs_lb_drop(c->type, 1);
    else
        rs_lb_hold(c->type);
    push_res_t r = push_in(f, map, 0, &pc, RECORDS);
    rs_lb_counts_t n = counts();
    rs_status_t got = c->at == AT_OPEN ? r.open : r.close;
    if (got != c->want || (c->at == AT_CLOSE && r.open != RS_OK))
        fail_msg("%s: open %s, close %s; wanted %s at the %s", c->what, rs_strerror(r.open),
                 rs_strerror(r.close), rs_strerror(c->want), c->at == AT_OPEN ? "open" : "close");
    if (r.append != RS_OK && r.append != c->want)
        fail_msg("%s: an append returned %s", c->what, rs_strerror(r.append));
    if (c->fault == F_MANGLE && n.mangled[c->type] != 1)
        fail_msg("%s: %llu rewritten", c->what, (unsigned long long)n.mangled[c->type]);
    if (c->fault == F_DROP)
        assert_int_equal(n.dropped[c->type], 1);
    if (c->fault == F_HOLD)
        assert_int_equal(n.delivered[c->type], 0);
    assert_int_equal(n.connects, 0); /* the warm lane's connection */
    uint64_t ms = c->at == AT_OPEN ? r.open_ms : r.close_ms;
    if (c->min_ms == 0 ? ms >= WAIT_MS / 2 : ms + 20 < c->min_ms || ms >= c->min_ms + 2000)
        fail_msg("%s: took %llu ms", c->what, (unsigned long long)ms);
    if (c->want == RS_OK) {
        f->win[map] = 0;
        push_good(f, f->next_map++, 0, 0);
    } else {
        f->failed[map] = c->committed ? 2 : 1;
        /*
         * An attach or commit that failed closes the connection, and so does
         * a grant the pusher could not take; a grant the worker refused does not.
         */
        int kept = c->type == RS_SMSG_GRANT && !lb_status_garbled(c->want);
        push_good(f, map, 1, kept ? 0 : 1); /* releases a held reply */
        push_good(f, f->next_map++, 0, 0);
    }
    if (c->cold)
        push_good(f, empty, 0, 0);
}

static void run_cases(fcase_t *cases, size_t n, size_t merge_below)
{
    fx_t f;
    fx_open(&f, merge_below);
    for (size_t i = 0; i < n; i++)
        run_case(&f, &cases[i]);
    fx_check_close(&f);
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define ATTACH(what, m, want) \
    ((fcase_t){what, RS_SMSG_ATTACH_REPLY, m, AT_OPEN, want, 0, F_MANGLE, 0, 0, 0})

/* The worker's ATTACH_REPLY says no, or is malformed: the open returns what it says, at once. */
static void test_warm_attach_refused_malformed(void **state)
{
    (void)state;
    fcase_t cases[] = {
        ATTACH("refused, not found", M1(SET(H_STATUS, 4, RS_ERR_NOT_FOUND), 8), RS_ERR_NOT_FOUND),
        ATTACH("refused, refused", M1(SET(H_STATUS, 4, RS_ERR_REFUSED), 8), RS_ERR_REFUSED),
        ATTACH("refused, exists", M1(SET(H_STATUS, 4, RS_ERR_EXISTS), 8), RS_ERR_EXISTS),
        ATTACH("empty", M1(F_NONE, 0), RS_ERR_TRUNCATED),
        ATTACH("header cut", M1(F_NONE, 6), RS_ERR_TRUNCATED),
        ATTACH("fixed part cut", M1(F_NONE, 16), RS_ERR_TRUNCATED),
        ATTACH("rkey one byte short", M1(F_NONE, -2), RS_ERR_BAD_LENGTH),
        ATTACH("refusal with a body", M1(SET(H_STATUS, 4, RS_ERR_NOT_FOUND), -1),
               RS_ERR_BAD_LENGTH),
        ATTACH("unknown status", M1(SET(H_STATUS, 4, -999), -1), RS_ERR_PROTOCOL),
        ATTACH("another type", M1(SET(H_TYPE, 2, RS_SMSG_GRANT), -1), RS_ERR_PROTOCOL),
        ATTACH("another version", M1(SET(H_VERSION, 2, 0x7777), -1), RS_ERR_BAD_VERSION),
        ATTACH("empty arena", M1(SET(AR_ARENA, 8, 0), -1), RS_ERR_PROTOCOL),
        ATTACH("replicas past the maximum", M1(SET(AR_REPLICAS, 4, 9), -1), RS_ERR_PROTOCOL),
    };
    run_cases(cases, N_OF(cases), 0);
}

/*
 * The answer never comes (dropped), or comes after the wait (held, released
 * by the next push): the open's wait ends after connect_timeout_ms with
 * RS_ERR_TIMEOUT; the late answer never reaches the next pusher.
 */
static void test_warm_attach_missing_late(void **state)
{
    (void)state;
    fcase_t cases[] = {
        {"dropped", RS_SMSG_ATTACH_REPLY, M1(F_NONE, -1), AT_OPEN, RS_ERR_TIMEOUT, 0, F_DROP, 0,
         CONNECT_MS, 0},
        {"late", RS_SMSG_ATTACH_REPLY, M1(F_NONE, -1), AT_OPEN, RS_ERR_TIMEOUT, 0, F_HOLD, 0,
         CONNECT_MS, 0},
    };
    run_cases(cases, N_OF(cases), 0);
}

/*
 * Real refusals on the warm connection: a second pusher of a committed
 * attempt (RS_ERR_EXISTS), a pusher of another generation (RS_ERR_EXISTS).
 * The refused connection is not kept; nothing of the refused open lands.
 */
static void test_warm_attach_worker_refuses(void **state)
{
    (void)state;
    fx_t f;
    fx_open(&f, 0);
    rs_lb_reset();
    push_res_t r = push_in(&f, 0, 0, &f.pc, RECORDS);
    assert_int_equal(r.open, RS_ERR_EXISTS);
    assert_int_equal(counts().connects, 0);
    assert_true(r.open_ms < WAIT_MS / 2);
    push_good(&f, f.next_map++, 0, 1);
    rs_shuffle_desc_t keep = f.s.desc;
    f.s.desc.generation = 7;
    rs_lb_reset();
    r = push_in(&f, f.next_map, 0, &f.pc, RECORDS);
    assert_int_equal(r.open, RS_ERR_EXISTS);
    assert_int_equal(counts().connects, 0);
    f.s.desc = keep;
    f.failed[f.next_map] = 1;
    push_good(&f, f.next_map, 1, 1);
    f.next_map++;
    push_good(&f, f.next_map++, 0, 0);
    fx_check_close(&f); /* map 0 read once: nothing of the refused second pusher */
}

#define GRANT(what, m, want) \
    ((fcase_t){what, RS_SMSG_GRANT, m, AT_CLOSE, want, 0, F_MANGLE, 0, 0, 0})
#define GRANT_OK(what, m) GRANT(what, m, RS_OK)
#define GRANT_COLD(what, m, want) \
    ((fcase_t){what, RS_SMSG_GRANT, m, AT_CLOSE, want, 0, F_MANGLE, 0, 0, 1})

/*
 * The prefetch at open (the lane's hint, merge off: one grant per
 * partition) answered badly: a malformed answer fails the pusher with the
 * decoder's status, an entry out of range with RS_ERR_PROTOCOL, before any
 * write into it; a refusal is a hint only, and the push asks again.
 */
static void test_warm_prefetch_grant(void **state)
{
    (void)state;
    fcase_t cases[] = {
        GRANT("fixed part cut", M1(F_NONE, 16), RS_ERR_TRUNCATED),
        GRANT("entries one byte short", M1(F_NONE, -2), RS_ERR_BAD_LENGTH),
        GRANT("one entry more than sent", M1(ADD(G_N, 4, 1), -1), RS_ERR_BAD_LENGTH),
        GRANT("reserved set", M1(SET(G_RESERVED, 4, 1), -1), RS_ERR_PROTOCOL),
        GRANT("a refusal with entries", M1(SET(H_STATUS, 4, RS_ERR_NOT_FOUND), -1),
              RS_ERR_PROTOCOL),
        GRANT("unknown entry status", M1(SET(G_E0 + GE_STATUS, 4, -999), -1), RS_ERR_PROTOCOL),
        GRANT("unknown partition", M1(SET(G_E0 + GE_PART, 4, PARTS), -1), RS_ERR_PROTOCOL),
        GRANT("slot past the last", M1(SET(G_E0 + GE_SLOT, 4, RS_GRANT_SLOTS), -1),
              RS_ERR_PROTOCOL),
        GRANT("offset not aligned", M1(ADD(G_E0 + GE_OFF, 8, 1), -1), RS_ERR_PROTOCOL),
        GRANT("range wraps", M1(SET(G_E0 + GE_OFF, 8, UINT64_MAX - 63), -1), RS_ERR_PROTOCOL),
        GRANT("length past the maximum", M1(SET(G_E0 + GE_LEN, 8, RS_GRANT_MAX + 64), -1),
              RS_ERR_PROTOCOL),
        GRANT("range past the arena", M1(ADD(G_E0 + GE_OFF, 8, 1ull << 40), -1), RS_ERR_PROTOCOL),
        GRANT_OK("refused as a whole: a hint",
                 M2(SET(H_STATUS, 4, RS_ERR_NOT_FOUND), SET(G_N, 4, 0), RS_SPROTO_GRANT_LEN)),
        GRANT_OK("an entry refused: asked again", G_REFUSED(RS_ERR_NOT_FOUND)),
    };
    run_cases(cases, N_OF(cases), 0);
}

/*
 * Grants asked as the batches come (no hint: the lane's last task sent
 * nothing): a refusal fails the pusher with its status; a grant shorter
 * than asked, or a retire's empty answer, makes it ask again.
 */
static void test_warm_grant(void **state)
{
    (void)state;
    fcase_t cases[] = {
        GRANT_COLD("refused as a whole",
                   M2(SET(H_STATUS, 4, RS_ERR_NOT_FOUND), SET(G_N, 4, 0), RS_SPROTO_GRANT_LEN),
                   RS_ERR_NOT_FOUND),
        GRANT_COLD("an entry refused", G_REFUSED(RS_ERR_NOT_FOUND), RS_ERR_NOT_FOUND),
        GRANT_COLD("range past the arena", M1(ADD(G_E0 + GE_OFF, 8, 1ull << 40), -1),
                   RS_ERR_PROTOCOL),
        GRANT_COLD("shorter than asked", M1(SET(G_E0 + GE_LEN, 8, 64), -1), RS_OK),
        GRANT_COLD("empty: asked again", M2(SET(G_E0 + GE_LEN, 8, 0), SET(G_E0 + GE_OFF, 8, 0), -1),
                   RS_OK),
    };
    run_cases(cases, N_OF(cases), 0);
}

/* Merged writes' grants (the default merge_below: every batch here is small). */
static void test_warm_merged_grant(void **state)
{
    (void)state;
    fcase_t cases[] = {
        GRANT("refused", G_REFUSED(RS_ERR_NOT_FOUND), RS_ERR_NOT_FOUND),
        GRANT("shorter than the write", M1(SET(G_E0 + GE_LEN, 8, 64), -1), RS_ERR_PROTOCOL),
        GRANT("range past the arena", M1(ADD(G_E0 + GE_OFF, 8, 1ull << 40), -1), RS_ERR_PROTOCOL),
    };
    run_cases(cases, N_OF(cases), 32 << 10);
}

#define COMMIT(what, m, want) \
    ((fcase_t){what, RS_SMSG_COMMIT_REPLY, m, AT_CLOSE, want, 1, F_MANGLE, 0, 0, 0})

/*
 * The COMMIT_REPLY rewritten or late: the worker committed, the pusher
 * cannot know it and close fails with what it got (a refusal's status, the
 * decoder's, RS_ERR_TIMEOUT after wait_ms). The attempt is there for a
 * reader that names it; the next attempt commits too, and a reader reads
 * the one it names, once. A worker that refuses the commit itself (its
 * counts do not match) commits nothing.
 */
static void test_warm_commit_reply(void **state)
{
    (void)state;
    fcase_t cases[] = {
        COMMIT("refused, checksum", M1(SET(H_STATUS, 4, RS_ERR_CHECKSUM), -1), RS_ERR_CHECKSUM),
        COMMIT("cut", M1(F_NONE, 4), RS_ERR_TRUNCATED),
        COMMIT("unknown status", M1(SET(H_STATUS, 4, -999), -1), RS_ERR_PROTOCOL),
        COMMIT("another type", M1(SET(H_TYPE, 2, RS_SMSG_DROP_REPLY), -1), RS_ERR_PROTOCOL),
        COMMIT("another version", M1(SET(H_VERSION, 2, 0x7777), -1), RS_ERR_BAD_VERSION),
        {"late", RS_SMSG_COMMIT_REPLY, M1(F_NONE, -1), AT_CLOSE, RS_ERR_TIMEOUT, 1, F_HOLD,
         SHORT_MS, SHORT_MS, 0},
        {"counts refused by the worker", RS_SMSG_COMMIT, M1(ADD(C_E0 + CE_CHECKSUM, 8, 1), -1),
         AT_CLOSE, RS_ERR_CHECKSUM, 0, F_MANGLE, 0, 0, 0},
    };
    run_cases(cases, N_OF(cases), 0);
}

int main(void)
{
    setenv("RSHUFFLE_CONNECT_TIMEOUT_MS", "400", 0); /* CONNECT_MS */
    lb_env_defaults();
    lb_alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_attach_refused_malformed),
        cmocka_unit_test(test_warm_attach_missing_late),
        cmocka_unit_test(test_warm_attach_worker_refuses),
        cmocka_unit_test(test_warm_prefetch_grant),
        cmocka_unit_test(test_warm_grant),
        cmocka_unit_test(test_warm_merged_grant),
        cmocka_unit_test(test_warm_commit_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
