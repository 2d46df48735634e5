/*
 * fuzz_manifest without libFuzzer (plain and ASan builds): runs the target on
 * its seeds and on reproducible mutations of them (bit flips, cuts, extreme
 * bytes, splices, other modes), so the decoders' robustness is checked in
 * every build, not only the clang fuzz build.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_manifest.h"

#define SEEDS_MAX 64
#define MUTATIONS 2000 /* per seed */
#define BUF_MAX   4096

typedef struct corpus {
    uint8_t *seed[SEEDS_MAX];
    size_t len[SEEDS_MAX];
    int n;
} corpus_t;

static void keep_seed(void *user, const uint8_t *seed, size_t len)
{
    corpus_t *c = user;
    if (c->n == SEEDS_MAX || len > BUF_MAX / 2)
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

int main(void)
{
    corpus_t c = {.n = 0};
    manifest_corpus(keep_seed, &c);
    if (c.n < 20) {
        fprintf(stderr, "replay_manifest: only %d seeds\n", c.n);
        return 1;
    }
    uint64_t x = 0x5eedb0a7, runs = 0;
    static uint8_t buf[BUF_MAX];
    for (int s = 0; s < c.n; s++) {
        LLVMFuzzerTestOneInput(c.seed[s], c.len[s]);
        runs++;
        for (int m = 0; m < MUTATIONS; m++, runs++) {
            size_t len = c.len[s];
            memcpy(buf, c.seed[s], len);
            switch (rnd(&x) % 6) {
                case 0: /* flip 1-3 bits (not the mode byte) */
                    for (int k = 1 + (int)(rnd(&x) % 3); k > 0 && len > 1; k--)
                        buf[1 + rnd(&x) % (len - 1)] ^= (uint8_t)(1u << rnd(&x) % 8);
                    break;
                case 1: /* cut */
                    len = 1 + rnd(&x) % len;
                    break;
                case 2: /* an extreme value in a length-bearing byte */
                    if (len > 1)
                        buf[1 + rnd(&x) % (len - 1)] = rnd(&x) % 2 ? 0xff : 0;
                    break;
                case 3: /* the same bytes read as another format */
                    buf[0] = (uint8_t)rnd(&x);
                    break;
                case 4: { /* splice another seed's tail */
                    int o = (int)(rnd(&x) % (uint64_t)c.n);
                    size_t at = 1 + rnd(&x) % len, from = 1 + rnd(&x) % c.len[o];
                    if (from < c.len[o] && at + c.len[o] - from <= BUF_MAX) {
                        memcpy(buf + at, c.seed[o] + from, c.len[o] - from);
                        len = at + c.len[o] - from;
                    }
                    break;
                }
                case 5: /* append garbage */
                    for (int k = (int)(rnd(&x) % 16); k > 0 && len < BUF_MAX; k--)
                        buf[len++] = (uint8_t)rnd(&x);
                    break;
            }
            /* An exact-size heap copy so ASan catches reads past the end. */
            uint8_t *copy = malloc(len);
            memcpy(copy, buf, len);
            LLVMFuzzerTestOneInput(copy, len);
            free(copy);
        }
    }
    printf("replay_manifest: %d seeds, %llu inputs, no contract violation\n", c.n,
           (unsigned long long)runs);
    for (int s = 0; s < c.n; s++)
        free(c.seed[s]);
    return 0;
}
