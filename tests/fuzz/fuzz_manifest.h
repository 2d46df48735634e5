/* The broadcast wire-format fuzz target and its seed corpus (libFuzzer and the replay program). */
#ifndef RS_TESTS_FUZZ_MANIFEST_H
#define RS_TESTS_FUZZ_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

/*
 * Input: one mode byte, then the bytes the mode decodes.
 *   0: a descriptor
 *   1: a request (control message)
 *   2: a reply as found in a reply slot
 *   3: a reply with its metadata checksum recomputed first, so hostile lists reach the parser
 *   4: a news message
 *   5: a destroy notice
 */
enum {
    FUZZ_DESC = 0,
    FUZZ_REQ = 1,
    FUZZ_REPLY = 2,
    FUZZ_REPLY_RESEALED = 3,
    FUZZ_NEWS = 4,
    FUZZ_DESTROY = 5,
    FUZZ_MANIFEST_MODES = 6,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Calls emit once per seed input (valid encodings of every format, mode byte first). */
void manifest_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user);

#endif
