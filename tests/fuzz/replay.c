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

void replay_flip(uint8_t *buf, size_t len, uint64_t *x)
{
    for (int k = 1 + (int)(replay_rnd(x) % 3); k > 0; k--)
        buf[replay_rnd(x) % len] ^= (uint8_t)(1u << replay_rnd(x) % 8);
}

size_t replay_splice(uint8_t *buf, size_t len, const replay_corpus_t *c, uint64_t *x)
{
    int o = (int)(replay_rnd(x) % (uint64_t)c->n);
    size_t at = replay_rnd(x) % (len + 1), from = replay_rnd(x) % c->len[o];
    memcpy(buf + at, c->seed[o] + from, c->len[o] - from);
    return at + c->len[o] - from;
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

/* Bit flips, cuts, extreme bytes, splices, other modes, appended garbage. */
void replay_mutate_moded(uint8_t *buf, size_t *len_p, const replay_corpus_t *c, uint64_t *x)
{
    size_t len = *len_p;
    switch (replay_rnd(x) % 6) {
        case 0: /* flip 1-3 bits (not the mode byte) */
            for (int k = 1 + (int)(replay_rnd(x) % 3); k > 0 && len > 1; k--)
                buf[1 + replay_rnd(x) % (len - 1)] ^= (uint8_t)(1u << replay_rnd(x) % 8);
            break;
        case 1: /* cut */
            len = 1 + replay_rnd(x) % len;
            break;
        case 2: /* an extreme value in a length-bearing byte */
            if (len > 1)
                buf[1 + replay_rnd(x) % (len - 1)] = replay_rnd(x) % 2 ? 0xff : 0;
            break;
        case 3: /* the same bytes read as another format */
            buf[0] = (uint8_t)replay_rnd(x);
            break;
        case 4: { /* splice another seed's tail */
            int o = (int)(replay_rnd(x) % (uint64_t)c->n);
            size_t at = 1 + replay_rnd(x) % len, from = 1 + replay_rnd(x) % c->len[o];
            if (from < c->len[o] && at + c->len[o] - from <= replay_target.buf_max) {
                memcpy(buf + at, c->seed[o] + from, c->len[o] - from);
                len = at + c->len[o] - from;
            }
            break;
        }
        case 5: /* append garbage */
            for (int k = (int)(replay_rnd(x) % 16); k > 0 && len < replay_target.buf_max; k--)
                buf[len++] = (uint8_t)replay_rnd(x);
            break;
    }
    *len_p = len;
}
