/* A small verified shuffle through one worker, for tests (shuffle_check.c). */
#ifndef RS_TESTS_SHUFFLE_SHUFFLE_CHECK_H
#define RS_TESTS_SHUFFLE_SHUFFLE_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/pusher.h>

/*
 * Map 0 appends nrec records of reclen bytes (record i: i in its first 4
 * bytes, then bytes (uint8_t)i) to partition i % 4 of d (4 partitions) and
 * closes; returns the closed pusher (the caller destroys it). Every call
 * that fails fails the test.
 */
rs_pusher_t *sc_push(const rs_shuffle_desc_t *d, uint32_t nrec, size_t reclen);

/* Reads all 4 partitions of d back, checks every record and the count, then drops d. */
void sc_read_check(const rs_shuffle_desc_t *d, uint32_t nrec, size_t reclen);

#endif
