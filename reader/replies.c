/*
 * The read lane's reply handlers (ATTACH_REPLY, READ_REPLY, SPILL_REPLY):
 * a reply goes to the snapshots asked ahead (ahead.c) or to the request
 * the lane's current session waits for, matched by endpoint, type and tag
 * (a stale reply to a request that timed out is dropped).
 */
#include "reader/internal.h"

#include "shuffle/proto.h"

/* The answer to the attach outstanding on ep, kept for rs_rd_sess_attach_end: 1, else 0. */
static int attach_reply(rs_reader_session_t *s, rs_ep_t *ep, const void *data, size_t len)
{
    if (s->att_conn == NULL || s->att_conn->ep != ep || s->att_got)
        return 0;
    s->att_status = rs_rd_reply_copy(&s->att_reply, &s->att_cap, data, len);
    if (s->att_status == RS_OK)
        s->att_len = len;
    s->att_got = 1;
    return 1;
}

static void on_reply(rs_read_lane_t *l, unsigned type, rs_ep_t *ep, const void *data, size_t len)
{
    rs_reader_session_t *s = l->sess;
    rs_smsg_t m;
    if (s == NULL)
        return; /* between sessions: a late answer to the last one */
    if (rs_rd_sess_ahead_reply(s, ep, type, data, len))
        return;
    if (type == RS_SMSG_ATTACH_REPLY && attach_reply(s, ep, data, len))
        return;
    if (ep != s->want_ep || s->got || type != s->want_type)
        return;
    rs_status_t st = rs_sproto_decode(data, len, type, &m);
    if (st != RS_OK) { /* malformed: the request fails with the decoder's status */
        s->got_status = st;
        s->got_garbled = 1;
        s->got = 1;
        return;
    }
    uint32_t tag = m.type == RS_SMSG_READ_REPLY    ? m.u.read_reply.tag
                   : m.type == RS_SMSG_SPILL_REPLY ? m.u.spill_reply.tag
                                                   : s->want_tag;
    if (tag != s->want_tag)
        return; /* the late answer to a request that timed out */
    s->got_status = rs_rd_reply_copy(&s->reply, &s->reply_cap, data, len);
    if (s->got_status == RS_OK)
        s->reply_len = len;
    s->got = 1;
}

static void on_attach_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    on_reply(arg, RS_SMSG_ATTACH_REPLY, ep, data, len);
}

static void on_read_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    on_reply(arg, RS_SMSG_READ_REPLY, ep, data, len);
}

static void on_spill_reply(void *arg, rs_ep_t *ep, const void *data, size_t len)
{
    on_reply(arg, RS_SMSG_SPILL_REPLY, ep, data, len);
}

rs_status_t rs_rd_lane_handlers(rs_read_lane_t *l)
{
    rs_status_t st = rs_set_msg_handler(l->ctx, RS_SMSG_ATTACH_REPLY, on_attach_reply, l);
    if (st == RS_OK)
        st = rs_set_msg_handler(l->ctx, RS_SMSG_READ_REPLY, on_read_reply, l);
    if (st == RS_OK)
        st = rs_set_msg_handler(l->ctx, RS_SMSG_SPILL_REPLY, on_spill_reply, l);
    return st;
}
