/* rs_shuffle_drop: ask every worker to free a shuffle's storage. */
#include "pusher/internal.h"

#include "common/clock.h"
#include "common/log.h"
#include "shuffle/name.h"

#include <stdlib.h>
#include <string.h>

typedef struct drop_state {
    int answered;
    rs_status_t status;
} drop_state_t;

static void on_drop_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    (void)ep;
    drop_state_t *d = arg;
    rs_status_t carried;
    d->status = rs_sproto_status_decode(data, len, RS_SMSG_DROP_REPLY, &carried);
    if (d->status == RS_OK)
        d->status = carried;
    d->answered = 1;
}

rs_status_t rs_shuffle_drop(const rs_shuffle_desc_t *desc, const rs_config_t *tcfg)
{
    if (desc == NULL || (desc->n_workers > 0 && desc->workers == NULL))
        return RS_ERR_INVALID;
    rs_ctx_t *ctx;
    rs_status_t s = rs_ctx_create(tcfg, &ctx), first = RS_OK;
    if (s != RS_OK)
        return s;
    drop_state_t d;
    rs_set_msg_handler(ctx, RS_SMSG_DROP_REPLY, on_drop_reply, &d);
    for (uint32_t i = 0; i < desc->n_workers; i++) {
        rs_ep_t *ep;
        s = rs_sproto_name_connect(ctx, desc->workers[i], &ep);
        if (s == RS_OK) {
            d.answered = 0;
            d.status = RS_ERR_TIMEOUT;
            rs_smsg_drop_t m = {.status = RS_OK, .shuffle_id = desc->shuffle_id};
            uint8_t buf[RS_SPROTO_DROP_LEN];
            size_t len;
            s = rs_sproto_drop_encode(&m, buf, sizeof(buf), &len);
            if (s == RS_OK)
                s = rs_msg_send(ep, RS_SMSG_DROP, buf, len, NULL, NULL);
            uint64_t deadline =
                rs_now_coarse_ns() + RS_MS_TO_NS(rs_ctx_config(ctx)->connect_timeout_ms);
            while (s == RS_OK && !d.answered && rs_ep_status(ep) == RS_OK &&
                   rs_now_coarse_ns() < deadline)
                rs_wait(ctx, 10);
            if (s == RS_OK)
                s = d.status;
            rs_ep_close(ep);
        }
        if (s != RS_OK) {
            /* By index: a blob name runs to kilobytes */
            rs_warn("drop of shuffle %u at worker %u: %s", desc->shuffle_id, i, rs_strerror(s));
            if (first == RS_OK)
                first = s;
        }
    }
    rs_ctx_destroy(ctx);
    return first;
}
