/*
 * Private state of the broadcast node.
 *
 * Threads: the transport's progress thread runs every callback, under the
 * context lock. Callbacks only record state and queue work; the node's
 * service thread handles queued messages (it may register memory and post)
 * and runs the timers. API threads (getters) plan and post their reads
 * themselves.
 *
 * Locks, in the only order they may nest:
 *   transport context lock (callbacks)  ->  entry->lock / src->lock  ->  node->lock
 * node->lock guards the tables (entries, sources, peers, requests, retired
 * lists) and reference counts; it is held briefly and never around a
 * transport call. entry->lock guards one fetch; src->lock one published
 * object. No transport call is made with any of these locks held: a thread
 * decides under the lock, unlocks, then posts.
 */
#ifndef RS_BROADCAST_INTERNAL_H
#define RS_BROADCAST_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <rshuffle/broadcast.h>
#include <rshuffle/transport.h>

#include "broadcast/proto.h"
#include "common/list.h"

/* ------------------------------------------------------------ addresses */

/* An address with its own storage (host or blob bytes). */
typedef struct rs_bc_addr_own {
    rs_bc_addr_t a; /* a.bytes.p points at buf */
    uint8_t *buf;
} rs_bc_addr_own_t;

rs_status_t rs_bc_addr_copy(rs_bc_addr_own_t *dst, const rs_bc_addr_t *src);
void rs_bc_addr_release(rs_bc_addr_own_t *a);

/* ---------------------------------------------------------------- slots */

/*
 * Registered buffers carved from slabs registered once: reply slots (peers
 * write replies into them) and staging slots (a source builds replies in
 * them). A request that needs more than slot_size gets a slab of its own,
 * kept for reuse.
 */
typedef struct rs_bc_slot rs_bc_slot_t;

typedef struct rs_bc_slab {
    rs_list_t link;
    rs_mr_t *mr;
    rs_bc_slot_t *slots; /* the slots carved from it */
    uint8_t rkey[RS_RKEY_BLOB_MAX];
    size_t rkey_len;
} rs_bc_slab_t;

struct rs_bc_slot {
    rs_list_t link;
    rs_bc_slab_t *slab;
    uint8_t *p;
    size_t cap;
    uint64_t off; /* offset of p in the slab's region */
    int big;      /* on the big free list when free */
};

typedef struct rs_bc_slots {
    pthread_mutex_t lock;
    rs_ctx_t *ctx;
    unsigned access;
    size_t slot_size;
    uint32_t per_slab;
    rs_list_t free;     /* slot_size slots */
    rs_list_t big_free; /* larger ones */
    rs_list_t slabs;
} rs_bc_slots_t;

void rs_bc_slots_init(rs_bc_slots_t *s, rs_ctx_t *ctx, unsigned access, size_t slot_size,
                      uint32_t per_slab);
/* A slot of at least need bytes. Not from a transport callback (it may register memory). */
rs_status_t rs_bc_slots_get(rs_bc_slots_t *s, size_t need, rs_bc_slot_t **slot_p);
/* A free slot of at least need bytes, never registering (callbacks allowed); RS_ERR_BUSY: none. */
rs_status_t rs_bc_slots_try(rs_bc_slots_t *s, size_t need, rs_bc_slot_t **slot_p);
/* Returns a slot (callbacks allowed). */
void rs_bc_slots_put(rs_bc_slots_t *s, rs_bc_slot_t *slot);
/* Frees the slot structures once the context (which frees the memory) is destroyed. */
void rs_bc_slots_fini(rs_bc_slots_t *s);
/*
 * This thread's stash, for a request served inside a transport callback
 * (servecb.c): reserves n free slots of cap bytes without registering, which
 * rs_bc_slots_get then hands out instead of registering. 0 (nothing added)
 * when they are not all free. rs_bc_slots_stash_return gives back the
 * unused ones and ends the stash.
 */
int rs_bc_slots_stash_fill(rs_bc_slots_t *s, uint32_t n, size_t cap);
void rs_bc_slots_stash_return(void);

/* ---------------------------------------------------------- endpoints */

/* Per-endpoint state (rs_ep_user): remote keys of the peer's reply slabs. */
typedef struct rs_bc_peer rs_bc_peer_t;

typedef struct rs_bc_epinfo {
    rs_list_t link; /* node->epinfos (accepted endpoints) */
    rs_ep_t *ep;
    rs_bc_peer_t *peer;   /* the peer when we connected, NULL when accepted */
    int dead;             /* atomic: RS_BDEAD / rs_bc_epinfo_kill */
    pthread_mutex_t lock; /* rkeys: callbacks and the service thread both answer requests */
    rs_list_t rkeys;      /* rs_bc_key_cache_t */
} rs_bc_epinfo_t;

typedef struct rs_bc_key_cache {
    rs_list_t link;
    rs_rkey_t *rkey;
    size_t len;
    uint8_t blob[];
} rs_bc_key_cache_t;

#define RS_BDEAD(info) __atomic_load_n(&(info)->dead, __ATOMIC_ACQUIRE)

/* The remote key for blob on ep, unpacked once per endpoint. */
rs_status_t rs_bc_epinfo_rkey(rs_bc_epinfo_t *info, const void *blob, size_t len,
                              rs_rkey_t **rkey_p);

/* A peer this node connects to (a source or a holder), found by address. */
typedef enum {
    RS_BPEER_NEW,
    RS_BPEER_CONNECTING,
    RS_BPEER_READY,
    RS_BPEER_DEAD
} rs_bc_peer_state_t;

struct rs_bc_peer {
    rs_list_t link; /* node->peers */
    rs_bc_addr_own_t addr;
    rs_ep_t *ep;
    rs_bc_peer_state_t state; /* node->lock */
    rs_status_t err;
    uint32_t reads; /* reads in flight to this peer (atomic) */
    rs_bc_epinfo_t info;
    rs_list_t rcache;    /* unpacked keys of its object regions (rcache.c; info.lock) */
    uint64_t rcache_max; /* bytes of unused regions those may keep mapped */
};

/* ---------------------------------------------------------------- regions */

typedef struct rs_bc_region rs_bc_region_t;

/*
 * A remote-readable region of at least len bytes with its packed key
 * (rkey: RS_RKEY_BLOB_MAX bytes): rs_bc_region_take from the cache only
 * (RS_ERR_NOT_FOUND: none fits), rs_bc_region_new newly registered, and
 * rs_bc_region_get (reclaim.c) the cache, then regions of retired or
 * evicted objects, then a new one. Not from a transport callback.
 */
rs_status_t rs_bc_region_take(rs_bcast_node_t *node, size_t len, rs_mr_t **mr_p, uint8_t *rkey,
                              size_t *rkey_len);
rs_status_t rs_bc_region_new(rs_bcast_node_t *node, size_t len, rs_mr_t **mr_p, uint8_t *rkey,
                             size_t *rkey_len);
rs_status_t rs_bc_region_get(rs_bcast_node_t *node, size_t len, rs_mr_t **mr_p, uint8_t *rkey,
                             size_t *rkey_len);
/*
 * Takes a region nothing here uses any more: cached for reuse (within
 * cache_bytes), else freed after grace_ms (peers may still be reading it).
 */
void rs_bc_region_put(rs_bcast_node_t *node, rs_mr_t *mr, const uint8_t *rkey, size_t rkey_len);
/* Frees the regions whose grace passed. Service thread. */
void rs_bc_regions_tick(rs_bcast_node_t *node, uint64_t now);
/* Frees the cache's structures once the context (which frees the memory) is destroyed. */
void rs_bc_regions_fini(rs_bcast_node_t *node);

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
    int requested; /* the manifest request was sent (or is being sent) */
    int have_manifest;
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

/* ------------------------------------------------------------------ node */

typedef struct rs_bc_work {
    rs_list_t link;
    int kind; /* RS_BWORK_* */
    rs_ep_t *ep;
    rs_status_t status;
    size_t len;
    uint8_t data[];
} rs_bc_work_t;

enum { RS_BWORK_REQ, RS_BWORK_DESTROY, RS_BWORK_EP, RS_BWORK_NEWS };

#define RS_BTOMBS 256

struct rs_bcast_node {
    rs_ctx_t *ctx;
    rs_bcast_config_t cfg;
    uint32_t msg_max;
    uint32_t peer_timeout_ms;
    rs_listener_t *listener;
    uint64_t node_id;
    rs_bc_addr_own_t self;
    int fault_corrupt; /* RS_FAULT_INJECTION: serve corrupted copies */
    int fault_slow;    /* RS_FAULT_INJECTION: pause 20 ms before posting each read */

    pthread_t thread;
    int stop; /* atomic */

    pthread_mutex_t lock;
    pthread_cond_t cond; /* peer state changes */
    rs_list_t entries;
    rs_list_t retired;
    rs_list_t sources;
    rs_list_t retired_srcs;
    rs_list_t peers;
    rs_list_t epinfos; /* accepted endpoints */
    rs_list_t pending;
    rs_list_t lost_slots; /* reply slots of requests that timed out: never reused */
    rs_list_t regions;    /* cached object regions (rs_bc_region_t) */
    rs_list_t doomed;     /* regions freed once their grace passed */
    size_t region_bytes;
    uint64_t next_seq;
    uint32_t next_req_id;
    uint64_t tombs[RS_BTOMBS][2]; /* (node_id, seq) of objects destroyed lately */
    uint32_t n_tombs;
    rs_bcast_stats_t stats; /* reader totals and source totals (atomic adds) */
    uint32_t sends;         /* destroy notices in flight (atomic) */

    pthread_mutex_t work_lock;
    pthread_cond_t work_cond;
    rs_list_t work;
    uint32_t work_queued; /* events queued or being handled (atomic) */

    rs_bc_slots_t replies; /* reader: reply slots peers write into */
    rs_bc_slots_t staging; /* source: replies are built here */
};

/* Adds v to a counter of node->stats (and of the entry / source when given). */
#define RS_BSTAT_ADD(field, v) __atomic_fetch_add(&(field), (uint64_t)(v), __ATOMIC_RELAXED)

/* A peer by address, created NEW when unknown (node->lock taken inside). */
rs_bc_peer_t *rs_bc_peer_get(rs_bcast_node_t *node, const rs_bc_addr_t *addr);

/*
 * Connects the peer unless it is READY (waiting for another thread's attempt
 * if one is under way); RS_OK when READY. *connected set when this call
 * opened the connection.
 */
rs_status_t rs_bc_peer_connect(rs_bcast_node_t *node, rs_bc_peer_t *peer, int *connected);

/* Takes one of the peer's read slots (reads_per_ep); 0 when full. */
int rs_bc_peer_take_read(rs_bcast_node_t *node, rs_bc_peer_t *peer);
void rs_bc_peer_put_read(rs_bc_peer_t *peer);

/* Frees peers and endpoint infos once the context (endpoints, keys) is destroyed. */
void rs_bc_peers_fini(rs_bcast_node_t *node);

/* A new request id and the pending record (node->lock taken inside). */
uint32_t rs_bc_node_req_id(rs_bcast_node_t *node);

/* Remembers / asks whether (node_id, seq) was destroyed (node->lock held). */
void rs_bc_node_tomb_add(rs_bcast_node_t *node, uint64_t node_id, uint64_t seq);
int rs_bc_node_tomb_has(const rs_bcast_node_t *node, uint64_t node_id, uint64_t seq);

/* 64 random bits (a per-thread generator seeded from getrandom). */
uint64_t rs_bc_random64(void);
/* 64 fresh random bits from getrandom (else the clock and the pid): node ids, seeds. */
uint64_t rs_bc_random_seed(void);

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
