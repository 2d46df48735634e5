/*
 * libFuzzer target for the UCX backend's active-message headers
 * (transport/ucx/amhdr.c): bytes from a peer, decoded before anything is
 * looked up by them. Besides memory safety it checks the contract: RS_OK,
 * RS_ERR_PROTOCOL or RS_ERR_BAD_LENGTH only; nothing written on an error;
 * an accepted header has its kind's length, a known kind and known flags,
 * and packs back to exactly its input (one encoding per header).
 */
#include <string.h>

#include "fuzz_amhdr.h"
#include "fuzz_check.h"
#include "transport/ucx/amhdr.h"

#define IN_MAX 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > IN_MAX)
        return 0;
    uint8_t buf[IN_MAX];
    memcpy(buf, data, size);
    rs_ucx_hdr_t h, h0;
    rs_ucx_rma_hdr_t rh, rh0;
    int rma = 7;
    memset(&h, 0xa5, sizeof(h));
    memset(&rh, 0xa5, sizeof(rh));
    h0 = h;
    rh0 = rh;
    rs_status_t st = rs_ucx_am_hdr_decode(buf, size, &h, &rh, &rma);
    CHECK(st == RS_OK || st == RS_ERR_PROTOCOL || st == RS_ERR_BAD_LENGTH);
    if (st != RS_OK) {
        CHECK(rma == 7 && memcmp(&h, &h0, sizeof(h)) == 0 && memcmp(&rh, &rh0, sizeof(rh)) == 0);
        return 0;
    }
    CHECK(size > 0 && buf[0] == (rma ? rh.kind : h.kind));
    if (rma) {
        CHECK(size == RS_UCX_RMA_HDR_LEN && memcmp(&h, &h0, sizeof(h)) == 0);
        CHECK(rh.kind >= RS_UCX_PUT && rh.kind <= RS_UCX_FLUSH_REP);
        CHECK((rh.flags & ~(RS_UCX_F_NOTIFY | RS_UCX_F_REFUSED)) == 0);
        rs_ucx_rma_wire_t w;
        rs_ucx_rma_hdr_pack(&rh, &w);
        CHECK(memcmp(w.b, buf, size) == 0);
    } else {
        CHECK(rma == 0 && size == RS_UCX_HDR_LEN && memcmp(&rh, &rh0, sizeof(rh)) == 0);
        CHECK(h.kind >= RS_UCX_CONN && h.kind <= RS_UCX_BYE);
        rs_ucx_hdr_wire_t w;
        rs_ucx_hdr_pack(&h, &w);
        CHECK(memcmp(w.b, buf, size) == 0);
    }
    return 0;
}
