/* Seeds for fuzz_handshake: HELLO-shaped messages (magic "RSHS", version 1) with tokens of several
 * lengths. */
#include <string.h>

#include "fuzz_handshake.h"
#include "transport/internal.h"

void handshake_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user)
{
    static const char *const tokens[] = {
        "", "rshuffle", "job-42",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"};
    for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
        uint8_t seed[8 + 64 + sizeof(rs_proc_id_t)];
        uint32_t magic = 0x53485352u; /* "RSHS" */
        uint16_t version = 1, len = (uint16_t)strlen(tokens[i]);
        memcpy(seed, &magic, 4);
        memcpy(seed + 4, &version, 2);
        memcpy(seed + 6, &len, 2);
        memcpy(seed + 8, tokens[i], len);
        rs_proc_id_t id;
        memset(&id, 0, sizeof(id));
        id.pid = 1000 + (uint32_t)i;
        strcpy(id.boot_id, "6f1c9a2e-0b4d-4e8f-9a7b-3c2d1e0f9a8b");
        memcpy(seed + 8 + len, &id, sizeof(id));
        emit(user, seed, 8 + len + sizeof(id));
    }
}
