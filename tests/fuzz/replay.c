/* The replay program's main (see replay.h); the target comes from replay_<target>.c. */
#include "replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

uint64_t replay_rnd(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

static void keep_seed(void *user, const uint8_t *seed, size_t len)
{
    replay_corpus_t *c = user;
    if (c->n == REPLAY_SEEDS_MAX || len > replay_target.buf_max / 2)
        return;
    c->seed[c->n] = malloc(len);
    memcpy(c->seed[c->n], seed, len);
    c->len[c->n++] = len;
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
    const replay_target_t *t = &replay_target;
    replay_corpus_t c = {.n = 0};
    t->corpus(keep_seed, &c);
    if (c.n < t->seeds_min) {
        fprintf(stderr, "replay_%s: only %d seeds\n", t->name, c.n);
        return 1;
    }
    uint64_t x = t->rng_state, runs = 0;
    uint8_t *buf = malloc(t->buf_max);
    for (int s = 0; s < c.n; s++) {
        run(c.seed[s], c.len[s]);
        runs++;
        for (int m = 0; m < t->mutations; m++, runs++) {
            size_t len = c.len[s];
            memcpy(buf, c.seed[s], len);
            t->mutate(buf, &len, &c, &x);
            run(buf, len);
        }
    }
    printf("replay_%s: %llu inputs from %d seeds, no failure\n", t->name, (unsigned long long)runs,
           c.n);
    free(buf);
    for (int s = 0; s < c.n; s++)
        free(c.seed[s]);
    return 0;
}
