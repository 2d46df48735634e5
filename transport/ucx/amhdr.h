/*
 * The UCX backend's active-message headers (one AM id carries them all),
 * on the wire little-endian, the kind byte first:
 *
 *   control (RS_UCX_HDR_LEN, 16 bytes): u8 kind (CONN, CONN_ACK, MSG,
 *     NOTIFY, BYE), u8 flags (0), u16 0, u32 dst_id, u32 src_id, u32 arg
 *   one-sided (RS_UCX_RMA_HDR_LEN, 32 bytes; amrma.c): u8 kind (PUT ..
 *     FLUSH_REP), u8 flags (RS_UCX_F_*), u16 0, u32 dst_id, u32 src_id,
 *     u32 op_id, u64 raddr, u64 value
 *
 * A sender packs a header into storage that stays put until UCX is done
 * with the send; the receiver decodes it strictly with the bounded cursor
 * (common/cursor.h): the kind says which header it is, and an unknown kind,
 * a length other than that kind's, a reserved byte or an unknown flag set
 * is refused. No UCX type here: the fuzz target links it alone.
 */
#ifndef RS_TRANSPORT_UCX_AMHDR_H
#define RS_TRANSPORT_UCX_AMHDR_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/status.h>

#define RS_UCX_HDR_LEN     16
#define RS_UCX_RMA_HDR_LEN 32

enum {
    RS_UCX_CONN = 1,     /* client -> server: src_id (+ client worker address) */
    RS_UCX_CONN_ACK = 2, /* server -> client: src_id is the server's id */
    RS_UCX_MSG = 3,      /* a message; arg is its type */
    RS_UCX_NOTIFY = 4,   /* a notified put's notification; arg is the immediate */
    RS_UCX_BYE = 5,      /* the sender closed the connection */
    /* our own one-sided protocol (amrma.c), header rs_ucx_rma_hdr_t */
    RS_UCX_PUT = 16,
    RS_UCX_GET_REQ = 17,
    RS_UCX_GET_REP = 18,
    RS_UCX_FADD_REQ = 19,
    RS_UCX_FADD_REP = 20,
    RS_UCX_FLUSH_REQ = 21,
    RS_UCX_FLUSH_REP = 22,
};

enum {
    RS_UCX_F_NOTIFY = 1,  /* PUT: notify the target after writing */
    RS_UCX_F_REFUSED = 2, /* answer: the target refused the address */
};

/* A one-sided message's header, decoded. */
typedef struct rs_ucx_rma_hdr {
    uint32_t dst_id, src_id;
    uint16_t kind, flags;
    uint32_t op_id; /* the requester's pending-request id */
    uint64_t raddr;
    uint64_t value; /* immediate, length, addend, old value or status, by kind */
} rs_ucx_rma_hdr_t;

/* A control header (messages, notifications, connection control), decoded. */
typedef struct rs_ucx_hdr {
    uint32_t dst_id; /* receiver's connection id (0: unknown yet) */
    uint32_t src_id; /* sender's connection id */
    uint32_t arg;
    uint32_t kind;
} rs_ucx_hdr_t;

/* Packed headers, as sent. */
typedef struct rs_ucx_hdr_wire {
    uint8_t b[RS_UCX_HDR_LEN];
} rs_ucx_hdr_wire_t;

typedef struct rs_ucx_rma_wire {
    uint8_t b[RS_UCX_RMA_HDR_LEN];
} rs_ucx_rma_wire_t;

/* Packs h into w (h's kind one of the control kinds; flags 0). */
void rs_ucx_hdr_pack(const rs_ucx_hdr_t *h, rs_ucx_hdr_wire_t *w);
/* Packs h into w (h's kind one of the one-sided kinds). */
void rs_ucx_rma_hdr_pack(const rs_ucx_rma_hdr_t *h, rs_ucx_rma_wire_t *w);

/*
 * Decodes a received header of len bytes. RS_OK: *rma_p is 0 and *h the
 * control header, or *rma_p is 1 and *rh the one-sided one.
 * RS_ERR_PROTOCOL: an unknown kind, a reserved byte or an unknown flag set;
 * RS_ERR_BAD_LENGTH: not its kind's length. Nothing is set on an error.
 */
rs_status_t rs_ucx_am_hdr_decode(const void *buf, size_t len, rs_ucx_hdr_t *h, rs_ucx_rma_hdr_t *rh,
                                 int *rma_p);

#endif
