/*
 * Worker internals. store.c: the arena, shuffles, partitions, extents,
 * grants, the commit index, spill and snapshots (no transport). serve.c:
 * the protocol handlers. worker.c: lifecycle and the thread.
 */
#ifndef RS_WORKER_INTERNAL_H
#define RS_WORKER_INTERNAL_H

#include <pthread.h>
#include <rshuffle/codec.h>
#include <rshuffle/transport.h>
#include <rshuffle/worker.h>

#include "common/list.h"
#include "common/range_alloc.h"
#include "shuffle/proto.h"
#include "worker/watch.h"

typedef struct wshuffle wshuffle_t;
typedef struct wpart wpart_t;

/* Where a merged extent's frame is indexed: its partition's entry (spill.c moves it). */
typedef struct wframe_ref {
    uint32_t part, entry;
} wframe_ref_t;

/* A contiguous piece of the arena holding one partition's batches. */
typedef struct extent {
    rs_list_t link; /* in part->extents */
    wpart_t *part;
    uint64_t off, len;
    uint64_t fill;        /* bytes handed out as grants */
    uint32_t live_grants; /* grants whose bytes have not all arrived */
    uint32_t n_batches;   /* committed batches still in memory */
    uint32_t pins;        /* open snapshots that list its batches: never spilled meanwhile */
    uint32_t pin_snap;    /* a merged extent: the last snapshot that pinned it */
    int spilling;         /* the extent spill_extent is writing (spill.c) */
    int closed;           /* no more grants from it; trimmed to fill */
    int reserve;          /* a merged grant's, in the staging reserve (merged.c) */
    rs_range_t *holes;    /* retired grants' unused room, back in the data area already */
    uint32_t n_holes, cap_holes;
    wframe_ref_t *frames; /* a merged extent: the frames indexed in it, in arrival order */
    uint32_t n_frames, cap_frames;
} extent_t;

/* A range of an extent granted to one pusher endpoint. */
typedef struct wgrant {
    extent_t *ext;
    uint64_t off, len; /* arena offset */
    uint64_t used;     /* bytes the pusher wrote (final once retired) */
    uint64_t settled;  /* bytes of batches that arrived (committed or refused) */
    uint64_t open;     /* bytes of it counted in the store's open_room */
    uint32_t partition;
    uint32_t slot;
    int retired;  /* the pusher is done with it: used is final */
    int released; /* every byte arrived: its extent no longer waits for it */
} wgrant_t;

typedef struct wentry {
    rs_snap_entry_t e;
    extent_t *ext; /* NULL once spilled */
} wentry_t;

/*
 * What every arriving batch touches comes first: with parts[] 64-byte
 * aligned (store.c) it is one cache line, and with 20,000 partitions that
 * line is seldom in cache when a merged write's frame for it arrives.
 */
struct wpart {
    extent_t *cur;
    wentry_t *entries;
    uint32_t n_entries, cap_entries;
    uint32_t merged_entries; /* entries in merged extents, still in memory */
    wshuffle_t *sh;
    rs_list_t extents;
    uint64_t next_extent; /* size of the next extent (doubles) */
};

typedef struct wcommit {
    rs_list_t link;
    uint32_t map_id, attempt;
    rs_commit_entry_t *entries; /* sorted by partition */
    uint32_t n;
} wcommit_t;

struct wshuffle {
    rs_list_t link;
    uint32_t id;
    uint32_t n_partitions;
    wpart_t *parts;
    /*
     * Merged grants' extents (merged.c), outside parts[]: their frames are
     * indexed in place by their partitions; freed once none is in memory.
     */
    wpart_t merged;
    rs_list_t commits;
    uint32_t open_snaps; /* a dropped shuffle is freed once no snapshot */
    uint32_t pushers;    /* ... and no attached pusher connection uses it */
    uint32_t replicas;   /* R, as its first pusher said (0: none attached yet); others must agree */
    uint64_t generation; /* the registration its first pusher named: others are refused */
    int dropped;
    int spill_fd; /* -1 until the first spill; one file per shuffle, unlinked at once */
    uint64_t spill_len;
};

/* Room in the arena outside partition extents (snapshot indexes, staged spills). */
typedef struct wspace {
    uint64_t off, len; /* arena offset; len 0: none */
    int reserve;       /* from the staging reserve, else from the data area */
} wspace_t;

typedef struct wsnap {
    rs_list_t link; /* in conn->snaps */
    uint32_t id;
    wshuffle_t *sh;
    wspace_t index;           /* the snapshot in the arena (len 0: sent inline) */
    uint64_t index_bytes;     /* its exact length */
    wspace_t stage;           /* spilled batches staged for the reader */
    rs_snap_entry_t *entries; /* the snapshot's entries, for spill loads */
    uint32_t n_entries;
    extent_t **pinned; /* extents holding its in-memory batches */
    uint32_t n_pinned;
} wsnap_t;

typedef struct wpstat {
    uint32_t batches;
    uint64_t bytes, checksum;
} wpstat_t;

/* One peer endpoint. */
typedef struct wconn {
    rs_list_t link;
    rs_ep_t *ep;
    int role; /* 0 until attached */
    wshuffle_t *sh;
    uint32_t map_id, attempt;
    wgrant_t **slots; /* by slot number */
    uint32_t n_slots;
    uint32_t *free_slots; /* free slot numbers, a stack (n_slots long) */
    uint32_t n_free;
    uint32_t open_grants; /* not yet retired by the pusher */
    uint64_t reclaim_at;  /* last RECLAIM sent (coarse ns) */
    wpstat_t *stats;      /* per partition, batches that arrived from this pusher */
    uint64_t batches;     /* arrivals, repeats of a batch included */
    uint64_t distinct;    /* arrivals of distinct batches */
    uint8_t *seen;        /* bitmap of batch sequence numbers that arrived */
    uint64_t seen_bits;
    rs_commit_entry_t *commit; /* chunks of a commit being received */
    uint32_t commit_n, commit_cap;
    uint64_t commit_total; /* set by the last chunk: waiting for the batches */
    uint64_t commit_deadline;
    int commit_pending;
    rs_list_t snaps;

    uint64_t generation; /* reader: the registration it reads (its attach said) */
    int committed;       /* pusher: its commit was accepted (gone after it: no warning) */
    int said_unknown;    /* reader: a read of an unknown shuffle was logged */
} wconn_t;

typedef struct rs_worker_store {
    rs_worker_config_t cfg;
    uint8_t *arena;
    uint64_t arena_len;
    rs_range_alloc_t ra;  /* the data area [0, data_len): partition extents */
    rs_range_alloc_t rsv; /* the staging reserve [data_len, arena_len) */
    uint64_t data_len;
    uint64_t high_water; /* of the data area */
    uint64_t open_room;  /* granted bytes nothing has arrived in yet (unreleased grants) */
    uint32_t landing;    /* merged grants whose writes have not all arrived */
    /*
     * Current extents made or shortened (room a trim would give back), and
     * how many the last trim saw: none since, nothing to trim.
     */
    uint64_t tails_made, tails_trimmed;
    rs_list_t shuffles;
    uint32_t next_snap;
    int spill_errno;       /* the last spill's failure (0: the last spill worked, or none yet) */
    uint64_t spill_again;  /* coarse ns: after a failure, no spill before this */
    uint64_t spill_log_ns; /* last spill failure logged (rate limit) */
    uint32_t spill_quiet;  /* failures not logged since */
    rs_worker_stats_t stats;
} rs_wk_store_t;

/*
 * Bytes of the data area in use beyond room granted that nothing has
 * arrived in: what the high-water mark bounds. Idle grant room is not spilled
 * for (RECLAIM returns it); a merged grant in the reserve counts in open_room
 * only, hence the floor.
 */
static inline uint64_t rs_wk_store_held(const rs_wk_store_t *st)
{
    return st->ra.used > st->open_room ? st->ra.used - st->open_room : 0;
}

struct rs_worker {
    rs_ctx_t *ctx;
    rs_mr_t *arena_mr;
    rs_listener_t *listener;
    struct rs_local_reg *local; /* the arena in the process-local registry, once listening */
    rs_wk_store_t st;
    rs_list_t conns;
    pthread_t thread;
    int thread_started;
    volatile int stop;
    pthread_mutex_t stats_lock;
    rs_worker_stats_t stats_copy;
    uint8_t rkey[RS_RKEY_BLOB_MAX];
    size_t rkey_len;
    uint8_t *msg_buf; /* a reply being built: msg_max bytes (handlers run one at a time) */
    rs_ep_t **dead;   /* endpoints to close outside callbacks */
    size_t n_dead, cap_dead;
    uint64_t next_housekeeping;
    uint16_t
        watched[RS_WK_WATCH_MINE]; /* the TCP listeners its context opened (UCX's own: watch.h) */
    int n_watched;
    int counted;            /* in the process's count of listening workers (the watch needs 1) */
    uint64_t next_watch;    /* the listener watch (worker.c), coarse ns */
    uint32_t watch_strikes; /* checks in a row that found connections nobody accepts */
    int draining;           /* rs_worker_drain: no new shuffles or maps (__atomic: any thread) */
};

/* serve.c */
rs_status_t rs_wk_handlers(rs_worker_t *w);
void rs_wk_commit_check(rs_worker_t *w, wconn_t *c, int timed_out);
void rs_wk_conn_free(rs_worker_t *w, wconn_t *c);
/*
 * arrival.c: the checks every arriving frame passes (single or merged): it
 * parses (verifies, with verify) inside room and names this shuffle, the
 * pusher's map and attempt, a seq below RS_SEQ_MAX and partition
 * (RS_MERGED_PART: any of the shuffle's). RS_OK with *f, else the status
 * its NACK carries.
 */
rs_status_t rs_wk_frame_check(const rs_worker_t *w, const wconn_t *c, const uint8_t *frame,
                              size_t room, uint32_t partition, rs_frame_t *f);
/* A batch refused: counted, and the pusher told (a NACK). */
void rs_wk_nack(rs_worker_t *w, wconn_t *c, uint32_t partition, uint32_t imm, uint64_t seq,
                rs_status_t status);
/* Marks batch seq of c as arrived; returns whether it had arrived before. */
int rs_wk_seen(wconn_t *c, uint64_t seq);
/* Frees g's slot once it is retired and all its bytes arrived. */
void rs_wk_slot_maybe_free(rs_worker_t *w, wconn_t *c, wgrant_t *g);
/*
 * merged.c: a merged write arrived at offset in of g (RS_MERGED_PART); the
 * caller then frees g's slot and checks a pending commit.
 */
void rs_wk_merged_arrived(rs_worker_t *w, wconn_t *c, wgrant_t *g, uint64_t in, uint32_t imm);
/* info.c: the INFO request's handler */
void rs_wk_on_info(void *arg, rs_ep_t *ep, const void *data, size_t len);
/* dead.c: ep is closed at the next housekeeping (not from its callback). */
void rs_wk_defer_close(rs_worker_t *w, rs_ep_t *ep);
/* stats.c: publishes the counters for rs_worker_stats. */
void rs_wk_stats_publish(rs_worker_t *w);

/* store.c: the store and its shuffles */
rs_status_t rs_wk_store_init(rs_wk_store_t *st, const rs_worker_config_t *cfg, uint8_t *arena,
                             uint64_t len);
void rs_wk_store_cleanup(rs_wk_store_t *st);
wshuffle_t *rs_wk_store_find(rs_wk_store_t *st, uint32_t shuffle_id);
rs_status_t rs_wk_store_attach(rs_wk_store_t *st, uint32_t shuffle_id, uint32_t n_partitions,
                               wshuffle_t **sh_p);
/* A pusher connection attached to sh (rs_wk_store_attach counts it) went away. */
void rs_wk_store_pusher_detach(rs_wk_store_t *st, wshuffle_t *sh);
/* Frees a shuffle now, or once its last snapshot and attached pusher are gone. */
void rs_wk_store_drop(rs_wk_store_t *st, wshuffle_t *sh);
/* Frees a dropped shuffle once no snapshot and no pusher holds it. */
void rs_wk_shuffle_maybe_free(rs_wk_store_t *st, wshuffle_t *sh);

/* extents.c: arena accounting and partition extents */
/* Refreshes the arena usage counters. */
void rs_wk_arena_used_update(rs_wk_store_t *st);
/* Gives len bytes at off back to the data area. */
void rs_wk_arena_put(rs_wk_store_t *st, uint64_t off, uint64_t len);
/* Takes len bytes of the data area (the range allocator's status). */
rs_status_t rs_wk_arena_get(rs_wk_store_t *st, uint64_t len, uint64_t *off_p);
/* Unlinks e from its partition and gives its range back (less its holes). */
void rs_wk_extent_free(rs_wk_store_t *st, extent_t *e);
/*
 * Gives len bytes at off inside e (a retired grant's unused room, below
 * e's fill) back to the data area now; e remembers the hole so that its
 * free skips it. RS_ERR_NOMEM: nothing changed (the room stays e's).
 */
rs_status_t rs_wk_extent_hole(rs_wk_store_t *st, extent_t *e, uint64_t off, uint64_t len);
/* Stops granting from e and gives its unused tail back. */
void rs_wk_extent_close(rs_wk_store_t *st, extent_t *e);
/* Frees e once closed, without live grants, in-memory batches or pins. */
void rs_wk_extent_maybe_free(rs_wk_store_t *st, extent_t *e);

/* grants.c */
/*
 * A new grant of want bytes (+ bulk room while memory is plentiful) for
 * partition p. RS_ERR_BACKPRESSURE when even want does not fit after
 * spilling; RS_ERR_IO when it does not fit and the last spill failed (its
 * disk full or failing: logged by spill.c); RS_ERR_BUSY for an
 * RS_GRANT_AHEAD request while memory is short.
 */
rs_status_t rs_wk_store_grant(rs_wk_store_t *st, wshuffle_t *sh, uint32_t p, uint64_t want,
                              uint32_t flags, wgrant_t **g_p);
/* Marks bytes of g as arrived (sink mode frees a released grant's extent at once). */
void rs_wk_store_settle(rs_wk_store_t *st, wgrant_t *g, uint64_t bytes);
/* The pusher is done with g after used bytes (idempotent). */
void rs_wk_store_retire(rs_wk_store_t *st, wgrant_t *g, uint64_t used);
/* Frees g; bytes that never arrived are given up (the pusher is gone). */
void rs_wk_store_grant_free(rs_wk_store_t *st, wgrant_t *g);
/*
 * A merged grant (RS_GRANT_MERGED) of exactly want bytes, in an extent of
 * its own (sh->merged); errors as rs_wk_store_grant's.
 */
rs_status_t rs_wk_store_grant_merged(rs_wk_store_t *st, wshuffle_t *sh, uint64_t want,
                                     wgrant_t **g_p);
/*
 * Indexes a merged write's frame e (e->loc inside g) in partition p: where
 * it lies, or, g being in the staging reserve, copied into the partition's
 * extents when room is found (trimming extents' unused tails, never
 * spilling). The caller walks g's frames and settles them.
 */
rs_status_t rs_wk_store_place_merged(rs_wk_store_t *st, wshuffle_t *sh, wgrant_t *g, uint32_t p,
                                     rs_snap_entry_t *e);

/* commits.c: the commit index */
rs_status_t rs_wk_store_add_entry(rs_wk_store_t *st, wgrant_t *g, const rs_snap_entry_t *e);
/* Indexes e in part, held by ext (its in-memory batches count it). */
rs_status_t rs_wk_part_add_entry(rs_wk_store_t *st, wpart_t *part, extent_t *ext,
                                 const rs_snap_entry_t *e);
/* Keeps a map's commit: entries (sorted by partition, owned from now on). */
void rs_wk_store_commit(rs_wk_store_t *st, wshuffle_t *sh, uint32_t map_id, uint32_t attempt,
                        rs_commit_entry_t *entries, uint32_t n);

/* spill.c */
/* Gives back the unused tails of partitions' current extents (no I/O). */
void rs_wk_store_trim(rs_wk_store_t *st);
/* Spills unpinned settled extents until the data area is below the mark and need bytes fit. */
void rs_wk_store_spill(rs_wk_store_t *st, uint64_t need);

/* snapshots.c */
/*
 * Opens a snapshot of partition p: its commits and entries, with every
 * extent holding its in-memory batches pinned. Its index (*index_len_p
 * bytes) is written to inline_buf when at most inline_max bytes (to be sent
 * inline: snap->index.len 0), else into the arena (snap->index).
 * RS_ERR_BACKPRESSURE: no room for it there.
 */
rs_status_t rs_wk_store_snap_open(rs_wk_store_t *st, wshuffle_t *sh, uint32_t p, void *inline_buf,
                                  size_t inline_max, wsnap_t **snap_p, size_t *index_len_p);
/*
 * Stages spilled frames [first, first+n) of snap in the arena (snap->stage):
 * all of them, or as many leading ones as fit (*staged_p). RS_ERR_BACKPRESSURE
 * when not even one fits now.
 */
rs_status_t rs_wk_store_stage(rs_wk_store_t *st, wsnap_t *snap, uint32_t first, uint32_t n,
                              uint32_t *staged_p);
/* Releases the snapshot's pins and staging room and frees it. */
void rs_wk_store_snap_close(rs_wk_store_t *st, wsnap_t *snap);

#endif
