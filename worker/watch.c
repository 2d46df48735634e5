/*
 * This process's listening TCP sockets and their accept queues (watch.h).
 * Asked of the kernel's socket diagnostics for listeners only: reading
 * /proc/net/tcp walks the whole established hash table (262,144 buckets
 * here), 20-90 ms of a worker every watch while a task waits for its
 * answer; /proc/net/tcp stays the fallback where netlink is refused.
 */
#include "worker/watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TCP_LISTEN_STATE 10

/* The inodes of this process's sockets, sorted; NULL when /proc cannot be read. */
static unsigned long *socket_inodes(size_t *n_p)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return NULL;
    size_t n = 0, cap = 64;
    unsigned long *v = malloc(cap * sizeof(*v));
    struct dirent *e;
    while (v != NULL && (e = readdir(d)) != NULL) {
        char link[64];
        ssize_t len = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
        unsigned long ino;
        if (len <= 0)
            continue;
        link[len] = '\0';
        if (sscanf(link, "socket:[%lu]", &ino) != 1)
            continue;
        if (n == cap) {
            unsigned long *g = realloc(v, 2 * cap * sizeof(*v));
            if (g == NULL) {
                free(v);
                v = NULL;
                break;
            }
            v = g;
            cap *= 2;
        }
        v[n++] = ino;
    }
    closedir(d);
    *n_p = n;
    return v;
}

static int has(const unsigned long *v, size_t n, unsigned long ino)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == ino)
            return 1;
    return 0;
}

/* Adds this process's listeners of one /proc/net/tcp{,6} table to v (n of them so far). */
static int scan(const char *table, const unsigned long *ino, size_t n_ino, uint16_t skip_port,
                rs_wk_listening_t *v, int n)
{
    FILE *f = fopen(table, "r");
    if (f == NULL)
        return n;
    char line[512];
    if (fgets(line, sizeof(line), f) == NULL) { /* the header */
        fclose(f);
        return n;
    }
    while (n < RS_WK_WATCH_PORTS && fgets(line, sizeof(line), f) != NULL) {
        unsigned port, state;
        unsigned long rxq, inode;
        /* sl: local:port remote:port st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line,
                   " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x %*x:%lx %*x:%*x %*x %*u %*u %lu",
                   &port, &state, &rxq, &inode) != 4)
            continue;
        /* For a listener rx_queue is its accept queue's length. */
        if (state == 0x0a && port != skip_port && has(ino, n_ino, inode))
            v[n++] = (rs_wk_listening_t){.port = (uint16_t)port, .waiting = (uint32_t)rxq};
    }
    fclose(f);
    return n;
}

/*
 * As scan, from one family's listeners as the kernel's socket diagnostics
 * dump them (only the listening hash is walked). -1: netlink refused or
 * broken (the caller falls back to /proc).
 */
static int diag(int family, const unsigned long *ino, size_t n_ino, uint16_t skip_port,
                rs_wk_listening_t *v, int n)
{
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -1;
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 r;
    } req;
    memset(&req, 0, sizeof(req));
    req.nh.nlmsg_len = sizeof(req);
    req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.r.sdiag_family = (uint8_t)family;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = 1u << TCP_LISTEN_STATE;
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&sa, sizeof(sa)) !=
        (ssize_t)sizeof(req)) {
        close(fd);
        return -1;
    }
    long buf[2048]; /* aligned for nlmsghdr */
    for (int rounds = 0; rounds < 1024; rounds++) {
        ssize_t len = recv(fd, buf, sizeof(buf), 0);
        if (len < 0 && errno == EINTR)
            continue;
        if (len <= 0)
            break;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len);
             h = NLMSG_NEXT(h, len)) {
            if (h->nlmsg_type == NLMSG_DONE) {
                close(fd);
                return n;
            }
            if (h->nlmsg_type == NLMSG_ERROR ||
                h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
                goto fail;
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            uint16_t port = ntohs(m->id.idiag_sport);
            /* For a listener idiag_rqueue is its accept queue's length. */
            if (n < RS_WK_WATCH_PORTS && m->idiag_state == TCP_LISTEN_STATE && port != skip_port &&
                has(ino, n_ino, m->idiag_inode))
                v[n++] = (rs_wk_listening_t){.port = port, .waiting = m->idiag_rqueue};
        }
    }
fail:
    close(fd);
    return -1;
}

int rs_wk_listening(uint16_t skip_port, rs_wk_listening_t *v)
{
    size_t n_ino = 0;
    unsigned long *ino = socket_inodes(&n_ino);
    if (ino == NULL)
        return -1;
    int n = diag(AF_INET, ino, n_ino, skip_port, v, 0);
    if (n >= 0)
        n = diag(AF_INET6, ino, n_ino, skip_port, v, n);
    if (n < 0) {
        n = scan("/proc/net/tcp", ino, n_ino, skip_port, v, 0);
        n = scan("/proc/net/tcp6", ino, n_ino, skip_port, v, n);
    }
    free(ino);
    return n;
}
