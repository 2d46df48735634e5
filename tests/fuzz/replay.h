/*
 * A fuzz target without libFuzzer (plain and ASan builds): replay.c runs it
 * on its seed corpus and on reproducible mutations of each seed, so the
 * decoders' robustness is checked in every build, not only the clang fuzz
 * build. Each replay_<target>.c defines replay_target: its corpus and how
 * its inputs are mutated.
 */
#ifndef RS_TESTS_FUZZ_REPLAY_H
#define RS_TESTS_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#define REPLAY_SEEDS_MAX 64

typedef struct replay_corpus {
    uint8_t *seed[REPLAY_SEEDS_MAX];
    size_t len[REPLAY_SEEDS_MAX];
    int n;
} replay_corpus_t;

typedef struct replay_target {
    const char *name;
    void (*corpus)(void (*emit)(void *user, const uint8_t *seed, size_t len), void *user);
    int seeds_min;      /* fewer seeds is a failure */
    int mutations;      /* per seed */
    size_t buf_max;     /* a mutation's room; seeds over half of it are left out */
    uint64_t rng_state; /* first state of replay_rnd */
    /* Mutates buf, which holds a seed of *len bytes, in place (*len may change). */
    void (*mutate)(uint8_t *buf, size_t *len, const replay_corpus_t *c, uint64_t *x);
} replay_target_t;

extern const replay_target_t replay_target;

/*
 * The mutations of targets whose input is a mode byte and a message: bit
 * flips (not the mode byte), cuts, extreme bytes, the same bytes read as
 * another mode, splices of another seed's tail, appended garbage; within
 * replay_target.buf_max.
 */
void replay_mutate_moded(uint8_t *buf, size_t *len, const replay_corpus_t *c, uint64_t *x);

/* Flips 1-3 random bits of buf[0..len) (len >= 1). */
void replay_flip(uint8_t *buf, size_t len, uint64_t *x);

/*
 * Puts a random tail of a random seed of c at a random offset of buf's
 * len bytes; returns the new length (within twice the largest seed).
 */
size_t replay_splice(uint8_t *buf, size_t len, const replay_corpus_t *c, uint64_t *x);

/* The next number of a xorshift64 sequence (reproducible mutations). */
uint64_t replay_rnd(uint64_t *x);

#endif
