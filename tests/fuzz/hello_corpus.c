/* Seed inputs for fuzz_hello: valid hellos and replies, and near misses. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_hello.h"
#include "transport/ucx/front_wire.h"

static void emit_mode(void (*emit)(void *, const uint8_t *, size_t), void *user, uint8_t mode,
                      const uint8_t *msg, size_t len)
{
    uint8_t *seed = malloc(len + 1);
    if (seed == NULL)
        return;
    seed[0] = mode;
    memcpy(seed + 1, msg, len);
    emit(user, seed, len + 1);
    free(seed);
}

void hello_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user)
{
    static const char *tokens[] = {
        "", "rshuffle", "rshufflf", "intruder-1",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"};
    uint8_t buf[RS_FRONT_REPLY_MAX];
    for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
        size_t n = rs_ucx_front_hello_build(buf, tokens[i], strlen(tokens[i]), 0);
        emit_mode(emit, user, FUZZ_FRONT_HELLO, buf, n);
        emit_mode(emit, user, FUZZ_FRONT_HELLO, buf, n > 3 ? n - 3 : 0); /* truncated */
    }
    /* The 64-byte message that aborted UCX's own listener. */
    uint8_t ucx_killer[64] = {0x2f};
    emit_mode(emit, user, FUZZ_FRONT_HELLO, ucx_killer, sizeof(ucx_killer));
    static const size_t addr_lens[] = {1, 40, 300, RS_ADDR_BLOB_MAX};
    static uint8_t addr[RS_ADDR_BLOB_MAX];
    for (size_t i = 0; i < sizeof(addr); i++)
        addr[i] = (uint8_t)(i * 7);
    for (size_t i = 0; i < sizeof(addr_lens) / sizeof(addr_lens[0]); i++) {
        size_t n = rs_ucx_front_reply_build(buf, RS_FRONT_ACCEPT, addr, addr_lens[i]);
        emit_mode(emit, user, FUZZ_FRONT_REPLY, buf, n);
    }
    size_t n = rs_ucx_front_reply_build(buf, RS_FRONT_REFUSE, NULL, 0);
    emit_mode(emit, user, FUZZ_FRONT_REPLY, buf, n);
    n = rs_ucx_front_reply_build(buf, RS_FRONT_BUSY, NULL, 0);
    emit_mode(emit, user, FUZZ_FRONT_REPLY, buf, n);
}
