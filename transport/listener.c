/* Listeners: accept connections on host:port through the backend's CM. */
#include "transport/internal.h"

#include "common/log.h"

#include <stdlib.h>

rs_status_t rs_listen(rs_ctx_t *ctx, const char *host, uint16_t port, rs_listener_t **listener_p)
{
    if (ctx == NULL || host == NULL || listener_p == NULL) {
        rs_error("rs_listen: invalid argument");
        return RS_ERR_INVALID;
    }
    rs_listener_t *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        rs_error("out of memory allocating a listener");
        return RS_ERR_NOMEM;
    }
    l->ctx = ctx;
    rs_tp_lock(ctx);
    rs_status_t st = ctx->destroying ? RS_ERR_STATE : ctx->be_ops->listen(ctx, l, host, port);
    if (st == RS_OK)
        rs_list_add_tail(&ctx->listeners, &l->link);
    rs_tp_unlock(ctx);
    if (st != RS_OK) {
        free(l);
        return st;
    }
    *listener_p = l;
    return RS_OK;
}

uint16_t rs_listener_port(const rs_listener_t *listener)
{
    if (listener == NULL)
        return 0;
    return listener->port;
}

void rs_listener_destroy(rs_listener_t *listener)
{
    if (listener == NULL)
        return;
    rs_ctx_t *ctx = listener->ctx;
    rs_tp_lock(ctx);
    ctx->be_ops->listener_close(listener);
    rs_list_del(&listener->link);
    rs_tp_unlock(ctx);
    free(listener);
}
