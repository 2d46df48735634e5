/* This process's listening TCP sockets and their accept queues (watch.h). */
#include "worker/watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int rs_wk_listening(uint16_t skip_port, rs_wk_listening_t *v)
{
    size_t n_ino = 0;
    unsigned long *ino = socket_inodes(&n_ino);
    if (ino == NULL)
        return -1;
    int n = scan("/proc/net/tcp", ino, n_ino, skip_port, v, 0);
    n = scan("/proc/net/tcp6", ino, n_ino, skip_port, v, n);
    free(ino);
    return n;
}
