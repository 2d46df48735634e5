/*
 * UCX backend: opening and closing a UCX worker of the context (explicit
 * progress, wakeup fd, address blob, the AM handler): the context's own
 * (ctx.c) and a connection's own receive queue (own.c).
 */
#include "transport/ucx/ucx.h"

#include "common/log.h"

#include <stdlib.h>

void rs_ucx_worker_close(const rs_ucx_worker_t *w)
{
    free(w->blob);
    ucp_worker_release_address(w->worker, w->addr);
    ucp_worker_destroy(w->worker);
}

/* The blob of w's full address and its network-only one (none if UCX has no network device). */
static rs_status_t worker_blob(rs_ucx_ctx_t *uc, rs_ucx_worker_t *w, size_t full_len)
{
    ucp_worker_attr_t wa = {.field_mask =
                                UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS,
                            .address_flags = UCP_WORKER_ADDRESS_FLAG_NET_ONLY};
    ucs_status_t s = ucp_worker_query(w->worker, &wa);
    const void *net = s == UCS_OK ? wa.address : NULL;
    size_t net_len = s == UCS_OK ? wa.address_length : 0;
    rs_status_t st =
        rs_ucx_addr_pack(uc->place_key, w->addr, full_len, net, net_len, &w->blob, &w->blob_len);
    if (s == UCS_OK)
        ucp_worker_release_address(w->worker, wa.address);
    return st;
}

rs_status_t rs_ucx_worker_set_am(const rs_ucx_worker_t *w, ucp_am_recv_callback_t cb, void *arg)
{
    ucp_am_handler_param_t ap = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = RS_UCX_AM_ID,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = cb,
        .arg = arg,
    };
    ucs_status_t s = ucp_worker_set_am_recv_handler(w->worker, &ap);
    if (s != UCS_OK) {
        rs_error("ucp_worker_set_am_recv_handler failed: %s", ucs_status_string(s));
        return RS_ERR_TRANSPORT;
    }
    return RS_OK;
}

rs_status_t rs_ucx_worker_open(rs_ctx_t *ctx, rs_ucx_ctx_t *uc, rs_ucx_worker_t *w)
{
    /* The generic layer's lock serialises every call into the worker. */
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SERIALIZED,
    };
    rs_ucx_worker_t n = {0};
    ucs_status_t s = ucp_worker_create(uc->context, &wp, &n.worker);
    if (s != UCS_OK) {
        rs_error("ucp_worker_create failed: %s", ucs_status_string(s));
        return RS_ERR_TRANSPORT;
    }
    s = ucp_worker_get_efd(n.worker, &n.efd);
    if (s != UCS_OK) {
        rs_error("ucp_worker_get_efd failed: %s", ucs_status_string(s));
        goto err_destroy_worker;
    }
    size_t full_len;
    s = ucp_worker_get_address(n.worker, &n.addr, &full_len);
    if (s != UCS_OK) {
        rs_error("ucp_worker_get_address failed: %s", ucs_status_string(s));
        goto err_destroy_worker;
    }
    rs_status_t st = worker_blob(uc, &n, full_len);
    if (st != RS_OK) {
        ucp_worker_release_address(n.worker, n.addr);
        ucp_worker_destroy(n.worker);
        return st;
    }
    if (rs_ucx_worker_set_am(&n, uc->am_cb, ctx) != RS_OK)
        goto err_release_address;
    rs_list_init(&n.link);
    *w = n;
    return RS_OK;

err_release_address:
    free(n.blob);
    ucp_worker_release_address(n.worker, n.addr);
err_destroy_worker:
    ucp_worker_destroy(n.worker);
    return RS_ERR_TRANSPORT;
}
