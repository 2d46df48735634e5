/* The front door's hello and reply: building and strict decoding. */
#include "transport/ucx/front_wire.h"

#include <string.h>

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    put16(p, (uint16_t)v);
    put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const unsigned char *p)
{
    return get16(p) | ((uint32_t)get16(p + 2) << 16);
}

static uint64_t get64(const unsigned char *p)
{
    return get32(p) | ((uint64_t)get32(p + 4) << 32);
}

/*
 * Checks what is present of magic and version (a prefix of them too), so a
 * stranger's first bytes are refused without waiting for a whole header.
 */
static int prefix_ok(const unsigned char *buf, size_t len)
{
    unsigned char want[6];
    put32(want, RS_FRONT_MAGIC);
    put16(want + 4, RS_FRONT_VERSION);
    size_t n = len < sizeof(want) ? len : sizeof(want);
    return memcmp(buf, want, n) == 0;
}

size_t rs_ucx_front_hello_build(unsigned char *buf, const char *token, size_t token_len,
                                uint64_t place_key)
{
    if (token_len > RS_JOB_TOKEN_MAX)
        return 0;
    put32(buf, RS_FRONT_MAGIC);
    put16(buf + 4, RS_FRONT_VERSION);
    put16(buf + 6, (uint16_t)token_len);
    put64(buf + 8, place_key);
    if (token_len > 0)
        memcpy(buf + RS_FRONT_HELLO_HDR, token, token_len);
    return RS_FRONT_HELLO_HDR + token_len;
}

int rs_ucx_front_hello_parse(const unsigned char *buf, size_t len, rs_ucx_front_hello_t *hello)
{
    if (!prefix_ok(buf, len))
        return RS_FRONT_MALFORMED;
    if (len < RS_FRONT_HELLO_HDR)
        return RS_FRONT_INCOMPLETE;
    size_t token_len = get16(buf + 6);
    if (token_len > RS_JOB_TOKEN_MAX)
        return RS_FRONT_MALFORMED;
    size_t total = RS_FRONT_HELLO_HDR + token_len;
    if (len < total)
        return RS_FRONT_INCOMPLETE;
    if (len > total)
        return RS_FRONT_MALFORMED;
    hello->token = buf + RS_FRONT_HELLO_HDR;
    hello->token_len = token_len;
    hello->place_key = get64(buf + 8);
    return (int)total;
}

size_t rs_ucx_front_reply_build(unsigned char *buf, unsigned status, const void *addr,
                                size_t addr_len)
{
    if (status == RS_FRONT_ACCEPT
            ? addr_len == 0 || addr_len > RS_ADDR_BLOB_MAX
            : (status != RS_FRONT_REFUSE && status != RS_FRONT_BUSY) || addr_len != 0)
        return 0;
    put32(buf, RS_FRONT_MAGIC);
    put16(buf + 4, RS_FRONT_VERSION);
    put16(buf + 6, (uint16_t)status);
    put32(buf + 8, (uint32_t)addr_len);
    if (addr_len > 0)
        memcpy(buf + RS_FRONT_REPLY_HDR, addr, addr_len);
    return RS_FRONT_REPLY_HDR + addr_len;
}

int rs_ucx_front_reply_parse(const unsigned char *buf, size_t len, rs_ucx_front_reply_t *reply)
{
    if (!prefix_ok(buf, len))
        return RS_FRONT_MALFORMED;
    if (len >= 8) {
        unsigned status = get16(buf + 6);
        if (status != RS_FRONT_ACCEPT && status != RS_FRONT_REFUSE && status != RS_FRONT_BUSY)
            return RS_FRONT_MALFORMED;
    }
    if (len < RS_FRONT_REPLY_HDR)
        return RS_FRONT_INCOMPLETE;
    unsigned status = get16(buf + 6);
    uint32_t addr_len = get32(buf + 8);
    if (status == RS_FRONT_ACCEPT ? addr_len == 0 || addr_len > RS_ADDR_BLOB_MAX : addr_len != 0)
        return RS_FRONT_MALFORMED;
    size_t total = RS_FRONT_REPLY_HDR + (size_t)addr_len;
    if (len < total)
        return RS_FRONT_INCOMPLETE;
    if (len > total)
        return RS_FRONT_MALFORMED;
    reply->status = status;
    reply->addr = addr_len > 0 ? buf + RS_FRONT_REPLY_HDR : NULL;
    reply->addr_len = addr_len;
    return (int)total;
}
