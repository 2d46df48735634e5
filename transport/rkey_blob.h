/* The remote-key blob envelope (rkey_blob.c); tests build foreign blobs with it. */
#ifndef RS_TRANSPORT_RKEY_BLOB_H
#define RS_TRANSPORT_RKEY_BLOB_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/status.h>

/*
 * Layout (host byte order; peers of one job share an architecture):
 *   u32 magic, u16 version, u16 backend id, u32 access, u32 backend length,
 *   u64 base, u64 length, u64 checksum (computed with this field zero),
 *   backend bytes.
 */
#define RS_RKEY_MAGIC   0x59454b52u /* "RKEY" */
#define RS_RKEY_VERSION 1

enum { RS_RKEY_BACKEND_UCX = 1, RS_RKEY_BACKEND_VERBS = 2 };

typedef struct rs_rkey_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t backend;
    uint32_t access;
    uint32_t be_len;
    uint64_t base;
    uint64_t len;
    uint64_t checksum;
} rs_rkey_hdr_t;

_Static_assert(sizeof(rs_rkey_hdr_t) == 40, "rkey blob header has no padding");

/* The checksum a blob's header carries: over the header (checksum zero) and the backend bytes. */
uint64_t rs_tp_rkey_blob_checksum(const rs_rkey_hdr_t *hdr, const void *be, size_t be_len);

/*
 * Checks a peer's blob of len bytes for the backend with id backend: size,
 * magic, version, exact backend length, checksum, backend id, region bounds
 * and access bits. RS_OK and *hdr_p, or RS_ERR_BAD_RKEY (logged at debug).
 * Needs no context: the fuzz target calls it directly.
 */
rs_status_t rs_tp_rkey_blob_parse(const void *blob, size_t len, uint16_t backend,
                                  rs_rkey_hdr_t *hdr_p);

#endif
