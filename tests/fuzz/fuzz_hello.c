/*
 * libFuzzer target for the front door's decoders (transport/ucx/front_wire.h):
 * the hello a listener reads from anyone who connects, and the reply a
 * client reads from the listener. Besides memory safety, it checks their
 * contract as the socket code relies on it: the result is a documented one;
 * a complete message is exactly the input and re-encodes to the same bytes;
 * every strict prefix of a valid message is incomplete (so a slow peer is
 * waited for); once malformed, no longer input is anything else (so a
 * connection is dropped at its first bad byte); and the constant-time token
 * check agrees with memcmp.
 */
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_hello.h"
#include "common/token.h"
#include "transport/ucx/front_wire.h"

static const char token[] = "rshuffle";

static int parse(int reply, const uint8_t *buf, size_t len)
{
    if (reply) {
        rs_ucx_front_reply_t r;
        return rs_ucx_front_reply_parse(buf, len, &r);
    }
    rs_ucx_front_hello_t h;
    return rs_ucx_front_hello_parse(buf, len, &h);
}

/* Prefixes: incomplete before a complete message, malformed stays malformed. */
static void check_prefixes(int reply, const uint8_t *buf, size_t len, int whole)
{
    int bad = 0;
    for (size_t k = 0; k <= len; k++) {
        int r = parse(reply, buf, k);
        CHECK(r == RS_FRONT_INCOMPLETE || r == RS_FRONT_MALFORMED || (r > 0 && (size_t)r == k));
        if (whole > 0 && k < len)
            CHECK(r == RS_FRONT_INCOMPLETE);
        if (bad)
            CHECK(r == RS_FRONT_MALFORMED);
        bad = r == RS_FRONT_MALFORMED;
        if (r > 0 && k < len)
            bad = 1; /* a byte past a complete message is malformed */
    }
}

static void fuzz_hello(const uint8_t *buf, size_t len)
{
    rs_ucx_front_hello_t h;
    int r = rs_ucx_front_hello_parse(buf, len, &h);
    CHECK(r == RS_FRONT_INCOMPLETE || r == RS_FRONT_MALFORMED || (r > 0 && (size_t)r == len));
    CHECK(len <= RS_FRONT_HELLO_MAX || r == RS_FRONT_MALFORMED);
    if (r > 0) {
        CHECK(h.token_len <= RS_JOB_TOKEN_MAX && h.token == buf + RS_FRONT_HELLO_HDR);
        CHECK(RS_FRONT_HELLO_HDR + h.token_len == len);
        uint8_t again[RS_FRONT_HELLO_MAX];
        CHECK(rs_ucx_front_hello_build(again, (const char *)h.token, h.token_len, h.place_key) ==
              len);
        CHECK(memcmp(again, buf, len) == 0);
        int same = h.token_len == strlen(token) && memcmp(h.token, token, h.token_len) == 0;
        CHECK(rs_token_equal(h.token, h.token_len, token, strlen(token)) == same);
    }
    check_prefixes(0, buf, len, r);
}

static void fuzz_reply(const uint8_t *buf, size_t len)
{
    rs_ucx_front_reply_t rep;
    int r = rs_ucx_front_reply_parse(buf, len, &rep);
    CHECK(r == RS_FRONT_INCOMPLETE || r == RS_FRONT_MALFORMED || (r > 0 && (size_t)r == len));
    CHECK(len <= RS_FRONT_REPLY_MAX || r == RS_FRONT_MALFORMED);
    if (r > 0) {
        CHECK(rep.status == RS_FRONT_ACCEPT || rep.status == RS_FRONT_REFUSE ||
              rep.status == RS_FRONT_BUSY);
        CHECK(rep.status == RS_FRONT_ACCEPT ? rep.addr_len > 0 && rep.addr_len <= RS_ADDR_BLOB_MAX
                                            : rep.addr_len == 0 && rep.addr == NULL);
        CHECK(RS_FRONT_REPLY_HDR + rep.addr_len == len);
        static uint8_t again[RS_FRONT_REPLY_MAX];
        CHECK(rs_ucx_front_reply_build(again, rep.status, rep.addr, rep.addr_len) == len);
        CHECK(memcmp(again, buf, len) == 0);
    }
    /* Prefixes of long inputs cost len^2: the first 256 bytes hold every field. */
    check_prefixes(1, buf, len < 256 ? len : 256, len < 256 ? r : 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] % FUZZ_FRONT_MODES == FUZZ_FRONT_HELLO)
        fuzz_hello(data + 1, size - 1);
    else
        fuzz_reply(data + 1, size - 1);
    return 0;
}
