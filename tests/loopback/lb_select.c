/*
 * Backend selection of the loopback test library (rshuffle_lb): the
 * library's own selection (transport/select.c, compiled here once more
 * under another name, unchanged) is replaced by one that gives every
 * context the loopback backend, whatever RSHUFFLE_TRANSPORT says. The
 * library's select.c object is left out of rshuffle_lb, so librshuffle
 * itself never knows this backend.
 */
#define rs_tp_select_backend rs_tp_select_backend_library
#include "transport/select.c"
#undef rs_tp_select_backend

#include "tests/loopback/lb_backend.h"

rs_status_t rs_tp_select_backend(const rs_config_t *cfg, const rs_backend_ops_t **ops_p);

rs_status_t rs_tp_select_backend(const rs_config_t *cfg, const rs_backend_ops_t **ops_p)
{
    (void)cfg;
    *ops_p = &rs_lb_ops;
    return RS_OK;
}
