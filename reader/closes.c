/*
 * READ_CLOSEs held back and sent together: a session reading thousands of
 * small partitions from one worker closed a snapshot per partition, one
 * message each between the reads. Queued per connection, they go out in a
 * burst (the queue full, before any other message on that connection, at
 * the session's next call once the oldest waited RS_READ_CLOSE_HOLD_MS,
 * and at session close), so the worker takes them in a row (docs/shuffle.md,
 * "Read path"). A snapshot stays pinned until its close is sent: at most
 * RS_READ_CLOSE_BATCH per connection.
 */
#include "reader/internal.h"

#include "common/assert.h"
#include "common/clock.h"
#include "shuffle/proto.h"

void rs_rd_close_send(rs_ep_t *ep, uint32_t snap_id)
{
    rs_smsg_read_close_t m = {.status = RS_OK, .snap_id = snap_id};
    uint8_t buf[RS_SPROTO_READ_CLOSE_LEN];
    size_t len;
    if (rs_sproto_read_close_encode(&m, buf, sizeof(buf), &len) == RS_OK)
        rs_msg_send(ep, RS_SMSG_READ_CLOSE, buf, len, NULL, NULL);
}

void rs_rd_closes_flush(rconn_t *c)
{
    uint32_t n = c->n_closes;
    c->n_closes = 0;
    if (n == 0 || c->ep == NULL || rs_ep_status(c->ep) != RS_OK)
        return; /* a lost connection took its snapshots with it */
    for (uint32_t i = 0; i < n; i++)
        rs_rd_close_send(c->ep, c->closes[i]);
}

void rs_rd_closes_add(rconn_t *c, uint32_t snap_id)
{
    RS_ASSERT(c->n_closes < RS_READ_CLOSE_BATCH);
    if (c->n_closes == 0)
        c->closes_since = rs_now_coarse_ns();
    c->closes[c->n_closes++] = snap_id;
    if (c->n_closes == RS_READ_CLOSE_BATCH)
        rs_rd_closes_flush(c);
}

void rs_rd_closes_due(rs_reader_session_t *s)
{
    uint64_t now = 0;
    for (uint32_t w = 0; s->conns != NULL && w < s->desc.n_workers; w++) {
        rconn_t *c = &s->conns[w];
        if (c->n_closes == 0)
            continue;
        if (now == 0)
            now = rs_now_coarse_ns();
        if (now - c->closes_since >= RS_MS_TO_NS(RS_READ_CLOSE_HOLD_MS))
            rs_rd_closes_flush(c);
    }
}

void rs_rd_closes_flush_all(rs_reader_session_t *s)
{
    for (uint32_t w = 0; s->conns != NULL && w < s->desc.n_workers; w++)
        rs_rd_closes_flush(&s->conns[w]);
}
