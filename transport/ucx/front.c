/*
 * UCX backend: the front door. rs_listen opens a TCP socket of ours instead
 * of a UCX listener. An accepted connection must deliver a hello
 * (front_wire.h: magic, version, job token) within connect_timeout_ms; only
 * then does the listener answer with the worker address, and the client
 * connects to that address through UCX (conn.c). No byte received on the
 * listener's port ever reaches a UCX parser.
 *
 * Every socket is non-blocking and driven from the backend's progress (an
 * epoll of our own, nested in the fd rs_ctx_fd returns; polled when arm
 * finds it ready, and once per coarse clock tick). A connection that
 * is refused, malformed, slow or closed is closed at once (reset: no
 * CLOSE-WAIT, no TIME-WAIT left here). At most RS_UCX_FRONT_HELLOS_MAX
 * accepted connections wait for their hello; a new one evicts the oldest,
 * so a flood cannot exhaust descriptors, and a real client, whose hello
 * follows its connect within a round trip, still gets in.
 *
 * Descriptors: every client costs this process a few (UCX's socket for it,
 * its connection back, about two over TCP), and UCX stops accepting for
 * good on its own listener when an accept finds none left. So a client is
 * let in only while the descriptors in use, those it and the clients let
 * in just before will take, and a reserve stay below the soft limit;
 * otherwise its hello is answered RS_FRONT_BUSY (RS_ERR_REFUSED at the
 * client, with a line saying why) and the refusal logged, once per second
 * at most.
 */
#include "transport/ucx/ucx.h"
#include "transport/ucx/front_wire.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/token.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define RS_UCX_FRONT_HELLOS_MAX   64 /* accepted connections before their hello is done */
#define RS_UCX_FRONT_ACCEPT_BATCH 32 /* accepts per progress call */
#define RS_UCX_FRONT_EVENTS       32
#define RS_UCX_FRONT_PAUSE_NS     RS_MS_TO_NS(100)  /* out of descriptors: accept again after */
#define RS_UCX_FRONT_LOG_NS       RS_MS_TO_NS(1000) /* at most one refusal logged per second */
#define RS_UCX_FRONT_BUF          (RS_FRONT_REPLY_MAX + 1) /* + 1: a byte too many is seen */
#define RS_UCX_FRONT_FDS_CLIENT   3  /* descriptors a client may take here (2 over TCP, 1 spare) */
#define RS_UCX_FRONT_FDS_RESERVE  16 /* kept free at least (spill files, logs, UCX), or 1/8 */
#define RS_UCX_FRONT_FDS_OWN      12 /* a worker of the client's own here (6-10 measured) */

typedef enum {
    F_LISTEN,  /* the listening socket; deadline_ns: paused until */
    F_HELLO,   /* accepted: reading the hello */
    F_REPLY,   /* accepted: sending the reply, then closing */
    F_CONNECT, /* client: connecting, then sending the hello */
    F_ANSWER,  /* client: reading the reply */
} front_kind_t;

struct rs_ucx_front {
    rs_list_t link; /* in uc->front_socks, or uc->front_dead once closed */
    int fd;         /* -1 once closed */
    front_kind_t kind;
    rs_listener_t *l;     /* the listener, for it and its accepted connections */
    rs_ucx_ep_t *uep;     /* client: the endpoint connecting */
    uint64_t deadline_ns; /* accepted: dropped at this time */
    size_t len, off;      /* bytes in buf; bytes of them sent */
    unsigned char buf[];
};

/* ------------------------------------------------------------- sockets */

static rs_status_t resolve(const char *host, uint16_t port, int passive,
                           struct sockaddr_storage *ss, socklen_t *len)
{
    if (host[0] == '\0') {
        rs_error("an empty host name");
        return RS_ERR_INVALID;
    }
    char bare[INET6_ADDRSTRLEN + 8];
    size_t n = strlen(host);
    if (host[0] == '[' && n > 2 && n - 2 < sizeof(bare) && host[n - 1] == ']') {
        memcpy(bare, host + 1, n - 2); /* "[::1]": the literal, as getaddrinfo takes it */
        bare[n - 2] = '\0';
        host = bare;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
    struct addrinfo *res;
    char service[8];
    snprintf(service, sizeof(service), "%u", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        rs_error("cannot resolve '%s': %s", host, gai_strerror(rc));
        return RS_ERR_INVALID;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return RS_OK;
}

static rs_ucx_front_t *front_new(rs_ucx_ctx_t *uc, int fd, front_kind_t kind, size_t buf,
                                 uint32_t events)
{
    rs_ucx_front_t *f = calloc(1, sizeof(*f) + buf);
    if (f == NULL) {
        rs_error("out of memory allocating a front-door socket");
        return NULL;
    }
    f->fd = fd;
    f->kind = kind;
    struct epoll_event ev = {.events = events, .data.ptr = f};
    if (epoll_ctl(uc->front_ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        rs_error("epoll_ctl on a front-door socket failed: errno %d", errno);
        free(f);
        return NULL;
    }
    rs_list_add_tail(&uc->front_socks, &f->link);
    uc->front_n++;
    return f;
}

static void front_events(rs_ucx_ctx_t *uc, rs_ucx_front_t *f, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = f};
    if (epoll_ctl(uc->front_ep, EPOLL_CTL_MOD, f->fd, &ev) != 0)
        rs_warn("epoll_ctl on a front-door socket failed: errno %d", errno);
}

/* Closes at once; reset: with an RST (no FIN handshake, no TIME-WAIT here). */
static void close_fd(int fd, int reset)
{
    if (reset) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(fd);
}

/* Closes f; it is freed after the event batch that may still name it. */
static void front_close(rs_ucx_ctx_t *uc, rs_ucx_front_t *f, int reset)
{
    if (f->fd < 0)
        return;
    (void)epoll_ctl(uc->front_ep, EPOLL_CTL_DEL, f->fd, NULL);
    close_fd(f->fd, reset);
    f->fd = -1;
    if (f->kind == F_HELLO || f->kind == F_REPLY)
        uc->front_hellos--;
    if (f->uep != NULL) {
        f->uep->front = NULL;
        f->uep = NULL;
    }
    uc->front_n--;
    rs_list_del(&f->link);
    rs_list_add_tail(&uc->front_dead, &f->link);
}

static void front_free_dead(rs_ucx_ctx_t *uc)
{
    while (!rs_list_empty(&uc->front_dead)) {
        rs_ucx_front_t *f = rs_list_first(&uc->front_dead, rs_ucx_front_t, link);
        rs_list_del(&f->link);
        free(f);
    }
}

/* A peer's misbehaviour: debug only, so a hostile peer cannot flood the log. */
static void front_drop(rs_ucx_ctx_t *uc, rs_ucx_front_t *f, const char *why)
{
    rs_debug("front door: dropping a connection: %s", why);
    front_close(uc, f, 1);
}

rs_status_t rs_ucx_front_open(rs_ucx_ctx_t *uc)
{
    rs_list_init(&uc->front_socks);
    rs_list_init(&uc->front_dead);
    uc->front_ep = epoll_create1(EPOLL_CLOEXEC);
    if (uc->front_ep < 0)
        goto err;
    uc->wait_fd = epoll_create1(EPOLL_CLOEXEC);
    if (uc->wait_fd < 0)
        goto err_close_front;
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.fd = uc->efd;
    if (epoll_ctl(uc->wait_fd, EPOLL_CTL_ADD, uc->efd, &ev) != 0)
        goto err_close_wait;
    ev.data.fd = uc->front_ep;
    if (epoll_ctl(uc->wait_fd, EPOLL_CTL_ADD, uc->front_ep, &ev) != 0)
        goto err_close_wait;
    return RS_OK;

err_close_wait:
    close(uc->wait_fd);
err_close_front:
    close(uc->front_ep);
err:
    rs_error("cannot create the front door's epoll: errno %d", errno);
    return RS_ERR_IO;
}

void rs_ucx_front_close_all(rs_ucx_ctx_t *uc)
{
    while (!rs_list_empty(&uc->front_socks))
        front_close(uc, rs_list_first(&uc->front_socks, rs_ucx_front_t, link), 1);
    front_free_dead(uc);
    close(uc->wait_fd);
    close(uc->front_ep);
}

/* --------------------------------------------------------- descriptors */

/* Descriptors open in this process (-1: unknown, no /proc). */
static long fds_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    long n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own */
}

/* The soft limit (-1: unlimited or unknown). */
static long fds_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return -1;
    return (long)rl.rlim_cur;
}

static long fds_reserve(long limit)
{
    return limit / 8 > RS_UCX_FRONT_FDS_RESERVE ? limit / 8 : RS_UCX_FRONT_FDS_RESERVE;
}

/*
 * Descriptors free below the soft limit, less the reserve and what the
 * clients let in ahead will take (LONG_MAX: no limit known).
 */
static long fds_room(rs_ctx_t *ctx, rs_ucx_ctx_t *uc)
{
    long limit = fds_limit(), open = fds_open();
    if (limit < 0 || open < 0)
        return LONG_MAX;
    uint64_t now = rs_now_coarse_ns();
    if (uc->front_admitted > 0 &&
        now - uc->front_admit_ns > RS_MS_TO_NS(rs_tp_ctx_cfg(ctx)->connect_timeout_ms))
        uc->front_admitted = 0; /* they connected (or never will) */
    return limit - open - fds_reserve(limit) - (long)uc->front_admitted * RS_UCX_FRONT_FDS_CLIENT;
}

int rs_ucx_front_conn_arrived(rs_ctx_t *ctx)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    if (uc->front_admitted > 0)
        uc->front_admitted--;
    long limit = fds_limit(), open = fds_open();
    return limit >= 0 && open >= 0 && limit - open < fds_reserve(limit) / 2;
}

static void front_busy_log(rs_ucx_ctx_t *uc, const char *who)
{
    uint64_t now = rs_now_coarse_ns();
    if (uc->front_busy_log_ns != 0 && now - uc->front_busy_log_ns < RS_UCX_FRONT_LOG_NS) {
        uc->front_busy_quiet++;
        return;
    }
    long limit = fds_limit(), open = fds_open();
    rs_warn("refusing %s: %ld of %ld descriptors in use, %u clients let in still connecting (a "
            "client takes about %d, %ld are kept free; raise the limit, ulimit -n, for more "
            "clients; %u more refused since last said)",
            who, open, limit, uc->front_admitted, RS_UCX_FRONT_FDS_CLIENT,
            limit >= 0 ? fds_reserve(limit) : 0, uc->front_busy_quiet);
    uc->front_busy_log_ns = now;
    uc->front_busy_quiet = 0;
}

void rs_ucx_front_conn_refused(rs_ctx_t *ctx)
{
    front_busy_log(rs_ucx_ctx(ctx), "a connection by address");
}

/* ------------------------------------------------------------ listener */

rs_status_t rs_ucx_listen(rs_ctx_t *ctx, rs_listener_t *l, const char *host, uint16_t port)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    struct sockaddr_storage ss;
    socklen_t slen;
    rs_status_t st = resolve(host, port, 1, &ss, &slen);
    if (st != RS_OK)
        return st;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rs_error("cannot listen on %s:%u: socket: errno %d", host, port, errno);
        return RS_ERR_IO;
    }
    /* A restart after a crash listens at once, despite connections in TIME-WAIT. */
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&ss, slen) != 0 || listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        rs_error("cannot listen on %s:%u: %s", host, port, strerror(err));
        close(fd);
        return err == EADDRINUSE      ? RS_ERR_EXISTS
               : err == EADDRNOTAVAIL ? RS_ERR_INVALID
                                      : RS_ERR_TRANSPORT;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) != 0) {
        rs_error("getsockname on a listener failed: errno %d", errno);
        close(fd);
        return RS_ERR_IO;
    }
    rs_ucx_front_t *f = front_new(uc, fd, F_LISTEN, 0, EPOLLIN);
    if (f == NULL) {
        close(fd);
        return RS_ERR_NOMEM;
    }
    f->l = l;
    const struct sockaddr *sa = (const struct sockaddr *)&bound;
    l->port = sa->sa_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)sa)->sin6_port)
                                        : ntohs(((const struct sockaddr_in *)sa)->sin_port);
    l->be = f;
    long limit = fds_limit(), open = fds_open();
    if (limit >= 0 && open >= 0)
        rs_info("front door on port %u: %ld of %ld descriptors in use: room for about %ld "
                "clients (%d descriptors each, %ld kept free) before new ones are refused",
                l->port, open, limit, (limit - open - fds_reserve(limit)) / RS_UCX_FRONT_FDS_CLIENT,
                RS_UCX_FRONT_FDS_CLIENT, fds_reserve(limit));
    return RS_OK;
}

void rs_ucx_listener_close(rs_listener_t *l)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(l->ctx);
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &uc->front_socks)
    {
        rs_ucx_front_t *f = RS_CONTAINER_OF(pos, rs_ucx_front_t, link);
        if (f->l == l)
            front_close(uc, f, 1);
    }
    l->be = NULL;
}

/* Makes room for one more accepted connection: drops the oldest still silent. */
static int evict_oldest(rs_ucx_ctx_t *uc)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &uc->front_socks)
    {
        rs_ucx_front_t *f = RS_CONTAINER_OF(pos, rs_ucx_front_t, link);
        if (f->kind == F_HELLO) {
            front_drop(uc, f, "too many connections without a hello (oldest evicted)");
            return 1;
        }
    }
    return 0;
}

static unsigned front_accept(rs_ctx_t *ctx, rs_ucx_ctx_t *uc, rs_ucx_front_t *lf)
{
    unsigned n = 0;
    /* Sockets waiting for a hello take descriptors too: half the reserve at most. */
    long room = fds_room(ctx, uc), hellos_max = RS_UCX_FRONT_HELLOS_MAX;
    if (room != LONG_MAX) {
        long limit = fds_limit();
        long spare = room + (limit >= 0 ? fds_reserve(limit) / 2 : 0);
        if (spare < hellos_max - (long)uc->front_hellos)
            hellos_max = (long)uc->front_hellos + (spare > 1 ? spare : 1);
    }
    for (int i = 0; i < RS_UCX_FRONT_ACCEPT_BATCH && lf->fd >= 0; i++) {
        int fd = accept4(lf->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* The socket stays readable: stop watching it for a while. */
                uint64_t now = rs_now_coarse_ns();
                if (uc->front_emfile_ns == 0 || now - uc->front_emfile_ns >= RS_UCX_FRONT_LOG_NS) {
                    rs_error("front door: cannot accept (%s): pausing for %u ms; UCX's own "
                             "listener may have stopped accepting too (raise the descriptor "
                             "limit)",
                             strerror(errno), (unsigned)(RS_UCX_FRONT_PAUSE_NS / 1000000));
                    uc->front_emfile_ns = now;
                }
                front_events(uc, lf, 0);
                lf->deadline_ns = rs_now_coarse_ns() + RS_UCX_FRONT_PAUSE_NS;
            }
            if (errno == ECONNABORTED || errno == EINTR)
                continue;
            break;
        }
        n++;
        if ((long)uc->front_hellos >= hellos_max && !evict_oldest(uc)) {
            close_fd(fd, 1);
            continue;
        }
        rs_ucx_front_t *f = front_new(uc, fd, F_HELLO, RS_UCX_FRONT_BUF, EPOLLIN);
        if (f == NULL) {
            close_fd(fd, 1);
            continue;
        }
        f->l = lf->l;
        f->deadline_ns = rs_now_coarse_ns() + RS_MS_TO_NS(rs_tp_ctx_cfg(ctx)->connect_timeout_ms);
        uc->front_hellos++;
    }
    return n;
}

static void front_reply_send(rs_ucx_ctx_t *uc, rs_ucx_front_t *f)
{
    ssize_t w = send(f->fd, f->buf + f->off, f->len - f->off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            front_drop(uc, f, "the peer went away before our reply");
        return;
    }
    f->off += (size_t)w;
    if (f->off == f->len)
        front_close(uc, f, 0); /* a FIN after the reply: the client reads it all */
}

static void front_refusal_log(rs_ucx_ctx_t *uc)
{
    uint64_t now = rs_now_coarse_ns();
    if (uc->front_log_ns != 0 && now - uc->front_log_ns < RS_UCX_FRONT_LOG_NS) {
        uc->front_quiet++;
        return;
    }
    rs_warn("refusing a peer: its hello carries another job token (%u more since last said)",
            uc->front_quiet);
    uc->front_log_ns = now;
    uc->front_quiet = 0;
}

static void front_hello_recv(rs_ctx_t *ctx, rs_ucx_ctx_t *uc, rs_ucx_front_t *f)
{
    ssize_t r = recv(f->fd, f->buf + f->len, RS_FRONT_HELLO_MAX + 1 - f->len, MSG_DONTWAIT);
    if (r < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            front_drop(uc, f, "receive error");
        return;
    }
    if (r == 0) {
        front_drop(uc, f, "closed before its hello");
        return;
    }
    f->len += (size_t)r;
    rs_ucx_front_hello_t hello;
    int n = rs_ucx_front_hello_parse(f->buf, f->len, &hello);
    if (n == RS_FRONT_INCOMPLETE)
        return;
    if (n == RS_FRONT_MALFORMED) {
        front_drop(uc, f, "malformed hello");
        return;
    }
    const char *token = rs_tp_ctx_cfg(ctx)->job_token;
    if (rs_token_equal(hello.token, hello.token_len, token, strlen(token))) {
        if (fds_room(ctx, uc) < RS_UCX_FRONT_FDS_CLIENT) {
            front_busy_log(uc, "a client");
            f->len = rs_ucx_front_reply_build(f->buf, RS_FRONT_BUSY, NULL, 0);
        } else {
            /* A client of this host: the address of a worker of its own (1-7 ms here), where
             * descriptors allow; else it shares the context's queue. */
            const unsigned char *addr = uc->addr;
            size_t addr_len = uc->addr_len;
            rs_status_t st = RS_ERR_EXISTS;
            if (fds_room(ctx, uc) >= RS_UCX_FRONT_FDS_CLIENT + RS_UCX_FRONT_FDS_OWN)
                st = rs_ucx_accept_own_open(ctx, hello.place_key, &addr, &addr_len);
            if (st != RS_OK && st != RS_ERR_EXISTS)
                rs_warn("a client of this host shares our receive queue: %s", rs_strerror(st));
            uc->front_admitted++;
            uc->front_admit_ns = rs_now_coarse_ns();
            f->len = rs_ucx_front_reply_build(f->buf, RS_FRONT_ACCEPT, addr, addr_len);
        }
    } else {
        front_refusal_log(uc);
        f->len = rs_ucx_front_reply_build(f->buf, RS_FRONT_REFUSE, NULL, 0);
    }
    if (f->len == 0) {
        rs_error("front door: the worker address (%zu bytes) does not fit a reply", uc->addr_len);
        front_close(uc, f, 1);
        return;
    }
    f->off = 0;
    f->kind = F_REPLY;
    front_events(uc, f, EPOLLOUT);
    front_reply_send(uc, f);
}

/* --------------------------------------------------------------- client */

static void client_fail(rs_ucx_ctx_t *uc, rs_ucx_front_t *f, rs_status_t st, const char *why)
{
    rs_ucx_ep_t *uep = f->uep;
    rs_debug("front door: connect failed: %s", why);
    front_close(uc, f, 1);
    if (uep != NULL && uep->ep != NULL)
        rs_tp_ep_failed(uep->ep, st);
}

rs_status_t rs_ucx_front_connect(rs_ucx_ep_t *uep, const char *host, uint16_t port)
{
    rs_ctx_t *ctx = uep->ctx;
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    struct sockaddr_storage ss;
    socklen_t slen;
    uep->ep->stage = "resolve";
    rs_status_t st = resolve(host, port, 0, &ss, &slen);
    if (st != RS_OK)
        return st;
    uep->ep->stage = "TCP connect";
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rs_error("connect to %s:%u: socket: errno %d", host, port, errno);
        return RS_ERR_IO;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (const struct sockaddr *)&ss, slen) != 0 && errno != EINPROGRESS) {
        int err = errno;
        close(fd);
        rs_debug("connect to %s:%u: %s", host, port, strerror(err));
        return err == ECONNREFUSED ? RS_ERR_REFUSED : RS_ERR_UNREACHABLE;
    }
    rs_ucx_front_t *f = front_new(uc, fd, F_CONNECT, RS_UCX_FRONT_BUF, EPOLLOUT);
    if (f == NULL) {
        close(fd);
        return RS_ERR_NOMEM;
    }
    const char *token = rs_tp_ctx_cfg(ctx)->job_token;
    f->len = rs_ucx_front_hello_build(f->buf, token, strlen(token), uc->place_key);
    f->uep = uep;
    uep->front = f;
    return RS_OK;
}

void rs_ucx_front_drop_ep(rs_ucx_ep_t *uep)
{
    if (uep->front != NULL)
        front_close(rs_ucx_ctx(uep->ctx), uep->front, 1);
}

static void client_send(rs_ucx_ctx_t *uc, rs_ucx_front_t *f)
{
    if (f->off == 0) {
        int err = 0;
        socklen_t elen = sizeof(err);
        if (getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
            err = errno;
        if (err != 0) {
            client_fail(uc, f, err == ECONNREFUSED ? RS_ERR_REFUSED : RS_ERR_UNREACHABLE,
                        strerror(err));
            return;
        }
        if (f->uep != NULL && f->uep->ep != NULL)
            f->uep->ep->stage = "hello"; /* TCP connected: the job token goes out */
    }
    ssize_t w = send(f->fd, f->buf + f->off, f->len - f->off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            client_fail(uc, f, errno == ECONNREFUSED ? RS_ERR_REFUSED : RS_ERR_UNREACHABLE,
                        strerror(errno));
        return;
    }
    f->off += (size_t)w;
    if (f->off < f->len)
        return;
    f->kind = F_ANSWER;
    f->len = 0;
    front_events(uc, f, EPOLLIN);
}

static void client_recv(rs_ucx_ctx_t *uc, rs_ucx_front_t *f)
{
    ssize_t r = recv(f->fd, f->buf + f->len, RS_UCX_FRONT_BUF - f->len, MSG_DONTWAIT);
    if (r < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            client_fail(uc, f, RS_ERR_UNREACHABLE, strerror(errno));
        return;
    }
    if (r == 0) {
        client_fail(uc, f, RS_ERR_REFUSED, "the listener closed without a reply");
        return;
    }
    f->len += (size_t)r;
    rs_ucx_front_reply_t reply;
    int n = rs_ucx_front_reply_parse(f->buf, f->len, &reply);
    if (n == RS_FRONT_INCOMPLETE)
        return;
    if (n == RS_FRONT_MALFORMED) {
        client_fail(uc, f, RS_ERR_PROTOCOL, "malformed reply");
        return;
    }
    if (reply.status == RS_FRONT_REFUSE) {
        client_fail(uc, f, RS_ERR_AUTH, "the listener refused our job token");
        return;
    }
    if (reply.status == RS_FRONT_BUSY) {
        rs_warn("a listener refused us: it takes no more clients now (at its descriptor limit)");
        client_fail(uc, f, RS_ERR_REFUSED, "the listener is at its descriptor limit");
        return;
    }
    rs_ucx_ep_t *uep = f->uep;
    if (uep->ep != NULL)
        uep->ep->stage = "UCX wire-up";
    /* The address lives in f->buf: connect before f goes. */
    rs_status_t st = rs_ucx_connect_uep(uep, reply.addr, reply.addr_len);
    front_close(uc, f, 0);
    if (st != RS_OK && uep->ep != NULL)
        rs_tp_ep_failed(uep->ep, st);
}

/* ------------------------------------------------------------- progress */

static void front_deadlines(rs_ucx_ctx_t *uc, uint64_t now)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &uc->front_socks)
    {
        rs_ucx_front_t *f = RS_CONTAINER_OF(pos, rs_ucx_front_t, link);
        if (f->deadline_ns == 0 || now < f->deadline_ns)
            continue;
        if (f->kind == F_LISTEN) {
            f->deadline_ns = 0;
            front_events(uc, f, EPOLLIN);
        } else {
            front_drop(uc, f, "no hello within connect_timeout_ms");
        }
    }
}

int rs_ucx_front_ready(rs_ucx_ctx_t *uc)
{
    struct epoll_event ev;
    return uc->front_n > 0 && epoll_wait(uc->front_ep, &ev, 1, 0) > 0; /* level-triggered */
}

unsigned rs_ucx_front_progress(rs_ctx_t *ctx)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    uc->front_kick = 0;
    struct epoll_event ev[RS_UCX_FRONT_EVENTS];
    int k = epoll_wait(uc->front_ep, ev, RS_UCX_FRONT_EVENTS, 0);
    unsigned n = 0;
    for (int i = 0; i < k; i++) {
        rs_ucx_front_t *f = ev[i].data.ptr;
        if (f->fd < 0)
            continue; /* closed by an earlier event of this batch */
        n++;
        switch (f->kind) {
            case F_LISTEN:
                n += front_accept(ctx, uc, f);
                break;
            case F_HELLO:
                front_hello_recv(ctx, uc, f);
                break;
            case F_REPLY:
                front_reply_send(uc, f);
                break;
            case F_CONNECT:
                client_send(uc, f);
                break;
            case F_ANSWER:
                client_recv(uc, f);
                break;
        }
    }
    uint64_t now = rs_now_coarse_ns();
    front_deadlines(uc, now);
    rs_ucx_accept_expire(ctx, now);
    front_free_dead(uc);
    return n;
}
