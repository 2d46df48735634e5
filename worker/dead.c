/*
 * Endpoints the worker closes at its next housekeeping (worker.c), not
 * inside the transport callback that found them dead or done (serve.c).
 */
#include "worker/internal.h"

#include <stdlib.h>

void rs_wk_defer_close(rs_worker_t *w, rs_ep_t *ep)
{
    if (w->n_dead == w->cap_dead) {
        size_t cap = w->cap_dead ? 2 * w->cap_dead : 16;
        rs_ep_t **n = realloc(w->dead, cap * sizeof(*n));
        if (n == NULL)
            return; /* closed with the context */
        w->dead = n;
        w->cap_dead = cap;
    }
    w->dead[w->n_dead++] = ep;
}
