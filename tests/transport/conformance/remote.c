/*
 * Two hosts: the serving roles of the suite on another host.
 *
 * There, `test_transport_conformance --serve-roles HOST:PORT` listens on TCP.
 * Here, with RSHUFFLE_TEST_REMOTE=HOST:PORT, h_spawn of a serving role
 * (h_role_t.serves) connects to it instead of forking: one connection per
 * child, which becomes the child's channel. The role server forks a
 * supervisor per connection, which spawns the role with h_spawn_local (the
 * same fork + exec and pipes as on one host) and relays:
 *
 *   test -> supervisor: H_SPWN (role and args, NUL-separated) first; then
 *                       H_SIGN (int32 signal, for the child) or any frame,
 *                       passed on to the child unchanged
 *   supervisor -> test: H_SPWN (int32 pid of the child) first; then the
 *                       child's bytes as they come; last H_EXIT (int32 exit
 *                       code, as h_child_wait returns it) when it is reaped
 *
 * If the test goes away (EOF), the supervisor SIGKILLs the child; if the
 * supervisor goes away, the child dies with it (PR_SET_PDEATHSIG).
 */
#include "harness_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

const char *h_remote(void)
{
    const char *r = getenv("RSHUFFLE_TEST_REMOTE");
    return (r != NULL && r[0] != '\0') ? r : NULL;
}

/* Splits HOST:PORT (HOST may be [v6]) into host and port; false if malformed. */
static bool h_split(const char *hostport, char *host, size_t cap, char port[8])
{
    const char *colon = strrchr(hostport, ':');
    if (colon == NULL || colon == hostport || strlen(colon + 1) == 0 || strlen(colon + 1) > 5)
        return false;
    const char *h = hostport;
    size_t hl = (size_t)(colon - hostport);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl + 1 > cap)
        return false;
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, 8, "%s", colon + 1);
    return true;
}

static struct addrinfo *h_resolve(const char *hostport, bool passive)
{
    char host[256], port[8];
    if (!h_split(hostport, host, sizeof(host), port))
        return NULL;
    int flags = AI_NUMERICHOST | AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = flags}, *ai = NULL;
    return getaddrinfo(host, port, &hints, &ai) == 0 ? ai : NULL;
}

static void h_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* A TCP connection to the role server, retried for up to timeout_ms; -1 if none. */
static int h_connect_server(const char *hostport, int timeout_ms)
{
    struct addrinfo *ai = h_resolve(hostport, false);
    H_CHECK(ai != NULL, "RSHUFFLE_TEST_REMOTE=%s is not a numeric HOST:PORT", hostport);
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    int fd = -1;
    while (fd < 0 && h_now_ms() < deadline) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        H_CHECK(fd >= 0, "socket: %s", strerror(errno));
        int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int err = 0;
            socklen_t el = sizeof(err);
            bool up = poll(&p, 1, 2000) == 1 &&
                      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0;
            r = up ? 0 : -1;
        }
        if (r != 0) {
            close(fd);
            fd = -1;
            usleep(100000);
        }
    }
    freeaddrinfo(ai);
    if (fd >= 0) {
        H_CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0, "fcntl");
        h_nodelay(fd);
    }
    return fd;
}

void h_spawn_remote(h_child_t *c, const char *const *args)
{
    char req[H_MAX_ARGS * 128];
    size_t len = 0;
    for (int i = 0; args[i] != NULL; i++) {
        size_t l = strlen(args[i]) + 1;
        H_CHECK(len + l <= sizeof(req), "arguments too long");
        memcpy(req + len, args[i], l);
        len += l;
    }
    int fd = h_connect_server(h_remote(), 10000);
    H_CHECK(fd >= 0, "no role server at %s (RSHUFFLE_TEST_REMOTE) for %s", h_remote(), args[0]);
    memset(c, 0, sizeof(*c));
    c->ch.rd = fd;
    c->ch.wr = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* h_child_release closes both */
    H_CHECK(c->ch.wr >= 0, "dup: %s", strerror(errno));
    c->ch.remote = true;
    snprintf(c->role, sizeof(c->role), "%s", args[0]);
    H_CHECK(h_send(&c->ch, H_SPWN, req, len), "the role server at %s went away", h_remote());
    int32_t pid = 0;
    uint32_t tag = 0;
    ssize_t n = h_recv_frame(&c->ch, &tag, &pid, sizeof(pid), 30000, false);
    H_CHECK(n == (ssize_t)sizeof(pid) && tag == H_SPWN && pid > 0,
            "the role server at %s did not start %s", h_remote(), args[0]);
    c->pid = pid;
    h_track(c);
}

int h_remote_wait(h_child_t *c, int timeout_ms)
{
    static uint8_t sink[1 << 20];
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    bool dropped = false;
    while (!c->ch.exited) {
        uint64_t now = h_now_ms();
        if (now >= deadline)
            break;
        uint32_t tag;
        /* What the test did not read is dropped, as a local child's pipe would be. */
        if (h_recv_frame(&c->ch, &tag, sink, sizeof(sink), (int)(deadline - now), true) < 0 &&
            !c->ch.exited) {
            dropped = h_now_ms() < deadline;
            break;
        }
    }
    if (c->ch.exited) {
        int code = c->ch.exit_code;
        if (code != 0)
            fprintf(stderr, "[test] child %s (pid %d on the other host) exited with %d\n", c->role,
                    (int)c->pid, code);
        h_child_release(c);
        return code;
    }
    fprintf(stderr, "[test] child %s (pid %d on the other host) %s: killed\n", c->role, (int)c->pid,
            dropped ? "is lost: the role server closed its channel without an exit code"
                    : "did not exit in time");
    h_remote_kill(c);
    return -1;
}

void h_remote_kill(h_child_t *c)
{
    static uint8_t sink[1 << 20];
    int32_t sig = SIGKILL;
    if (!c->ch.exited && h_send(&c->ch, H_SIGN, &sig, sizeof(sig))) {
        uint64_t deadline = h_now_ms() + 10000;
        for (uint64_t now; !c->ch.exited && (now = h_now_ms()) < deadline;) {
            uint32_t tag;
            if (h_recv_frame(&c->ch, &tag, sink, sizeof(sink), (int)(deadline - now), true) < 0 &&
                !c->ch.exited)
                break;
        }
    }
    h_child_release(c);
}

/* ---------------------------------------------------------- the server side */

/* Serves one connection: spawns the role it asks for and relays until it is reaped. */
static int h_supervise(int fd, const char *peer)
{
    static uint8_t buf[1 << 20];
    h_chan_t up = {.rd = fd, .wr = fd};
    uint32_t tag = 0;
    h_nodelay(fd);
    ssize_t n = h_recv_frame(&up, &tag, buf, sizeof(buf) - 1, 30000, false);
    if (n <= 0 || tag != H_SPWN) {
        fprintf(stderr, "[roles] %s sent no spawn request\n", peer);
        return 1;
    }
    buf[n] = '\0';
    const char *args[H_MAX_ARGS + 1];
    int na = 0;
    for (size_t off = 0; off < (size_t)n && na < H_MAX_ARGS;
         off += strlen((const char *)buf + off) + 1)
        args[na++] = (const char *)buf + off;
    args[na] = NULL;

    h_child_t c;
    h_spawn_local(&c, args);
    int32_t pid = c.pid;
    fprintf(stderr, "[roles] %s (pid %d) started for %s\n", c.role, (int)pid, peer);
    bool child_open = true;
    if (!h_send(&up, H_SPWN, &pid, sizeof(pid)))
        goto test_gone;
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                              {.fd = child_open ? c.ch.rd : -1, .events = POLLIN}};
        if (poll(p, 2, child_open ? 1000 : 10) < 0 && errno != EINTR)
            goto test_gone;
        if (child_open && p[1].revents != 0) {
            ssize_t k = read(c.ch.rd, buf, sizeof(buf));
            if (k > 0 && !h_write_all(fd, buf, (size_t)k))
                goto test_gone;
            if (k == 0 || (k < 0 && errno != EINTR))
                child_open = false;
        }
        if (p[0].revents != 0) {
            n = h_recv_frame(&up, &tag, buf, sizeof(buf), 10000, true);
            if (n < 0)
                goto test_gone;
            if (tag == H_SIGN && n == (ssize_t)sizeof(int32_t)) {
                int32_t sig;
                memcpy(&sig, buf, sizeof(sig));
                fprintf(stderr, "[roles] %s (pid %d): signal %d (%s)\n", c.role, (int)pid, (int)sig,
                        strsignal(sig));
                kill(c.pid, sig);
            } else {
                (void)h_send(&c.ch, tag, buf, (size_t)n); /* the child may be gone */
            }
        }
        if (!child_open) {
            int ws = 0;
            if (waitpid(c.pid, &ws, WNOHANG) == c.pid) {
                int32_t code = h_decode(ws);
                fprintf(stderr, "[roles] %s (pid %d) exited with %d\n", c.role, (int)pid,
                        (int)code);
                c.pid = 0;
                h_child_release(&c);
                (void)h_send(&up, H_EXIT, &code, sizeof(code));
                return 0;
            }
        }
    }
test_gone:
    fprintf(stderr, "[roles] %s (pid %d): the test went away: killed\n", c.role, (int)pid);
    h_child_kill(&c);
    return 0;
}

int h_role_server(const char *hostport)
{
    h_role_name = "roles";
    struct addrinfo *ai = h_resolve(hostport, true);
    if (ai == NULL) {
        fprintf(stderr, "[roles] --serve-roles wants a numeric HOST:PORT, not %s\n", hostport);
        return 1;
    }
    int one = 1;
    int lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(lfd, 32) != 0) {
        fprintf(stderr, "[roles] cannot listen on %s: %s\n", hostport, strerror(errno));
        freeaddrinfo(ai);
        return 1;
    }
    freeaddrinfo(ai);
    /* Port 0: the system's choice, which the line below names. */
    struct sockaddr_storage me;
    socklen_t ml = sizeof(me);
    char addr[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (getsockname(lfd, (struct sockaddr *)&me, &ml) == 0 && me.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&me)->sin_addr, addr, sizeof(addr));
        port = ntohs(((struct sockaddr_in *)&me)->sin_port);
    } else if (me.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&me)->sin6_addr, addr, sizeof(addr));
        port = ntohs(((struct sockaddr_in6 *)&me)->sin6_port);
    }
    signal(SIGPIPE, SIG_IGN);
    printf(me.ss_family == AF_INET6 ? "[roles] serving roles on [%s]:%u\n"
                                    : "[roles] serving roles on %s:%u\n",
           addr, port);
    fflush(stdout);
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, 500) <= 0)
            continue;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        char peer[INET6_ADDRSTRLEN + 8] = "?";
        if (ss.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, peer, sizeof(peer));
        else if (ss.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, peer, sizeof(peer));
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(lfd);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            _exit(h_supervise(fd, peer));
        }
        if (pid < 0)
            fprintf(stderr, "[roles] fork: %s\n", strerror(errno));
        close(fd);
    }
}
