/* The reader role: a process's entry per object, its blocks and holders, requests awaiting replies.
 */
#ifndef RS_BROADCAST_ENTRY_H
#define RS_BROADCAST_ENTRY_H

#include "broadcast/internal.h"

/* ---------------------------------------------------------------- reader */

typedef enum {
    RS_BLK_MISSING,
    RS_BLK_READING,
    RS_BLK_LANDED,    /* read completed, not verified */
    RS_BLK_VERIFYING, /* a getter is checksumming it */
    RS_BLK_DONE,
} rs_bc_blk_state_t;

typedef struct rs_bc_entry rs_bc_entry_t;

typedef struct rs_bc_block {
    rs_bc_entry_t *entry;
    uint32_t index;
    uint8_t state;
    uint8_t source_fails; /* checksum failures of reads from the source */
    uint32_t holder;      /* index in entry->holders of the read in flight or last read */
    uint64_t posted_ns;   /* when its read was posted */
} rs_bc_block_t;

/* A holder as a reader sees it (index 0 is the source once the manifest is in). */
typedef struct rs_bc_holder {
    uint32_t id;
    int is_source;
    int complete;
    int bad;       /* unreachable, refused its key, or served corrupt bytes */
    int preparing; /* a getter is connecting to it / unpacking its key */
    rs_bc_peer_t *peer;
    rs_rkey_t *rkey;
    uint8_t *rkey_blob;
    size_t rkey_len;
    uint8_t *bitmap; /* NULL when complete */
    uint8_t *claims; /* blocks it reads from the source now (NULL: none known) */
    rs_bc_addr_own_t addr;
} rs_bc_holder_t;

typedef enum { RS_BENT_FETCHING, RS_BENT_READY, RS_BENT_FAILED } rs_bc_ent_state_t;

/*
 * A direct read: NONE -> READING -> LANDED (the read completed) -> FETCHED
 * (the block checked: no holder, nothing to keep the copy for) or back to
 * NONE (failed or timed out: the fetch goes on as usual). READING and
 * LANDED: a getter is at it, the others wait.
 */
typedef enum {
    RS_BDIRECT_NONE,
    RS_BDIRECT_READING,
    RS_BDIRECT_LANDED,
    RS_BDIRECT_FETCHED
} rs_bc_direct_t;

/*
 * The manifest (the GET request's reply): NONE -> ASKED (the fetch plan
 * has a getter send the request) -> HAVE (its reply merged). A failed
 * request fails the entry instead.
 */
typedef enum { RS_BMAN_NONE, RS_BMAN_ASKED, RS_BMAN_HAVE } rs_bc_manifest_t;

static inline int rs_bc_direct_busy(rs_bc_direct_t d)
{
    return d == RS_BDIRECT_READING || d == RS_BDIRECT_LANDED;
}

struct rs_bc_entry {
    rs_list_t link; /* node->entries, then node->retired */
    rs_bcast_node_t *node;
    pthread_mutex_t lock;
    pthread_cond_t cond;

    /* from the descriptor */
    uint64_t node_id, seq, size;
    uint32_t block_size, nblocks;
    int is_inline;
    rs_bc_addr_own_t src_addr;
    rs_bc_peer_t *src_peer;

    /* node->lock */
    uint32_t refs; /* getters in rs_bcast_get + references handed out */
    int in_table;
    uint64_t retire_ns;

    /* entry->lock */
    rs_bc_ent_state_t state;
    rs_status_t err;
    int destroyed;
    int source_gone;
    rs_bc_manifest_t manifest; /* asked for, then here */
    int req_inflight;          /* a request awaits its reply */
    rs_bc_direct_t direct;     /* the direct read of a one-block object (direct.c) */
    rs_status_t direct_status; /* ... how its read completed (RS_BDIRECT_LANDED) */
    int announce_due;          /* blocks verified or claimed since the last announcement */
    int waiting;               /* some block can be read from nobody now: others are fetching it */
    int src_open;              /* patience ran out: any block may come from the source */
    uint64_t progress_ns;      /* last time a block landed or the source told news */
    uint64_t read_ns;          /* moving average of how long a block read takes */
    uint32_t version;          /* the object's version as the last reply told it */
    uint32_t rversion;         /* ... and of its active readers */
    rs_bc_active_t *active;    /* those readers (ticket, start) */
    uint32_t n_active;
    uint32_t ticket;
    uint32_t start;     /* where in the shared permutation we read from */
    uint32_t own_count; /* the first own_count blocks of order are ours to read from the source */
    uint32_t reads_inflight;
    uint32_t ops; /* reads in flight + requests awaiting replies */
    uint32_t source_inflight;
    rs_status_t last_err; /* why the last read or verification failed */
    uint32_t *landed;     /* stack of LANDED blocks awaiting verification */
    uint32_t n_landed;
    uint32_t n_done;
    rs_mr_t *mr;               /* the object region (non-inline) */
    rs_rkey_t *direct_rkey;    /* the source's key, kept while a direct read outlives its getter */
    rs_bc_slot_t *inline_slot; /* the reply slot holding an inline object */
    uint8_t *embed_copy;       /* an embedded object's bytes, copied from its descriptor */
    uint8_t *data;
    uint8_t rkey[RS_RKEY_BLOB_MAX];
    size_t rkey_len;
    uint64_t *sums;
    rs_bc_block_t *blocks;
    uint8_t *bitmap;
    uint8_t *claimed; /* blocks we read from the source (announced as claims) */
    uint32_t *order;
    rs_bc_holder_t **holders;
    uint32_t n_holders, cap_holders;
    uint64_t rng;
    rs_bcast_stats_t stats;
};

struct rs_bcast_ref {
    rs_bc_entry_t *entry;
};

/* A request awaiting its reply (node->lock). */
typedef struct rs_bc_pending {
    rs_list_t link;
    uint32_t req_id;
    uint8_t kind;
    rs_bc_entry_t *entry;
    rs_bc_slot_t *slot;
    rs_bc_peer_t *peer;
    uint64_t deadline_ns;
} rs_bc_pending_t;

/* The reply to a request arrived (progress thread) or failed (service thread). */
void rs_bc_entry_reply(rs_bcast_node_t *node, rs_bc_pending_t *pend, rs_status_t status);

/* News of the readers fetching an object. Transport callback (or the service thread). */
void rs_bc_entry_news(rs_bcast_node_t *node, const rs_bc_news_t *news);

/* A destroy notice for (node_id, seq). Service thread, or the destroying thread. */
void rs_bc_entry_destroyed(rs_bcast_node_t *node, uint64_t node_id, uint64_t seq);

/* The peer died: entries fetching from it recover, idle copies of its objects go. */
void rs_bc_entry_peer_dead(rs_bcast_node_t *node, rs_bc_peer_t *peer);

/* Drops a reference; retires the entry when nothing needs it. */
void rs_bc_entry_unref(rs_bc_entry_t *e);

/* Frees retired entries as rs_bc_src_reap frees objects (force: context gone). */
void rs_bc_entry_reap(rs_bcast_node_t *node, uint64_t now, int force);
/* Retires the oldest unreferenced entry whose region fits len; 1 if one went. */
int rs_bc_entry_evict(rs_bcast_node_t *node, size_t len);

/* ----------------------------------------------------- entries (entry.c) */

/*
 * The entry for an object, joined (refs + 1) or created (FETCHING, refs 1).
 * *joined tells which. RS_ERR_DESTROYED when the node knows it was destroyed.
 */
rs_status_t rs_bc_entry_acquire(rs_bcast_node_t *node, const rs_bc_desc_t *d, rs_bc_entry_t **e_p,
                                int *joined);

/* Ends a fetch with an error (entry->lock held); getters wake. */
void rs_bc_entry_fail(rs_bc_entry_t *e, rs_status_t st);

#endif
