/* Monotonic clock helpers. */
#ifndef RS_COMMON_CLOCK_H
#define RS_COMMON_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t rs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Cheaper, ~1-4 ms resolution: good enough for timeouts of many ms. */
static inline uint64_t rs_now_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define RS_MS_TO_NS(ms) ((uint64_t)(ms)*1000000ull)

/* Makes cond's timed waits use CLOCK_MONOTONIC: a wall-clock step never stretches them. */
static inline void rs_cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
}

/* A deadline on the rs_now_ns clock as pthread_cond_timedwait takes it (see above). */
static inline struct timespec rs_ns_to_timespec(uint64_t ns)
{
    return (struct timespec){.tv_sec = (time_t)(ns / 1000000000ull),
                             .tv_nsec = (long)(ns % 1000000000ull)};
}

#endif
