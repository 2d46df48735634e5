/*
 * libFuzzer target for the job-token handshake decoder (transport/
 * handshake.c: HELLO, WELCOME, REJECT; bytes from a peer that reached the
 * transport). Besides memory safety it checks the contract: an accepted
 * message is exactly header + token + identity, the token lies inside the
 * input, and the identity's boot id is terminated.
 */
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_handshake.h"
#include "transport/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *token = NULL;
    uint16_t token_len = 0;
    rs_proc_id_t id;
    if (!rs_tp_hs_parse(data, size, &token, &token_len, &id))
        return 0;
    CHECK(size == 8 + (size_t)token_len + sizeof(id));
    CHECK((const uint8_t *)token == data + 8);
    CHECK(memchr(id.boot_id, '\0', sizeof(id.boot_id)) != NULL);
    return 0;
}
