/*
 * The broadcast wire formats: descriptor, request (a control message),
 * reply (written into the requester's registered reply slot by one notified
 * put) and destroy notice. All integers little-endian. Decoders treat their
 * input as hostile: every length is checked against the bytes present and
 * the protocol's limits, unknown flags and trailing bytes are errors, and
 * the output views point into the input (valid while it is).
 * Layouts: docs/broadcast.md "Wire formats".
 */
#ifndef RS_BROADCAST_PROTO_H
#define RS_BROADCAST_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/broadcast.h>
#include <rshuffle/transport.h>

#include "broadcast/blocks.h"

#define RS_BCAST_VERSION    1
#define RS_BCAST_BLOCK_MIN  4096u
#define RS_BCAST_BLOCK_MAX  (1u << 30)
#define RS_BCAST_BLOCKS_MAX (1u << 20)
#define RS_BCAST_DATA_ALIGN 64u /* inline data starts at this alignment in a reply */

#define RS_BDESC_MAGIC  0x44425352u /* "RSBD" */
#define RS_BREQ_MAGIC   0x51425352u /* "RSBQ" */
#define RS_BREPLY_MAGIC 0x52425352u /* "RSBR" */
#define RS_BDESTR_MAGIC 0x58425352u /* "RSBX" */
#define RS_BNEWS_MAGIC  0x4e425352u /* "RSBN" */

/* Longest a source keeps an UPDATE with RS_BREQ_F_WAIT before answering it anyway. */
#define RS_BPOLL_MS 50

/* Message types in the node's own transport context. */
enum { RS_BMSG_REQ = 1, RS_BMSG_DESTROY = 2, RS_BMSG_NEWS = 3 };

/* Descriptor flags. */
enum {
    RS_BDESC_F_INLINE = 1u << 0,
    RS_BDESC_F_EMBED = 1u << 1, /* (with INLINE) the object's bytes follow the source address */
};

/* Request kinds and flags. */
enum {
    RS_BREQ_GET = 1,      /* manifest (and inline data) wanted */
    RS_BREQ_UPDATE = 2,   /* announce my blocks, send me the holders */
    RS_BREQ_ANNOUNCE = 3, /* announce my blocks, no reply */
};
enum {
    RS_BREQ_F_HOLDER = 1u << 0,   /* carries the requester's address and region key */
    RS_BREQ_F_BITMAP = 1u << 1,   /* carries the requester's block bitmap */
    RS_BREQ_F_COMPLETE = 1u << 2, /* the requester holds every block */
    RS_BREQ_F_WAIT = 1u << 3,     /* UPDATE: answer once the object's version passes known */
    RS_BREQ_F_CLAIMS = 1u << 4,   /* carries the blocks the requester is reading from the source */
    RS_BREQ_F_ALL = (1u << 5) - 1,
};

/* Reply flags and holder flags. */
enum {
    RS_BREPLY_F_INLINE = 1u << 0, /* the object's bytes follow the metadata */
    RS_BREPLY_F_SUMS = 1u << 1,   /* per-block checksums present */
    RS_BREPLY_F_ALL = (1u << 2) - 1,
};
enum {
    RS_BHOLDER_F_COMPLETE = 1u << 0, /* holds every block: no bitmap follows */
    RS_BHOLDER_F_SOURCE = 1u << 1,   /* the source itself */
    RS_BHOLDER_F_CLAIMS = 1u << 2,   /* a bitmap of blocks it is reading from the source follows */
    RS_BHOLDER_F_ALL = (1u << 3) - 1,
};

/* The fixed part of a reply (up to the checksums); the minimum adds empty lists and the trailer. */
#define RS_BREPLY_HDR_LEN   80u
#define RS_BREPLY_MIN_LEN   (RS_BREPLY_HDR_LEN + 4u + 4u + 8u)
#define RS_BCAST_ACTIVE_MAX 4096u /* active readers (ticket, start) listed in one reply */

typedef struct rs_bc_view {
    const uint8_t *p;
    uint32_t len;
} rs_bc_view_t;

/* A peer's address: hostport (port, host) or a transport address blob. */
typedef struct rs_bc_addr {
    uint8_t kind;       /* rs_bcast_addr_kind_t */
    uint16_t port;      /* hostport only */
    rs_bc_view_t bytes; /* host (no NUL) or blob */
} rs_bc_addr_t;

typedef struct rs_bc_desc {
    uint64_t node_id; /* the source node (random per node) */
    uint64_t seq;     /* the object's number at that node, from 1 */
    uint64_t size;
    uint32_t block_size;
    uint32_t nblocks;
    uint32_t flags;
    rs_bc_addr_t src;
    const uint8_t *embed; /* EMBED: size bytes (inside the encoded descriptor once decoded) */
} rs_bc_desc_t;

typedef struct rs_bc_req {
    uint8_t kind;
    uint16_t flags;
    uint32_t req_id;
    uint32_t nblocks;
    uint64_t node_id, seq;
    uint32_t source_reads;    /* the requester's reads so far from the source, */
    uint32_t holder_reads;    /* ... and from holders (for the source's counters) */
    uint32_t known;           /* UPDATE: the object version the requester has seen */
    uint64_t reply_off;       /* GET/UPDATE: where in the reply region */
    uint32_t reply_cap;       /* ... and how many bytes fit */
    rs_bc_view_t reply_rkey;  /* ... packed key of the reply region */
    rs_bc_addr_t holder_addr; /* HOLDER */
    rs_bc_view_t holder_rkey; /* HOLDER: the requester's object region */
    rs_bc_view_t bitmap;      /* BITMAP: ceil(nblocks / 8) bytes */
    rs_bc_view_t claims;      /* CLAIMS: ceil(nblocks / 8) bytes */
} rs_bc_req_t;

typedef struct rs_bc_holder_wire {
    uint32_t id;
    uint8_t flags;
    rs_bc_addr_t addr;
    rs_bc_view_t rkey;
    rs_bc_view_t bitmap; /* empty when COMPLETE */
    rs_bc_view_t claims; /* CLAIMS only */
} rs_bc_holder_wire_t;

typedef struct rs_bc_reply {
    uint8_t kind;
    int16_t status;
    uint32_t meta_len;
    uint64_t node_id, seq, size;
    uint32_t block_size, nblocks, flags;
    uint32_t ticket;   /* the order the requester registered in */
    uint32_t active;   /* other holders still fetching */
    uint32_t version;  /* the object's holder-set version at the source */
    uint32_t rversion; /* ... of its set of active readers (the list below) */
    uint32_t start;    /* where in the shared block permutation the requester starts */
    uint64_t perm_seed;
    rs_bc_view_t sums;    /* nblocks little-endian u64, or empty */
    uint32_t n_active;    /* the readers still fetching (the requester included) */
    rs_bc_view_t tickets; /* n_active (ticket u32, start u32) pairs */
    uint32_t n_holders;
    rs_bc_view_t holders; /* the encoded holder list, already validated */
    rs_bc_view_t data;    /* INLINE: size bytes */
} rs_bc_reply_t;

/* ------------------------------------------------------------ addresses */

/* Checks a host name: 1..RS_BCAST_HOST_MAX bytes of [A-Za-z0-9.:_%[]-]. */
rs_status_t rs_bc_host_check(const void *host, size_t len);

/* Two addresses are the same peer. */
int rs_bc_addr_equal(const rs_bc_addr_t *a, const rs_bc_addr_t *b);

/* "host:port" or "blob(N bytes)" for logs. */
void rs_bc_addr_format(const rs_bc_addr_t *a, char *buf, size_t buflen);

/* ----------------------------------------------------------- descriptor */

/* Number of blocks of an object (0 for an empty one). */
uint32_t rs_bc_nblocks(uint64_t size, uint32_t block_size);

size_t rs_bc_desc_len(const rs_bc_desc_t *d);
rs_status_t rs_bc_desc_encode(const rs_bc_desc_t *d, void *buf, size_t buflen, size_t *len_p);
rs_status_t rs_bc_desc_decode(const void *buf, size_t len, rs_bc_desc_t *d);

/* -------------------------------------------------------------- request */

/* Bytes the request will take; encode fails with RS_ERR_MSG_SIZE past max. */
size_t rs_bc_req_len(const rs_bc_req_t *q);
rs_status_t rs_bc_req_encode(const rs_bc_req_t *q, void *buf, size_t buflen, size_t *len_p);
rs_status_t rs_bc_req_decode(const void *buf, size_t len, rs_bc_req_t *q);

/* ---------------------------------------------------------------- reply */

/*
 * A reply is written in steps: begin (header), sums, active tickets, holders
 * one at a time (rs_bc_reply_add_holder returns RS_ERR_NO_SPACE when it would
 * not fit, the encoder staying valid), then finish (trailer, inline data)
 * which returns the total length. Data is copied by finish unless data ==
 * NULL (it was placed at rs_bc_reply_data_off already).
 */
typedef struct rs_bc_reply_enc {
    uint8_t *p;
    size_t cap;
    size_t off;
    size_t n_active_off;
    size_t n_holders_off;
    uint32_t n_holders;
    uint32_t nblocks;
    int failed;
} rs_bc_reply_enc_t;

void rs_bc_reply_begin(rs_bc_reply_enc_t *e, void *buf, size_t cap, const rs_bc_reply_t *hdr);
void rs_bc_reply_put_sums(rs_bc_reply_enc_t *e, const uint64_t *sums, uint32_t n);
void rs_bc_reply_put_active(rs_bc_reply_enc_t *e, const rs_bc_active_t *active, uint32_t n);
rs_status_t rs_bc_reply_add_holder(rs_bc_reply_enc_t *e, const rs_bc_holder_wire_t *h);
rs_status_t rs_bc_reply_finish(rs_bc_reply_enc_t *e, const void *data, uint64_t size,
                               size_t *len_p);

/* Where inline data of a reply whose metadata is meta_len bytes starts. */
static inline size_t rs_bc_reply_data_off(size_t meta_len)
{
    return (meta_len + RS_BCAST_DATA_ALIGN - 1) & ~(size_t)(RS_BCAST_DATA_ALIGN - 1);
}

/* Bytes of metadata a reply with these parts takes (no holders). */
size_t rs_bc_reply_meta_len(uint32_t n_sums);

/* Reply room, beyond the metadata, for the active readers' pairs and for the holder lists. */
#define RS_BREPLY_ACTIVE_BUDGET (16u << 10)
#define RS_BREPLY_HOLDER_BUDGET (16u << 10)

/* Bytes one holder takes in a reply. */
size_t rs_bc_holder_wire_len(const rs_bc_holder_wire_t *h, uint32_t nblocks);

/* Decodes and validates a whole reply found in a buffer of cap bytes. */
rs_status_t rs_bc_reply_decode(const void *buf, size_t cap, rs_bc_reply_t *r);

/* Iterates the validated holders: *off starts at 0; returns 0 at the end. */
int rs_bc_reply_next_holder(const rs_bc_reply_t *r, size_t *off, rs_bc_holder_wire_t *h);

/* The i-th of back-to-back (ticket u32, start u32) pairs, as replies and news carry them. */
rs_bc_active_t rs_bc_active_at(const uint8_t *pairs, uint32_t i);

/* The i-th checksum / active reader of a decoded reply. */
uint64_t rs_bc_reply_sum(const rs_bc_reply_t *r, uint32_t i);
rs_bc_active_t rs_bc_reply_active(const rs_bc_reply_t *r, uint32_t i);

/* ----------------------------------------------------------- news */

/*
 * News (source -> active readers, one-way): the set of readers fetching the
 * object changed; the list gives their (ticket, start) pairs (at most what
 * fits in buflen bytes).
 */
typedef struct rs_bc_news {
    uint64_t node_id, seq;
    uint32_t rversion;
    uint32_t n_active;
    rs_bc_view_t tickets; /* n_active (ticket u32, start u32) pairs */
} rs_bc_news_t;

#define RS_BNEWS_FIXED 32u
rs_status_t rs_bc_news_encode(uint64_t node_id, uint64_t seq, uint32_t rversion,
                              const rs_bc_active_t *active, uint32_t n, void *buf, size_t buflen,
                              size_t *len_p);
rs_status_t rs_bc_news_decode(const void *buf, size_t len, rs_bc_news_t *n);
rs_bc_active_t rs_bc_news_active(const rs_bc_news_t *n, uint32_t i);

/* ----------------------------------------------------------- destroy */

#define RS_BDESTROY_LEN 24u
void rs_bc_destroy_encode(uint64_t node_id, uint64_t seq, uint8_t out[RS_BDESTROY_LEN]);
rs_status_t rs_bc_destroy_decode(const void *buf, size_t len, uint64_t *node_id, uint64_t *seq);

#endif
