/*
 * Workers lost, told once to every lane of a client (shuffle/client.h).
 * Noting takes the set's lock; a lane's check of its epoch is one atomic
 * load, and only a lane that is behind takes the lock, to copy what it has
 * not seen.
 */
#include "shuffle/client.h"
#include "shuffle/loss.h"

#include <stdlib.h>
#include <string.h>

void rs_loss_init(rs_loss_set_t *ls)
{
    memset(ls->addr, 0, sizeof(ls->addr));
    atomic_init(&ls->epoch, 0);
    pthread_mutex_init(&ls->lock, NULL);
}

void rs_loss_fini(rs_loss_set_t *ls)
{
    for (uint32_t i = 0; i < RS_LOSS_KEEP; i++)
        free(ls->addr[i]);
    pthread_mutex_destroy(&ls->lock);
}

uint64_t rs_lane_loss_epoch(const rs_lane_t *lane)
{
    return atomic_load_explicit(&lane->losses->epoch, memory_order_acquire);
}

void rs_lane_loss_note(rs_lane_t *lane, const char *addr, uint64_t made)
{
    rs_loss_set_t *ls = lane->losses;
    pthread_mutex_lock(&ls->lock);
    uint64_t e = atomic_load_explicit(&ls->epoch, memory_order_relaxed);
    uint64_t first = e > RS_LOSS_KEEP ? e - RS_LOSS_KEEP + 1 : 1;
    if (made + 1 > first)
        first = made + 1;
    for (uint64_t k = first; k <= e; k++) {
        const char *a = ls->addr[(k - 1) % RS_LOSS_KEEP];
        if (a != NULL && strcmp(a, addr) == 0) { /* this process's end is known already */
            pthread_mutex_unlock(&ls->lock);
            return;
        }
    }
    char **slot = &ls->addr[e % RS_LOSS_KEEP];
    free(*slot);
    *slot = strdup(addr); /* NULL: walkers take every connection as lost */
    atomic_store_explicit(&ls->epoch, e + 1, memory_order_release);
    pthread_mutex_unlock(&ls->lock);
}

/* fn runs without the lock: it closes endpoints, whose callbacks may note losses. */
uint64_t rs_lane_loss_walk(rs_lane_t *lane, uint64_t seen, rs_lane_loss_fn fn, void *arg)
{
    rs_loss_set_t *ls = lane->losses;
    if (rs_lane_loss_epoch(lane) == seen)
        return seen;
    char *addr[RS_LOSS_KEEP];
    uint32_t n = 0;
    int all = 0;
    pthread_mutex_lock(&ls->lock);
    uint64_t e = atomic_load_explicit(&ls->epoch, memory_order_relaxed);
    if (e - seen > RS_LOSS_KEEP) {
        all = 1;
    } else {
        for (uint64_t k = seen + 1; k <= e && !all; k++) {
            const char *a = ls->addr[(k - 1) % RS_LOSS_KEEP];
            addr[n] = a != NULL ? strdup(a) : NULL;
            all = addr[n] == NULL; /* unknown, or no memory: every connection */
            n += !all;
        }
    }
    pthread_mutex_unlock(&ls->lock);
    if (all)
        fn(arg, NULL, e);
    for (uint32_t i = 0; i < n; i++) {
        if (!all)
            fn(arg, addr[i], seen + 1 + i);
        free(addr[i]);
    }
    return e;
}
