/*
 * A getter's wait. Left to the transport's progress thread, every answer a
 * getter waits for costs two thread hops: the progress thread wakes from its
 * poll to run the callback, and the callback wakes the getter. On a machine
 * with no spare core each hop is a context switch on the critical path
 * (tens of microseconds on a loaded VM, against a 1-2 us round trip over
 * shared memory). So, as MPI and UCX applications do, the thread that waits
 * drives the transport itself: rs_progress on the node's context runs the
 * callbacks (the reply, the read completion) on this thread, and the getter
 * sees its answer as soon as it lands.
 *
 * Bounded: it spins only while an answer is due soon (a read in flight, or
 * the first reply), yields the core between empty rounds (another process
 * on this core may be the one that must answer), and after RS_BGET_SPIN_NS
 * without any event it sleeps on the entry's condition as before, the
 * progress thread running the callbacks. Every wait ends by `until`.
 */
#include "broadcast/internal.h"
#include "broadcast/entry.h"

#include <sched.h>
#include <time.h>

#include "broadcast/getwait.h"
#include "common/clock.h"

/* Longest spin without an event before sleeping: covers a source's wake-up on a loaded host. */
#define RS_BGET_SPIN_NS 2000000ull
/* Empty rounds after which each further empty round yields the core (1: every one). */
#define RS_BGET_TIGHT 1u

/* An answer this getter waits for is due soon (e->lock held). */
static int answer_due(const rs_bc_entry_t *e)
{
    if (e->state != RS_BENT_FETCHING)
        return 0;
    return e->reads_inflight > 0 || (e->req_inflight && e->manifest != RS_BMAN_HAVE);
}

/*
 * What the fetch loop plans from (e->lock held). The progress thread may run
 * a callback while this thread spins (its broadcast of e->cond then wakes
 * nobody): a changed snapshot tells.
 */
static uint64_t snapshot(const rs_bc_entry_t *e)
{
    return (uint64_t)e->state ^ ((uint64_t)e->reads_inflight << 4) ^
           ((uint64_t)e->req_inflight << 24) ^ ((uint64_t)(e->manifest == RS_BMAN_HAVE) << 25) ^
           ((uint64_t)e->n_landed << 26) ^ ((uint64_t)e->n_holders << 40) ^
           ((uint64_t)e->version << 48) ^ ((uint64_t)e->ops << 56);
}

void rs_bc_entry_wait(rs_bc_entry_t *e, uint64_t until)
{
    uint64_t now = rs_now_ns();
    uint64_t stop = now + RS_BGET_SPIN_NS < until ? now + RS_BGET_SPIN_NS : until;
    uint64_t seen = snapshot(e);
    unsigned empty = 0;

    while (answer_due(e)) {
        pthread_mutex_unlock(&e->lock);
        /* Not under e->lock: callbacks take it (lock order: context -> entry). */
        unsigned n = rs_progress(e->node->ctx);
        if (n == 0 && ++empty >= RS_BGET_TIGHT)
            sched_yield();
        pthread_mutex_lock(&e->lock);
        if (n > 0 || snapshot(e) != seen)
            return; /* something happened: the caller re-plans */
        if (rs_now_ns() >= stop)
            break;
    }
    if (snapshot(e) != seen)
        return;
    /* e->lock held since the last look: a callback's broadcast cannot slip in before the wait. */
    struct timespec ts = rs_ns_to_timespec(until);
    pthread_cond_timedwait(&e->cond, &e->lock, &ts);
}
