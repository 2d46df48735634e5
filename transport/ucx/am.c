/*
 * UCX backend: sending active messages. One AM id carries messages,
 * notifications and the connection control messages; the control header
 * (amhdr.h) says which and names the receiving connection (recv.c dispatches
 * them). Sends are forced eager so a handler always sees whole data and
 * messages on one endpoint stay in order.
 */
#include "transport/ucx/ucx.h"

#include "common/assert.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

static void msg_sent_cb(void *request, ucs_status_t status, void *user_data)
{
    rs_op_t *op = user_data;
    ucp_request_free(request);
    free(op->be[0]);
    op->be[0] = NULL;
    rs_tp_op_complete(op, rs_ucx_status(status));
}

rs_status_t rs_ucx_msg_send(rs_ep_t *ep, rs_op_t *op, unsigned type, const void *data, size_t len)
{
    rs_ucx_ep_t *uep = ep->be;
    if (uep == NULL || uep->uep == NULL)
        return RS_ERR_UNREACHABLE;
    /* Header and data stay ours until UCX is done with them. */
    rs_ucx_hdr_wire_t *hdr = malloc(sizeof(*hdr) + len);
    if (hdr == NULL) {
        rs_error("out of memory copying a %zu-byte message", len);
        return RS_ERR_NOMEM;
    }
    rs_ucx_hdr_pack(
        &(rs_ucx_hdr_t){.dst_id = uep->peer_id, .src_id = uep->id, .arg = type, .kind = RS_UCX_MSG},
        hdr);
    if (len > 0)
        memcpy(hdr + 1, data, len);
    op->be[0] = hdr;
    ucp_request_param_t p = rs_ucx_am_param(msg_sent_cb, op, 0);
    ucs_status_ptr_t req =
        ucp_am_send_nbx(uep->uep, RS_UCX_AM_ID, hdr, sizeof(*hdr), hdr + 1, len, &p);
    RS_ASSERT(op->be[0] == hdr);
    if (!UCS_PTR_IS_PTR(req)) { /* done or failed at once: the copy is ours to free */
        free(hdr);
        op->be[0] = NULL;
    }
    return rs_ucx_post_result(op, req, "ucp_am_send_nbx");
}
