/*
 * UCX after fork(): UCX's asynchronous thread holds a process-wide lock on
 * its event handlers while it dispatches an event. A child forked at that
 * moment inherits the lock held and no thread to release it, and its first
 * worker that registers a handler waits on it forever (a forked child of
 * test_shuffle_client_fork hung so once in about 100 runs at load 3). So
 * a child forked while its parent had UCX contexts open opens none of its
 * own: RS_ERR_STATE, at once, instead of a hang now and then. A child
 * forked with none open (the parent shut its clients, workers and nodes
 * down first), or one that execs, is not affected.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

#include <pthread.h>
#include <stdatomic.h>

static atomic_uint open_ctxs; /* this process's UCX contexts */
static unsigned forked_with;  /* in a child: the parent's open at the fork */
static pthread_once_t hook_once = PTHREAD_ONCE_INIT;

static void at_fork_child(void)
{
    unsigned open = atomic_load(&open_ctxs);
    if (open > 0) /* a refused child's own children inherit its held lock: they refuse too */
        forked_with = open;
    atomic_store(&open_ctxs, 0); /* the parent's are never closed here */
}

static void hook(void)
{
    pthread_atfork(NULL, NULL, at_fork_child);
}

rs_status_t rs_ucx_fork_open(void)
{
    pthread_once(&hook_once, hook);
    if (forked_with > 0) {
        rs_error("ucx: this process was forked while its parent had %u UCX context(s) open; "
                 "UCX's locks may be held here, so it opens none: the parent closes its "
                 "clients, workers and nodes (rs_client_default_shutdown) before fork(), or "
                 "the child execs",
                 forked_with);
        return RS_ERR_STATE;
    }
    atomic_fetch_add(&open_ctxs, 1);
    return RS_OK;
}

void rs_ucx_fork_close(void)
{
    unsigned n = atomic_load(&open_ctxs);
    while (n > 0 && !atomic_compare_exchange_weak(&open_ctxs, &n, n - 1))
        ;
}
