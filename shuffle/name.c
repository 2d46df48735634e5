/*
 * Worker names: "host:port" (a listener's address) or "blob:HEX" (the
 * worker context's transport address, hex-encoded: rs_worker_name), and the
 * connection each names.
 */
#include "shuffle/name.h"

#include <string.h>

#include "common/log.h"
#include "shuffle/proto.h"

#define BLOB_PREFIX     "blob:"
#define BLOB_PREFIX_LEN (sizeof(BLOB_PREFIX) - 1)

_Static_assert(RS_SHUFFLE_NAME_MAX >= BLOB_PREFIX_LEN + 2 * RS_ADDR_BLOB_MAX + 1,
               "any blob name fits RS_SHUFFLE_NAME_MAX");

int rs_sproto_name_is_blob(const char *name)
{
    return name != NULL && strncmp(name, BLOB_PREFIX, BLOB_PREFIX_LEN) == 0;
}

rs_status_t rs_sproto_name_encode(const void *blob, size_t len, char *buf, size_t cap)
{
    static const char digits[] = "0123456789abcdef";
    if (blob == NULL || buf == NULL || len == 0 || len > RS_ADDR_BLOB_MAX ||
        cap < BLOB_PREFIX_LEN + 2 * len + 1)
        return RS_ERR_NO_SPACE;
    const uint8_t *b = blob;
    memcpy(buf, BLOB_PREFIX, BLOB_PREFIX_LEN);
    char *o = buf + BLOB_PREFIX_LEN;
    for (size_t i = 0; i < len; i++) {
        *o++ = digits[b[i] >> 4];
        *o++ = digits[b[i] & 15];
    }
    *o = '\0';
    return RS_OK;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A blob name's bytes into blob (RS_ADDR_BLOB_MAX); RS_ERR_INVALID when malformed. */
static rs_status_t name_decode(const char *name, uint8_t *blob, size_t *len_p)
{
    const char *h = name + BLOB_PREFIX_LEN;
    size_t n = strlen(h);
    if (n == 0 || n % 2 != 0 || n / 2 > RS_ADDR_BLOB_MAX)
        return RS_ERR_INVALID;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex_value(h[2 * i]), lo = hex_value(h[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return RS_ERR_INVALID;
        blob[i] = (uint8_t)(hi << 4 | lo);
    }
    *len_p = n / 2;
    return RS_OK;
}

rs_status_t rs_sproto_name_connect(rs_ctx_t *ctx, const char *name, rs_ep_t **ep_p)
{
    if (name == NULL)
        return RS_ERR_INVALID;
    if (rs_sproto_name_is_blob(name)) {
        uint8_t blob[RS_ADDR_BLOB_MAX];
        size_t len;
        if (name_decode(name, blob, &len) != RS_OK) {
            rs_error("shuffle: malformed worker name (want blob: and the address in hex)");
            return RS_ERR_INVALID;
        }
        return rs_connect_address(ctx, blob, len, ep_p);
    }
    char host[RS_SHUFFLE_ADDR_MAX];
    uint16_t port;
    if (rs_sproto_addr_split(name, host, sizeof(host), &port) != RS_OK) {
        rs_error("shuffle: bad worker name '%s' (want host:port or blob:HEX)", name);
        return RS_ERR_INVALID;
    }
    return rs_connect(ctx, host, port, ep_p);
}
