/* Helpers for the single-process transport tests: two contexts connected. */
#ifndef RS_TESTS_TT_UTIL_H
#define RS_TESTS_TT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/transport.h>

#include <sys/types.h>

typedef struct tt_pair {
    rs_ctx_t *srv, *cli;
    rs_listener_t *listener;
    rs_ep_t *cep;  /* client side */
    rs_ep_t *sep;  /* server side (accepted) */
    int accepted;  /* accept events seen */
    int ep_errors; /* error events seen on the server */
} tt_pair_t;

/* The test configuration: UCX, short timeouts. */
void tt_config(rs_config_t *cfg);

/*
 * Server context + listener on 127.0.0.1 and a client connected to it
 * (both configured by tt_config, then adjusted by the optional cfg hooks).
 */
void tt_pair_open(tt_pair_t *p, const rs_config_t *srv_cfg, const rs_config_t *cli_cfg);
void tt_pair_close(tt_pair_t *p);

/* Progresses both contexts until *flag != 0 or timeout_ms; returns *flag. */
int tt_progress_until(rs_ctx_t *a, rs_ctx_t *b, volatile int *flag, int timeout_ms);
/* Progresses both until *count >= want or timeout_ms; returns *count. */
long tt_progress_count(rs_ctx_t *a, rs_ctx_t *b, volatile long *count, long want, int timeout_ms);

/* An op callback that stores its status and counts: arg is a tt_done_t. */
typedef struct tt_done {
    int calls;
    rs_status_t status;
} tt_done_t;
void tt_done_cb(void *arg, rs_status_t status);

/* Progresses both until d->calls >= want or timeout_ms; returns d->calls. */
int tt_wait_calls(rs_ctx_t *a, rs_ctx_t *b, tt_done_t *d, int want, int timeout_ms);

/* Exchanges the server region's rkey to the client endpoint. */
rs_rkey_t *tt_rkey_for(rs_ep_t *ep, rs_mr_t *mr);

/*
 * tt_pair_open (server with the defaults), then a zeroed len-byte server
 * region open to remote access, a len-byte client buffer, and the region's
 * rkey at the client.
 */
void tt_pair_open_regions(tt_pair_t *p, const rs_config_t *cli_cfg, size_t len, rs_mr_t **smr,
                          rs_mr_t **cmr, rs_rkey_t **rkey);

/* The monotonic clock in milliseconds (deadlines of the waits above). */
uint64_t tt_now_ms(void);

/* Busy-waits ns nanoseconds. */
void tt_spin_ns(long ns);

/*
 * A process about to be killed: sends len-byte messages of type on ep as fast as ctx takes
 * them, gap_ns apart (so the peer drains faster than it fills), until killed. Never returns.
 */
void tt_flood(rs_ctx_t *ctx, rs_ep_t *ep, unsigned type, size_t len, long gap_ns);

/* A message handler that counts: arg is a long. */
void tt_count_msg(void *arg, rs_ep_t *ep, const void *data, size_t len);

/*
 * Lets want more of a flooder's messages arrive on ctx (*floods counts them), SIGKILLs the
 * flooder pid while they keep coming (so it dies sending, not waiting for room), reaps it and
 * waits until ep, our connection with it, has failed and says its peer exited.
 */
void tt_kill_mid_flood(rs_ctx_t *ctx, pid_t pid, rs_ep_t *ep, volatile long *floods, long want);

/* Bounds the whole test program (a hung test is a failed test). */
void tt_alarm(unsigned seconds);

#endif
