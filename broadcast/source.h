/* The source role: published objects, their holders, long polls and replies. */
#ifndef RS_BROADCAST_SOURCE_H
#define RS_BROADCAST_SOURCE_H

#include "broadcast/internal.h"

/* ---------------------------------------------------------------- source */

typedef struct rs_bc_src_holder {
    uint32_t id;
    int complete;
    uint32_t have;        /* blocks announced */
    rs_bc_epinfo_t *conn; /* where its requests came from (destroy notices go there) */
    rs_bc_addr_own_t addr;
    uint8_t *rkey;
    size_t rkey_len;
    uint8_t *bitmap;
    uint8_t *claims; /* blocks it said it is reading from the source */
    uint32_t start;  /* where in the block permutation it reads from */
} rs_bc_src_holder_t;

typedef enum { RS_BSRC_OPEN, RS_BSRC_SEALED, RS_BSRC_DESTROYED } rs_bc_src_state_t;

/* An UPDATE parked until the object's version moves (a long poll). */
typedef struct rs_bc_parked {
    rs_list_t link;
    rs_bc_epinfo_t *info;
    uint32_t req_id;
    uint32_t self_id; /* the requester's holder id (0: none) */
    uint64_t reply_off;
    uint32_t reply_cap;
    uint64_t deadline_ns;
    size_t rkey_len;
    uint8_t rkey[];
} rs_bc_parked_t;

struct rs_bcast {
    rs_list_t link; /* node->sources, then node->retired_srcs */
    rs_bcast_node_t *node;
    pthread_mutex_t lock;
    uint64_t seq;
    uint64_t size;
    uint32_t block_size, nblocks;
    int is_inline;
    rs_mr_t *mr;
    int user_mr;      /* mr is the caller's (rs_bcast_publish_mr): never cached or freed */
    uint8_t *data;    /* the object's bytes */
    size_t reply_len; /* inline: the prebuilt reply at the region's start */
    uint64_t *sums;
    uint8_t rkey[RS_RKEY_BLOB_MAX]; /* the region's key (non-inline) */
    size_t rkey_len;
    uint64_t perm_seed;
    uint32_t *perm_pos; /* block -> its position in the shared permutation (lazily) */
    rs_bc_src_state_t state;
    uint32_t version;  /* bumped whenever holders join, announce blocks or die (src->lock) */
    uint32_t rversion; /* bumped when the set of active readers changes (src->lock) */
    rs_list_t parked;  /* rs_bc_parked_t (src->lock) */
    uint32_t busy;     /* requests being served + puts in flight from mr (node->lock) */
    uint64_t free_after_ns;
    rs_bc_src_holder_t **holders;
    uint32_t n_holders, cap_holders;
    rs_bc_epinfo_t **readers; /* every endpoint that asked for the manifest: told of a destroy */
    uint32_t n_readers, cap_readers;
    rs_bcast_stats_t stats; /* source fields (atomic adds) */
};

/* The holder registry (holders.c); src->lock held for all of them. */
/*
 * A new open object of len bytes (checked against the block limit) with its
 * checksum array, no memory yet; rs_bc_src_free_new undoes it before the
 * object is listed in the node.
 */
rs_status_t rs_bc_src_new(rs_bcast_node_t *node, size_t len, rs_bcast_t **src_p);
void rs_bc_src_free_new(rs_bcast_t *src);
void rs_bc_src_holder_free(rs_bc_src_holder_t *h);
int rs_bc_src_holder_find(rs_bcast_t *src, const rs_bc_addr_t *addr);
rs_bc_src_holder_t *rs_bc_src_holder_by_id(rs_bcast_t *src, uint32_t id);
/* Not known to be dead (its endpoint to us is alive). */
int rs_bc_src_holder_alive(const rs_bc_src_holder_t *h);
/* An active reader: still fetching, and its connection to us alive. */
int rs_bc_src_holder_active(const rs_bc_src_holder_t *h);
/*
 * Registers a GET's requester as a holder, replacing one at the same address
 * (its region is new) and picking where it starts. NULL when out of room.
 */
rs_bc_src_holder_t *rs_bc_src_holder_register(rs_bcast_t *src, rs_bc_epinfo_t *conn,
                                              const rs_bc_req_t *q);
/*
 * Applies an announcement (bitmap, claims, completion); gained (optional,
 * bitmap bytes) receives the blocks it added. Returns whether it added any.
 */
int rs_bc_src_holder_update(rs_bcast_t *src, rs_bc_src_holder_t *h, const rs_bc_req_t *q,
                            uint8_t *gained);
/* Remembers an endpoint that asked for the manifest (told of a destroy). */
void rs_bc_src_reader_note(rs_bcast_t *src, rs_bc_epinfo_t *info);

/* Replies of a source (srcreply.c). */
/* Drops a busy reference on src (node->lock taken inside). */
void rs_bc_src_unbusy(rs_bcast_node_t *node, rs_bcast_t *src);
/* Answers with only a status (destroyed, unknown, no space). */
void rs_bc_src_reply_status(rs_bcast_node_t *node, rs_bc_epinfo_t *info, const rs_bc_req_t *q,
                            rs_status_t status);
/*
 * Builds and sends a manifest (GET) or holder update (UPDATE) for the
 * requester self_id, in a staging slot as large as the requester allows.
 * Takes a busy reference on src for the put.
 */
void rs_bc_src_reply_manifest(rs_bcast_node_t *node, rs_bcast_t *src, rs_bc_epinfo_t *info,
                              const rs_bc_req_t *q, uint32_t self_id);
/*
 * Answers a GET for an inline object with one notified put straight from its
 * prebuilt reply. 0 when the requester's slot is too small (or out of memory).
 */
int rs_bc_src_reply_inline(rs_bcast_node_t *node, rs_bc_epinfo_t *info, rs_bcast_t *src,
                           const rs_bc_req_t *q);

/* Long polls (park.c). A parked UPDATE due at deadline (ns); NULL: out of memory. */
rs_bc_parked_t *rs_bc_src_park_new(rs_bc_epinfo_t *info, const rs_bc_req_t *q, uint32_t self_id,
                                   uint64_t deadline);
/*
 * Answers parked long polls of src: those past their deadline, those gained
 * brings news for (when given), or all. status != RS_OK: only that status.
 */
void rs_bc_src_park_release(rs_bcast_node_t *node, rs_bcast_t *src, uint64_t now, int all,
                            const uint8_t *gained, rs_status_t status);

/* Serves one decoded request that arrived on info's endpoint. Service thread. */
void rs_bc_src_serve(rs_bcast_node_t *node, rs_bc_epinfo_t *info, const rs_bc_req_t *q);

/*
 * Serves a GET for an inline object right away (from the transport callback:
 * no allocation, one put from the prebuilt reply). Returns 0, having done
 * nothing, for any other request: the service thread serves those.
 */
int rs_bc_src_serve_fast(rs_bcast_node_t *node, rs_bc_epinfo_t *info, const rs_bc_req_t *q);

/* Answers long polls whose time is up. Service thread. */
void rs_bc_src_tick(rs_bcast_node_t *node, uint64_t now);

/* An endpoint peers used died: holders behind it stop being listed. Service thread. */
void rs_bc_src_conn_dead(rs_bcast_node_t *node, rs_bc_epinfo_t *info);

/*
 * Frees retired objects whose grace passed and that nothing uses (srcfree.c).
 * force: the context is destroyed, free every structure without transport
 * calls.
 */
void rs_bc_src_reap(rs_bcast_node_t *node, uint64_t now, int force);

#endif
