/* A hand-driven pusher for worker unit tests (lb_wclient.h). */
#include "tests/loopback/lb_wclient.h"
#include "tests/loopback/lb_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static void on_msg(void *arg, rs_ep_t *ep, const void *data, size_t len, unsigned type)
{
    (void)ep;
    lbw_client_t *c = arg;
    if (len > LBW_MSG_CAP)
        len = LBW_MSG_CAP;
    memcpy(c->last[type], data, len);
    c->last_len[type] = len;
    c->got[type]++;
}

#define LBW_HANDLER(t)                                                       \
    static void on_##t(void *arg, rs_ep_t *ep, const void *data, size_t len) \
    {                                                                        \
        on_msg(arg, ep, data, len, t);                                       \
    }
LBW_HANDLER(RS_SMSG_ATTACH_REPLY)
LBW_HANDLER(RS_SMSG_GRANT)
LBW_HANDLER(RS_SMSG_NACK)
LBW_HANDLER(RS_SMSG_COMMIT_REPLY)
LBW_HANDLER(RS_SMSG_RECLAIM)
LBW_HANDLER(RS_SMSG_DROP_REPLY)

void lbw_open(lbw_client_t *c, uint16_t port)
{
    memset(c, 0, sizeof(*c));
    rs_config_t cfg;
    assert_int_equal(rs_config_init(&cfg), RS_OK);
    cfg.progress_thread = 0;
    assert_int_equal(rs_ctx_create(&cfg, &c->ctx), RS_OK);
    rs_set_msg_handler(c->ctx, RS_SMSG_ATTACH_REPLY, on_RS_SMSG_ATTACH_REPLY, c);
    rs_set_msg_handler(c->ctx, RS_SMSG_GRANT, on_RS_SMSG_GRANT, c);
    rs_set_msg_handler(c->ctx, RS_SMSG_NACK, on_RS_SMSG_NACK, c);
    rs_set_msg_handler(c->ctx, RS_SMSG_COMMIT_REPLY, on_RS_SMSG_COMMIT_REPLY, c);
    rs_set_msg_handler(c->ctx, RS_SMSG_RECLAIM, on_RS_SMSG_RECLAIM, c);
    rs_set_msg_handler(c->ctx, RS_SMSG_DROP_REPLY, on_RS_SMSG_DROP_REPLY, c);
    assert_int_equal(rs_mem_alloc(c->ctx, LBW_BUF_LEN, RS_MEM_LOCAL, &c->mr), RS_OK);
    assert_int_equal(rs_connect(c->ctx, "127.0.0.1", port, &c->ep), RS_OK);
}

void lbw_close(lbw_client_t *c)
{
    rs_rkey_destroy(c->arena);
    rs_ep_close(c->ep);
    rs_mem_free(c->mr);
    rs_ctx_destroy(c->ctx);
    memset(c, 0, sizeof(*c));
}

int lbw_wait(lbw_client_t *c, unsigned type, unsigned before, int ms)
{
    uint64_t end = lb_now_ms() + (uint64_t)ms;
    while (c->got[type] <= before && lb_now_ms() < end)
        rs_wait(c->ctx, 5);
    return c->got[type] > before;
}

static void send_msg(lbw_client_t *c, unsigned type, const void *buf, size_t len)
{
    assert_int_equal(rs_msg_send(c->ep, type, buf, len, NULL, NULL), RS_OK);
}

rs_status_t lbw_attach(lbw_client_t *c, uint32_t shuffle_id, uint32_t n_partitions, uint32_t map_id,
                       uint32_t attempt)
{
    rs_smsg_attach_t m = {.status = RS_OK,
                          .role = RS_ROLE_PUSHER,
                          .shuffle_id = shuffle_id,
                          .n_partitions = n_partitions,
                          .map_id = map_id,
                          .attempt = attempt,
                          .replicas = 1};
    uint8_t buf[RS_SPROTO_ATTACH_LEN];
    size_t len;
    assert_int_equal(rs_sproto_attach_encode(&m, buf, sizeof(buf), &len), RS_OK);
    unsigned before = c->got[RS_SMSG_ATTACH_REPLY];
    send_msg(c, RS_SMSG_ATTACH, buf, len);
    assert_true(lbw_wait(c, RS_SMSG_ATTACH_REPLY, before, 2000));
    rs_smsg_attach_reply_t r;
    assert_int_equal(rs_sproto_attach_reply_decode(c->last[RS_SMSG_ATTACH_REPLY],
                                                   c->last_len[RS_SMSG_ATTACH_REPLY], &r),
                     RS_OK);
    if (r.status != RS_OK)
        return r.status;
    c->shuffle_id = shuffle_id;
    c->map_id = map_id;
    c->attempt = attempt;
    c->arena_len = r.arena_len;
    rs_rkey_destroy(c->arena);
    c->arena = NULL;
    assert_int_equal(rs_rkey_unpack(c->ep, r.rkey, r.rkey_len, &c->arena), RS_OK);
    return RS_OK;
}

rs_status_t lbw_grant(lbw_client_t *c, const rs_grant_want_t *wants, uint32_t n, rs_grant_t *out)
{
    static uint32_t req_id;
    uint8_t buf[LBW_MSG_CAP];
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(rs_sproto_grant_want_put(buf, sizeof(buf), i, &wants[i]), RS_OK);
    rs_smsg_grant_req_t m = {.status = RS_OK, .req_id = ++req_id, .n = n};
    size_t len;
    assert_int_equal(rs_sproto_grant_req_encode(&m, buf, sizeof(buf), &len), RS_OK);
    unsigned before = c->got[RS_SMSG_GRANT];
    send_msg(c, RS_SMSG_GRANT_REQ, buf, len);
    assert_true(lbw_wait(c, RS_SMSG_GRANT, before, 2000));
    rs_smsg_grant_t r;
    assert_int_equal(rs_sproto_grant_decode(c->last[RS_SMSG_GRANT], c->last_len[RS_SMSG_GRANT], &r),
                     RS_OK);
    if (r.status != RS_OK)
        return r.status;
    assert_int_equal(r.req_id, m.req_id);
    assert_int_equal(r.n, n);
    for (uint32_t i = 0; i < n; i++)
        out[i] = rs_sproto_grant_get(&r, i);
    return RS_OK;
}

size_t lbw_frame(lbw_client_t *c, uint32_t partition, uint64_t seq, const void *payload, size_t len,
                 uint64_t *checksum_p, size_t *at_p)
{
    rs_frame_ids_t ids = {.shuffle_id = c->shuffle_id,
                          .map_id = c->map_id,
                          .attempt = c->attempt,
                          .partition = partition,
                          .seq = seq};
    uint8_t *base = rs_mr_addr(c->mr);
    size_t at = c->buf_used;
    size_t flen;
    assert_int_equal(
        rs_frame_encode(RS_CODEC_NONE, 0, &ids, payload, len, base + at, LBW_BUF_LEN - at, &flen),
        RS_OK);
    rs_frame_t f;
    assert_int_equal(rs_frame_parse(base + at, flen, &f), RS_OK);
    c->buf_used = at + rs_sproto_round(flen);
    assert_true(c->buf_used <= LBW_BUF_LEN);
    *checksum_p = f.checksum;
    *at_p = at;
    return flen;
}

static void put_cb(void *arg, rs_status_t status)
{
    lbw_client_t *c = arg;
    if (status == RS_OK)
        c->puts_done++;
    else
        c->puts_failed++;
}

rs_status_t lbw_put_batch(lbw_client_t *c, size_t at, size_t len, const rs_grant_t *g, uint64_t in)
{
    int before = c->puts_done + c->puts_failed;
    uint8_t *base = rs_mr_addr(c->mr);
    rs_status_t st = rs_put_notify(c->ep, base + at, len, c->mr, c->arena, g->off + in,
                                   rs_imm_make(g->slot, in), put_cb, c);
    if (st != RS_OK)
        return st;
    uint64_t end = lb_now_ms() + 2000;
    while (c->puts_done + c->puts_failed == before && lb_now_ms() < end)
        rs_wait(c->ctx, 5);
    return c->puts_done + c->puts_failed > before ? RS_OK : RS_ERR_TIMEOUT;
}

rs_status_t lbw_commit(lbw_client_t *c, const rs_commit_entry_t *e, uint32_t n,
                       uint64_t total_batches, int wait_ms)
{
    uint8_t buf[LBW_MSG_CAP];
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(rs_sproto_commit_put(buf, sizeof(buf), i, &e[i]), RS_OK);
    rs_smsg_commit_t m = {.status = RS_OK, .n = n, .last = 1, .total_batches = total_batches};
    size_t len;
    assert_int_equal(rs_sproto_commit_encode(&m, buf, sizeof(buf), &len), RS_OK);
    unsigned before = c->got[RS_SMSG_COMMIT_REPLY];
    send_msg(c, RS_SMSG_COMMIT, buf, len);
    if (!lbw_wait(c, RS_SMSG_COMMIT_REPLY, before, wait_ms))
        return RS_ERR_TIMEOUT;
    rs_status_t st;
    assert_int_equal(rs_sproto_status_decode(c->last[RS_SMSG_COMMIT_REPLY],
                                             c->last_len[RS_SMSG_COMMIT_REPLY],
                                             RS_SMSG_COMMIT_REPLY, &st),
                     RS_OK);
    return st;
}

rs_smsg_nack_t lbw_last_nack(const lbw_client_t *c)
{
    rs_smsg_nack_t n;
    assert_true(c->got[RS_SMSG_NACK] > 0);
    assert_int_equal(rs_sproto_nack_decode(c->last[RS_SMSG_NACK], c->last_len[RS_SMSG_NACK], &n),
                     RS_OK);
    return n;
}
