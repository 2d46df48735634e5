/*
 * A hostile client of a front door (transport/ucx/front.c), for the security
 * tests: garbage, mutated hellos and slow connections against a port on
 * 127.0.0.1, and the checks that the listening process stays whole.
 */
#ifndef RS_TESTS_SECURITY_FRONT_ATTACK_H
#define RS_TESTS_SECURITY_FRONT_ATTACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What one attack did, for the report. */
typedef struct fa_counts {
    unsigned conns;     /* connections made */
    unsigned closed_ms; /* longest wait for the server to close a bad connection */
    unsigned slow;      /* slow connections held */
    unsigned slow_ms;   /* longest life of a slow connection */
} fa_counts_t;

/* RSHUFFLE_TEST_SECURITY_N, else dflt: connections per kind of attack. */
unsigned fa_rounds(unsigned dflt);

/* Descriptors the process holds (entries of /proc/PID/fd). */
int fa_fd_count(pid_t pid);

/* Waits up to ms for pid's descriptor count to come back to want; returns the last count. */
int fa_fd_settle(pid_t pid, int want, int ms);

/* 1 while the child pid runs (not exited, not killed). */
int fa_alive(pid_t pid);

/*
 * Every kind of garbage, n connections of each: the 64-byte message that
 * aborted UCX's listener, random payloads, 4 KiB of garbage, mutated hellos
 * (wrong token, bad magic or version, oversized or truncated lengths, bytes
 * after the hello, random flips). Checks that each bad connection the
 * server can judge is closed by it within bound_ms, that a wrong token gets
 * a refusal and the right token the worker address. token: the right one.
 */
void fa_garbage(uint16_t port, const char *token, unsigned n, int bound_ms, fa_counts_t *c);

/*
 * n connections that send a valid hello's first bytes and then nothing;
 * returns once the server closed every one of them (it must, within
 * bound_ms of the last one's start).
 */
void fa_slow_loris(uint16_t port, unsigned n, int bound_ms, fa_counts_t *c);

/* Opens n slow connections and leaves them open; fa_slow_close closes them. */
int *fa_slow_open(uint16_t port, unsigned n);
void fa_slow_close(int *fds, unsigned n);

/* A free TCP port on 127.0.0.1 (bound and released). */
uint16_t fa_free_port(void);

#endif
