/*
 * Where each partition's batches go: its R holders, the first R workers
 * of its ring not lost when its first batch was framed (docs/shuffle.md,
 * "Moving a lost worker's partitions"). Calls no other file of the engine.
 */
#include "pusher/internal.h"

#include "common/assert.h"
#include "common/log.h"

/* Partition part's R holders (rs_pusher.hold). */
uint32_t *rs_push_holders(const rs_pusher_t *p, uint32_t part)
{
    return &p->hold[(size_t)part * p->replicas];
}

int rs_push_replicas_live(const rs_pusher_t *p)
{
    for (uint32_t part = 0; part < p->desc.n_partitions; part++) {
        const uint32_t *h = rs_push_holders(p, part);
        int live = 0;
        for (uint32_t k = 0; k < p->replicas && !live; k++)
            live = !rs_push_worker_is(&p->workers[h[k]], RS_PW_LOST);
        if (!live) {
            rs_error("pusher (shuffle %u map %u): partition %u has no live holder left",
                     p->desc.shuffle_id, p->map_id, part);
            return 0;
        }
    }
    return 1;
}

/*
 * The first R workers of part's ring that are not lost; with fewer live,
 * lost ones fill the rest (never sent to). Distinct workers either way.
 */
static void seat(rs_pusher_t *p, uint32_t part)
{
    uint32_t nw = p->desc.n_workers, n = 0;
    uint32_t *h = rs_push_holders(p, part);
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t j = 0; j < nw && n < p->replicas; j++) {
            uint32_t w = (p->place[part] + j) % nw;
            if (rs_push_worker_is(&p->workers[w], RS_PW_LOST) == pass)
                h[n++] = w;
        }
    }
    RS_ASSERT(n == p->replicas); /* R <= W: rs_shuffle_replicas */
}

/* Was a batch of part framed? Then a holder counts it (one was live: else the pusher failed). */
static int started(const rs_pusher_t *p, uint32_t part)
{
    const uint32_t *h = rs_push_holders(p, part);
    for (uint32_t k = 0; k < p->replicas; k++) {
        if (p->workers[h[k]].counts[part].batches > 0)
            return 1;
    }
    return 0;
}

void rs_push_seat_unstarted(rs_pusher_t *p)
{
    for (uint32_t part = 0; part < p->desc.n_partitions; part++) {
        if (!started(p, part))
            seat(p, part);
    }
}

/* Does worker w hold part? */
int rs_push_holds(const rs_pusher_t *p, uint32_t part, uint32_t w)
{
    const uint32_t *h = rs_push_holders(p, part);
    for (uint32_t k = 0; k < p->replicas; k++) {
        if (h[k] == w)
            return 1;
    }
    return 0;
}
