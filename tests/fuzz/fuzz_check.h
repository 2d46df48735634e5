/* The fuzz targets' contract checks: a broken one traps, which libFuzzer and the replays report. */
#ifndef RS_TESTS_FUZZ_CHECK_H
#define RS_TESTS_FUZZ_CHECK_H

#define CHECK(cond)           \
    do {                      \
        if (!(cond))          \
            __builtin_trap(); \
    } while (0)

#endif
