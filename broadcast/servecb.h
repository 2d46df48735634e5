/* Serving requests inside the transport callback, with reserved staging slots (servecb.c). */
#ifndef RS_BROADCAST_SERVECB_H
#define RS_BROADCAST_SERVECB_H

#include <stddef.h>

#include "broadcast/internal.h"
#include "broadcast/source.h"

/*
 * Serves a request (GET, UPDATE, ANNOUNCE of a multi-block object) at once,
 * from the transport callback that delivered it, when that needs no memory
 * registration: the staging slots its replies need (the manifest, the long
 * polls an announcement releases) are free now. Returns 0, having done
 * nothing, otherwise, or when earlier requests still wait in the service
 * thread's queue (requests of one endpoint are served in order): queue it.
 */
int rs_bc_src_serve_cb(rs_bcast_node_t *node, rs_bc_epinfo_t *info, const rs_bc_req_t *q);

#endif
