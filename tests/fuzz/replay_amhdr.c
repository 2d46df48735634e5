/* fuzz_amhdr replayed (replay.h): its seeds and their mutations. */
#include "fuzz_amhdr.h"
#include "replay.h"

#define BUF_MAX 128

/* Bit flips, cuts, another kind byte, a reserved or flag byte set, appended bytes, splices. */
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
        case 2: /* another kind: the other header's size, or none */
            buf[0] = (uint8_t)(replay_rnd(x) % 2 ? replay_rnd(x) % 24 : replay_rnd(x));
            break;
        case 3: /* flags or reserved bytes */
            buf[1 + replay_rnd(x) % 3] = (uint8_t)replay_rnd(x);
            break;
        case 4: /* bytes after the header */
            for (int k = 1 + (int)(replay_rnd(x) % 16); k > 0; k--)
                buf[len++] = (uint8_t)replay_rnd(x);
            break;
        default: /* splice another seed's tail */
            len = replay_splice(buf, len, c, x);
            break;
    }
    *len_p = len;
}

const replay_target_t replay_target = {
    .name = "amhdr",
    .corpus = amhdr_corpus,
    .seeds_min = 12,
    .mutations = 1000,
    .buf_max = BUF_MAX,
    .rng_state = 0xa11ce,
    .mutate = mutate,
};
