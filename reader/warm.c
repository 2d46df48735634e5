/*
 * Warming a client's read lanes before its reduce tasks come: the lanes'
 * contexts, one resident read buffer each and a connection to every worker
 * made now (docs/shuffle.md, "Warm lanes"). A connection gets its remote
 * key from the first session's attach.
 */
#include "reader/internal.h"
#include "reader/config.h"

#include "common/log.h"

#include <stdlib.h>

/* Gives l one resident read buffer for its next session, unless it has one. */
static rs_status_t lane_buf(rs_read_lane_t *l)
{
    if (l->n_bufs > 0)
        return RS_OK;
    if (l->cap_bufs == 0) {
        rs_mr_t **n = malloc(4 * sizeof(*n));
        if (n == NULL)
            return RS_ERR_NOMEM;
        l->bufs = n;
        l->cap_bufs = 4;
    }
    rs_mr_t *mr;
    rs_status_t s = rs_mem_alloc(l->ctx, l->key.read_max, RS_MEM_LOCAL, &mr); /* resident */
    if (s != RS_OK)
        return s;
    l->bufs[l->n_bufs++] = mr;
    return RS_OK;
}

/* Gives l a resident read buffer and a connection to every worker of desc. */
static rs_status_t lane_warm(rs_read_lane_t *l, const rs_shuffle_desc_t *desc)
{
    rs_status_t s = lane_buf(l);
    for (uint32_t i = 0; i < desc->n_workers && s == RS_OK; i++) {
        if (desc->workers[i] == NULL) {
            rs_error("reader warm: worker %u of the shuffle has no address", i);
            s = RS_ERR_INVALID;
        } else if ((s = rs_rd_lane_conn_warm(l, desc->workers[i])) != RS_OK) {
            rs_error("reader warm: cannot connect to worker %s: %s", desc->workers[i],
                     rs_strerror(s));
        }
    }
    return s;
}

rs_status_t rs_reader_warm_in(rs_client_t *client, const rs_shuffle_desc_t *desc,
                              const rs_reader_config_t *cfg, uint32_t lanes)
{
    if (client == NULL || desc == NULL || desc->n_workers == 0 || desc->workers == NULL ||
        lanes == 0 || lanes > RS_READ_WARM_MAX) {
        rs_error("reader warm: %s", client == NULL ? "NULL client"
                                    : desc == NULL ? "NULL shuffle descriptor"
                                    : lanes == 0 || lanes > RS_READ_WARM_MAX
                                        ? "lanes must be 1 to RS_READ_WARM_MAX"
                                        : "the descriptor has no workers");
        return RS_ERR_INVALID;
    }
    rs_reader_config_t rc;
    rs_status_t s = RS_OK;
    if (cfg != NULL) {
        rc = *cfg;
    } else {
        rs_reader_config_defaults(&rc);
        s = rs_reader_config_from_env(&rc);
    }
    rs_read_lane_key_t key;
    if (s == RS_OK && (s = rs_rd_config_check(&rc)) == RS_OK)
        s = rs_rd_lane_key_make(&rc, &key);
    if (s != RS_OK)
        return s;
    rs_read_lane_t **got = calloc(lanes, sizeof(*got));
    if (got == NULL)
        return RS_ERR_NOMEM;
    uint32_t n = 0;
    /* All taken at once, so each is a lane of its own, as sessions running together take them. */
    for (; n < lanes; n++)
        if ((s = rs_rd_lane_get(client, &key, &got[n])) != RS_OK)
            break;
    for (uint32_t i = 0; i < n && s == RS_OK; i++)
        s = lane_warm(got[i], desc);
    for (uint32_t i = 0; i < n; i++)
        rs_lane_give(&got[i]->base, 1); /* no session on it: reusable */
    free(got);
    return s;
}

rs_status_t rs_reader_warm(const rs_shuffle_desc_t *desc, const rs_reader_config_t *cfg,
                           uint32_t lanes)
{
    rs_client_t *c = rs_client_default();
    if (c == NULL)
        return RS_ERR_NOMEM;
    return rs_reader_warm_in(c, desc, cfg, lanes);
}
