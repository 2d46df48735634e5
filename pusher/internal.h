/*
 * Pusher internals: the writer side (pusher.c) and the push engine, which
 * runs on the push queue's thread (pushq.c). The engine's files, each one
 * job, in their call order: a file calls only files listed before it (and
 * merge.c, conn.c, pushq.c, which call none of them), so the calls form no
 * circle (scripts/check-circles):
 *
 *   fail.c    a pusher's first failure, kept and logged
 *   seat.c    each partition's holders (its ring, workers lost skipped)
 *   lost.c    a worker lost (R >= 2) or failing the pusher (R = 1); liveness
 *   grants.c  retires, grant requests, the prefetch at open
 *   post.c    posting writes into grants, and their completions
 *   take.c    a buffer from the writer: framed, counted, queued, posted
 *   commit.c  the map commit once every write completed
 *   answer.c  the workers' messages (grants, reclaims, commit replies...)
 *   engine.c  the round hook: liveness, retries, merged writes' ages, commit
 *
 * pusher.c and lane.c, above them all, open, close and install them.
 */
#ifndef RS_PUSHER_INTERNAL_H
#define RS_PUSHER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <rshuffle/pusher.h>

#include "common/assert.h"
#include "common/list.h"
#include "shuffle/client.h"
#include "shuffle/proto.h"
#include "pusher/pushq.h"

/*
 * A push lane (pusher/lane.c): what a pusher borrows from its client for
 * its life and the next pusher reuses: a transport context, the registered
 * pool and its engine thread, and one connection per worker address.
 */
typedef struct rs_push_conn {
    char *addr;
    rs_ep_t *ep;
    rs_rkey_t *rkey;           /* the worker's arena, unpacked at the first attach on ep */
    struct rs_push_lane *lane; /* its lane */
    uint64_t made;             /* the client's loss epoch when ep was made (shuffle/client.h) */
    int exited;                /* its worker's process was seen gone: the lane owes a renewal */
} rs_push_conn_t;

/* What makes a lane fit a pusher: everything its context and pool were made with. */
typedef struct rs_push_lane_key {
    rs_config_t tcfg;
    size_t buf_len, pool_bytes;
    uint32_t queue_depth;
} rs_push_lane_key_t;

typedef struct rs_push_lane {
    rs_lane_t base; /* first: the client's view */
    rs_push_lane_key_t key;
    rs_ctx_t *ctx;
    rs_pushq_t *q;
    /* The pusher served (NULL between tasks); changed only with the engine's driver token held. */
    struct rs_pusher *_Atomic p;
    rs_push_conn_t **conns; /* each its own allocation: pushers keep pointers */
    uint32_t n_conns, cap_conns;
    /*
     * What the last committed task of a shuffle sent per partition: the next
     * task of that shuffle starts its buffers at that size, so each
     * partition goes as one batch at close (one grant), not as a doubling
     * run of 4, 8, 16 KiB batches each asking for its own grant.
     */
    uint64_t hint_shuffle;
    uint32_t hint_parts;
    uint32_t *hint;     /* hint_parts sizes in bytes, 0: none */
    int hint_any;       /* some size is not 0 (else nothing to presize or prefetch) */
    uint64_t loss_seen; /* the client's losses up to this epoch were applied to conns */
    /*
     * The last task's per-partition arrays (pusher.c), resident: the next
     * task zeroes them instead of faulting in fresh pages (6 MB at 20,000
     * partitions and 2 workers). At most one block, the largest yet.
     */
    void *arrays;
    size_t arrays_len;
} rs_push_lane_t;

/* A grant of one partition at its worker (len 0: none). */
typedef struct pgrant {
    uint32_t slot;
    uint64_t off, len, used;
} pgrant_t;

/*
 * Append's cursor into a partition's current buffer, apart from the buffer's
 * descriptor: with many partitions the descriptors are as many cache lines
 * (and pages) as partitions, while these 16 bytes per partition stay cached.
 */
typedef struct pwrite {
    uint8_t *data; /* cur's data, NULL without a buffer */
    uint32_t fill; /* bytes of records written */
    uint32_t cap;  /* cur's length (0 without a buffer) */
} pwrite_t;

/* One partition's space at its worker: the grant being filled and the next one. */
typedef struct ppart {
    pgrant_t cur, next;
    uint64_t ahead_want; /* streaming: the size of its batches, asked for ahead */
    uint32_t n_pending;  /* its batches waiting (pending or blocked) */
    uint32_t n_blocked;  /* of those, in blocked: later ones queue behind them */
    uint8_t ahead_queued, ahead_out, ahead_refused, in_req;
    uint8_t needy;     /* queued in the worker's needy ring */
    rs_list_t blocked; /* its batches waiting for a grant, in order */
} ppart_t;

typedef struct pretire {
    uint32_t partition, slot;
    uint64_t used;
} pretire_t;

/*
 * A merged write (pusher/merge.c): small frames bound for one worker,
 * copied back to back at 64-byte offsets into a block of the pool, written
 * with one grant and one notification.
 */
typedef struct pmerge {
    rs_list_t link; /* in its worker's merges, in order (not while filled or in flight) */
    struct pworker *w;
    rs_pbuf_int_t *buf; /* a transient block of the pool */
    uint32_t used, n;   /* bytes packed (64-byte multiple), frames */
    uint32_t state;     /* RS_PM_SEALED, RS_PM_ASKED, RS_PM_GRANTED */
    uint32_t slot;      /* granted: the grant */
    uint64_t off;
    uint64_t opened; /* coarse ns: its first frame */
} pmerge_t;

enum { RS_PM_SEALED = 0, RS_PM_ASKED = 1, RS_PM_GRANTED = 2 };
#define RS_PUSH_MERGE_KEEP 32 /* merged writes' blocks a pusher keeps for reuse */

/*
 * Where a worker stands with its pusher (pworker_t.flags): the attach and
 * the commit each go out once; the attach is answered once; the commit's
 * outcome is final once known (an answer, a loss, a failure, nothing to
 * send); a worker lost stays lost. Set through rs_push_worker_set only,
 * which checks the order.
 */
enum {
    RS_PW_ATTACH_SENT = 1u << 0, /* answers on its connection now find it */
    RS_PW_ATTACHED = 1u << 1,    /* the attach was answered: attach_status */
    RS_PW_COMMIT_SENT = 1u << 2, /* the commit went out (or failed to) */
    RS_PW_COMMIT_DONE = 1u << 3, /* commit_status is its outcome */
    RS_PW_LOST = 1u << 4,        /* R >= 2: dead or silent; nothing more goes to it */
};

/* The pusher's view of one worker. */
typedef struct pworker {
    struct rs_pusher *p;
    uint32_t index;
    rs_push_conn_t *conn; /* the lane's connection to this worker */
    rs_ep_t *ep;
    rs_rkey_t *rkey;
    uint64_t arena_len; /* its arena's bytes, as its attach reply said: every grant lies inside */
    int garbled;        /* it sent bytes the pusher refused: its connection is not kept */
    uint32_t flags;     /* RS_PW_* */
    rs_status_t attach_status;
    rs_list_t pending;  /* framed batches waiting for in-flight room (or not yet looked at) */
    uint64_t n_blocked; /* batches in the partitions' blocked lists */
    uint32_t *needy;    /* ring (n_partitions long): partitions with blocked batches to ask for */
    uint32_t needy_head, n_needy;
    uint64_t inflight;
    ppart_t *parts;            /* per partition */
    rs_commit_entry_t *counts; /* per partition: what this worker should hold */
    uint64_t batches;          /* sends, retries included */
    pretire_t *retires;        /* grants done with, to tell the worker in the next request */
    uint32_t ret_head, n_retires, cap_retires; /* [ret_head, n_retires) not yet sent */
    uint32_t *ahead;                           /* partitions whose next grant should be asked for */
    uint32_t n_ahead;
    int reclaim;       /* the worker is short of memory: give back idle grants */
    int inflight_full; /* try_post stopped at max_inflight: a completion resumes it */
    int req_out;
    uint32_t req_id;
    uint32_t prefetch_id; /* the request of grants asked at open (0: none) */
    uint64_t bp_since, retry_at;
    rs_status_t commit_status;
    uint64_t heard_at;   /* last message or write completion from the worker */
    uint64_t wait_since; /* since when an answer is owed (0: none) */
    pmerge_t *mcur;      /* the merged write being filled (NULL: none) */
    rs_list_t merges;    /* sealed merged writes waiting for a grant or room to post */
    uint32_t m_unasked;  /* of those, in RS_PM_SEALED */
} pworker_t;

/* Test-only faults (compiled with RS_FAULT_INJECTION). */
enum { RS_FAULT_NONE = 0, RS_FAULT_CORRUPT = 1, RS_FAULT_DUPLICATE = 2, RS_FAULT_HUGE_SEQ = 3 };

struct rs_pusher {
    rs_pusher_config_t cfg;
    rs_shuffle_desc_t desc;
    uint32_t map_id, attempt;
    rs_client_t *client;
    rs_push_lane_t *lane; /* NULL once given back (close or destroy) */
    rs_ctx_t *ctx;        /* the lane's */
    rs_pushq_t *q;        /* the lane's */
    int64_t user_bufs;    /* buffers the writer took with rs_pusher_buf_get and holds */
    pworker_t *workers;
    uint32_t *place;   /* partition -> worker index (replica 0; replica k is the k-th next) */
    uint32_t replicas; /* R: workers each batch is written to */
    /*
     * Partition p's holders, hold[p * R + k]: the first R workers of its ring
     * (place, place + 1, ... mod W) not lost when its first batch was framed
     * (its replicas while every worker lives). Settled from then on.
     */
    uint32_t *hold;
    /* One allocation: place, hold, the writer's and the workers' per-partition arrays. */
    void *arrays;
    size_t arrays_len;

    /* writer side */
    rs_pbuf_t **cur; /* per partition, append mode */
    pwrite_t *wr;    /* per partition: where append writes into cur (all append touches) */
    size_t *next_len;
    size_t *sent;     /* per partition: bytes handed over in append mode */
    size_t part_cap;  /* append buffers grow to this: within half the pool and hot_bytes */
    size_t first_len; /* a partition's first buffer: min_buf, or part_cap when smaller */
    uint64_t records;
    uint64_t next_seq; /* batch numbers, given at hand-off */

    /* engine side */
    uint32_t msg_max;
    uint8_t *msg_buf; /* a grant request or commit being built: msg_max bytes */
    rs_pusher_stats_t stats;
    _Atomic int error;
    atomic_int closing; /* close asked the engine to commit */
    /*
     * Close hands every partition's last buffer over before the engine asks
     * for their grants, so one request per worker carries them all.
     */
    atomic_int flushing;  /* set: grant requests wait (codec none only) */
    atomic_int flushed;   /* set by close: the engine asks now */
    uint32_t merge_below; /* frames shorter than this go merged (0: none); merge.c */
    uint32_t merge_len;   /* a merged write's block */
    uint32_t m_inflight;  /* merged writes posted and not completed (engine thread) */
    rs_pbuf_int_t *mfree[RS_PUSH_MERGE_KEEP]; /* blocks of completed merged writes, for reuse */
    uint32_t n_mfree, merge_keep;
    int fault, fault_every;
    uint64_t fault_count;

    pthread_mutex_t lock; /* close waits for the engine's commit */
    pthread_cond_t cond;
    int commit_finished;
};

/* The pusher's error (RS_OK: none yet). */
static inline rs_status_t rs_push_err(struct rs_pusher *p)
{
    return (rs_status_t)atomic_load(&p->error);
}

static inline void rs_push_batch_release(struct rs_pusher *p, rs_pbuf_int_t *b)
{
    rs_pushq_release(p->q, &b->pub);
}

/* A send left its list or its put completed: the buffer goes back after the last one. */
static inline void rs_push_batch_unref(struct rs_pusher *p, rs_pbuf_int_t *b)
{
    RS_ASSERT(b->refs > 0);
    if (--b->refs == 0)
        rs_push_batch_release(p, b);
}

/* Are all of flags (RS_PW_*) set on w? */
static inline int rs_push_worker_is(const pworker_t *w, uint32_t flags)
{
    return (w->flags & flags) == flags;
}

/* Sets flags (RS_PW_*) on w, checking the order they come in. */
static inline void rs_push_worker_set(pworker_t *w, uint32_t flags)
{
    uint32_t once = RS_PW_ATTACH_SENT | RS_PW_ATTACHED | RS_PW_COMMIT_SENT | RS_PW_LOST;
    RS_ASSERT((w->flags & flags & once) == 0);
    w->flags |= flags;
    RS_ASSERT(!rs_push_worker_is(w, RS_PW_ATTACHED) || rs_push_worker_is(w, RS_PW_ATTACH_SENT));
    RS_ASSERT(!rs_push_worker_is(w, RS_PW_COMMIT_SENT) || rs_push_worker_is(w, RS_PW_ATTACHED));
    RS_ASSERT(!rs_push_worker_is(w, RS_PW_LOST) || w->p->replicas > 1);
}

/* w's commit has its outcome, unless an earlier cause gave it one. */
static inline void rs_push_commit_end(pworker_t *w, rs_status_t status)
{
    if (rs_push_worker_is(w, RS_PW_COMMIT_DONE))
        return;
    w->commit_status = status;
    rs_push_worker_set(w, RS_PW_COMMIT_DONE);
}

/* What is left of a grant. */
static inline uint64_t rs_push_room(const pgrant_t *g)
{
    RS_ASSERT(g->used <= g->len);
    return g->len - g->used;
}

/* Does [off, off + len) lie inside w's arena? Written so that off + len cannot wrap. */
static inline int rs_push_grant_in_arena(const pworker_t *w, uint64_t off, uint64_t len)
{
    return len <= w->arena_len && off <= w->arena_len - len;
}

/* fail.c: the pusher fails with status (the first failure is kept and logged). */
void rs_push_fail(struct rs_pusher *p, rs_status_t status, const char *why);

/* seat.c */
/* Partition part's R holders (rs_pusher.hold). */
uint32_t *rs_push_holders(const struct rs_pusher *p, uint32_t part);
/* Does worker w hold part? */
int rs_push_holds(const struct rs_pusher *p, uint32_t part, uint32_t w);
/* Does every partition keep a holder on a worker not lost? (logs the first that does not) */
int rs_push_replicas_live(const struct rs_pusher *p);
/* Seats every partition not started on the first R live workers of its ring. */
void rs_push_seat_unstarted(struct rs_pusher *p);

/* lost.c */
/* Drops w's queued sends and merged writes not in flight. */
void rs_push_drop_pending(pworker_t *w);
/* R >= 2: w is lost (nothing more goes to it); the pusher fails when a partition has no holder. */
void rs_push_worker_lost(pworker_t *w, rs_status_t status, const char *why);
/* A message to w could not go out: with R >= 2 w is lost, else the pusher fails. */
void rs_push_send_failed(pworker_t *w, rs_status_t status, const char *what);
/* A worker that owes an answer and sent nothing for peer_timeout_ms is lost (R = 1: fails). */
void rs_push_check_alive(pworker_t *w, uint64_t now);

/* grants.c */
/* Remembers that the pusher is done with g (zeroed); the next request tells the worker. */
void rs_push_retire(pworker_t *w, uint32_t partition, pgrant_t *g);
/* A partition whose batches wait for space joins the queue of those to ask for (once). */
void rs_push_needs_grant(pworker_t *w, uint32_t part, ppart_t *pp);
/* Sends w's next grant request when one is due and none is out. */
void rs_push_request_grants(pworker_t *w);

/* post.c: posts w's waiting batches that have granted room, asks for space for the rest. */
void rs_push_try_post(pworker_t *w);

/* commit.c: sends the commits once close handed everything over and every write completed. */
void rs_push_commit_progress(struct rs_pusher *p);

/* merge.c */
/* Sizes merged writes for p's workers (or turns them off). */
void rs_push_merge_setup(struct rs_pusher *p);
/*
 * Before a batch is framed: room for a frame of about len bytes in w's
 * merged write (a new block when it is full): 1, or 0 when the pool has no
 * room for a block now. A frame that would not merge: 1.
 */
int rs_push_merge_room(pworker_t *w, size_t len);
/* Copies b's frame into w's merged write: 1 when it goes so (b's send to w is done), else 0. */
int rs_push_merge_add(pworker_t *w, const rs_pbuf_int_t *b);
/* Seals w's merged write being filled (it waits for its grant). */
void rs_push_merge_seal(pworker_t *w);
/* Seals a merged write being filled for longer than the age bound: 1 when it did. */
int rs_push_merge_age(pworker_t *w, uint64_t now);
/* Does anything of w's merged writes wait (filled, sealed, or granted and not posted)? */
int rs_push_merge_busy(const pworker_t *w);
/* Sealed merged writes to ask grants for. */
int rs_push_merge_wants(const pworker_t *w);
/* Puts MERGED entries for sealed writes at buf[n..max_n); returns the new n. */
uint32_t rs_push_merge_ask(pworker_t *w, uint8_t *buf, size_t cap, uint32_t n, uint32_t max_n);
/*
 * A GRANT entry for RS_MERGED_PART: the oldest write asked for takes it
 * (RS_OK) or goes back to be asked again (the entry's status returned:
 * RS_ERR_BACKPRESSURE, RS_ERR_IO, RS_ERR_BUSY); another status fails.
 */
rs_status_t rs_push_merge_granted(pworker_t *w, const rs_grant_t *g);
/* The first granted write that may post now (NULL: none), unlinked. */
pmerge_t *rs_push_merge_next(pworker_t *w);
/* Releases a merged write (its block back to the pool). */
void rs_push_merge_release(pmerge_t *m);
/* Releases every merged write of w not in flight. */
void rs_push_merge_drop(pworker_t *w);
/* Gives the kept blocks back to the pool (the lane goes back). */
void rs_push_merge_blocks_free(struct rs_pusher *p);
/* Are merged writes posted, or sealed and on their way (their blocks come back)? */
int rs_push_merge_pending(const struct rs_pusher *p);

/* lane.c */
/*
 * The configuration a task of n_partitions runs with (cfg NULL: defaults and
 * environment; checked, the pool grown for the count, transport read into
 * the key) and the key of the lanes that fit it. Outputs set on RS_OK only.
 */
rs_status_t rs_push_lane_key_make(const rs_pusher_config_t *cfg, uint32_t n_partitions,
                                  rs_pusher_config_t *cfg_p, rs_push_lane_key_t *key_p);
/* A lane fit for key: an idle one of the client, else a new one. */
rs_status_t rs_push_lane_get(rs_client_t *c, const rs_push_lane_key_t *key, rs_push_lane_t **l_p);
/* The lane's connection to addr, made now if it has none (or a dead one). */
rs_status_t rs_push_lane_conn(rs_push_lane_t *l, const char *addr, rs_push_conn_t **conn_p);
/*
 * Between tasks: closes the lane's dead connections, and when a worker of
 * this host exited, every connection, renewing the receive queue.
 */
void rs_push_lane_check(rs_push_lane_t *l);
/*
 * conn.c: closes a connection of the lane (its writes in flight are canceled now).
 * When its worker's process is gone, the client hears of the loss and the
 * lane renews its receive queue before its next task.
 */
void rs_push_lane_conn_close(rs_push_conn_t *conn);
/*
 * conn.c: a task found conn's worker lost: when its process is gone (a worker of
 * this host), the client hears of it now, so its other lanes drop their
 * connections to it before their next task, once.
 */
void rs_push_lane_conn_lost(rs_push_conn_t *conn);
/* conn.c: rs_push_lane_conn_close, telling the client of a gone worker only when note is set. */
void rs_push_conn_drop(rs_push_conn_t *conn, int note);
/* Waits for the engine's driver token (no round runs meanwhile) / gives it back. */
void rs_push_lane_hold(rs_push_lane_t *l);
void rs_push_lane_unhold(rs_push_lane_t *l);
/* Makes l's kept per-partition arrays resident for tasks of desc's shape (pusher.c; warm). */
void rs_push_arrays_warm(rs_push_lane_t *l, const rs_shuffle_desc_t *desc);
/* answer.c: the lane's message handlers (arg: the lane). */
rs_status_t rs_push_install_handlers(rs_push_lane_t *l);
/* take.c: the queue's hook for a buffer handed over (RS_ERR_BUSY: offer it again later). */
rs_status_t rs_push_engine_take(struct rs_pusher *p, rs_pushq_t *q, rs_pbuf_int_t *b);
/* engine.c: the queue's hook run every round. */
unsigned rs_push_engine_poll(struct rs_pusher *p);
/*
 * Right after the attaches (engine held): asks every worker for the space
 * the lane's last task of this shuffle used per partition, so that the
 * grants are in hand by close. A refusal is not an error: close asks again.
 */
void rs_push_prefetch(struct rs_pusher *p, const uint32_t *hint); /* grants.c */

/* take.c, test-only: every every-th batch is corrupted after sealing or sent twice. */
void rs_push_fault(struct rs_pusher *p, int fault, int every);

#endif
