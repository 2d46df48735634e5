/* The worker's counters, published for rs_worker_stats (worker.c) by the worker thread. */
#include "worker/internal.h"

void rs_wk_stats_publish(rs_worker_t *w)
{
    pthread_mutex_lock(&w->stats_lock);
    w->stats_copy = w->st.stats;
    pthread_mutex_unlock(&w->stats_lock);
}
