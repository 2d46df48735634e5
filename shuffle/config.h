/* The shuffle layer's variables (shuffle/config.c). */
#ifndef RS_SHUFFLE_CONFIG_H
#define RS_SHUFFLE_CONFIG_H

#include <stdint.h>
#include <rshuffle/client.h>

/*
 * The replication factor RSHUFFLE_REPLICAS asks for (1 when unset) into
 * *replicas_p; RS_ERR_CONFIG for a bad value (logged), *replicas_p then
 * untouched.
 */
rs_status_t rs_sh_env_replicas(uint32_t *replicas_p);

/* RS_OK when cfg's fields are in their variables' ranges, else RS_ERR_CONFIG (logged). */
rs_status_t rs_sh_client_config_check(const rs_client_config_t *cfg);

#endif
