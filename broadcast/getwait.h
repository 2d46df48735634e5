/* A getter's bounded wait that drives the node's transport itself (getwait.c). */
#ifndef RS_BROADCAST_GETWAIT_H
#define RS_BROADCAST_GETWAIT_H

#include <stdint.h>

#include "broadcast/internal.h"
#include "broadcast/entry.h"

/*
 * Waits, e->lock held (released while waiting), until something may have
 * changed for e's fetch or until `until` (rs_now_ns clock). While an answer
 * is due soon it runs rs_progress on the node's context from this thread
 * (bounded spin), then sleeps on e->cond. Never from a transport callback.
 */
void rs_bc_entry_wait(rs_bc_entry_t *e, uint64_t until);

#endif
