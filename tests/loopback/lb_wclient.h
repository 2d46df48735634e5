/*
 * A hand-driven pusher for worker unit tests: one transport context and
 * endpoint on the loopback backend speaking the shuffle protocol message by
 * message (shuffle/proto.h), so a test can send what no real pusher sends
 * (a bad frame, a wrong commit) and look at each answer. Driven from the
 * test's thread; every wait is bounded.
 */
#ifndef RS_TESTS_LB_WCLIENT_H
#define RS_TESTS_LB_WCLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/codec.h>
#include <rshuffle/transport.h>

#include "shuffle/proto.h"

#define LBW_MSG_CAP 8192
#define LBW_BUF_LEN (1u << 20)

typedef struct lbw_client {
    rs_ctx_t *ctx;
    rs_ep_t *ep;
    rs_mr_t *mr; /* LBW_BUF_LEN bytes: frames are built here */
    size_t buf_used;
    rs_rkey_t *arena;
    uint64_t arena_len;
    uint32_t shuffle_id, map_id, attempt;
    /* The newest message of each shuffle type, and how many came. */
    uint8_t last[RS_SMSG_LAST + 1][LBW_MSG_CAP];
    size_t last_len[RS_SMSG_LAST + 1];
    unsigned got[RS_SMSG_LAST + 1];
    int puts_done, puts_failed;
} lbw_client_t;

/* Connects to the worker on port; asserts. */
void lbw_open(lbw_client_t *c, uint16_t port);
void lbw_close(lbw_client_t *c);

/* Progresses until got[type] > before or ms passed; returns whether it came. */
int lbw_wait(lbw_client_t *c, unsigned type, unsigned before, int ms);

/* ATTACH as a pusher of (map, attempt); returns the reply's status (arena rkey kept). */
rs_status_t lbw_attach(lbw_client_t *c, uint32_t shuffle_id, uint32_t n_partitions, uint32_t map_id,
                       uint32_t attempt);

/* One GRANT_REQ of n wants; the answer's entries go to out (n of them); returns its status. */
rs_status_t lbw_grant(lbw_client_t *c, const rs_grant_want_t *wants, uint32_t n, rs_grant_t *out);

/*
 * Frames payload (ids: the client's shuffle, map, attempt; partition, seq)
 * into the local buffer. Returns the frame length; *checksum_p its checksum.
 */
size_t lbw_frame(lbw_client_t *c, uint32_t partition, uint64_t seq, const void *payload, size_t len,
                 uint64_t *checksum_p, size_t *at_p);
/* Puts the frame at local offset at (len bytes) into grant g at in, notified; waits for it. */
rs_status_t lbw_put_batch(lbw_client_t *c, size_t at, size_t len, const rs_grant_t *g, uint64_t in);

/* One COMMIT (n entries, last chunk, total_batches); returns COMMIT_REPLY's status. */
rs_status_t lbw_commit(lbw_client_t *c, const rs_commit_entry_t *e, uint32_t n,
                       uint64_t total_batches, int wait_ms);

/* The newest NACK, decoded (asserts one came). */
rs_smsg_nack_t lbw_last_nack(const lbw_client_t *c);

#endif
