/* Harness of the transport conformance suite (see harness.h). */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness_priv.h"
#include "perf/perf_util.h"

#define H_MAX_CHILDREN 16
#define H_MAX_CTX      8

static h_child_t *h_children[H_MAX_CHILDREN];
static rs_ctx_t *h_contexts[H_MAX_CTX];
static atomic_uint h_doubles;
static const h_role_t *h_roles;
const char *h_role_name = "test";

/* ------------------------------------------------------------ environment */

const char *h_host(void)
{
    const char *h = getenv("RSHUFFLE_TEST_HOST");
    return (h != NULL && h[0] != '\0') ? h : "127.0.0.1";
}

static uint32_t h_env_ms(const char *name, uint32_t dflt)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0')
        return dflt;
    return (uint32_t)strtoul(v, NULL, 10);
}

uint32_t h_time_scale(void)
{
    uint32_t k = h_env_ms("RSHUFFLE_TEST_TIME_SCALE", 1);
    return k < 1 ? 1 : k > 8 ? 8 : k;
}

uint32_t h_slack_ms(void)
{
    return h_env_ms("RSHUFFLE_TEST_SLACK_MS", 1500) * h_time_scale();
}

uint64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void h_die(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%s pid %d] %s:%d: check failed: %s: %s\n", h_role_name, (int)getpid(), file,
            line, cond, msg);
    fflush(stderr);
    _exit(3);
}

void h_config(rs_config_t *cfg)
{
    rs_status_t st = rs_config_init(cfg);
    H_CHECK_OK(st);
}

rs_ctx_t *h_ctx(const rs_config_t *cfg)
{
    rs_ctx_t *ctx = NULL;
    rs_status_t st = rs_ctx_create(cfg, &ctx);
    H_CHECK(st == RS_OK, "rs_ctx_create: %s", rs_strerror(st));
    for (int i = 0; i < H_MAX_CTX; i++) {
        if (h_contexts[i] == NULL) {
            h_contexts[i] = ctx;
            break;
        }
    }
    return ctx;
}

void h_ctx_destroy(rs_ctx_t *ctx)
{
    for (int i = 0; i < H_MAX_CTX; i++)
        if (h_contexts[i] == ctx)
            h_contexts[i] = NULL;
    rs_ctx_destroy(ctx);
}

/* ------------------------------------------------------------ the channel */

typedef struct h_frame {
    uint32_t tag;
    uint32_t len;
} h_frame_t;

bool h_write_all(int fd, const void *data, size_t len)
{
    return perf_write_all(fd, data, len) == 0;
}

/* Reads exactly len bytes before the deadline; false on timeout or EOF. */
static bool h_read_all(int fd, void *data, size_t len, uint64_t deadline)
{
    uint64_t now = h_now_ms();
    return perf_read_all(fd, data, len, deadline > now ? (int)(deadline - now) : 0) == 0;
}

bool h_send(h_chan_t *ch, uint32_t tag, const void *data, size_t len)
{
    h_frame_t f = {.tag = tag, .len = (uint32_t)len};
    return h_write_all(ch->wr, &f, sizeof(f)) && (len == 0 || h_write_all(ch->wr, data, len));
}

ssize_t h_recv_frame(h_chan_t *ch, uint32_t *tag_p, void *buf, size_t cap, int timeout_ms,
                     bool quiet)
{
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    h_frame_t f;
    if (!h_read_all(ch->rd, &f, sizeof(f), deadline)) {
        if (!quiet)
            fprintf(stderr, "[%s] channel: no message within %d ms (or peer gone)\n", h_role_name,
                    timeout_ms);
        return -1;
    }
    if (ch->remote && f.tag == H_EXIT && f.len == sizeof(int32_t)) {
        /* The role server's word that the child on the other host is gone. */
        int32_t code = -1;
        if (!h_read_all(ch->rd, &code, sizeof(code), deadline + 10000))
            code = -1;
        ch->exited = true;
        ch->exit_code = code;
        if (!quiet)
            fprintf(stderr, "[%s] channel: the child on the other host exited with %d\n",
                    h_role_name, (int)code);
        return -1;
    }
    if (f.len > cap) {
        fprintf(stderr, "[%s] channel: message of %u bytes, room for %zu\n", h_role_name, f.len,
                cap);
        return -1;
    }
    if (f.len > 0 && !h_read_all(ch->rd, buf, f.len, deadline + 10000)) {
        fprintf(stderr, "[%s] channel: truncated message\n", h_role_name);
        return -1;
    }
    *tag_p = f.tag;
    return (ssize_t)f.len;
}

ssize_t h_recv_any(h_chan_t *ch, uint32_t *tag_p, void *buf, size_t cap, int timeout_ms)
{
    return h_recv_frame(ch, tag_p, buf, cap, timeout_ms, false);
}

ssize_t h_recv(h_chan_t *ch, uint32_t tag, void *buf, size_t cap, int timeout_ms)
{
    uint32_t got = 0;
    ssize_t n = h_recv_any(ch, &got, buf, cap, timeout_ms);
    if (n >= 0 && got != tag) {
        fprintf(stderr, "[%s] channel: got tag %.4s, expected %.4s\n", h_role_name,
                (const char *)&got, (const char *)&tag);
        return -1;
    }
    return n;
}

bool h_readable(h_chan_t *ch, int timeout_ms)
{
    struct pollfd pfd = {.fd = ch->rd, .events = POLLIN};
    int r = poll(&pfd, 1, timeout_ms);
    return r > 0;
}

/* ------------------------------------------------------------- processes */

void h_track(h_child_t *c)
{
    for (int i = 0; i < H_MAX_CHILDREN; i++) {
        if (h_children[i] == NULL) {
            h_children[i] = c;
            return;
        }
    }
    H_CHECK(0, "more than %d children", H_MAX_CHILDREN);
}

static void h_untrack(h_child_t *c)
{
    for (int i = 0; i < H_MAX_CHILDREN; i++)
        if (h_children[i] == c)
            h_children[i] = NULL;
}

static bool h_role_serves(const char *role)
{
    if (strcmp(role, "unused_port") == 0)
        return true;
    for (const h_role_t *r = h_roles; r != NULL && r->name != NULL; r++)
        if (strcmp(r->name, role) == 0)
            return r->serves;
    return false;
}

void h_spawn(h_child_t *c, const char *role, ...)
{
    const char *args[H_MAX_ARGS + 1];
    int n = 0;
    va_list ap;
    args[n++] = role;
    va_start(ap, role);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < H_MAX_ARGS; n++)
        args[n] = a;
    va_end(ap);
    args[n] = NULL;
    if (h_remote() != NULL && h_role_serves(role))
        h_spawn_remote(c, args);
    else
        h_spawn_local(c, args);
}

void h_spawn_local(h_child_t *c, const char *const *args)
{
    static char store[H_MAX_ARGS + 3][128];
    char *argv[H_MAX_ARGS + 3];
    int argc = 0;

    /* Copies, so the child gets writable strings without casting const away. */
    snprintf(store[argc], sizeof(store[0]), "/proc/self/exe");
    argv[argc] = store[argc];
    argc++;
    snprintf(store[argc], sizeof(store[0]), "--role");
    argv[argc] = store[argc];
    argc++;
    for (int i = 0; args[i] != NULL && i < H_MAX_ARGS; i++, argc++) {
        snprintf(store[argc], sizeof(store[0]), "%s", args[i]);
        argv[argc] = store[argc];
    }
    argv[argc] = NULL;
    const char *role = args[0];

    int down[2], up[2];
    H_CHECK(pipe2(down, O_CLOEXEC) == 0 && pipe2(up, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    H_CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: the parent may have threads. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        int rd = fcntl(down[0], F_DUPFD, 100), wr = fcntl(up[1], F_DUPFD, 100);
        if (rd < 0 || wr < 0 || dup2(rd, 3) != 3 || dup2(wr, 4) != 4)
            _exit(126);
        close_range(5, ~0u, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    close(down[0]);
    close(up[1]);
    memset(c, 0, sizeof(*c));
    c->pid = pid;
    c->ch.rd = up[0];
    c->ch.wr = down[1];
    snprintf(c->role, sizeof(c->role), "%s", role);
    h_track(c);
}

void h_child_release(h_child_t *c)
{
    h_untrack(c);
    if (c->ch.rd >= 0)
        close(c->ch.rd);
    if (c->ch.wr >= 0)
        close(c->ch.wr);
    c->ch.rd = c->ch.wr = -1;
    c->pid = 0;
}

int h_decode(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return -1;
}

int h_child_wait(h_child_t *c, int timeout_ms)
{
    if (c->ch.remote)
        return h_remote_wait(c, timeout_ms);
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    int wstatus = 0;
    for (;;) {
        pid_t r = waitpid(c->pid, &wstatus, WNOHANG);
        if (r == c->pid) {
            int code = h_decode(wstatus);
            if (code != 0)
                fprintf(stderr, "[test] child %s (pid %d) exited with %d\n", c->role, (int)c->pid,
                        code);
            h_child_release(c);
            return code;
        }
        if (r < 0 || h_now_ms() >= deadline)
            break;
        usleep(2000);
    }
    fprintf(stderr, "[test] child %s (pid %d) did not exit within %d ms: killed\n", c->role,
            (int)c->pid, timeout_ms);
    h_child_kill(c);
    return -1;
}

void h_child_kill(h_child_t *c)
{
    if (c->ch.remote) {
        h_remote_kill(c);
        return;
    }
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
    }
    h_child_release(c);
}

int h_child_stop(h_child_t *c, int timeout_ms)
{
    h_send(&c->ch, H_STOP, NULL, 0);
    return h_child_wait(c, timeout_ms);
}

void h_child_signal(h_child_t *c, int sig)
{
    if (c->ch.remote) {
        int32_t s = sig;
        H_CHECK(h_send(&c->ch, H_SIGN, &s, sizeof(s)), "the role server went away");
    } else if (c->pid > 0) {
        kill(c->pid, sig);
    }
}

static void h_on_alarm(int sig)
{
    static const char msg[] = "[test] the test ran out of time (alarm): failed\n";
    (void)sig;
    ssize_t n = write(2, msg, sizeof(msg) - 1);
    (void)n;
    for (int i = 0; i < H_MAX_CHILDREN; i++) {
        h_child_t *c = h_children[i];
        if (c == NULL || c->pid <= 0)
            continue;
        if (c->ch.remote) {
            /* One write (async-signal-safe); the role server also kills it when we are gone. */
            struct {
                uint32_t tag, len;
                int32_t sig;
            } f = {H_SIGN, sizeof(int32_t), SIGKILL};
            n = write(c->ch.wr, &f, sizeof(f));
        } else {
            kill(c->pid, SIGKILL);
        }
    }
    _exit(124);
}

int h_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, h_on_alarm);
    alarm(h_env_ms("RSHUFFLE_TEST_ALARM_S", 120) * h_time_scale());
    return 0;
}

int h_teardown(void **state)
{
    (void)state;
    alarm(0);
    for (int i = 0; i < H_MAX_CHILDREN; i++)
        if (h_children[i] != NULL)
            h_child_kill(h_children[i]);
    for (int i = 0; i < H_MAX_CTX; i++)
        if (h_contexts[i] != NULL)
            h_ctx_destroy(h_contexts[i]);
    if (h_double_callbacks() != 0) {
        fprintf(stderr, "[test] %u callbacks fired twice\n", h_double_callbacks());
        return -1;
    }
    return 0;
}

void h_set_roles(const h_role_t *roles)
{
    h_roles = roles;
}

/* Built in: binds a port on this host's RSHUFFLE_TEST_HOST, releases it, sends it. */
static int h_role_unused_port(h_chan_t *ch, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    uint16_t port = h_unused_port();
    H_CHECK(h_send(ch, H_PORT, &port, sizeof(port)), "channel closed");
    return 0;
}

int h_role_main(int argc, char **argv)
{
    static const h_role_t builtin[] = {{"unused_port", h_role_unused_port, true}, {NULL, NULL, 0}};
    for (int table = 0; table < 2; table++) {
        const h_role_t *r = table == 0 ? builtin : h_roles;
        for (; r != NULL && r->name != NULL; r++) {
            if (strcmp(r->name, argv[2]) == 0)
                break;
        }
        if (r == NULL || r->name == NULL)
            continue;
        h_role_name = r->name;
        signal(SIGPIPE, SIG_IGN);
        alarm(h_env_ms("RSHUFFLE_TEST_ALARM_S", 120) * h_time_scale() + 30);
        h_chan_t ch = {.rd = 3, .wr = 4};
        int rc = r->fn(&ch, argc - 3, argv + 3);
        close(3);
        close(4);
        return rc;
    }
    fprintf(stderr, "unknown role %s\n", argv[2]);
    return 2;
}

/* --------------------------------------------------------------- waiting */

void h_pump(rs_ctx_t *ctx)
{
    if (ctx == NULL) {
        usleep(1000);
        return;
    }
    (void)rs_wait(ctx, 2);
}

void h_op_cb(void *arg, rs_status_t status)
{
    h_op_t *op = arg;
    atomic_store(&op->status, (int)status);
    if (atomic_fetch_add(&op->calls, 1) != 0)
        atomic_fetch_add(&h_doubles, 1);
}

unsigned h_double_callbacks(void)
{
    return atomic_load(&h_doubles);
}

/* --------------------------------------------------------------- patterns */

static inline uint64_t h_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint8_t h_pat_byte(uint64_t seed, uint64_t i)
{
    return (uint8_t)(h_mix(h_mix(seed) + (i >> 3)) >> ((i & 7) * 8));
}

void h_pat_fill(void *buf, size_t len, uint64_t seed, uint64_t start)
{
    uint8_t *p = buf;
    uint64_t base = h_mix(seed), w = 0;
    for (size_t k = 0; k < len; k++) {
        uint64_t i = start + k;
        if (k == 0 || (i & 7) == 0)
            w = h_mix(base + (i >> 3));
        p[k] = (uint8_t)(w >> ((i & 7) * 8));
    }
}

int64_t h_pat_check(const void *buf, size_t len, uint64_t seed, uint64_t start)
{
    const uint8_t *p = buf;
    uint64_t base = h_mix(seed), w = 0;
    for (size_t k = 0; k < len; k++) {
        uint64_t i = start + k;
        if (k == 0 || (i & 7) == 0)
            w = h_mix(base + (i >> 3));
        if (p[k] != (uint8_t)(w >> ((i & 7) * 8)))
            return (int64_t)k;
    }
    return -1;
}

void h_model_add(h_model_t *m, uint64_t off, uint64_t len, uint64_t seed)
{
    H_CHECK(m->n < H_MODEL_MAX, "model full");
    m->r[m->n++] = (h_range_t){.off = off, .len = len, .seed = seed};
}

void h_model_add_literal(h_model_t *m, uint64_t off, const void *bytes, uint64_t len)
{
    H_CHECK(m->n < H_MODEL_MAX && len <= 8, "model full or literal too long");
    h_range_t r = {.off = off, .len = len, .literal = 1};
    memcpy(r.lit, bytes, len);
    m->r[m->n++] = r;
}

void h_model_expect(const h_model_t *m, uint64_t off, size_t len, uint8_t *out)
{
    h_pat_fill(out, len, m->bg_seed, off);
    for (uint32_t k = 0; k < m->n; k++) {
        const h_range_t *r = &m->r[k];
        uint64_t a = r->off > off ? r->off : off;
        uint64_t b = r->off + r->len < off + len ? r->off + r->len : off + len;
        if (a >= b)
            continue;
        if (r->literal)
            memcpy(out + (a - off), r->lit + (a - r->off), b - a);
        else
            h_pat_fill(out + (a - off), b - a, r->seed, a - r->off);
    }
}

int64_t h_model_check(const h_model_t *m, const uint8_t *region, size_t len)
{
    enum { CHUNK = 1 << 20 };
    uint8_t *exp = malloc(CHUNK);
    H_CHECK(exp != NULL, "out of memory");
    int64_t bad = -1;
    for (size_t off = 0; off < len && bad < 0; off += CHUNK) {
        size_t n = len - off < CHUNK ? len - off : CHUNK;
        h_model_expect(m, off, n, exp);
        if (memcmp(exp, region + off, n) == 0)
            continue;
        for (size_t k = 0; k < n; k++) {
            if (exp[k] != region[off + k]) {
                bad = (int64_t)(off + k);
                break;
            }
        }
    }
    free(exp);
    return bad;
}

/* ------------------------------------------------------------- connecting */

const char *h_method_name(h_method_t m)
{
    return m == H_LISTEN ? "listen" : "address";
}

h_method_t h_method_parse(const char *s)
{
    return strcmp(s, "address") == 0 ? H_ADDRESS : H_LISTEN;
}

rs_status_t h_offer(rs_ctx_t *ctx, h_chan_t *ch, h_method_t m, rs_listener_t **l_p)
{
    if (m == H_LISTEN) {
        rs_listener_t *l = NULL;
        rs_status_t st = rs_listen(ctx, h_host(), 0, &l);
        if (st != RS_OK)
            return st;
        uint16_t port = rs_listener_port(l);
        *l_p = l;
        return h_send(ch, H_PORT, &port, sizeof(port)) ? RS_OK : RS_ERR_IO;
    }
    static uint8_t blob[RS_ADDR_BLOB_MAX];
    size_t len = 0;
    rs_status_t st = rs_ctx_address(ctx, blob, sizeof(blob), &len);
    if (st != RS_OK)
        return st;
    if (len == 0 || len > RS_ADDR_BLOB_MAX)
        return RS_ERR_INVALID;
    *l_p = NULL;
    return h_send(ch, H_ADDR, blob, len) ? RS_OK : RS_ERR_IO;
}

bool h_can_listen(void)
{
    const char *v = getenv("RSHUFFLE_TEST_CONNECT");
    return v == NULL || strcmp(v, "address") != 0;
}

h_method_t h_default_method(void)
{
    return h_can_listen() ? H_LISTEN : H_ADDRESS;
}

bool h_recv_peer(h_chan_t *ch, h_peer_t *p, int timeout_ms)
{
    uint32_t tag = 0;
    ssize_t n = h_recv_any(ch, &tag, p->blob, sizeof(p->blob), timeout_ms);
    if (n < 0)
        return false;
    if (tag == H_PORT && n == (ssize_t)sizeof(p->port)) {
        p->method = H_LISTEN;
        memcpy(&p->port, p->blob, sizeof(p->port));
        p->len = 0;
        return true;
    }
    if (tag == H_ADDR && n > 0) {
        p->method = H_ADDRESS;
        p->len = (size_t)n;
        return true;
    }
    fprintf(stderr, "[%s] channel: expected a port or an address\n", h_role_name);
    return false;
}

bool h_send_peer(h_chan_t *ch, const h_peer_t *p)
{
    if (p->method == H_LISTEN)
        return h_send(ch, H_PORT, &p->port, sizeof(p->port));
    return h_send(ch, H_ADDR, p->blob, p->len);
}

rs_status_t h_connect_peer(rs_ctx_t *ctx, const h_peer_t *p, rs_ep_t **ep_p)
{
    if (p->method == H_LISTEN)
        return rs_connect(ctx, h_host(), p->port, ep_p);
    return rs_connect_address(ctx, p->blob, p->len, ep_p);
}

rs_status_t h_connect(rs_ctx_t *ctx, h_chan_t *ch, h_method_t m, rs_ep_t **ep_p)
{
    static h_peer_t peer;
    if (!h_recv_peer(ch, &peer, 30000) || peer.method != m)
        return RS_ERR_IO;
    return h_connect_peer(ctx, &peer, ep_p);
}

void h_send_rkey(h_chan_t *ch, const rs_mr_t *mr)
{
    uint8_t blob[RS_RKEY_BLOB_MAX];
    size_t len = 0;
    rs_status_t st = rs_mr_pack_rkey(mr, blob, sizeof(blob), &len);
    H_CHECK(st == RS_OK, "rs_mr_pack_rkey: %s", rs_strerror(st));
    H_CHECK(len > 0 && len <= RS_RKEY_BLOB_MAX, "rkey blob of %zu bytes", len);
    H_CHECK(h_send(ch, H_RKEY, blob, len), "channel closed");
}

rs_status_t h_recv_rkey(h_chan_t *ch, rs_ep_t *ep, rs_rkey_t **rkey_p)
{
    uint8_t blob[RS_RKEY_BLOB_MAX];
    ssize_t n = h_recv(ch, H_RKEY, blob, sizeof(blob), 30000);
    if (n <= 0)
        return RS_ERR_IO;
    return rs_rkey_unpack(ep, blob, (size_t)n, rkey_p);
}

/* ------------------------------------------------------------ serving */

h_serve_mode_t h_serve_mode_parse(const char *s)
{
    if (strcmp(s, "thread") == 0)
        return H_SERVE_THREAD;
    if (strcmp(s, "fd") == 0)
        return H_SERVE_FD;
    return H_SERVE_WAIT;
}

/* Handles one channel message; false on H_STOP. */
static bool h_serve_cmd(rs_ctx_t *ctx, h_chan_t *ch, h_cmd_fn_t cmd, void *arg)
{
    static uint8_t buf[1 << 16];
    uint32_t tag = 0;
    ssize_t n = h_recv_any(ch, &tag, buf, sizeof(buf), 10000);
    H_CHECK(n >= 0, "the parent went away");
    if (tag == H_STOP)
        return false;
    H_CHECK(cmd != NULL, "unexpected command %.4s", (const char *)&tag);
    cmd(arg, ctx, ch, tag, buf, (size_t)n);
    return true;
}

static int h_min_timeout(int next, int dflt)
{
    return (next >= 0 && next < dflt) ? next : dflt;
}

void h_serve(rs_ctx_t *ctx, h_chan_t *ch, h_serve_mode_t mode, h_cmd_fn_t cmd, h_tick_fn_t tick,
             void *arg)
{
    if (mode == H_SERVE_THREAD) {
        rs_status_t st = rs_progress_thread_start(ctx);
        H_CHECK_OK(st);
    }
    for (;;) {
        int next = tick != NULL ? tick(arg, ctx) : -1;
        if (mode == H_SERVE_WAIT) {
            (void)rs_wait(ctx, h_min_timeout(next, 5));
            if (h_readable(ch, 0) && !h_serve_cmd(ctx, ch, cmd, arg))
                break;
        } else if (mode == H_SERVE_THREAD) {
            if (h_readable(ch, h_min_timeout(next, 100)) && !h_serve_cmd(ctx, ch, cmd, arg))
                break;
        } else {
            while (rs_progress(ctx) > 0)
                ;
            rs_status_t st = rs_ctx_arm(ctx);
            if (st == RS_ERR_BUSY)
                continue;
            H_CHECK(st == RS_OK, "rs_ctx_arm: %s", rs_strerror(st));
            struct pollfd pfd[2] = {{.fd = rs_ctx_fd(ctx), .events = POLLIN},
                                    {.fd = ch->rd, .events = POLLIN}};
            /* A lost wake-up shows up as slowness past the test's alarm. */
            if (poll(pfd, 2, h_min_timeout(next, 1000)) > 0 && (pfd[1].revents != 0) &&
                !h_serve_cmd(ctx, ch, cmd, arg))
                break;
        }
    }
    if (mode == H_SERVE_THREAD)
        rs_progress_thread_stop(ctx);
}

uint16_t h_unused_port(void)
{
    if (h_remote() != NULL && strcmp(h_role_name, "unused_port") != 0) {
        /* A port nobody listens on at the other host, where the tests connect. */
        h_child_t c;
        uint16_t port = 0;
        h_spawn(&c, "unused_port", NULL);
        H_CHECK(h_recv(&c.ch, H_PORT, &port, sizeof(port), 30000) == sizeof(port),
                "no port from the other host");
        H_CHECK(h_child_wait(&c, 20000) == 0, "unused_port failed on the other host");
        return port;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai = NULL;
    H_CHECK(getaddrinfo(h_host(), "0", &hints, &ai) == 0, "bad RSHUFFLE_TEST_HOST %s", h_host());
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    H_CHECK(fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0, "bind: %s", strerror(errno));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    H_CHECK(getsockname(fd, (struct sockaddr *)&ss, &sl) == 0, "getsockname");
    uint16_t port = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                                            : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    close(fd);
    freeaddrinfo(ai);
    return port;
}
