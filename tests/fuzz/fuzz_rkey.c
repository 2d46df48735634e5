/*
 * libFuzzer target for the remote-key blob envelope (transport/rkey_blob.c):
 * bytes from a peer, checked before the backend parses any of them. Besides
 * memory safety it checks the contract: RS_OK or RS_ERR_BAD_RKEY only, and
 * an accepted blob describes exactly its input (length, backend, checksum,
 * a region that does not wrap, known access bits).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_rkey.h"
#include "transport/rkey_blob.h"
#include <rshuffle/transport.h>

#define BLOB_MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size - 1 > BLOB_MAX)
        return 0;
    uint8_t mode = data[0];
    uint8_t blob[BLOB_MAX];
    size_t len = size - 1;
    memcpy(blob, data + 1, len);
    uint16_t backend = (mode & 2) ? RS_RKEY_BACKEND_VERBS : RS_RKEY_BACKEND_UCX;
    if ((mode & 1) && len >= sizeof(rs_rkey_hdr_t)) {
        rs_rkey_hdr_t h;
        memcpy(&h, blob, sizeof(h));
        if (h.be_len == len - sizeof(h)) {
            h.checksum = rs_tp_rkey_blob_checksum(&h, blob + sizeof(h), h.be_len);
            memcpy(blob, &h, sizeof(h));
        }
    }
    rs_rkey_hdr_t hdr;
    memset(&hdr, 0xa5, sizeof(hdr));
    rs_status_t st = rs_tp_rkey_blob_parse(blob, len, backend, &hdr);
    CHECK(st == RS_OK || st == RS_ERR_BAD_RKEY);
    if (st != RS_OK)
        return 0;
    CHECK(len == sizeof(hdr) + hdr.be_len);
    CHECK(memcmp(&hdr, blob, sizeof(hdr)) == 0);
    CHECK(hdr.magic == RS_RKEY_MAGIC && hdr.version == RS_RKEY_VERSION);
    CHECK(hdr.backend == backend);
    CHECK(hdr.base + hdr.len >= hdr.base);
    CHECK((hdr.access & ~(unsigned)RS_MEM_REMOTE_ALL) == 0);
    CHECK(hdr.checksum == rs_tp_rkey_blob_checksum(&hdr, blob + sizeof(hdr), hdr.be_len));
    return 0;
}
