/*
 * Wire pieces shared by the broadcast codecs (broadcast/desc.c, req.c,
 * reply.c, news.c), defined in broadcast/proto.c; nothing else uses them.
 */
#ifndef RS_BROADCAST_PROTO_INT_H
#define RS_BROADCAST_PROTO_INT_H

#include "broadcast/proto.h"

#include "common/cursor.h"

/* Bytes of a's wire form: kind, u16 length, (port), bytes. */
size_t rs_bc_addr_wire_len(const rs_bc_addr_t *a);

/* Writes a's wire form. */
void rs_bc_w_addr(rs_wbuf_t *w, const rs_bc_addr_t *a);

/* Reads and checks an address; a->bytes points into r's buffer. */
rs_status_t rs_bc_r_addr(rs_rbuf_t *r, rs_bc_addr_t *a);

/* A key blob: u16 length, 1..RS_RKEY_BLOB_MAX bytes. */
rs_status_t rs_bc_r_rkey(rs_rbuf_t *r, rs_bc_view_t *v);

/* A bitmap of nblocks bits: the unused high bits of the last byte must be 0. */
rs_status_t rs_bc_r_bitmap(rs_rbuf_t *r, uint32_t nblocks, rs_bc_view_t *v);

/* size, block_size and nblocks agree and are within the protocol's limits. */
rs_status_t rs_bc_check_geometry(uint64_t size, uint32_t block_size, uint32_t nblocks);

#endif
