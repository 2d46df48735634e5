/*
 * A pusher's failure: the first error is kept (rs_pusher.error) and logged,
 * and the push queue is told so the writer's waits end. The bottom of the
 * engine's files (pusher/internal.h has their order).
 */
#include "pusher/internal.h"

#include "common/log.h"

void rs_push_fail(rs_pusher_t *p, rs_status_t status, const char *why)
{
    int expected = RS_OK;
    if (atomic_compare_exchange_strong(&p->error, &expected, (int)status))
        rs_error("pusher (shuffle %u map %u attempt %u): %s: %s", p->desc.shuffle_id, p->map_id,
                 p->attempt, why, rs_strerror(status));
    rs_push_q_fail(p->q, status);
}
