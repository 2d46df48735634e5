/*
 * The shuffle's control messages between pushers, workers and readers
 * (docs/shuffle.md, "Protocol"). It lives in common/ because all three
 * sides speak it and none may include another's internals; it is the only
 * shuffle code in common/. Every message starts with rs_smsg_hdr_t; all
 * fields are little-endian fixed-width (the hosts are x86-64/aarch64 LE and
 * the structs are naturally aligned without padding).
 */
#ifndef RS_COMMON_SHUFFLE_PROTO_H
#define RS_COMMON_SHUFFLE_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/status.h>

/* Message types 16..31 of the transport's user range belong to the shuffle. */
enum {
    RS_SMSG_ATTACH = 16,       /* pusher/reader -> worker */
    RS_SMSG_ATTACH_REPLY = 17, /* worker: arena rkey */
    RS_SMSG_GRANT_REQ = 18,    /* pusher: space for partitions */
    RS_SMSG_GRANT = 19,        /* worker: ranges granted, or backpressure */
    RS_SMSG_NACK = 20,         /* worker: a batch was refused */
    RS_SMSG_COMMIT = 21,       /* pusher: per-partition counts of its map attempt */
    RS_SMSG_COMMIT_REPLY = 22, /* worker: the counts match what arrived */
    RS_SMSG_READ_OPEN = 23,    /* reader: snapshot a partition's index */
    RS_SMSG_READ_REPLY = 24,   /* worker: where the index snapshot is */
    RS_SMSG_SPILL_LOAD = 25,   /* reader: stage spilled batches in registered memory */
    RS_SMSG_SPILL_REPLY = 26,  /* worker: where they are staged */
    RS_SMSG_READ_CLOSE = 27,   /* reader: done with a snapshot */
    RS_SMSG_DROP = 28,         /* anyone: free a shuffle's storage */
    RS_SMSG_DROP_REPLY = 29,
    RS_SMSG_RECLAIM = 30, /* worker -> pusher: memory is short, give back unused grant room */
    RS_SMSG_FIRST = 16,
    RS_SMSG_LAST = 30,
};

#define RS_SPROTO_VERSION 2
#define RS_SPROTO_ALIGN   64u                 /* grants, batches and arena offsets are multiples */
#define RS_STAGE_MAX      ((uint64_t)8 << 20) /* spilled bytes staged per SPILL_LOAD at most */
/* A map numbers its batches from 0; a worker refuses seq >= this (its seen-bitmap bound). */
#define RS_SEQ_MAX ((uint64_t)1 << 32)

/*
 * A notified put's 32 bits: the grant slot (per endpoint, assigned by the
 * worker) and the batch's offset inside that grant in 64-byte units.
 */
#define RS_IMM_SLOT_BITS 14u
#define RS_IMM_OFF_BITS  18u
#define RS_GRANT_MAX     ((uint64_t)RS_SPROTO_ALIGN << RS_IMM_OFF_BITS) /* 16 MiB */
#define RS_GRANT_SLOTS   (1u << RS_IMM_SLOT_BITS)

static inline uint32_t rs_imm_make(uint32_t slot, uint64_t off_in_grant)
{
    return (slot << RS_IMM_OFF_BITS) | (uint32_t)(off_in_grant / RS_SPROTO_ALIGN);
}
static inline uint32_t rs_imm_slot(uint32_t imm)
{
    return imm >> RS_IMM_OFF_BITS;
}
static inline uint64_t rs_imm_off(uint32_t imm)
{
    return (uint64_t)(imm & ((1u << RS_IMM_OFF_BITS) - 1)) * RS_SPROTO_ALIGN;
}
static inline uint64_t rs_sproto_round(uint64_t len)
{
    return (len + RS_SPROTO_ALIGN - 1) & ~(uint64_t)(RS_SPROTO_ALIGN - 1);
}

typedef struct rs_smsg_hdr {
    uint16_t version;
    uint16_t type; /* repeats the transport type, for sanity */
    int32_t status;
} rs_smsg_hdr_t;

enum { RS_ROLE_PUSHER = 1, RS_ROLE_READER = 2 };

typedef struct rs_smsg_attach {
    rs_smsg_hdr_t h;
    uint32_t role;
    uint32_t shuffle_id;
    uint32_t n_partitions; /* pusher: creates the shuffle or must match it */
    uint32_t map_id;       /* pusher */
    uint32_t attempt;      /* pusher */
    uint32_t pad;
} rs_smsg_attach_t;

typedef struct rs_smsg_attach_reply {
    rs_smsg_hdr_t h;
    uint64_t arena_len;
    uint32_t rkey_len; /* the arena's packed rkey follows */
    uint32_t pad;
} rs_smsg_attach_reply_t;

enum {
    RS_GRANT_BULK = 1,  /* the partition streams: grant more than asked */
    RS_GRANT_AHEAD = 2, /* the next grant before it is needed: refused (RS_ERR_BUSY) when short */
};
#define RS_SLOT_NONE UINT32_MAX

/*
 * One entry of a grant request: retire a grant the pusher is done with
 * (retire_slot, after retire_used bytes), ask for a new one (want > 0), or
 * both. Retires are processed before grants.
 */
typedef struct rs_grant_want {
    uint32_t partition;
    uint32_t flags;
    uint64_t want; /* bytes of batches waiting now (rounded); 0: retire only */
    uint32_t retire_slot;
    uint32_t pad;
    uint64_t retire_used;
} rs_grant_want_t;

typedef struct rs_smsg_grant_req {
    rs_smsg_hdr_t h;
    uint32_t req_id;
    uint32_t n; /* rs_grant_want_t follow */
} rs_smsg_grant_req_t;

typedef struct rs_grant {
    uint32_t partition;
    int32_t status; /* RS_OK, RS_ERR_NOT_FOUND, RS_ERR_BACKPRESSURE, RS_ERR_BUSY (ahead refused) */
    uint32_t slot;
    uint32_t pad;
    uint64_t off; /* arena offset */
    uint64_t len;
} rs_grant_t;

typedef struct rs_smsg_grant {
    rs_smsg_hdr_t h; /* status: RS_OK, or why the whole request was refused */
    uint32_t req_id;
    uint32_t n;
    uint32_t retry_ms; /* with backpressure: when to ask again */
    uint32_t pad;
} rs_smsg_grant_t;

typedef struct rs_smsg_nack {
    rs_smsg_hdr_t h;
    uint32_t partition;
    uint32_t imm;
    uint64_t seq;
} rs_smsg_nack_t;

typedef struct rs_commit_entry {
    uint32_t partition;
    uint32_t batches;
    uint64_t bytes;    /* frame bytes */
    uint64_t checksum; /* sum of the frames' checksums (order-free) */
} rs_commit_entry_t;

typedef struct rs_smsg_commit {
    rs_smsg_hdr_t h;
    uint32_t n;             /* rs_commit_entry_t follow */
    uint32_t last;          /* the final chunk: the worker replies after it */
    uint64_t total_batches; /* last chunk: every batch sent to this worker */
} rs_smsg_commit_t;

/* RECLAIM carries only the header: the pusher retires every grant it holds without a use. */

typedef struct rs_smsg_read_open {
    rs_smsg_hdr_t h;
    uint32_t shuffle_id;
    uint32_t partition;
    uint32_t tag; /* echoed in the reply */
    uint32_t pad;
} rs_smsg_read_open_t;

typedef struct rs_smsg_read_reply {
    rs_smsg_hdr_t h;
    uint32_t snap_id;
    uint32_t tag;
    uint64_t index_off; /* arena offset of the snapshot; UINT64_MAX: it follows inline */
    uint64_t index_len;
} rs_smsg_read_reply_t;

/* The snapshot a reader pulls: header, commits, then batch entries. */
typedef struct rs_snap_hdr {
    uint32_t magic; /* RS_SNAP_MAGIC */
    uint32_t n_commits;
    uint32_t n_entries;
    uint32_t partition;
} rs_snap_hdr_t;
#define RS_SNAP_MAGIC 0x50414e53u /* "SNAP" */

typedef struct rs_snap_commit {
    uint32_t map_id;
    uint32_t attempt;
    uint32_t batches;
    uint32_t pad;
    uint64_t bytes;
    uint64_t checksum;
} rs_snap_commit_t;

enum { RS_SNAP_SPILLED = 1 };

typedef struct rs_snap_entry {
    uint64_t loc; /* arena offset, or spill-file offset when RS_SNAP_SPILLED */
    uint32_t len; /* frame length */
    uint32_t flags;
    uint32_t map_id;
    uint32_t attempt;
    uint64_t seq;
} rs_snap_entry_t;

typedef struct rs_smsg_spill_load {
    rs_smsg_hdr_t h;
    uint32_t snap_id;
    uint32_t first; /* entry index */
    uint32_t n;     /* entries, all spilled */
    uint32_t tag;   /* echoed in the reply */
} rs_smsg_spill_load_t;

typedef struct rs_smsg_spill_reply {
    rs_smsg_hdr_t h; /* RS_ERR_BACKPRESSURE: no room to stage even one frame now, ask again */
    uint32_t n;      /* entries staged: the first n asked for (at least 1) */
    uint32_t tag;
    uint32_t retry_ms;
    uint32_t pad;
    uint64_t off; /* arena offset: the n frames back to back, each RS_SPROTO_ALIGN-aligned */
    uint64_t len;
} rs_smsg_spill_reply_t;

typedef struct rs_smsg_read_close {
    rs_smsg_hdr_t h;
    uint32_t snap_id;
    uint32_t pad;
} rs_smsg_read_close_t;

typedef struct rs_smsg_drop {
    rs_smsg_hdr_t h;
    uint32_t shuffle_id;
    uint32_t pad;
} rs_smsg_drop_t;

static inline void rs_smsg_init(rs_smsg_hdr_t *h, unsigned type, rs_status_t status)
{
    h->version = RS_SPROTO_VERSION;
    h->type = (uint16_t)type;
    h->status = (int32_t)status;
}

/*
 * Checks an incoming message: at least fixed bytes, the right version and
 * type, and (when item > 0) n_items items of that size exactly after the
 * fixed part. RS_ERR_TRUNCATED, RS_ERR_BAD_VERSION or RS_ERR_PROTOCOL.
 */
rs_status_t rs_smsg_check(const void *data, size_t len, unsigned type, size_t fixed, size_t item,
                          uint64_t n_items);

/*
 * A reply's outcome: rs_smsg_check of its header, then the status it
 * carries (refusals are header-only, whatever the reply's full size).
 */
rs_status_t rs_smsg_status(const void *data, size_t len, unsigned type);

/* Splits a worker's "host:port" (port 1..65535; host shorter than cap): RS_ERR_INVALID if not. */
rs_status_t rs_sproto_addr_split(const char *addr, char *host, size_t cap, uint16_t *port);

#endif
