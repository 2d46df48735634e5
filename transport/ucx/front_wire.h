/*
 * The UCX backend's front door's wire format: what a client and a listener
 * exchange on the listener's TCP port before any byte reaches UCX (front.c).
 *
 *   hello (client -> listener), little-endian:
 *     u32 magic "RSFD", u16 version, u16 token length (<= RS_JOB_TOKEN_MAX),
 *     u64 the client's place key (addr.c; 0 unknown), the token bytes.
 *     Nothing follows.
 *   reply (listener -> client), little-endian:
 *     u32 magic "RSFD", u16 version, u16 status (RS_FRONT_ACCEPT,
 *     RS_FRONT_REFUSE or RS_FRONT_BUSY), u32 address length (accept:
 *     1..RS_ADDR_BLOB_MAX; otherwise 0), the address bytes. Nothing follows.
 *
 * Every field is fixed-size or bounded; the decoders are incremental (feed
 * them every byte received so far) and strict (a byte more than the message
 * is malformed). They touch only the bytes given and have no state.
 */
#ifndef RS_TRANSPORT_UCX_FRONT_WIRE_H
#define RS_TRANSPORT_UCX_FRONT_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/config.h>
#include <rshuffle/transport.h>

#define RS_FRONT_MAGIC     0x44465352u /* "RSFD" */
#define RS_FRONT_VERSION   2           /* 2: the hello carries the client's place key */
#define RS_FRONT_HELLO_HDR 16
#define RS_FRONT_HELLO_MAX (RS_FRONT_HELLO_HDR + RS_JOB_TOKEN_MAX)
#define RS_FRONT_REPLY_HDR 12
#define RS_FRONT_REPLY_MAX (RS_FRONT_REPLY_HDR + RS_ADDR_BLOB_MAX)

enum {
    RS_FRONT_ACCEPT = 0,
    RS_FRONT_REFUSE = 1, /* another job token */
    RS_FRONT_BUSY = 2,   /* the listener takes no more clients now (descriptors) */
};

/* Decoder results besides a complete message's length (> 0). */
enum {
    RS_FRONT_INCOMPLETE = 0, /* a valid prefix: wait for more bytes */
    RS_FRONT_MALFORMED = -1, /* no byte sequence starting so can be valid */
};

typedef struct rs_ucx_front_hello {
    const unsigned char *token; /* points into the decoded buffer */
    size_t token_len;
    uint64_t place_key; /* the client's (addr.c), so the listener knows a peer of its host */
} rs_ucx_front_hello_t;

typedef struct rs_ucx_front_reply {
    unsigned status;
    const unsigned char *addr; /* points into the decoded buffer */
    size_t addr_len;
} rs_ucx_front_reply_t;

/*
 * Writes the hello for token (token_len <= RS_JOB_TOKEN_MAX) and place_key into buf
 * (RS_FRONT_HELLO_MAX bytes); returns its length, or 0 if token_len is too long.
 */
size_t rs_ucx_front_hello_build(unsigned char *buf, const char *token, size_t token_len,
                                uint64_t place_key);

/*
 * Decodes the len bytes received so far. Returns the hello's length (== len)
 * and sets *hello, RS_FRONT_INCOMPLETE, or RS_FRONT_MALFORMED; *hello is set
 * only for a complete hello.
 */
int rs_ucx_front_hello_parse(const unsigned char *buf, size_t len, rs_ucx_front_hello_t *hello);

/*
 * Writes a reply into buf (RS_FRONT_REPLY_MAX bytes); returns its length, or
 * 0 if the arguments break the format (accept without an address or with
 * more than RS_ADDR_BLOB_MAX bytes, refuse with one, unknown status).
 */
size_t rs_ucx_front_reply_build(unsigned char *buf, unsigned status, const void *addr,
                                size_t addr_len);

/* Like rs_ucx_front_hello_parse, for a reply. */
int rs_ucx_front_reply_parse(const unsigned char *buf, size_t len, rs_ucx_front_reply_t *reply);

#endif
