/*
 * The shuffle layer's tables: rs_client_config_t (RSHUFFLE_CLIENT_LANES) and
 * the descriptors' default replication factor (RSHUFFLE_REPLICAS).
 */
#include "shuffle/config.h"

#include "common/cfgtab.h"

#include <rshuffle/shuffle.h>

#include <string.h>

static const rs_cfg_row_t client_rows[] = {
    RS_CFG_UINT_ROW(rs_client_config_t, "RSHUFFLE_CLIENT_LANES", max_idle, "64", 0, 65536,
                    "idle lanes (context, pool, connections) a client keeps for later tasks; 0: "
                    "none"),
};

const rs_cfg_table_t rs_client_config_table = {"client config", client_rows,
                                               sizeof(client_rows) / sizeof(client_rows[0])};

/* What a descriptor with replicas 0 takes from the environment. */
typedef struct {
    uint32_t replicas;
} shuffle_env_t;

static const rs_cfg_row_t shuffle_rows[] = {
    RS_CFG_UINT_ROW(shuffle_env_t, "RSHUFFLE_REPLICAS", replicas, "1", 1, RS_SHUFFLE_REPLICAS_MAX,
                    "workers holding each batch, for descriptors that leave replicas 0"),
};

const rs_cfg_table_t rs_shuffle_env_table = {"shuffle", shuffle_rows,
                                             sizeof(shuffle_rows) / sizeof(shuffle_rows[0])};

void rs_client_config_defaults(rs_client_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    rs_cfg_defaults(&rs_client_config_table, cfg);
}

rs_status_t rs_client_config_from_env(rs_client_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    return rs_cfg_apply(&rs_client_config_table, cfg);
}

rs_status_t rs_sh_client_config_check(const rs_client_config_t *cfg)
{
    return rs_cfg_check(&rs_client_config_table, cfg);
}

rs_status_t rs_sh_env_replicas(uint32_t *replicas_p)
{
    shuffle_env_t e;
    rs_status_t st = rs_cfg_defaults(&rs_shuffle_env_table, &e);
    if (st == RS_OK)
        st = rs_cfg_apply(&rs_shuffle_env_table, &e);
    if (st == RS_OK)
        *replicas_p = e.replicas;
    return st;
}
