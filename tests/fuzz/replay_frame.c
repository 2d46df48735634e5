/* fuzz_frame replayed (replay.h): its seeds and their mutations. */
#include "fuzz_frame.h"
#include "replay.h"

#define BUF_MAX (2 * 8192 + 16)

/* Bit flips, cuts, overwritten header bytes, splices, other modes, random payload bytes. */
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
        case 2: /* overwrite a header byte with an extreme value */
            buf[1 + replay_rnd(x) % (len > 49 ? 48 : len)] = replay_rnd(x) % 2 ? 0xff : 0;
            break;
        case 3: /* other mode, same bytes */
            buf[0] = (uint8_t)replay_rnd(x);
            break;
        case 4: /* splice another seed's tail */
            len = replay_splice(buf, len, c, x);
            break;
        default: /* random bytes in the payload */
            for (int k = 0; k < 8 && len > 50; k++)
                buf[50 + replay_rnd(x) % (len - 50)] = (uint8_t)replay_rnd(x);
            break;
    }
    *len_p = len;
}

const replay_target_t replay_target = {
    .name = "frame",
    .corpus = frame_corpus,
    .seeds_min = 10,
    .mutations = 400,
    .buf_max = BUF_MAX,
    .rng_state = 0x5eed,
    .mutate = mutate,
};
