/* The shuffle wire-message fuzz target and its seed corpus (libFuzzer and the replay program). */
#ifndef RS_TESTS_FUZZ_SPROTO_H
#define RS_TESTS_FUZZ_SPROTO_H

#include <stddef.h>
#include <stdint.h>

/*
 * Input: one mode byte, then the bytes the mode decodes. Mode % 32 picks
 * the message type 16 + mode % 32 (16..32); 31 picks a partition snapshot
 * (17..30 nothing).
 */
#define FUZZ_SPROTO_SNAP 31u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Calls emit once per seed input (valid encodings of every message, mode byte first). */
void sproto_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user);

#endif
