/*
 * UCX backend: status mapping and the outcome of posting a request, shared
 * by every file that posts (am.c, rma.c, amrma.c). They live apart from
 * ctx.c, which holds the ops table, and from rma.c, which calls amrma.c,
 * so that no two files of the backend call each other.
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

rs_status_t rs_ucx_status(ucs_status_t status)
{
    switch (status) {
        case UCS_OK:
            return RS_OK;
        case UCS_ERR_NO_MEMORY:
            return RS_ERR_NOMEM;
        case UCS_ERR_CANCELED:
            return RS_ERR_CANCELED;
        case UCS_ERR_TIMED_OUT:
            return RS_ERR_TIMEOUT;
        case UCS_ERR_REJECTED:
        case UCS_ERR_NOT_CONNECTED:
            return RS_ERR_REFUSED;
        case UCS_ERR_ENDPOINT_TIMEOUT: /* UCX's verdict on a peer gone (a killed one, over TCP) */
        case UCS_ERR_UNREACHABLE:
        case UCS_ERR_CONNECTION_RESET:
        case UCS_ERR_IO_ERROR:
            return RS_ERR_UNREACHABLE;
        case UCS_ERR_UNSUPPORTED:
            return RS_ERR_UNSUPPORTED;
        default:
            return RS_ERR_TRANSPORT;
    }
}

void rs_ucx_op_done_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    rs_tp_op_complete(user_data, rs_ucx_status(status));
}

rs_status_t rs_ucx_post_error(ucs_status_ptr_t req, const char *what)
{
    rs_error("%s failed: %s", what, ucs_status_string(UCS_PTR_STATUS(req)));
    return rs_ucx_status(UCS_PTR_STATUS(req)) == RS_ERR_NOMEM ? RS_ERR_NOMEM : RS_ERR_UNREACHABLE;
}

rs_status_t rs_ucx_post_result(rs_op_t *op, ucs_status_ptr_t req, const char *what)
{
    if (req == NULL) {
        rs_tp_op_complete(op, RS_OK);
        return RS_OK;
    }
    return UCS_PTR_IS_ERR(req) ? rs_ucx_post_error(req, what) : RS_OK;
}
