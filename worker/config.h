/* The worker's configuration check (worker/config.c). */
#ifndef RS_WORKER_CONFIG_H
#define RS_WORKER_CONFIG_H

#include <rshuffle/worker.h>

/*
 * RS_OK when every field of the table is in its variable's range and
 * extent_min <= extent_max; else RS_ERR_CONFIG, logged naming the field and
 * its variable. The host's own limits (memory, spill directory) are
 * rs_worker_create's to check.
 */
rs_status_t rs_wk_config_check(const rs_worker_config_t *cfg);

#endif
