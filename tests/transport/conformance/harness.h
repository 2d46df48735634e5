/*
 * Harness of the transport conformance suite: real processes (fork + exec of
 * this binary in a role), a pipe channel per child for the out-of-band bits
 * (ports, address blobs, remote keys, commands), bounded waits, data
 * patterns, and the expected-content model of a target region.
 *
 * Nothing here knows a backend: the backend comes from RSHUFFLE_TRANSPORT
 * (and UCX_TLS for UCX) in the environment, the address to bind and connect
 * to from RSHUFFLE_TEST_HOST (default 127.0.0.1).
 *
 * Two hosts: with RSHUFFLE_TEST_REMOTE=HOST:PORT the serving roles (targets,
 * servers) run on another host, where `test_transport_conformance
 * --serve-roles HOST:PORT` spawns them; their channel is a TCP connection
 * (see remote.c). RSHUFFLE_TEST_HOST then names that host's address on both
 * sides: the roles there listen on it, the tests here connect to it.
 */
#ifndef RS_TEST_CONFORMANCE_HARNESS_H
#define RS_TEST_CONFORMANCE_HARNESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <rshuffle/transport.h>

/* ------------------------------------------------------------ environment */

/* RSHUFFLE_TEST_HOST, else 127.0.0.1. */
const char *h_host(void);
/*
 * How much slower than the machine the bounds were sized on this one runs:
 * RSHUFFLE_TEST_TIME_SCALE, 1..8 (default 1). The guests set it from their
 * measured boot time (tests/vm/run-in-guest); the slack, every H_UNTIL
 * bound and the alarm are multiplied by it.
 */
uint32_t h_time_scale(void);
/* Extra time allowed over a configured bound (RSHUFFLE_TEST_SLACK_MS, 1500, x h_time_scale). */
uint32_t h_slack_ms(void);
/* Monotonic milliseconds. */
uint64_t h_now_ms(void);
/* rs_config_init; a broken environment is fatal (the suite cannot run). */
void h_config(rs_config_t *cfg);
/* Creates a context (NULL cfg: environment) or dies; tracked for teardown. */
rs_ctx_t *h_ctx(const rs_config_t *cfg);
/* Destroys a context made by h_ctx. */
void h_ctx_destroy(rs_ctx_t *ctx);

/* ------------------------------------------------------------ the channel */

#define H_TAG(a, b, c, d) \
    ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
enum {
    H_PORT = H_TAG('P', 'O', 'R', 'T'), /* uint16_t listener port */
    H_ADDR = H_TAG('A', 'D', 'D', 'R'), /* context address blob */
    H_RKEY = H_TAG('R', 'K', 'E', 'Y'), /* packed remote key */
    H_STOP = H_TAG('S', 'T', 'O', 'P'), /* tear down and exit 0 */
    H_RSLT = H_TAG('R', 'S', 'L', 'T'), /* a command's result */
    H_DONE = H_TAG('D', 'O', 'N', 'E'), /* a child finished its part */
    H_GO = H_TAG('G', 'O', '!', '!'),   /* start together */
    /* Between a test and the role server (remote.c), never seen by a role. */
    H_SPWN = H_TAG('S', 'P', 'W', 'N'), /* spawn: role and args / its pid */
    H_SIGN = H_TAG('S', 'I', 'G', 'N'), /* int32 signal for the child */
    H_EXIT = H_TAG('E', 'X', 'I', 'T'), /* int32 exit code, as h_child_wait's */
};

typedef struct h_chan {
    int rd, wr;
    /* A child on the other host: its exit arrives as H_EXIT (then EOF). */
    bool remote, exited;
    int exit_code;
} h_chan_t;

/* Sends one framed message (tag, length, bytes); false if the peer is gone. */
bool h_send(h_chan_t *ch, uint32_t tag, const void *data, size_t len);
/*
 * Receives one message with the expected tag within timeout_ms into buf.
 * Returns its length, or -1 (timeout, EOF, wrong tag, too long: logged).
 */
ssize_t h_recv(h_chan_t *ch, uint32_t tag, void *buf, size_t cap, int timeout_ms);
/* Like h_recv for any tag (stored in *tag_p). */
ssize_t h_recv_any(h_chan_t *ch, uint32_t *tag_p, void *buf, size_t cap, int timeout_ms);
/* True when a message (or EOF) is waiting. */
bool h_readable(h_chan_t *ch, int timeout_ms);

/* ------------------------------------------------------------- processes */

typedef struct h_child {
    pid_t pid;
    h_chan_t ch;
    char role[32];
} h_child_t;

/*
 * Runs this binary again as `--role role args...` in a child process with
 * the channel on fds 3 (from parent) and 4 (to parent). NULL-terminated args.
 */
void h_spawn(h_child_t *c, const char *role, ...) __attribute__((sentinel));
/*
 * Waits at most timeout_ms for the child to exit (kills it after that).
 * Returns the exit code, 128 + signal if it was killed, or -1 on timeout.
 */
int h_child_wait(h_child_t *c, int timeout_ms);
/* SIGKILLs the child and reaps it. */
void h_child_kill(h_child_t *c);
/* Sends H_STOP and waits for the exit code (see h_child_wait). */
int h_child_stop(h_child_t *c, int timeout_ms);
/* Sends sig to the child (SIGSTOP, SIGCONT, SIGKILL), here or on the other host. */
void h_child_signal(h_child_t *c, int sig);

/* Per-test setup/teardown: an alarm for the whole test, leftovers cleaned. */
int h_setup(void **state);
int h_teardown(void **state);

/* Role entry points: main() dispatches `--role name` to these. */
typedef int (*h_role_fn_t)(h_chan_t *ch, int argc, char **argv);
typedef struct h_role {
    const char *name;
    h_role_fn_t fn;
    bool serves; /* a target or server: on the other host with RSHUFFLE_TEST_REMOTE */
} h_role_t;
/* The roles of this binary (NULL-terminated); main() sets them first. */
void h_set_roles(const h_role_t *roles);
int h_role_main(int argc, char **argv);

/* ------------------------------------------------------------ two hosts */

/* RSHUFFLE_TEST_REMOTE (HOST:PORT of the role server), or NULL. */
const char *h_remote(void);
/*
 * `--serve-roles HOST:PORT`: accepts a connection per child a test on
 * another host spawns, runs the role here and relays its channel; never
 * returns unless it cannot listen (1).
 */
int h_role_server(const char *hostport);

/* In a role: report a broken expectation and exit with status 3. */
#define H_CHECK(cond, ...)                                 \
    do {                                                   \
        if (!(cond))                                       \
            h_die(__FILE__, __LINE__, #cond, __VA_ARGS__); \
    } while (0)
#define H_CHECK_OK(st) H_CHECK((st) == RS_OK, "%s", rs_strerror(st))
void h_die(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

/* --------------------------------------------------------------- waiting */

/*
 * Progresses ctx (NULL: a context with a progress thread; just sleeps)
 * until cond holds or timeout_ms passed; evaluates to cond.
 */
#define H_UNTIL(ctx, cond, timeout_ms)                                             \
    __extension__({                                                                \
        uint64_t h_deadline_ = h_now_ms() + (uint64_t)(timeout_ms)*h_time_scale(); \
        bool h_ok_;                                                                \
        while (!(h_ok_ = (cond)) && h_now_ms() < h_deadline_)                      \
            h_pump(ctx);                                                           \
        h_ok_;                                                                     \
    })
/* One bounded progress step (rs_wait of a few ms). */
void h_pump(rs_ctx_t *ctx);

/* ----------------------------------------------------------- completions */

/* Records a completion; a second callback for one op is counted globally. */
typedef struct h_op {
    atomic_int calls;
    atomic_int status;
} h_op_t;
void h_op_cb(void *arg, rs_status_t status);
/* Callbacks that fired twice for one op since the process started. */
unsigned h_double_callbacks(void);

/* --------------------------------------------------------------- patterns */

/* The byte at index i of the pattern with this seed. */
uint8_t h_pat_byte(uint64_t seed, uint64_t i);
/* buf[k] = pattern(seed, start + k). */
void h_pat_fill(void *buf, size_t len, uint64_t seed, uint64_t start);
/* Index of the first byte that differs from the pattern, or -1. */
int64_t h_pat_check(const void *buf, size_t len, uint64_t seed, uint64_t start);

/*
 * The expected content of a region: a background pattern (indexed by region
 * offset) overwritten, in order, by ranges holding their own pattern
 * (indexed from the range's start) or up to 8 literal bytes.
 */
#define H_MODEL_MAX 16
typedef struct h_range {
    uint64_t off, len, seed;
    uint8_t lit[8];
    uint32_t literal;
} h_range_t;
typedef struct h_model {
    uint64_t bg_seed;
    uint32_t n;
    h_range_t r[H_MODEL_MAX];
} h_model_t;
void h_model_add(h_model_t *m, uint64_t off, uint64_t len, uint64_t seed);
void h_model_add_literal(h_model_t *m, uint64_t off, const void *bytes, uint64_t len);
/* The expected bytes [off, off + len) into out. */
void h_model_expect(const h_model_t *m, uint64_t off, size_t len, uint8_t *out);
/* Offset of the first byte of region (length len) that differs, or -1. */
int64_t h_model_check(const h_model_t *m, const uint8_t *region, size_t len);

/* ------------------------------------------------------------- connecting */

typedef enum h_method {
    H_LISTEN,  /* rs_listen / rs_connect host:port */
    H_ADDRESS, /* rs_ctx_address / rs_connect_address over the channel */
} h_method_t;
const char *h_method_name(h_method_t m);
h_method_t h_method_parse(const char *s);

/*
 * RSHUFFLE_TEST_CONNECT=address: the fabric cannot listen (UCX 1.13 needs its
 * tcp transport for listener connections, so UCX_TLS=posix,sysv,self cannot):
 * every test connects by address and the listener-only tests are left out.
 */
bool h_can_listen(void);
/* H_LISTEN, or H_ADDRESS when the fabric cannot listen. */
h_method_t h_default_method(void);

/* Server side: listens (sends H_PORT) or publishes its address (H_ADDR). */
rs_status_t h_offer(rs_ctx_t *ctx, h_chan_t *ch, h_method_t m, rs_listener_t **l_p);

/* What a server offered: a port or an address blob. */
typedef struct h_peer {
    h_method_t method;
    uint16_t port;
    size_t len;
    uint8_t blob[RS_ADDR_BLOB_MAX];
} h_peer_t;
/* Receives an H_PORT or H_ADDR message. */
bool h_recv_peer(h_chan_t *ch, h_peer_t *p, int timeout_ms);
/* Forwards it to another process (which then h_recv_peer's it). */
bool h_send_peer(h_chan_t *ch, const h_peer_t *p);
/* rs_connect or rs_connect_address to it. */
rs_status_t h_connect_peer(rs_ctx_t *ctx, const h_peer_t *p, rs_ep_t **ep_p);
/* Client side: receives the offer for method m from ch and connects. */
rs_status_t h_connect(rs_ctx_t *ctx, h_chan_t *ch, h_method_t m, rs_ep_t **ep_p);
/* Packs mr's remote key and sends it as H_RKEY. */
void h_send_rkey(h_chan_t *ch, const rs_mr_t *mr);
/* Receives an H_RKEY blob and unpacks it for ep. */
rs_status_t h_recv_rkey(h_chan_t *ch, rs_ep_t *ep, rs_rkey_t **rkey_p);

/* ------------------------------------------------------------ serving */

typedef enum h_serve_mode {
    H_SERVE_WAIT,   /* rs_wait in a loop */
    H_SERVE_THREAD, /* the progress thread; the main thread sleeps on the channel */
    H_SERVE_FD,     /* rs_ctx_arm + poll on the context fd and the channel */
} h_serve_mode_t;
h_serve_mode_t h_serve_mode_parse(const char *s);

/*
 * A command from the parent (not H_STOP). Runs on the main thread, without
 * the context lock.
 */
typedef void (*h_cmd_fn_t)(void *arg, rs_ctx_t *ctx, h_chan_t *ch, uint32_t tag, const void *data,
                           size_t len);
/*
 * Serves ctx until H_STOP (returns) or the parent goes away (exits 4).
 * tick (may be NULL) runs between steps and returns how soon (ms) it wants
 * to run again, or -1.
 */
typedef int (*h_tick_fn_t)(void *arg, rs_ctx_t *ctx);
void h_serve(rs_ctx_t *ctx, h_chan_t *ch, h_serve_mode_t mode, h_cmd_fn_t cmd, h_tick_fn_t tick,
             void *arg);

/* A TCP port on the test host that nobody listens on (just released). */
uint16_t h_unused_port(void);

#endif
