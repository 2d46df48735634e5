/* The frame fuzz target and its seed corpus, shared by libFuzzer and the replay program. */
#ifndef RS_TESTS_FUZZ_FRAME_H
#define RS_TESTS_FUZZ_FRAME_H

#include <stddef.h>
#include <stdint.h>

/*
 * Input: one mode byte, then the bytes the mode reads.
 *   0: one frame: parse, verify, decode
 *   1: one frame with its checksum recomputed first, so hostile payloads reach the decompressors
 *   2: an extent of back-to-back frames, walked and decoded
 *   3: a bare codec block: codec byte, raw length (u16 LE), compressed bytes
 */
enum { FUZZ_FRAME = 0, FUZZ_FRAME_RESEALED = 1, FUZZ_EXTENT = 2, FUZZ_BLOCK = 3, FUZZ_MODES = 4 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Calls emit once per seed input (valid frames, extents and blocks of every codec). */
void frame_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user);

#endif
