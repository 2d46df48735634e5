/* Monotonic clock helpers. */
#ifndef RS_COMMON_CLOCK_H
#define RS_COMMON_CLOCK_H

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

#endif
