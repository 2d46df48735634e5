/*
 * Liveness of peers on this host. A peer on shared memory that is killed
 * leaves its segments mapped: puts to it keep completing and nothing is
 * outstanding for a deadline to catch, and UCX 1.13 does not notice either.
 * The handshake therefore carries each side's process identity (pid, pid
 * namespace, boot id); for a peer in our host and pid namespace we hold a
 * pidfd, which becomes readable when that process exits, and the deadline
 * scan polls it.
 */
#include "transport/internal.h"

#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void read_boot_id(char *out, size_t cap)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    memset(out, 0, cap);
    if (f == NULL)
        return;
    if (fgets(out, (int)cap, f) == NULL)
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

void rs_tp_proc_identity(rs_proc_id_t *id)
{
    struct stat st;
    memset(id, 0, sizeof(*id));
    id->pid = (uint32_t)getpid();
    if (stat("/proc/self/ns/pid", &st) == 0)
        id->pidns = (uint64_t)st.st_ino;
    read_boot_id(id->boot_id, sizeof(id->boot_id));
}

void rs_tp_peer_watch(rs_ep_t *ep, const rs_proc_id_t *peer)
{
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    rs_proc_id_t me;
    rs_tp_proc_identity(&me);
    if (p->peer_pidfd >= 0 || me.boot_id[0] == '\0' || me.pidns == 0 || peer->pidns != me.pidns ||
        memcmp(peer->boot_id, me.boot_id, sizeof(me.boot_id)) != 0 || peer->pid == me.pid)
        return; /* another host or namespace, or ourselves: nothing to watch */
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)peer->pid, 0);
    if (fd < 0) {
        /* Already gone (ESRCH) counts as dead at the next scan. */
        if (errno == ESRCH)
            p->peer_gone = 1;
        else
            rs_debug("pidfd_open(%u) failed: errno %d", peer->pid, errno);
        return;
    }
    p->peer_pidfd = fd;
#endif
}

int rs_tp_peer_exited(rs_ep_t *ep)
{
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    if (p->peer_gone)
        return 1;
    if (p->peer_pidfd < 0)
        return 0;
    struct pollfd pfd = {.fd = p->peer_pidfd, .events = POLLIN};
    if (poll(&pfd, 1, 0) > 0) {
        p->peer_gone = 1;
        return 1;
    }
    return 0;
}

void rs_tp_peer_unwatch(rs_ep_t *ep)
{
    rs_ep_priv_t *p = RS_EP_PRIV(ep);
    if (p->peer_pidfd >= 0)
        close(p->peer_pidfd);
    p->peer_pidfd = -1;
}
