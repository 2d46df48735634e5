/*
 * The shuffle's control messages between pushers, workers and readers, and
 * the partition snapshot a reader pulls (docs/shuffle.md, "Wire format").
 * All three sides speak them and none may include another's internals.
 *
 * The structs below are host forms, not wire layouts: every message has an
 * encoder that writes its explicit little-endian bytes and a strict decoder
 * that treats its input as hostile (exact lengths, counts, enum ranges and
 * reserved fields that must be zero). A decoder writes its output only on
 * RS_OK; views in it point into the input and live as long as it does.
 * Decoders return RS_ERR_TRUNCATED (fewer bytes than the fixed part),
 * RS_ERR_BAD_VERSION, RS_ERR_BAD_LENGTH (a count or length disagrees with
 * the bytes present) or RS_ERR_PROTOCOL (a field out of range); they never
 * log. Encoders return RS_ERR_NO_SPACE when cap is too small.
 */
#ifndef RS_SHUFFLE_PROTO_H
#define RS_SHUFFLE_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/status.h>

/* Message types 16..32 of the transport's user range belong to the shuffle (33..63 stay free). */
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
    RS_SMSG_RECLAIM = 30,    /* worker -> pusher: memory is short, give back unused grant room */
    RS_SMSG_INFO = 31,       /* anyone: the worker's state (rshuffle_info --worker) */
    RS_SMSG_INFO_REPLY = 32, /* worker: counters, shuffles held, connections */
    RS_SMSG_FIRST = 16,
    RS_SMSG_LAST = 32,
};

/*
 * 3: with R >= 2 a commit lists every partition the worker holds (RS_SNAP_C_HOLDER).
 * 5: merged grants (RS_GRANT_MERGED): one write carries many partitions' frames.
 */
#define RS_SPROTO_VERSION 5
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

enum { RS_ROLE_PUSHER = 1, RS_ROLE_READER = 2 };

enum {
    RS_GRANT_BULK = 1,  /* the partition streams: grant more than asked */
    RS_GRANT_AHEAD = 2, /* the next grant before it is needed: refused (RS_ERR_BUSY) when short */
    /*
     * Room for one write of frames of many partitions (docs/shuffle.md,
     * "Merged pushes"): its entry's partition is RS_MERGED_PART, and only it
     * (a retire of a merged grant carries the flag too); never with BULK or
     * AHEAD. The worker's GRANT entry answers with partition RS_MERGED_PART.
     */
    RS_GRANT_MERGED = 4,
    RS_GRANT_FLAGS_ALL = 7,
};
#define RS_SLOT_NONE   UINT32_MAX
#define RS_MERGED_PART UINT32_MAX /* the partition field of a merged grant's entries */

enum { RS_SNAP_SPILLED = 1 };
/* A snapshot commit's flags: the commit listed this partition (R >= 2: the worker holds it). */
enum { RS_SNAP_C_HOLDER = 1 };
#define RS_SNAP_MAGIC 0x50414e53u /* "SNAP" */

/* Wire sizes: the fixed part of each message, and one entry of a list. */
#define RS_SPROTO_HDR_LEN          8u /* u16 version, u16 type, i32 status */
#define RS_SPROTO_ATTACH_LEN       40u
#define RS_SPROTO_ATTACH_REPLY_LEN 24u /* the arena's packed rkey follows */
#define RS_SPROTO_GRANT_REQ_LEN    16u /* rs_grant_want_t entries follow */
#define RS_SPROTO_GRANT_WANT_LEN   32u
#define RS_SPROTO_GRANT_LEN        24u /* rs_grant_t entries follow */
#define RS_SPROTO_GRANT_ENTRY_LEN  32u
#define RS_SPROTO_NACK_LEN         24u
#define RS_SPROTO_COMMIT_LEN       24u /* rs_commit_entry_t entries follow */
#define RS_SPROTO_COMMIT_ENTRY_LEN 24u
#define RS_SPROTO_READ_OPEN_LEN    24u
#define RS_SPROTO_READ_REPLY_LEN   32u /* an inline snapshot may follow */
#define RS_SPROTO_SPILL_LOAD_LEN   24u
#define RS_SPROTO_SPILL_REPLY_LEN  40u
#define RS_SPROTO_READ_CLOSE_LEN   16u
#define RS_SPROTO_DROP_LEN         16u
#define RS_SPROTO_SNAP_HDR_LEN     16u
#define RS_SPROTO_SNAP_COMMIT_LEN  32u
#define RS_SPROTO_SNAP_ENTRY_LEN   32u
#define RS_SPROTO_INFO_LEN         16u
#define RS_SPROTO_INFO_REPLY_LEN   112u /* shuffle entries, then connection entries follow */
#define RS_SPROTO_INFO_SHUFFLE_LEN 48u
#define RS_SPROTO_INFO_CONN_LEN    32u

/*
 * In every message, status is what the header carries: RS_OK in requests
 * (a decoder refuses anything else), the outcome in replies.
 */

typedef struct rs_smsg_attach {
    rs_status_t status;
    uint32_t role;
    uint32_t shuffle_id;
    uint32_t n_partitions; /* pusher: creates the shuffle or must match it (>= 1); reader: 0 */
    uint32_t map_id;       /* pusher; reader: 0 */
    uint32_t attempt;      /* pusher; reader: 0 */
    uint32_t replicas;     /* the sender's replication factor, 0..3 (0: not said, taken as 1) */
    uint64_t generation;   /* the registration's identity (rs_shuffle_desc_t.generation) */
} rs_smsg_attach_t;

/* A refusal is the header alone (arena_len and rkey empty). */
typedef struct rs_smsg_attach_reply {
    rs_status_t status;
    uint64_t arena_len;
    const uint8_t *rkey; /* the arena's packed rkey, 1..RS_RKEY_BLOB_MAX bytes */
    uint32_t rkey_len;
    uint32_t replicas; /* the shuffle's R as its pushers said, 0..3 (0: no pusher attached yet) */
} rs_smsg_attach_reply_t;

/*
 * One entry of a grant request: retire a grant the pusher is done with
 * (retire_slot, after retire_used bytes), ask for a new one (want > 0), or
 * both. Retires are processed before grants.
 */
typedef struct rs_grant_want {
    uint32_t partition;
    uint32_t flags;       /* RS_GRANT_* */
    uint64_t want;        /* bytes of batches waiting now (rounded); 0: retire only */
    uint32_t retire_slot; /* < RS_GRANT_SLOTS, or RS_SLOT_NONE (then retire_used is 0) */
    uint64_t retire_used;
} rs_grant_want_t;

typedef struct rs_smsg_grant_req {
    rs_status_t status;
    uint32_t req_id;
    uint32_t n;             /* entries, at least 1 */
    const uint8_t *entries; /* decoded: the validated entries (rs_sproto_grant_want_get) */
} rs_smsg_grant_req_t;

typedef struct rs_grant {
    uint32_t partition;
    rs_status_t
        status;    /* RS_OK, RS_ERR_NOT_FOUND, RS_ERR_BACKPRESSURE, RS_ERR_BUSY (ahead refused) */
    uint32_t slot; /* RS_OK with len > 0: < RS_GRANT_SLOTS; otherwise 0 */
    uint64_t off;  /* arena offset, RS_SPROTO_ALIGN-aligned */
    uint64_t len;  /* a multiple of RS_SPROTO_ALIGN, at most RS_GRANT_MAX; 0: a retire only */
} rs_grant_t;

typedef struct rs_smsg_grant {
    rs_status_t status; /* RS_OK, or why the whole request was refused (then n is 0) */
    uint32_t req_id;
    uint32_t n;
    uint32_t retry_ms; /* with backpressure: when to ask again */
    const uint8_t *entries;
} rs_smsg_grant_t;

typedef struct rs_smsg_nack {
    rs_status_t status; /* why the batch was refused: never RS_OK */
    uint32_t partition;
    uint32_t imm;
    uint64_t seq;
} rs_smsg_nack_t;

typedef struct rs_commit_entry {
    uint32_t partition; /* ascending within a message */
    uint32_t batches;   /* 0 (bytes and checksum 0 too): a holder of the partition sent nothing */
    uint64_t bytes;     /* frame bytes */
    uint64_t checksum;  /* sum of the frames' checksums (order-free) */
} rs_commit_entry_t;

typedef struct rs_smsg_commit {
    rs_status_t status;
    uint32_t n;             /* entries; 0 only in the last chunk */
    uint32_t last;          /* 0 or 1: the final chunk, the worker replies after it */
    uint64_t total_batches; /* last chunk: every batch sent to this worker */
    const uint8_t *entries;
} rs_smsg_commit_t;

typedef struct rs_smsg_read_open {
    rs_status_t status;
    uint32_t shuffle_id;
    uint32_t partition;
    uint32_t tag;          /* echoed in the reply */
    uint32_t n_partitions; /* the reader's, refused unless the shuffle's (0: not checked) */
} rs_smsg_read_open_t;

#define RS_SPROTO_INLINE UINT64_MAX /* index_off: the snapshot follows the reply */

typedef struct rs_smsg_read_reply {
    rs_status_t status; /* a refusal carries only the tag */
    uint32_t snap_id;
    uint32_t tag;
    uint64_t index_off; /* arena offset of the snapshot, or RS_SPROTO_INLINE */
    uint64_t index_len;
    const uint8_t *index; /* RS_SPROTO_INLINE: the index_len bytes of the snapshot */
} rs_smsg_read_reply_t;

typedef struct rs_smsg_spill_load {
    rs_status_t status;
    uint32_t snap_id;
    uint32_t first; /* entry index */
    uint32_t n;     /* entries, all spilled, at least 1 */
    uint32_t tag;   /* echoed in the reply */
} rs_smsg_spill_load_t;

typedef struct rs_smsg_spill_reply {
    rs_status_t status; /* RS_ERR_BACKPRESSURE: no room to stage even one frame now, ask again */
    uint32_t n;         /* entries staged: the first n asked for (at least 1; 0 in a refusal) */
    uint32_t tag;
    uint32_t retry_ms; /* RS_ERR_BACKPRESSURE only */
    uint64_t off;      /* arena offset: the n frames back to back, each RS_SPROTO_ALIGN-aligned */
    uint64_t len;
} rs_smsg_spill_reply_t;

typedef struct rs_smsg_read_close {
    rs_status_t status;
    uint32_t snap_id;
} rs_smsg_read_close_t;

typedef struct rs_smsg_drop {
    rs_status_t status;
    uint32_t shuffle_id;
} rs_smsg_drop_t;

/* The snapshot a reader pulls: header, commits, then batch entries. */
typedef struct rs_snap_hdr {
    uint32_t n_commits;
    uint32_t n_entries;
    uint32_t partition;
    const uint8_t *commits; /* decoded: the validated lists */
    const uint8_t *entries;
} rs_snap_hdr_t;

typedef struct rs_snap_commit {
    uint32_t map_id;
    uint32_t attempt;
    uint32_t batches; /* 0: the map committed nothing to this partition */
    uint32_t flags;   /* RS_SNAP_C_* */
    uint64_t bytes;
    uint64_t checksum;
} rs_snap_commit_t;

typedef struct rs_snap_entry {
    uint64_t loc;   /* arena offset, or spill-file offset when RS_SNAP_SPILLED */
    uint32_t len;   /* frame length, at least 1 */
    uint32_t flags; /* RS_SNAP_* */
    uint32_t map_id;
    uint32_t attempt;
    uint64_t seq; /* below RS_SEQ_MAX */
} rs_snap_entry_t;

/* --------------------------------------------------- fixed-size messages */

rs_status_t rs_sproto_attach_encode(const rs_smsg_attach_t *m, void *buf, size_t cap,
                                    size_t *len_p);
rs_status_t rs_sproto_attach_decode(const void *buf, size_t len, rs_smsg_attach_t *m);

/* A refusal (status != RS_OK) encodes as the header alone. */
rs_status_t rs_sproto_attach_reply_encode(const rs_smsg_attach_reply_t *m, void *buf, size_t cap,
                                          size_t *len_p);
rs_status_t rs_sproto_attach_reply_decode(const void *buf, size_t len, rs_smsg_attach_reply_t *m);

rs_status_t rs_sproto_nack_encode(const rs_smsg_nack_t *m, void *buf, size_t cap, size_t *len_p);
rs_status_t rs_sproto_nack_decode(const void *buf, size_t len, rs_smsg_nack_t *m);

rs_status_t rs_sproto_read_open_encode(const rs_smsg_read_open_t *m, void *buf, size_t cap,
                                       size_t *len_p);
rs_status_t rs_sproto_read_open_decode(const void *buf, size_t len, rs_smsg_read_open_t *m);

/*
 * Copies m->index after the fixed part when index_off is RS_SPROTO_INLINE
 * (not when it lies there already: buf + RS_SPROTO_READ_REPLY_LEN).
 */
rs_status_t rs_sproto_read_reply_encode(const rs_smsg_read_reply_t *m, void *buf, size_t cap,
                                        size_t *len_p);
rs_status_t rs_sproto_read_reply_decode(const void *buf, size_t len, rs_smsg_read_reply_t *m);

rs_status_t rs_sproto_spill_load_encode(const rs_smsg_spill_load_t *m, void *buf, size_t cap,
                                        size_t *len_p);
rs_status_t rs_sproto_spill_load_decode(const void *buf, size_t len, rs_smsg_spill_load_t *m);

rs_status_t rs_sproto_spill_reply_encode(const rs_smsg_spill_reply_t *m, void *buf, size_t cap,
                                         size_t *len_p);
rs_status_t rs_sproto_spill_reply_decode(const void *buf, size_t len, rs_smsg_spill_reply_t *m);

rs_status_t rs_sproto_read_close_encode(const rs_smsg_read_close_t *m, void *buf, size_t cap,
                                        size_t *len_p);
rs_status_t rs_sproto_read_close_decode(const void *buf, size_t len, rs_smsg_read_close_t *m);

rs_status_t rs_sproto_drop_encode(const rs_smsg_drop_t *m, void *buf, size_t cap, size_t *len_p);
rs_status_t rs_sproto_drop_decode(const void *buf, size_t len, rs_smsg_drop_t *m);

/*
 * Header-only messages: COMMIT_REPLY, DROP_REPLY and RECLAIM (whose status
 * must be RS_OK). Decoding refuses any other type.
 */
rs_status_t rs_sproto_status_encode(unsigned type, rs_status_t status, void *buf, size_t cap,
                                    size_t *len_p);
rs_status_t rs_sproto_status_decode(const void *buf, size_t len, unsigned type,
                                    rs_status_t *status);

/* ------------------------------------------------------ list messages */

/*
 * GRANT_REQ, GRANT and COMMIT carry n entries after their fixed part. The
 * sender puts entry i at its place with _put (RS_ERR_NO_SPACE past cap),
 * then encodes the fixed part, whose n says how many entries precede the
 * end: *len_p = _len(n). _max(cap) is how many entries a message of cap
 * bytes holds. A decoder validates every entry; _get reads entry i < n of a
 * decoded message (it cannot fail).
 */
size_t rs_sproto_grant_req_len(uint32_t n);
uint32_t rs_sproto_grant_req_max(size_t cap);
rs_status_t rs_sproto_grant_want_put(void *buf, size_t cap, uint32_t i, const rs_grant_want_t *e);
rs_status_t rs_sproto_grant_req_encode(const rs_smsg_grant_req_t *m, void *buf, size_t cap,
                                       size_t *len_p);
rs_status_t rs_sproto_grant_req_decode(const void *buf, size_t len, rs_smsg_grant_req_t *m);
rs_grant_want_t rs_sproto_grant_want_get(const rs_smsg_grant_req_t *m, uint32_t i);

size_t rs_sproto_grant_len(uint32_t n);
uint32_t rs_sproto_grant_max(size_t cap);
rs_status_t rs_sproto_grant_put(void *buf, size_t cap, uint32_t i, const rs_grant_t *e);
rs_status_t rs_sproto_grant_encode(const rs_smsg_grant_t *m, void *buf, size_t cap, size_t *len_p);
rs_status_t rs_sproto_grant_decode(const void *buf, size_t len, rs_smsg_grant_t *m);
rs_grant_t rs_sproto_grant_get(const rs_smsg_grant_t *m, uint32_t i);

size_t rs_sproto_commit_len(uint32_t n);
uint32_t rs_sproto_commit_max(size_t cap);
rs_status_t rs_sproto_commit_put(void *buf, size_t cap, uint32_t i, const rs_commit_entry_t *e);
rs_status_t rs_sproto_commit_encode(const rs_smsg_commit_t *m, void *buf, size_t cap,
                                    size_t *len_p);
rs_status_t rs_sproto_commit_decode(const void *buf, size_t len, rs_smsg_commit_t *m);
rs_commit_entry_t rs_sproto_commit_get(const rs_smsg_commit_t *m, uint32_t i);

/* -------------------------------------------------------------- snapshot */

/*
 * The same pattern: put commits (index i < n_commits) and entries (index
 * i < n_entries, placed after n_commits commits), then the header.
 */
size_t rs_sproto_snap_len(uint32_t n_commits, uint32_t n_entries);
rs_status_t rs_sproto_snap_commit_put(void *buf, size_t cap, uint32_t i, const rs_snap_commit_t *c);
rs_status_t rs_sproto_snap_entry_put(void *buf, size_t cap, uint32_t n_commits, uint32_t i,
                                     const rs_snap_entry_t *e);
rs_status_t rs_sproto_snap_encode(const rs_snap_hdr_t *h, void *buf, size_t cap, size_t *len_p);
/* RS_ERR_BAD_MAGIC besides the decoders' statuses. */
rs_status_t rs_sproto_snap_decode(const void *buf, size_t len, rs_snap_hdr_t *h);
rs_snap_commit_t rs_sproto_snap_commit_get(const rs_snap_hdr_t *h, uint32_t i);
rs_snap_entry_t rs_sproto_snap_entry_get(const rs_snap_hdr_t *h, uint32_t i);

/* ------------------------------------------------------------------ info */

/* An INFO request; with RS_INFO_REQ_DRAIN the worker starts draining first. */
enum { RS_INFO_REQ_DRAIN = 1 };
typedef struct rs_smsg_info {
    rs_status_t status;
    uint32_t flags; /* RS_INFO_REQ_* */
} rs_smsg_info_t;

enum {
    RS_INFO_DRAINING = 1,  /* the worker refuses new shuffles and maps */
    RS_INFO_TRUNCATED = 2, /* more shuffles or connections than one message holds */
    RS_INFO_FLAGS_ALL = 3,
};
enum { RS_INFO_SH_DROPPED = 1 };
#define RS_INFO_NONE UINT32_MAX /* a connection's shuffle_id/map_id when it has none */

typedef struct rs_info_counters {
    uint64_t batches, bytes, refused, spilled_bytes, spill_files, backpressure;
    uint64_t arena_used, arena_peak, arena_len, commits, stray_retires;
} rs_info_counters_t;

typedef struct rs_info_shuffle {
    uint32_t shuffle_id;
    uint32_t n_partitions; /* >= 1 */
    uint32_t maps;         /* map attempts committed */
    uint32_t replicas;     /* 0..3 */
    uint32_t flags;        /* RS_INFO_SH_* */
    uint32_t open_snaps;
    uint64_t bytes;   /* frame bytes committed */
    uint64_t batches; /* batches committed */
    uint64_t spilled_bytes;
} rs_info_shuffle_t;

typedef struct rs_info_conn {
    uint32_t role;       /* 0 (not attached), RS_ROLE_PUSHER or RS_ROLE_READER */
    uint32_t shuffle_id; /* RS_INFO_NONE: none */
    uint32_t map_id;     /* pusher; RS_INFO_NONE otherwise */
    uint32_t attempt;    /* pusher; 0 otherwise */
    uint32_t snaps;      /* open snapshots (reader) */
    uint32_t open_grants;
    uint64_t batches; /* arrivals from this pusher */
} rs_info_conn_t;

/* A refusal (status != RS_OK) is the header alone. */
typedef struct rs_smsg_info_reply {
    rs_status_t status;
    rs_info_counters_t c;
    uint32_t n_shuffles, n_conns;
    uint32_t flags;                  /* RS_INFO_* */
    const uint8_t *shuffles, *conns; /* decoded: the validated entries */
} rs_smsg_info_reply_t;

rs_status_t rs_sproto_info_encode(const rs_smsg_info_t *m, void *buf, size_t cap, size_t *len_p);
rs_status_t rs_sproto_info_decode(const void *buf, size_t len, rs_smsg_info_t *m);

/*
 * The list pattern with two lists: put shuffles (i < n_shuffles), then
 * connections (i < n_conns, after n_shuffles shuffles), then the fixed part.
 */
size_t rs_sproto_info_reply_len(uint32_t n_shuffles, uint32_t n_conns);
rs_status_t rs_sproto_info_shuffle_put(void *buf, size_t cap, uint32_t i,
                                       const rs_info_shuffle_t *e);
rs_status_t rs_sproto_info_conn_put(void *buf, size_t cap, uint32_t n_shuffles, uint32_t i,
                                    const rs_info_conn_t *e);
rs_status_t rs_sproto_info_reply_encode(const rs_smsg_info_reply_t *m, void *buf, size_t cap,
                                        size_t *len_p);
rs_status_t rs_sproto_info_reply_decode(const void *buf, size_t len, rs_smsg_info_reply_t *m);
rs_info_shuffle_t rs_sproto_info_shuffle_get(const rs_smsg_info_reply_t *m, uint32_t i);
rs_info_conn_t rs_sproto_info_conn_get(const rs_smsg_info_reply_t *m, uint32_t i);

/* ------------------------------------------------------------- any type */

/* One decoded message of any shuffle type. */
typedef struct rs_smsg {
    unsigned type;
    rs_status_t status; /* the header's */
    union {
        rs_smsg_attach_t attach;
        rs_smsg_attach_reply_t attach_reply;
        rs_smsg_grant_req_t grant_req;
        rs_smsg_grant_t grant;
        rs_smsg_nack_t nack;
        rs_smsg_commit_t commit;
        rs_smsg_read_open_t read_open;
        rs_smsg_read_reply_t read_reply;
        rs_smsg_spill_load_t spill_load;
        rs_smsg_spill_reply_t spill_reply;
        rs_smsg_read_close_t read_close;
        rs_smsg_drop_t drop;
        rs_smsg_info_t info;
        rs_smsg_info_reply_t info_reply;
    } u; /* the member of type (none for the header-only types) */
} rs_smsg_t;

/* Decodes a message that arrived as type; RS_ERR_PROTOCOL for a type outside the shuffle's. */
rs_status_t rs_sproto_decode(const void *buf, size_t len, unsigned type, rs_smsg_t *m);

/*
 * Splits a worker's "host:port" or "[IPv6 literal]:port" (the host then
 * without its brackets; port 1..65535; host shorter than cap):
 * RS_ERR_INVALID if not, and for an IPv6 literal without brackets.
 */
rs_status_t rs_sproto_addr_split(const char *addr, char *host, size_t cap, uint16_t *port);

#endif
