/* fuzz_rkey replayed (replay.h): its seeds and their mutations. */
#include "fuzz_rkey.h"
#include "replay.h"

#include <string.h>

#define BUF_MAX 2048

/* Bit flips, cuts, extreme bytes, other modes, appended garbage. */
static void mutate(uint8_t *buf, size_t *len_p, const replay_corpus_t *c, uint64_t *x)
{
    (void)c;
    size_t len = *len_p;
    switch (replay_rnd(x) % 5) {
        case 0: /* flip 1-3 bits (not the mode byte) */
            for (int k = 1 + (int)(replay_rnd(x) % 3); k > 0 && len > 1; k--)
                buf[1 + replay_rnd(x) % (len - 1)] ^= (uint8_t)(1u << replay_rnd(x) % 8);
            break;
        case 1: /* cut */
            len = 1 + replay_rnd(x) % len;
            break;
        case 2: /* an extreme value in a header byte */
            if (len > 1)
                buf[1 + replay_rnd(x) % (len - 1 < 40 ? len - 1 : 40)] =
                    replay_rnd(x) % 2 ? 0xff : 0;
            break;
        case 3: /* another mode */
            buf[0] = (uint8_t)replay_rnd(x);
            break;
        case 4: /* append garbage */
            for (int k = (int)(replay_rnd(x) % 16); k > 0 && len < BUF_MAX; k--)
                buf[len++] = (uint8_t)replay_rnd(x);
            break;
    }
    *len_p = len;
}

const replay_target_t replay_target = {
    .name = "rkey",
    .corpus = rkey_corpus,
    .seeds_min = 20,
    .mutations = 3000,
    .buf_max = BUF_MAX,
    .rng_state = 0x5eed4b45,
    .mutate = mutate,
};
