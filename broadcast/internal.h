/*
 * Private state of the broadcast node, shared by both roles: addresses,
 * slots, endpoints and peers, regions, the node. A source's objects are in
 * source.h, a reader's entries in entry.h.
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

#endif
