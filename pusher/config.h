/* The pusher's configuration check (pusher/config.c). */
#ifndef RS_PUSHER_CONFIG_H
#define RS_PUSHER_CONFIG_H

#include <rshuffle/pusher.h>

/*
 * RS_OK when cfg is one rs_pusher_open can use: every field of the table
 * in its variable's range, min_buf not 0, and the pool holding 4 buffers
 * (pool_bytes >= 4 * (buf_len + RS_PBUF_HEAD_ROOM)). Else RS_ERR_CONFIG,
 * logged naming the field and its variable.
 */
rs_status_t rs_push_config_check(const rs_pusher_config_t *cfg);

/*
 * A partition's buffer a task's pool is grown to hold, bytes (rs_push_pool_for):
 * 16 KiB, since the pool is resident only as far as it is used (pool.c).
 */
#define RS_PUSH_PART_GROW 16384u

/*
 * The pool a task of n_partitions partitions pushes from: pool_bytes,
 * doubled while half of it would give a partition's buffer less than
 * RS_PUSH_PART_GROW bytes, up to pool_max (never below pool_bytes).
 */
size_t rs_push_pool_for(const rs_pusher_config_t *cfg, uint32_t n_partitions);

#endif
