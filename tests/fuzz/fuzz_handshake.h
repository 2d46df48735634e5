/* The transport handshake fuzz target and its seed corpus (libFuzzer and the replay program). */
#ifndef RS_TESTS_FUZZ_HANDSHAKE_H
#define RS_TESTS_FUZZ_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

/* Input: the bytes of a HELLO, WELCOME or REJECT message as a peer sends them. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Calls emit once per seed input (valid handshake messages, tokens of several lengths). */
void handshake_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user);

#endif
