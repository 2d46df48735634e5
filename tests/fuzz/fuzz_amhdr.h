/* The UCX active-message header fuzz target and its seed corpus (libFuzzer and the replay program).
 */
#ifndef RS_TESTS_FUZZ_AMHDR_H
#define RS_TESTS_FUZZ_AMHDR_H

#include <stddef.h>
#include <stdint.h>

/* Input: the header bytes of an active message, as UCX hands them to the handler. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Calls emit once per seed input (a header of every kind, both sizes). */
void amhdr_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user);

#endif
