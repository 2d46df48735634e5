/*
 * Private state of the verbs backend, shared by its files:
 *   ctx.c     ops table, context (device, PD, CQ, SRQ, channels), progress
 *   cm.c      librdmacm: listeners, connections, CM events, addresses
 *   post.c    work requests: posting, send-queue/CQ accounting, completions
 *   mem.c     memory regions, remote keys, registered slot pools
 *   shared.c  context accessor, QP-number table, wake-up, status mapping
 * Calls go down that list only (ctx.c -> cm.c -> post.c -> mem.c, and all
 * of them -> shared.c), so no two files call each other.
 * See docs/verbs.md for the design.
 */
#ifndef RS_TRANSPORT_VERBS_IMPL_H
#define RS_TRANSPORT_VERBS_IMPL_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>

#include "transport/backend.h"

#include "common/list.h"

/* Receive work requests carry this bit in wr_id; send ones carry (ep uid << 32 | seq). */
#define RS_V_RECV_WRID (1ull << 63)
/* Buckets of the QP-number -> endpoint table (chained). */
#define RS_V_QP_BUCKETS 256

typedef struct rs_vctx rs_vctx_t;
typedef struct rs_vep rs_vep_t;

/* What a cm_id's context points to: an endpoint or a listener. */
typedef enum rs_vcm_kind {
    RS_VCM_EP = 1,
    RS_VCM_LISTENER = 2,
} rs_vcm_kind_t;

/* One buffer of a registered slot pool (message copies, atomic results). */
typedef struct rs_vslot {
    struct rs_vslot *next; /* free list */
    void *buf;
    uint32_t lkey;
} rs_vslot_t;

/* Fixed-size registered buffers, grown a slab at a time, freed at context close. */
typedef struct rs_vpool {
    size_t size;     /* bytes per slot */
    unsigned per;    /* slots per slab */
    rs_list_t slabs; /* rs_vslab_t (mem.c) */
    rs_vslot_t *free;
    const char *what; /* for error messages */
} rs_vpool_t;

/*
 * One operation to post: built on the stack and posted at once, or copied
 * to the endpoint's backlog when the send queue, the CQ or the read/atomic
 * budget is full (the backlog keeps the posting order).
 */
typedef struct rs_vwork {
    rs_list_t link;
    rs_op_t *op; /* NULL: an internal signal-only write */
    enum ibv_wr_opcode opcode;
    uint32_t len;
    uint64_t laddr;
    uint32_t lkey;
    uint64_t raddr;
    uint32_t rkey;
    uint32_t imm; /* host order: notification or message type */
    uint64_t add;
    rs_vslot_t *slot; /* message copy or atomic result */
    unsigned force_signal : 1;
} rs_vwork_t;

/* A posted send work request, until a completion retires it. */
typedef struct rs_vwr {
    rs_op_t *op; /* NULL once completed (or internal) */
    rs_vslot_t *slot;
    uint8_t rd;     /* counts against the read/atomic budget */
    uint8_t atomic; /* copy the slot's 8 bytes to op->result */
    uint8_t tail;   /* an internal signal-only write */
} rs_vwr_t;

struct rs_vep {
    rs_vcm_kind_t kind; /* RS_VCM_EP: first member */
    rs_vctx_t *vc;
    rs_ep_t *ep;
    struct rdma_cm_id *id;
    struct ibv_qp *qp;
    uint32_t qp_num;
    uint32_t uid;                    /* never reused in a context: tags send wr_ids */
    rs_vep_t *hnext;                 /* QP-number table chain */
    rs_list_t link;                  /* vc->eps */
    rs_list_t backlog_link;          /* vc->backlogged, while on_backlogged */
    rs_list_t tail_link;             /* vc->tails, while on_tails */
    rs_list_t backlog;               /* rs_vwork_t, oldest first */
    uint8_t on_backlogged, on_tails; /* on vc->backlogged, vc->tails */
    unsigned can_post : 1;           /* QP in RTS */
    unsigned failed : 1;             /* ep_fail ran: post nothing more */
    unsigned in_table : 1;
    unsigned counted : 1;  /* holds a CQ reserve slot */
    unsigned tail_out : 1; /* a signal-only write is in flight */

    rs_vwr_t *ring; /* posted send WRs: [head, tail) */
    uint32_t ring_size;
    uint64_t head, tail;
    uint32_t sq_cap;     /* regular WRs in flight at most */
    uint32_t unsignaled; /* WRs posted since the last signaled one */
    uint32_t rd_cap, rd_out;
    uint32_t inline_max;
};

typedef struct rs_vlistener {
    rs_vcm_kind_t kind; /* RS_VCM_LISTENER: first member */
    rs_vctx_t *vc;
    rs_listener_t *l; /* NULL: the context's own (rs_ctx_address) */
    struct rdma_cm_id *id;
    rs_list_t link; /* vc->listeners */
} rs_vlistener_t;

/* An op completed outside a completion (e.g. a flush with nothing in flight). */
typedef struct rs_vdeferred {
    rs_list_t link;
    rs_vep_t *v;
    rs_op_t *op;
    rs_status_t status;
} rs_vdeferred_t;

struct rs_vctx {
    rs_ctx_t *ctx;
    const rs_config_t *cfg;
    struct ibv_context **devices; /* rdma_get_devices(): holds them open */
    struct ibv_context *dev;      /* the one this context uses */
    struct ibv_device_attr dattr;
    uint8_t port;
    struct ibv_pd *pd;
    struct ibv_comp_channel *chan;
    struct ibv_cq *cq;
    struct ibv_srq *srq;
    struct rdma_event_channel *cm;
    int epfd;    /* the wait fd: CQ channel + CM channel + wake_fd */
    int wake_fd; /* eventfd: a post left an unsignaled tail while armed */
    int armed;   /* arm() returned RS_OK and no progress ran since */
    int woken;   /* wake_fd was written and not read yet */
    unsigned cq_events_unacked;

    /* receive buffers: srq_depth * msg_max, one MR */
    char *rbuf;
    struct ibv_mr *rbuf_mr;
    uint32_t n_recv;
    uint32_t msg_max;

    /* limits derived from the configuration and the device */
    uint32_t sq_depth, inline_req, signal_every, rd_cap;
    uint32_t cq_free; /* CQ entries left for send WRs (each posted WR holds one) */

    rs_vpool_t msg_pool;    /* copies of messages that are not sent inline */
    rs_vpool_t atomic_pool; /* 8-byte fetch-and-add results */
    rs_list_t work_free;    /* recycled rs_vwork_t */

    rs_list_t eps;        /* every rs_vep_t */
    rs_list_t listeners;  /* every rs_vlistener_t */
    rs_list_t backlogged; /* endpoints with a backlog */
    rs_list_t tails;      /* endpoints whose last WRs are unsignaled */
    rs_list_t deferred;   /* rs_vdeferred_t */
    rs_vep_t *qp_table[RS_V_QP_BUCKETS];
    uint32_t next_uid;

    rs_vlistener_t *own_listener; /* created by rs_ctx_address when needed */

    /* completions polled by arm() (which must not make upcalls) */
    struct ibv_wc stash[16];
    int n_stash;
};

/* shared.c */
rs_vctx_t *rs_verbs_vctx(const rs_ctx_t *ctx);
/* Wakes a thread sleeping on the wait fd (only if one may be). */
void rs_verbs_wake(rs_vctx_t *vc);
void rs_verbs_qp_table_add(rs_vctx_t *vc, rs_vep_t *v);
void rs_verbs_qp_table_del(rs_vctx_t *vc, rs_vep_t *v);
rs_vep_t *rs_verbs_qp_table_find(rs_vctx_t *vc, uint32_t qp_num);
/* Maps a work completion status to an rshuffle status. */
rs_status_t rs_verbs_wc_status(enum ibv_wc_status st);

/* mem.c */
rs_status_t rs_verbs_pool_init(rs_vctx_t *vc, rs_vpool_t *pool, size_t size, unsigned per,
                               const char *what);
void rs_verbs_pool_destroy(rs_vpool_t *pool);
rs_vslot_t *rs_verbs_slot_get(rs_vctx_t *vc, rs_vpool_t *pool);
void rs_verbs_slot_put(rs_vpool_t *pool, rs_vslot_t *slot);
rs_status_t rs_verbs_mem_reg(rs_ctx_t *ctx, rs_mr_t *mr, void *addr, size_t len, unsigned access);
void rs_verbs_mem_dereg(rs_mr_t *mr);
rs_status_t rs_verbs_rkey_pack(const rs_mr_t *mr, void *buf, size_t buflen, size_t *len_p);
rs_status_t rs_verbs_rkey_unpack(rs_ep_t *ep, rs_rkey_t *rkey, const void *buf, size_t len);
void rs_verbs_rkey_release(rs_rkey_t *rkey);

/* cm.c */
unsigned rs_verbs_cm_progress(rs_vctx_t *vc);
rs_status_t rs_verbs_listen(rs_ctx_t *ctx, rs_listener_t *l, const char *host, uint16_t port);
void rs_verbs_listener_close(rs_listener_t *l);
void rs_verbs_listener_free(rs_vlistener_t *vl);
rs_status_t rs_verbs_connect(rs_ctx_t *ctx, rs_ep_t *ep, const char *host, uint16_t port);
rs_status_t rs_verbs_address(rs_ctx_t *ctx, void *buf, size_t buflen, size_t *len_p);
rs_status_t rs_verbs_connect_address(rs_ctx_t *ctx, rs_ep_t *ep, const void *blob, size_t len);
void rs_verbs_ep_close(rs_ep_t *ep);

/* post.c */
rs_status_t rs_verbs_ep_init_sq(rs_vep_t *v, uint32_t sq_cap, uint32_t inline_max);
void rs_verbs_ep_fail(rs_ep_t *ep);
void rs_verbs_ep_release_sq(rs_vep_t *v);
void rs_verbs_handle_send_wc(rs_vctx_t *vc, const struct ibv_wc *wc);
unsigned rs_verbs_post_backlogs(rs_vctx_t *vc);
unsigned rs_verbs_post_tails(rs_vctx_t *vc);
unsigned rs_verbs_run_deferred(rs_vctx_t *vc);
void rs_verbs_work_free_all(rs_vctx_t *vc);
rs_status_t rs_verbs_put(rs_ep_t *ep, rs_op_t *op, const void *src, size_t len, rs_mr_t *mr,
                         rs_rkey_t *rkey, uint64_t raddr, int notify, uint32_t imm);
rs_status_t rs_verbs_get(rs_ep_t *ep, rs_op_t *op, void *dst, size_t len, rs_mr_t *mr,
                         rs_rkey_t *rkey, uint64_t raddr);
rs_status_t rs_verbs_fetch_add(rs_ep_t *ep, rs_op_t *op, rs_rkey_t *rkey, uint64_t raddr,
                               uint64_t add);
rs_status_t rs_verbs_flush(rs_ep_t *ep, rs_op_t *op);
rs_status_t rs_verbs_msg_send(rs_ep_t *ep, rs_op_t *op, unsigned type, const void *data,
                              size_t len);

#endif
