/* fuzz_hello replayed (replay.h): its seeds and their mutations. */
#include "fuzz_hello.h"
#include "replay.h"

#define BUF_MAX (2 * 4200)

/* Bit flips, cuts, extreme length fields, other mode, appended bytes, splices. */
static void mutate(uint8_t *buf, size_t *len_p, const replay_corpus_t *c, uint64_t *x)
{
    size_t len = *len_p;
    switch (replay_rnd(x) % 6) {
        case 0: /* flip 1-3 bits */
            replay_flip(buf, len, x);
            break;
        case 1: /* cut */
            len = replay_rnd(x) % (len + 1);
            break;
        case 2: /* a length or status byte at an extreme */
            if (len > 13)
                buf[7 + replay_rnd(x) % 6] = replay_rnd(x) % 2 ? 0xff : 0;
            break;
        case 3: /* other mode */
            buf[0] = (uint8_t)replay_rnd(x);
            break;
        case 4: /* bytes after the message */
            for (int k = 1 + (int)(replay_rnd(x) % 8); k > 0; k--)
                buf[len++] = (uint8_t)replay_rnd(x);
            break;
        default: /* splice another seed's tail */
            len = replay_splice(buf, len, c, x);
            break;
    }
    *len_p = len;
}

const replay_target_t replay_target = {
    .name = "hello",
    .corpus = hello_corpus,
    .seeds_min = 10,
    .mutations = 400,
    .buf_max = BUF_MAX,
    .rng_state = 0xf00d,
    .mutate = mutate,
};
