/* The UCX backend's own knobs (RSHUFFLE_UCX_*), from its table in config.c. */
#ifndef RS_TRANSPORT_UCX_CONFIG_H
#define RS_TRANSPORT_UCX_CONFIG_H

#include <stdint.h>
#include <rshuffle/status.h>

typedef enum { RS_UCX_RMA_AUTO, RS_UCX_RMA_UCX, RS_UCX_RMA_AM } rs_ucx_rma_t;
typedef enum { RS_UCX_MEM_OWN, RS_UCX_MEM_SHARED, RS_UCX_MEM_ATTACH } rs_ucx_mem_t;
typedef enum { RS_UCX_NOTIFY_FENCE, RS_UCX_NOTIFY_FLUSH } rs_ucx_notify_t;
typedef enum { RS_UCX_QUEUE_SHARED, RS_UCX_QUEUE_LOCAL, RS_UCX_QUEUE_OWN } rs_ucx_queue_t;

typedef struct rs_ucx_config {
    rs_ucx_rma_t rma;       /* RSHUFFLE_UCX_RMA: auto|ucx|am */
    rs_ucx_mem_t mem;       /* RSHUFFLE_UCX_MEM: own|shared|attach */
    rs_ucx_notify_t notify; /* RSHUFFLE_UCX_NOTIFY: fence|flush */
    uint64_t map_max;       /* RSHUFFLE_UCX_MAP_MAX (0: rs_ucx_map_max's default) */
    int huge;               /* RSHUFFLE_UCX_HUGE: 0|1 */
    rs_ucx_queue_t queue;   /* RSHUFFLE_UCX_QUEUE: shared|local|own */
} rs_ucx_config_t;

/*
 * The defaults, then the environment. RS_ERR_CONFIG (logged, naming the
 * variable and what it accepts) for a value the table refuses; *cfg is
 * then not written.
 */
rs_status_t rs_ucx_config_read(rs_ucx_config_t *cfg);

#endif
