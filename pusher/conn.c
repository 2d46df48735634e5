/*
 * A push lane's connections closed (pusher/lane.c keeps them): a worker of
 * this host found gone is told to the client's loss set (shuffle/loss.c)
 * and marked for the lane's renewal. Below lane.c and lost.c, which both
 * close or report connections.
 */
#include "pusher/internal.h"

/* Closes conn's endpoint; note: tell the client when its worker's process is gone. */
void rs_push_conn_drop(rs_push_conn_t *conn, int note)
{
    if (conn->ep != NULL && rs_ep_peer_exited(conn->ep)) {
        conn->exited = 1;
        if (note)
            rs_lane_loss_note(&conn->lane->base, conn->addr, conn->made);
    }
    if (conn->ep != NULL)
        rs_ep_close(conn->ep); /* also releases the rkey unpacked for it */
    conn->ep = NULL;
    conn->rkey = NULL;
}

void rs_push_lane_conn_close(rs_push_conn_t *conn)
{
    rs_push_conn_drop(conn, 1);
}

void rs_push_lane_conn_lost(rs_push_conn_t *conn)
{
    if (conn != NULL && conn->ep != NULL && rs_ep_peer_exited(conn->ep))
        rs_lane_loss_note(&conn->lane->base, conn->addr, conn->made);
}
