/*
 * RS_ASSERT(cond): an invariant the code relies on. When it does not hold
 * the process logs the condition with its source position and aborts: the
 * state is already corrupt and going on would hide the bug's first cause.
 *
 * Active in every build except Release and MinSizeRel, which define
 * RS_NO_ASSERT (CMakeLists.txt). Unlike assert(3) it does not follow
 * NDEBUG: CMake's RelWithDebInfo defines NDEBUG, and that is the build
 * `make check` tests, so the asserts run there. Compiled out, the condition
 * is still type-checked but never evaluated: it must have no side effects.
 *
 * Assert what the code itself guarantees (an op completes once, a count
 * never goes below zero, a lock is held); never what a peer or the caller
 * may get wrong, which is checked and answered with a status.
 */
#ifndef RS_COMMON_ASSERT_H
#define RS_COMMON_ASSERT_H

void rs_assert_fail(const char *cond, const char *file, int line, const char *func)
    __attribute__((noreturn, cold));

#ifdef RS_NO_ASSERT
#define RS_ASSERT(cond) ((void)sizeof(!(cond)))
#else
#define RS_ASSERT(cond) \
    (__builtin_expect(!!(cond), 1) ? (void)0 : rs_assert_fail(#cond, __FILE__, __LINE__, __func__))
#endif

#endif
