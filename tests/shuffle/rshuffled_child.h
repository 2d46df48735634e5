/* rshuffled as a child process of a test (fork + exec of RSHUFFLED_PATH). */
#ifndef RS_TESTS_SHUFFLE_RSHUFFLED_CHILD_H
#define RS_TESTS_SHUFFLE_RSHUFFLED_CHILD_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Starts rshuffled listening on RSHUFFLE_TEST_HOST (127.0.0.1):0 with the
 * extra arguments args and the extra environment env ("NAME=VALUE"; both
 * NULL-terminated, or NULL), dying with the test. Waits for its ready line
 * and writes the "host:port" it prints into addr. Returns its pid; a failure
 * fails the test.
 */
pid_t rsd_start(const char *const *args, const char *const *env, char *addr, size_t cap);

/* SIGKILLs and reaps *pid when it is > 0, then sets it to 0 (for teardowns). */
void rsd_kill(pid_t *pid);

#endif
