/* fuzz_manifest replayed (replay.h): its seeds and their mutations. */
#include "fuzz_manifest.h"
#include "replay.h"

#define BUF_MAX 4096

const replay_target_t replay_target = {
    .name = "manifest",
    .corpus = manifest_corpus,
    .seeds_min = 20,
    .mutations = 2000,
    .buf_max = BUF_MAX,
    .rng_state = 0x5eedb0a7,
    .mutate = replay_mutate_moded,
};
