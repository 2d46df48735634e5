/* fuzz_sproto replayed (replay.h): its seeds and their mutations. */
#include "fuzz_sproto.h"
#include "replay.h"

#define BUF_MAX 4096

const replay_target_t replay_target = {
    .name = "sproto",
    .corpus = sproto_corpus,
    .seeds_min = 20,
    .mutations = 3000,
    .buf_max = BUF_MAX,
    .rng_state = 0x5eed5e7a,
    .mutate = replay_mutate_moded,
};
