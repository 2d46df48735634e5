/* The remote-key blob fuzz target and its seed corpus (libFuzzer and the replay program). */
#ifndef RS_TESTS_FUZZ_RKEY_H
#define RS_TESTS_FUZZ_RKEY_H

#include <stddef.h>
#include <stdint.h>

/*
 * Input: one mode byte, then a blob. Mode bit 0 set: the blob's checksum
 * field is recomputed before parsing, as a peer that knows the format would
 * (the checksum guards against damage, not against a hostile peer), so the
 * checks behind it are reached too. Mode bit 1 picks the backend id parsed
 * for (UCX or verbs).
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Calls emit once per seed input (valid blobs of both backends, mode byte first). */
void rkey_corpus(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user);

#endif
