/*
 * Multi-process broadcast tests: the test process only orchestrates; every
 * broadcast node lives in an agent process (forked before any fabric state
 * exists) that obeys commands sent over a pipe: publish, get, get from
 * several threads, release, destroy, stats, quit. Every wait is bounded.
 */
#ifndef RS_TESTS_BT_AGENT_H
#define RS_TESTS_BT_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <rshuffle/broadcast.h>

#define BT_BLOCK   (256u << 10) /* block size of the test nodes */
#define BT_INLINE  (64u << 10)  /* inline threshold (the default) */
#define BT_EMBED   1024u        /* objects this small ride in the descriptor (the default) */
#define BT_WAIT_MS 30000        /* longest wait for an agent's answer */

typedef struct bt_agent {
    pid_t pid;
    int cmd_fd; /* parent -> agent */
    int res_fd; /* agent -> parent */
} bt_agent_t;

typedef struct bt_result {
    int32_t status;
    uint32_t nthreads; /* thread gets: how many succeeded with the right length and hash */
    uint64_t len;
    uint64_t hash;
    uint64_t ms; /* how long the get took */
    rs_bcast_stats_t stats;
} bt_result_t;

/* The test host (RSHUFFLE_TEST_HOST, else 127.0.0.1). */
const char *bt_host(void);

/* Starts an agent; fault: RSHUFFLE_BCAST_FAULT value or NULL; mode: torrent or source. */
void bt_spawn(bt_agent_t *a, const char *fault, rs_bcast_mode_t mode);
/* bt_spawn with one more NAME=VALUE in the agent's environment. */
void bt_spawn_env(bt_agent_t *a, const char *fault, rs_bcast_mode_t mode, const char *env);

/* Publishes size bytes of the pattern seed; returns the descriptor (len in *desc_len). */
void bt_publish(bt_agent_t *a, uint64_t size, uint64_t seed, uint8_t *desc, size_t *desc_len);

/* Starts a get (bt_get_wait collects its result). */
void bt_get_start(bt_agent_t *a, const uint8_t *desc, size_t desc_len);
/* Starts nthreads concurrent gets of one descriptor in the agent. */
void bt_threads_start(bt_agent_t *a, uint32_t nthreads, const uint8_t *desc, size_t desc_len);
void bt_get_wait(bt_agent_t *a, bt_result_t *r);

/* Re-hashes the bytes of every reference the agent holds (result in r->hash of the last). */
void bt_rehash(bt_agent_t *a, bt_result_t *r);
void bt_release(bt_agent_t *a);
/* Destroys the agent's i-th published object. */
void bt_destroy(bt_agent_t *a, uint32_t i);
/* The agent's node counters (or, for i >= 0, those of its i-th published object). */
void bt_stats(bt_agent_t *a, int i, rs_bcast_stats_t *s);
/* Waits until at least n holders announced a complete copy of the agent's i-th object. */
void bt_wait_announces(bt_agent_t *a, int i, uint64_t n);

void bt_quit(bt_agent_t *a);
void bt_kill(bt_agent_t *a);

/* The hash of size bytes of the pattern seed (what a correct reader holds). */
uint64_t bt_expected_hash(uint64_t size, uint64_t seed);

/* Bounds the whole test program. */
void bt_alarm(unsigned seconds);

#endif
