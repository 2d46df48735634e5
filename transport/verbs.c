/*
 * Placeholder for the verbs backend (the real one lives on branch `verbs`
 * and replaces this file): every context open fails cleanly, so
 * RSHUFFLE_TRANSPORT=verbs reports RS_ERR_UNSUPPORTED and auto falls back
 * to UCX.
 */
#include "transport/backend.h"

#include "common/log.h"

static rs_status_t verbs_ctx_open(rs_ctx_t *ctx)
{
    (void)ctx;
    rs_error("the verbs backend is not built into this library");
    return RS_ERR_UNSUPPORTED;
}

const rs_backend_ops_t rs_verbs_ops = {
    .name = "verbs",
    .ctx_open = verbs_ctx_open,
};
