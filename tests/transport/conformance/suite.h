/* The tests and child roles of the transport conformance suite. */
#ifndef RS_TEST_CONFORMANCE_SUITE_H
#define RS_TEST_CONFORMANCE_SUITE_H

#include "harness.h"

/* User message types the suite uses. */
enum {
    T_MSG_RKEY = 0,      /* a packed remote key, sent by a server to an accepted peer */
    T_MSG_REQ = 1,       /* request: [u32 seq][payload]; answered by T_MSG_REPLY */
    T_MSG_REPLY = 2,     /* [u32 seq][payload ^ 0xa5] */
    T_MSG_SEQ = 3,       /* ordered stream: [u64 seq][pattern(seq)] */
    T_MSG_QUERY = 4,     /* asks for the stream's counters: T_MSG_COUNTS */
    T_MSG_COUNTS = 5,    /* t_msg_counts_t */
    T_MSG_MAX = 6,       /* a message of exactly msg_max bytes: T_MSG_MAX_OK */
    T_MSG_MAX_OK = 7,    /* [u32 ok][u32 len] */
    T_MSG_DELAYED = 8,   /* asks for a T_MSG_DELAY_REP about 100 ms later */
    T_MSG_DELAY_REP = 9, /* empty */
    T_MSG_HELLO = 10,    /* any user message to a server (auth test) */
};

typedef struct t_msg_counts {
    uint64_t seq_count;
    uint64_t seq_errors;
    uint64_t bad_len;
} t_msg_counts_t;

/* Result of a target's VRFY command. */
typedef struct t_verify {
    int64_t bad;       /* first offset differing from the model, or -1 */
    uint32_t notifies; /* notifications received so far */
    uint32_t pad;
} t_verify_t;

enum {
    T_VRFY = H_TAG('V', 'R', 'F', 'Y'), /* h_model_t -> t_verify_t */
    T_FILL = H_TAG('F', 'I', 'L', 'L'), /* h_range_t -> t_verify_t */
    T_FREE = H_TAG('F', 'R', 'E', 'E'), /* frees the region (later commands fail) -> t_verify_t */
};

/* Size of the target region of the put/get tests: 16 MiB + 256 KiB. */
#define T_BIG_REGION ((16u << 20) + (256u << 10))
#define T_BG_SEED    0xb6u

/* t_rma.c */
void test_put_get_listen(void **state);
void test_put_get_address(void **state);
void test_rkey_blob_and_range(void **state);
void test_reused_ranges_stale_key(void **state);
int role_rma_target(h_chan_t *ch, int argc, char **argv);

/* t_notify.c */
void test_notified_puts(void **state);
int role_notify_target(h_chan_t *ch, int argc, char **argv);
int role_notify_putter(h_chan_t *ch, int argc, char **argv);

/* t_atomic.c */
void test_fetch_add_two_processes(void **state);
int role_fadd_target(h_chan_t *ch, int argc, char **argv);
int role_fadd_adder(h_chan_t *ch, int argc, char **argv);

/* t_msg.c */
void test_messages_listen(void **state);
void test_messages_address(void **state);
void test_event_fd_wakes(void **state);
int role_msg_server(h_chan_t *ch, int argc, char **argv);

/* t_auth.c */
void test_wrong_job_token(void **state);
int role_auth_server(h_chan_t *ch, int argc, char **argv);

/* t_failure.c */
void test_peer_killed_during_puts(void **state);
void test_stopped_peer_times_out(void **state);
void test_timed_out_peer_resumes(void **state);
void test_connect_refused(void **state);
void test_connect_address_dead_peer(void **state);
void test_destroy_with_ops_in_flight(void **state);
void test_ep_close_with_ops_in_flight(void **state);
int role_address_then_exit(h_chan_t *ch, int argc, char **argv);
int role_connect_dead(h_chan_t *ch, int argc, char **argv);

#endif
