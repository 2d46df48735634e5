/* Placement of partitions on workers (include/rshuffle/shuffle.h). */
#include <rshuffle/shuffle.h>

#include "common/log.h"
#include "shuffle/config.h"

uint32_t rs_placement_default(void *arg, uint32_t shuffle_id, uint32_t partition,
                              uint32_t n_workers)
{
    (void)arg;
    if (n_workers == 0)
        return 0; /* no worker to name: rs_shuffle_place refuses such a descriptor */
    /* Shifted by the shuffle id so small shuffles do not all start on worker 0. */
    return (uint32_t)(((uint64_t)partition + shuffle_id) % n_workers);
}

rs_status_t rs_shuffle_place(const rs_shuffle_desc_t *desc, uint32_t partition, uint32_t *worker_p)
{
    if (desc == NULL || worker_p == NULL || desc->n_workers == 0 || partition >= desc->n_partitions)
        return RS_ERR_INVALID;
    rs_placement_fn_t fn = desc->placement ? desc->placement : rs_placement_default;
    uint32_t w = fn(desc->placement_arg, desc->shuffle_id, partition, desc->n_workers);
    if (w >= desc->n_workers) {
        rs_error("placement of partition %u returned worker %u of %u", partition, w,
                 desc->n_workers);
        return RS_ERR_INVALID;
    }
    *worker_p = w;
    return RS_OK;
}

rs_status_t rs_shuffle_replicas(const rs_shuffle_desc_t *desc, uint32_t *replicas_p)
{
    if (desc == NULL || replicas_p == NULL || desc->n_workers == 0)
        return RS_ERR_INVALID;
    uint32_t r = desc->replicas;
    if (r == 0) {
        rs_status_t s = rs_sh_env_replicas(&r);
        if (s != RS_OK)
            return s;
    }
    if (r > RS_SHUFFLE_REPLICAS_MAX || r > desc->n_workers) {
        rs_error("shuffle %u: %u replicas asked for, but at most %u (and %u workers)",
                 desc->shuffle_id, r, RS_SHUFFLE_REPLICAS_MAX, desc->n_workers);
        return RS_ERR_INVALID;
    }
    *replicas_p = r;
    return RS_OK;
}

rs_status_t rs_shuffle_replica(const rs_shuffle_desc_t *desc, uint32_t partition, uint32_t k,
                               uint32_t *worker_p)
{
    uint32_t w;
    if (desc == NULL || worker_p == NULL || k >= RS_SHUFFLE_REPLICAS_MAX || k >= desc->n_workers)
        return RS_ERR_INVALID;
    rs_status_t s = rs_shuffle_place(desc, partition, &w);
    if (s != RS_OK)
        return s;
    *worker_p = (uint32_t)(((uint64_t)w + k) % desc->n_workers);
    return RS_OK;
}
