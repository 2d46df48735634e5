/*
 * fuzz_frame without libFuzzer (plain and ASan builds): runs the target on
 * its seed corpus and on reproducible mutations of it (bit flips, cuts,
 * overwritten bytes, splices, other modes), so the decoder's robustness is
 * checked in every build, not only the clang fuzz build.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_frame.h"

#define SEEDS_MAX 64
#define MUTATIONS 400 /* per seed */

typedef struct corpus {
    uint8_t *seed[SEEDS_MAX];
    size_t len[SEEDS_MAX];
    int n;
} corpus_t;

static void keep_seed(void *user, const uint8_t *seed, size_t len)
{
    corpus_t *c = user;
    if (c->n == SEEDS_MAX)
        return;
    c->seed[c->n] = malloc(len);
    memcpy(c->seed[c->n], seed, len);
    c->len[c->n++] = len;
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* Runs the target on an exact-size heap copy, so ASan sees reads past its end. */
static void run(const uint8_t *data, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, data, len);
    LLVMFuzzerTestOneInput(copy, len);
    free(copy);
}

int main(void)
{
    corpus_t c = {.n = 0};
    frame_corpus(keep_seed, &c);
    if (c.n < 10) {
        fprintf(stderr, "replay_frame: only %d seeds\n", c.n);
        return 1;
    }
    uint64_t x = 0x5eed, runs = 0;
    uint8_t buf[2 * 8192 + 16];
    for (int s = 0; s < c.n; s++) {
        run(c.seed[s], c.len[s]);
        runs++;
        for (int m = 0; m < MUTATIONS; m++, runs++) {
            size_t len = c.len[s];
            memcpy(buf, c.seed[s], len);
            switch (rnd(&x) % 6) {
                case 0: /* flip 1-3 bits */
                    for (int k = 1 + (int)(rnd(&x) % 3); k > 0; k--)
                        buf[rnd(&x) % len] ^= (uint8_t)(1u << rnd(&x) % 8);
                    break;
                case 1: /* cut */
                    len = rnd(&x) % (len + 1);
                    break;
                case 2: /* overwrite a header byte with an extreme value */
                    buf[1 + rnd(&x) % (len > 49 ? 48 : len)] = rnd(&x) % 2 ? 0xff : 0;
                    break;
                case 3: /* other mode, same bytes */
                    buf[0] = (uint8_t)rnd(&x);
                    break;
                case 4: { /* splice another seed's tail */
                    int o = (int)(rnd(&x) % (uint64_t)c.n);
                    size_t at = rnd(&x) % (len + 1), from = rnd(&x) % c.len[o];
                    memcpy(buf + at, c.seed[o] + from, c.len[o] - from);
                    len = at + c.len[o] - from;
                    break;
                }
                default: /* random bytes in the payload */
                    for (int k = 0; k < 8 && len > 50; k++)
                        buf[50 + rnd(&x) % (len - 50)] = (uint8_t)rnd(&x);
                    break;
            }
            run(buf, len);
        }
    }

    printf("replay_frame: %llu inputs from %d seeds, no failure\n", (unsigned long long)runs, c.n);
    for (int s = 0; s < c.n; s++)
        free(c.seed[s]);
    return 0;
}
