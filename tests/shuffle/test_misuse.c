/*
 * Wrong calls that used to lose records without a word, each now a clear
 * error: a second pusher of one (map, attempt), open or committed, refused
 * at open (RS_ERR_EXISTS); a reader whose n_maps leaves out a map that
 * committed, and one whose descriptor has another n_partitions than the
 * pushers', refused at open (RS_ERR_INVALID); an append to a partition
 * out of range or of a NULL record, refused with the pusher still usable,
 * and one after close (RS_ERR_STATE); the same for rs_pusher_reserve,
 * whose records, built in place, are read back byte for byte. The worker
 * is rshuffled in a process of its own; each pusher has its own context
 * and connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>

#include "rshuffled_child.h"

#define PARTS 4
#define NREC  2000

static pid_t daemon_pid;
static char addr[RS_SHUFFLE_ADDR_MAX];
static const char *workers[1] = {addr};

static int setup(void **state)
{
    (void)state;
    daemon_pid = rsd_start(NULL, NULL, addr, sizeof(addr));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rsd_kill(&daemon_pid);
    return 0;
}

static rs_shuffle_desc_t desc_of(uint32_t id, uint32_t n_partitions)
{
    return (rs_shuffle_desc_t){
        .shuffle_id = id, .n_partitions = n_partitions, .n_workers = 1, .workers = workers};
}

/* Opens (map, attempt) and appends NREC records tagged with map; *p_out open. */
static rs_status_t push_open(const rs_shuffle_desc_t *d, uint32_t map, uint32_t attempt,
                             rs_pusher_t **p_out)
{
    rs_pusher_t *p = NULL;
    rs_status_t s = rs_pusher_open(d, map, attempt, NULL, &p);
    if (s != RS_OK)
        return s;
    uint8_t rec[16];
    for (uint32_t i = 0; i < NREC && s == RS_OK; i++) {
        memset(rec, (int)(map * 31 + attempt), sizeof(rec));
        memcpy(rec, &i, sizeof(i));
        s = rs_pusher_append(p, i % PARTS, rec, sizeof(rec));
    }
    if (s != RS_OK) {
        rs_pusher_destroy(p);
        return s;
    }
    *p_out = p;
    return RS_OK;
}

static rs_status_t push_map(const rs_shuffle_desc_t *d, uint32_t map, uint32_t attempt)
{
    rs_pusher_t *p;
    rs_status_t s = push_open(d, map, attempt, &p);
    if (s != RS_OK)
        return s;
    s = rs_pusher_close(p, NULL);
    rs_pusher_destroy(p);
    return s;
}

/* Reads every partition with n_maps maps (attempts all 0): the worst status, records in *n. */
static rs_status_t read_all(const rs_shuffle_desc_t *d, uint32_t n_maps, uint64_t *n)
{
    uint32_t attempts[4] = {0};
    rs_reader_session_t *sess;
    assert_true(n_maps <= 4);
    rs_status_t s = rs_reader_session_open(d, n_maps, attempts, NULL, &sess);
    if (s != RS_OK)
        return s;
    *n = 0;
    for (uint32_t part = 0; part < d->n_partitions && s == RS_OK; part++) {
        rs_reader_t *r;
        if ((s = rs_reader_open_in(sess, part, &r)) != RS_OK)
            break;
        const void *rv;
        uint32_t len;
        while ((s = rs_reader_next(r, &rv, &len)) == RS_OK && rv != NULL)
            (*n)++;
        rs_reader_close(r);
    }
    rs_reader_session_close(sess);
    return s;
}

static void test_second_pusher_of_an_attempt(void **state)
{
    (void)state;
    rs_shuffle_desc_t d = desc_of(71, PARTS);
    rs_pusher_t *first;
    assert_int_equal(push_open(&d, 0, 0, &first), RS_OK);
    /* Open: a second pusher of map 0 attempt 0 is refused. */
    assert_int_equal(push_map(&d, 0, 0), RS_ERR_EXISTS);
    assert_int_equal(rs_pusher_close(first, NULL), RS_OK);
    rs_pusher_destroy(first);
    /* Committed: refused too. */
    assert_int_equal(push_map(&d, 0, 0), RS_ERR_EXISTS);
    /* Another attempt (speculative) and another map are welcome. */
    assert_int_equal(push_map(&d, 0, 1), RS_OK);
    assert_int_equal(push_map(&d, 1, 0), RS_OK);
    uint64_t n = 0;
    assert_int_equal(read_all(&d, 2, &n), RS_OK);
    assert_int_equal(n, 2 * NREC); /* attempt 0 of maps 0 and 1, the first pusher's bytes */
    assert_int_equal(rs_shuffle_drop(&d, NULL), RS_OK);
}

/*
 * The append's argument checks sit in front of its per-record path: the
 * refused calls append nothing and leave the pusher usable; an empty
 * record (NULL, 0) is a record; after close nothing more is taken.
 */
static void test_append_wrong_calls(void **state)
{
    (void)state;
    rs_shuffle_desc_t d = desc_of(74, PARTS);
    rs_pusher_t *p;
    assert_int_equal(push_open(&d, 0, 0, &p), RS_OK); /* NREC records, buffers part filled */
    uint8_t rec[16] = {0};
    assert_int_equal(rs_pusher_append(p, PARTS, rec, sizeof(rec)), RS_ERR_INVALID);
    assert_int_equal(rs_pusher_append(p, UINT32_MAX, rec, sizeof(rec)), RS_ERR_INVALID);
    assert_int_equal(rs_pusher_append(p, 0, NULL, 4), RS_ERR_INVALID);
    assert_int_equal(rs_pusher_append(p, 1, NULL, 0), RS_OK);
    assert_int_equal(rs_pusher_append(p, 2, rec, sizeof(rec)), RS_OK);
    assert_int_equal(rs_pusher_close(p, NULL), RS_OK);
    assert_int_equal(rs_pusher_append(p, 0, rec, sizeof(rec)), RS_ERR_STATE);
    assert_int_equal(rs_pusher_append(p, 1, NULL, 0), RS_ERR_STATE);
    rs_pusher_destroy(p);
    uint64_t n = 0;
    assert_int_equal(read_all(&d, 1, &n), RS_OK);
    assert_int_equal(n, NREC + 2); /* the empty record and the last one, nothing refused */
}

#define RESERVED   3000                       /* records of test_reserve_in_place */
#define RES_LEN(i) (4u + (uint32_t)(i) % 300) /* crossing buffer ends at many offsets */

static void res_fill(uint8_t *rec, uint32_t i)
{
    memcpy(rec, &i, 4);
    for (uint32_t k = 4; k < RES_LEN(i); k++)
        rec[k] = (uint8_t)(i * 7 + k);
}

/*
 * Records built in place (rs_pusher_reserve), mixed with copied ones in
 * the same buffers, read back byte for byte, each once; its wrong calls
 * are refused and leave nothing behind.
 */
static void test_reserve_in_place(void **state)
{
    (void)state;
    rs_shuffle_desc_t d = desc_of(75, PARTS);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(&d, 0, 0, NULL, &p), RS_OK);
    void *at = &at;
    assert_int_equal(rs_pusher_reserve(p, PARTS, 8, &at), RS_ERR_INVALID);
    assert_int_equal(rs_pusher_reserve(p, 0, 8, NULL), RS_ERR_INVALID);
    assert_int_equal(rs_pusher_reserve(NULL, 0, 8, &at), RS_ERR_INVALID);
    assert_int_equal(rs_pusher_reserve(p, 0, RS_PUSH_RECORD_MAX + 1, &at), RS_ERR_INVALID);
    assert_ptr_equal(at, &at); /* not written on an error */
    uint8_t rec[RES_LEN(299)];
    for (uint32_t i = 0; i < RESERVED; i++) {
        if (i % 2 == 0) {
            assert_int_equal(rs_pusher_reserve(p, i % PARTS, RES_LEN(i), &at), RS_OK);
            res_fill(at, i);
        } else {
            res_fill(rec, i);
            assert_int_equal(rs_pusher_append(p, i % PARTS, rec, RES_LEN(i)), RS_OK);
        }
    }
    assert_int_equal(rs_pusher_close(p, NULL), RS_OK);
    assert_int_equal(rs_pusher_reserve(p, 0, 8, &at), RS_ERR_STATE);
    assert_int_equal(rs_pusher_reserve(p, 0, 8, NULL), RS_ERR_STATE);
    rs_pusher_destroy(p);

    uint32_t attempts[1] = {0};
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(&d, 1, attempts, NULL, &sess), RS_OK);
    static uint8_t seen[RESERVED];
    memset(seen, 0, sizeof(seen));
    uint32_t n = 0;
    for (uint32_t part = 0; part < PARTS; part++) {
        rs_reader_t *r;
        assert_int_equal(rs_reader_open_in(sess, part, &r), RS_OK);
        const void *rv;
        uint32_t len, i;
        rs_status_t s;
        while ((s = rs_reader_next(r, &rv, &len)) == RS_OK && rv != NULL) {
            assert_true(len >= 4);
            memcpy(&i, rv, 4);
            assert_true(i < RESERVED && i % PARTS == part && len == RES_LEN(i));
            res_fill(rec, i);
            assert_memory_equal(rv, rec, len);
            assert_int_equal(seen[i]++, 0);
            n++;
        }
        assert_int_equal(s, RS_OK);
        rs_reader_close(r);
    }
    rs_reader_session_close(sess);
    assert_int_equal(n, RESERVED);
    assert_int_equal(rs_shuffle_drop(&d, NULL), RS_OK);
}

static void test_reader_n_maps_too_small(void **state)
{
    (void)state;
    rs_shuffle_desc_t d = desc_of(72, PARTS);
    assert_int_equal(push_map(&d, 0, 0), RS_OK);
    assert_int_equal(push_map(&d, 1, 0), RS_OK);
    assert_int_equal(push_map(&d, 2, 0), RS_OK);
    uint64_t n = 0;
    assert_int_equal(read_all(&d, 2, &n), RS_ERR_INVALID); /* map 2 committed */
    assert_int_equal(read_all(&d, 0, &n), RS_ERR_INVALID); /* every map left out */
    assert_int_equal(read_all(&d, 3, &n), RS_OK);
    assert_int_equal(n, 3 * NREC);
    assert_int_equal(rs_shuffle_drop(&d, NULL), RS_OK);
}

static void test_reader_other_n_partitions(void **state)
{
    (void)state;
    rs_shuffle_desc_t d = desc_of(73, PARTS);
    assert_int_equal(push_map(&d, 0, 0), RS_OK);
    uint64_t n = 0;
    rs_shuffle_desc_t more = desc_of(73, 2 * PARTS), fewer = desc_of(73, PARTS - 1);
    assert_int_equal(read_all(&more, 1, &n), RS_ERR_INVALID);
    assert_int_equal(read_all(&fewer, 1, &n), RS_ERR_INVALID);
    assert_int_equal(read_all(&d, 1, &n), RS_OK);
    assert_int_equal(n, NREC);
    assert_int_equal(rs_shuffle_drop(&d, NULL), RS_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_pusher_of_an_attempt),
        cmocka_unit_test(test_append_wrong_calls),
        cmocka_unit_test(test_reserve_in_place),
        cmocka_unit_test(test_reader_n_maps_too_small),
        cmocka_unit_test(test_reader_other_n_partitions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
