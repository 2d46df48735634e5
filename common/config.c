/* rs_config_t, the transport's configuration: defaults, environment, validation (config_table.c).
 */
#include <rshuffle/config.h>

#include "common/cfgtab.h"
#include "common/log.h"

#include <stddef.h>
#include <string.h>

void rs_config_defaults(rs_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    rs_cfg_defaults(&rs_config_table, cfg);
    cfg->log_level = rs_log_level(); /* the process's level: RSHUFFLE_LOG's default is warn */
}

rs_status_t rs_config_from_env(rs_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    return rs_cfg_apply(&rs_config_table, cfg);
}

rs_status_t rs_config_init(rs_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    rs_config_t c;
    rs_config_defaults(&c);
    rs_status_t st = rs_config_from_env(&c);
    if (st == RS_OK)
        *cfg = c;
    return st;
}

rs_status_t rs_config_validate(const rs_config_t *cfg)
{
    if (cfg == NULL)
        return RS_ERR_INVALID;
    return rs_cfg_check(&rs_config_table, cfg);
}
