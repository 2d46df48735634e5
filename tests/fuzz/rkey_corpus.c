/* Seeds for fuzz_rkey: valid blobs (mode byte first) for both backends and both modes. */
#include <string.h>

#include "fuzz_rkey.h"
#include "transport/rkey_blob.h"
#include <rshuffle/transport.h>

void rkey_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user)
{
    static const size_t be_lens[] = {0, 8, 37, 120, 512};
    for (unsigned mode = 0; mode < 4; mode++) {
        for (size_t i = 0; i < sizeof(be_lens) / sizeof(be_lens[0]); i++) {
            uint8_t seed[1 + sizeof(rs_rkey_hdr_t) + 512];
            rs_rkey_hdr_t h = {
                .magic = RS_RKEY_MAGIC,
                .version = RS_RKEY_VERSION,
                .backend = (mode & 2) ? RS_RKEY_BACKEND_VERBS : RS_RKEY_BACKEND_UCX,
                .access = i % 2 ? RS_MEM_REMOTE_ALL : 0,
                .be_len = (uint32_t)be_lens[i],
                .base = 0x7f0000000000ull + i * 4096,
                .len = (uint64_t)1 << (12 + i),
            };
            uint8_t *be = seed + 1 + sizeof(h);
            for (size_t k = 0; k < h.be_len; k++)
                be[k] = (uint8_t)(k * 7 + i);
            h.checksum = rs_tp_rkey_blob_checksum(&h, be, h.be_len);
            seed[0] = (uint8_t)mode;
            memcpy(seed + 1, &h, sizeof(h));
            emit(user, seed, 1 + sizeof(h) + h.be_len);
        }
    }
}
