/*
 * A watch on this process's own TCP listeners (watch.c). UCX stops
 * accepting on its TCP listener for good when one of its accepts finds no
 * descriptor left (measured with UCX 1.13: the socket is closed); the
 * worker would then refuse every new peer while it looks alive. Seen from
 * outside: the port no longer listens, or its accept queue stays
 * non-empty.
 */
#ifndef RS_WORKER_WATCH_H
#define RS_WORKER_WATCH_H

#include <stdint.h>

#define RS_WK_WATCH_PORTS 64 /* listeners of the process scanned at most */
#define RS_WK_WATCH_MINE  8  /* of them a worker's context opened, watched at most */

/* A listening TCP socket of this process: its port and accept queue's length. */
typedef struct rs_wk_listening {
    uint16_t port;
    uint32_t waiting;
} rs_wk_listening_t;

/*
 * This process's listening TCP sockets other than skip_port's, at most
 * RS_WK_WATCH_PORTS (in v, their number returned); -1 when it cannot be
 * told (no /proc). Linux only; cannot fail else.
 */
int rs_wk_listening(uint16_t skip_port, rs_wk_listening_t *v);

#endif
