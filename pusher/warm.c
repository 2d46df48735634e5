/*
 * Warming a client's push lanes before its tasks come, as an executor does
 * at start: the lanes' contexts, connections and pools are made and made
 * resident now, so a task's open and appends find them ready
 * (docs/shuffle.md, "Warm lanes").
 */
#include "pusher/internal.h"

#include "common/log.h"

#include <stdlib.h>

/* Connects l to every worker of desc and makes its pool resident. */
static rs_status_t lane_warm(rs_push_lane_t *l, const rs_shuffle_desc_t *desc)
{
    rs_status_t s = RS_OK;
    rs_push_lane_hold(l);
    rs_push_lane_check(l);
    for (uint32_t i = 0; i < desc->n_workers && s == RS_OK; i++) {
        rs_push_conn_t *conn;
        if (desc->workers[i] == NULL) {
            rs_error("pusher warm: worker %u of the shuffle has no address", i);
            s = RS_ERR_INVALID;
        } else if ((s = rs_push_lane_conn(l, desc->workers[i], &conn)) != RS_OK) {
            rs_error("pusher warm: cannot connect to worker %s: %s", desc->workers[i],
                     rs_strerror(s));
        }
    }
    rs_push_lane_unhold(l);
    if (s == RS_OK) {
        /* Each partition's buffer and about as many on their way, merged blocks beside. */
        uint64_t bufs = 2ull * desc->n_partitions + 64;
        rs_push_q_make_resident(l->q, bufs < UINT32_MAX ? (uint32_t)bufs : UINT32_MAX);
        rs_push_arrays_warm(l, desc);
    }
    return s;
}

rs_status_t rs_pusher_warm_in(rs_client_t *client, const rs_shuffle_desc_t *desc,
                              const rs_pusher_config_t *cfg, uint32_t lanes)
{
    if (client == NULL || desc == NULL || desc->n_partitions == 0 || desc->n_workers == 0 ||
        desc->workers == NULL || lanes == 0 || lanes > RS_PUSH_WARM_MAX) {
        rs_error("pusher warm: %s", client == NULL ? "NULL client"
                                    : desc == NULL ? "NULL shuffle descriptor"
                                    : lanes == 0 || lanes > RS_PUSH_WARM_MAX
                                        ? "lanes must be 1 to RS_PUSH_WARM_MAX"
                                        : "the descriptor has no partitions or no workers");
        return RS_ERR_INVALID;
    }
    rs_pusher_config_t pc;
    rs_push_lane_key_t key;
    rs_status_t s = rs_push_lane_key_make(cfg, desc->n_partitions, &pc, &key);
    if (s != RS_OK)
        return s;
    rs_push_lane_t **got = calloc(lanes, sizeof(*got));
    if (got == NULL)
        return RS_ERR_NOMEM;
    uint32_t n = 0;
    /* All taken at once, so each is a lane of its own, as tasks running together take them. */
    for (; n < lanes; n++)
        if ((s = rs_push_lane_get(client, &key, &got[n])) != RS_OK)
            break;
    for (uint32_t i = 0; i < n && s == RS_OK; i++)
        s = lane_warm(got[i], desc);
    /* No task in them: each goes back idle (a failed connection is made again later). */
    for (uint32_t i = 0; i < n; i++)
        rs_lane_give(&got[i]->base, 1);
    free(got);
    return s;
}

rs_status_t rs_pusher_warm(const rs_shuffle_desc_t *desc, const rs_pusher_config_t *cfg,
                           uint32_t lanes)
{
    rs_client_t *c = rs_client_default();
    if (c == NULL)
        return RS_ERR_NOMEM;
    return rs_pusher_warm_in(c, desc, cfg, lanes);
}
