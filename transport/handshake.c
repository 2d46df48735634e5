/*
 * The job-token handshake over internal message types. The client sends
 * HELLO (magic, version, token, its process identity); the server answers
 * WELCOME (its identity) and the endpoint becomes READY, or REJECT and the
 * endpoint is dropped. Nothing of the user's (messages, notifications,
 * rkeys) flows before READY. The identities let each side watch a peer on
 * the same host (peer_alive.c).
 */
#include "transport/internal.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/token.h"

#include <string.h>

#define RS_HS_MAGIC   0x53485352u /* "RSHS" */
#define RS_HS_VERSION 1

typedef struct rs_hs_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t token_len;
} rs_hs_hdr_t;

/* HELLO: header, token, identity. WELCOME and REJECT: header, identity. */
static size_t hs_build(unsigned char *buf, const char *token)
{
    rs_hs_hdr_t hdr = {RS_HS_MAGIC, RS_HS_VERSION, (uint16_t)(token ? strlen(token) : 0)};
    rs_proc_id_t id;
    rs_tp_proc_identity(&id);
    memcpy(buf, &hdr, sizeof(hdr));
    if (hdr.token_len > 0)
        memcpy(buf + sizeof(hdr), token, hdr.token_len);
    memcpy(buf + sizeof(hdr) + hdr.token_len, &id, sizeof(id));
    return sizeof(hdr) + hdr.token_len + sizeof(id);
}

void rs_tp_hs_start_client(rs_ep_t *ep)
{
    unsigned char buf[sizeof(rs_hs_hdr_t) + RS_JOB_TOKEN_MAX + sizeof(rs_proc_id_t)];
    size_t len = hs_build(buf, ep->ctx->cfg.job_token);
    rs_status_t st = rs_tp_msg_post(ep, RS__MSG_HELLO, buf, len, NULL, NULL);
    if (st != RS_OK)
        rs_tp_ep_kill(ep, st);
}

int rs_tp_hs_parse(const void *data, size_t len, const char **token_p, uint16_t *token_len_p,
                   rs_proc_id_t *id_p)
{
    rs_hs_hdr_t hdr;
    if (len < sizeof(hdr))
        return 0;
    memcpy(&hdr, data, sizeof(hdr));
    if (hdr.magic != RS_HS_MAGIC || hdr.version != RS_HS_VERSION ||
        sizeof(hdr) + hdr.token_len + sizeof(*id_p) != len)
        return 0;
    memcpy(id_p, (const unsigned char *)data + sizeof(hdr) + hdr.token_len, sizeof(*id_p));
    id_p->boot_id[sizeof(id_p->boot_id) - 1] = '\0';
    *token_p = (const char *)data + sizeof(hdr);
    *token_len_p = hdr.token_len;
    return 1;
}

static void hs_server_hello(rs_ep_t *ep, const void *data, size_t len)
{
    rs_ctx_t *ctx = ep->ctx;
    const rs_config_t *cfg = &ctx->cfg;
    const char *token;
    uint16_t token_len;
    rs_proc_id_t peer;
    unsigned char reply[sizeof(rs_hs_hdr_t) + sizeof(rs_proc_id_t)];
    size_t mine = strlen(cfg->job_token); /* compared in constant time, as the front door does */

    if (ep->state != RS_EP_HANDSHAKE || !ep->accepted) {
        rs_warn("endpoint %p: unexpected HELLO (ignored)", (void *)ep);
        return;
    }
    size_t reply_len = hs_build(reply, NULL);
    if (!rs_tp_hs_parse(data, len, &token, &token_len, &peer) ||
        !rs_token_equal((const unsigned char *)token, token_len, cfg->job_token, mine)) {
        rs_warn("refusing a peer: its HELLO carries another job token");
        rs_tp_msg_post(ep, RS__MSG_REJECT, reply, reply_len, NULL, NULL);
        /* Dead for the user; the REJECT still goes out. The peer closes on
         * receipt; if it does not, the reap deadline drops the endpoint. */
        ep->state = RS_EP_DEAD;
        ep->status = RS_ERR_AUTH;
        RS_EP_PRIV(ep)->reap_ns = rs_now_coarse_ns() + RS_MS_TO_NS(cfg->connect_timeout_ms);
        return;
    }
    rs_status_t st = rs_tp_msg_post(ep, RS__MSG_WELCOME, reply, reply_len, NULL, NULL);
    if (st != RS_OK) {
        rs_tp_ep_kill(ep, st);
        return;
    }
    rs_tp_peer_watch(ep, &peer);
    ep->state = RS_EP_READY;
    RS_EP_PRIV(ep)->reap_ns = 0;
    RS_EP_PRIV(ep)->told = 1;
    rs_tp_ep_tell_user(ep, RS_OK);
}

static void hs_client_reply(rs_ep_t *ep, unsigned type, const void *data, size_t len)
{
    const char *token;
    uint16_t token_len;
    rs_proc_id_t peer;
    if (ep->state != RS_EP_HANDSHAKE || !RS_EP_PRIV(ep)->hs_client ||
        ep->hs_result != RS_ERR_BUSY) {
        rs_warn("endpoint %p: unexpected handshake reply (ignored)", (void *)ep);
        return;
    }
    if (!rs_tp_hs_parse(data, len, &token, &token_len, &peer)) {
        rs_error("endpoint %p: malformed handshake reply", (void *)ep);
        rs_tp_ep_kill(ep, RS_ERR_PROTOCOL);
        return;
    }
    if (type == RS__MSG_WELCOME) {
        rs_tp_peer_watch(ep, &peer);
        ep->state = RS_EP_READY;
        ep->hs_result = RS_OK;
        return;
    }
    ep->hs_result = RS_ERR_AUTH;
    rs_tp_ep_kill(ep, RS_ERR_AUTH);
}

void rs_tp_hs_recv(rs_ep_t *ep, unsigned type, const void *data, size_t len)
{
    switch (type) {
        case RS__MSG_HELLO:
            hs_server_hello(ep, data, len);
            break;
        case RS__MSG_WELCOME:
        case RS__MSG_REJECT:
            hs_client_reply(ep, type, data, len);
            break;
        default:
            rs_warn("endpoint %p: unknown internal message type %u (ignored)", (void *)ep, type);
            break;
    }
}
