/* fuzz_rkey replayed (replay.h): its seeds and their mutations. */
#include "fuzz_rkey.h"
#include "replay.h"

#define BUF_MAX 2048

const replay_target_t replay_target = {
    .name = "rkey",
    .corpus = rkey_corpus,
    .seeds_min = 20,
    .mutations = 3000,
    .buf_max = BUF_MAX,
    .rng_state = 0x5eed4b45,
    .mutate = replay_mutate_moded,
};
