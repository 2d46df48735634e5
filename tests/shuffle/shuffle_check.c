/* A small verified shuffle through one worker, for tests (shuffle_check.h). */
#include "shuffle_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <string.h>
#include <cmocka.h>
#include <rshuffle/reader.h>

#define SC_PARTS   4
#define SC_REC_MAX 256

rs_pusher_t *sc_push(const rs_shuffle_desc_t *d, uint32_t nrec, size_t reclen)
{
    assert_true(reclen >= sizeof(uint32_t) + 1 && reclen <= SC_REC_MAX);
    rs_pusher_t *p;
    assert_int_equal(rs_pusher_open(d, 0, 0, NULL, &p), RS_OK);
    uint8_t rec[SC_REC_MAX];
    for (uint32_t i = 0; i < nrec; i++) {
        memset(rec, (int)i, reclen);
        memcpy(rec, &i, sizeof(i));
        assert_int_equal(rs_pusher_append(p, i % SC_PARTS, rec, (uint32_t)reclen), RS_OK);
    }
    assert_int_equal(rs_pusher_close(p, NULL), RS_OK);
    return p;
}

void sc_read_check(const rs_shuffle_desc_t *d, uint32_t nrec, size_t reclen)
{
    uint32_t attempt = 0;
    rs_reader_session_t *sess;
    assert_int_equal(rs_reader_session_open(d, 1, &attempt, NULL, &sess), RS_OK);
    uint64_t records = 0;
    for (uint32_t part = 0; part < SC_PARTS; part++) {
        rs_reader_t *r;
        assert_int_equal(rs_reader_open_in(sess, part, &r), RS_OK);
        const void *rv;
        uint32_t len;
        rs_status_t s;
        while ((s = rs_reader_next(r, &rv, &len)) == RS_OK && rv != NULL) {
            uint32_t i;
            memcpy(&i, rv, sizeof(i));
            assert_int_equal(len, reclen);
            assert_int_equal(i % SC_PARTS, part);
            assert_int_equal(((const uint8_t *)rv)[len - 1], (uint8_t)i);
            records++;
        }
        assert_int_equal(s, RS_OK);
        rs_reader_close(r);
    }
    rs_reader_session_close(sess);
    assert_int_equal(records, nrec);
    assert_int_equal(rs_shuffle_drop(d, NULL), RS_OK);
}
