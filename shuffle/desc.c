/* Placement of partitions on workers (include/rshuffle/shuffle.h). */
#include <rshuffle/shuffle.h>

#include "common/log.h"

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
    if (desc == NULL || desc->n_workers == 0 || partition >= desc->n_partitions)
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
