/* Seeds for fuzz_amhdr: a packed header of every kind, control and one-sided. */
#include "fuzz_amhdr.h"
#include "transport/ucx/amhdr.h"

void amhdr_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user)
{
    for (unsigned kind = RS_UCX_CONN; kind <= RS_UCX_BYE; kind++) {
        rs_ucx_hdr_wire_t w;
        rs_ucx_hdr_pack(&(rs_ucx_hdr_t){.dst_id = kind == RS_UCX_CONN ? 0 : 0x10002u,
                                        .src_id = 0x30004u,
                                        .arg = kind * 7,
                                        .kind = kind},
                        &w);
        emit(user, w.b, sizeof(w.b));
    }
    for (unsigned kind = RS_UCX_PUT; kind <= RS_UCX_FLUSH_REP; kind++) {
        rs_ucx_rma_wire_t w;
        rs_ucx_rma_hdr_pack(&(rs_ucx_rma_hdr_t){.dst_id = 0x10002u,
                                                .src_id = 0x30004u,
                                                .kind = (uint16_t)kind,
                                                .flags = kind == RS_UCX_PUT       ? RS_UCX_F_NOTIFY
                                                         : kind == RS_UCX_GET_REP ? RS_UCX_F_REFUSED
                                                                                  : 0,
                                                .op_id = kind * 13,
                                                .raddr = 0x7f0000001000ull + kind,
                                                .value = (uint64_t)kind << 40},
                            &w);
        emit(user, w.b, sizeof(w.b));
    }
}
