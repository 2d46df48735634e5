/* fuzz_handshake replayed (replay.h): its seeds and their mutations. */
#include "fuzz_handshake.h"
#include "replay.h"

#define BUF_MAX 1024

/* Bit flips, cuts, extreme bytes, appended garbage. */
static void mutate(uint8_t *buf, size_t *len_p, const replay_corpus_t *c, uint64_t *x)
{
    (void)c;
    size_t len = *len_p;
    switch (replay_rnd(x) % 4) {
        case 0:
            for (int k = 1 + (int)(replay_rnd(x) % 3); k > 0; k--)
                buf[replay_rnd(x) % len] ^= (uint8_t)(1u << replay_rnd(x) % 8);
            break;
        case 1:
            len = replay_rnd(x) % len;
            break;
        case 2:
            buf[replay_rnd(x) % (len < 8 ? len : 8)] = replay_rnd(x) % 2 ? 0xff : 0;
            break;
        case 3:
            for (int k = (int)(replay_rnd(x) % 16); k > 0 && len < BUF_MAX; k--)
                buf[len++] = (uint8_t)replay_rnd(x);
            break;
    }
    *len_p = len;
}

const replay_target_t replay_target = {
    .name = "handshake",
    .corpus = handshake_corpus,
    .seeds_min = 4,
    .mutations = 3000,
    .buf_max = BUF_MAX,
    .rng_state = 0x5eed4853,
    .mutate = mutate,
};
