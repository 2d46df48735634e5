/* The front-door fuzz target and its seed corpus, shared by libFuzzer and the replay program. */
#ifndef RS_TESTS_FUZZ_HELLO_H
#define RS_TESTS_FUZZ_HELLO_H

#include <stddef.h>
#include <stdint.h>

/*
 * Input: one mode byte, then the bytes a peer sent.
 *   0: a hello, as a listener receives it (token checked against "rshuffle")
 *   1: a reply, as a connecting client receives it
 */
enum { FUZZ_FRONT_HELLO = 0, FUZZ_FRONT_REPLY = 1, FUZZ_FRONT_MODES = 2 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Calls emit once per seed input (valid hellos and replies, and near misses). */
void hello_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user);

#endif
