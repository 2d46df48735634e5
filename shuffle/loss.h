/*
 * A client's lost workers (shuffle/loss.c): the last RS_LOSS_KEEP workers
 * of this host its lanes saw exit, each with the loss epoch it was given.
 * The client embeds one; its lanes reach it through rs_lane_t.
 */
#ifndef RS_SHUFFLE_LOSS_H
#define RS_SHUFFLE_LOSS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define RS_LOSS_KEEP 64

typedef struct rs_loss_set {
    _Atomic uint64_t epoch; /* losses noted so far; written under lock, read without */
    pthread_mutex_t lock;
    char *addr[RS_LOSS_KEEP]; /* loss e at (e - 1) % RS_LOSS_KEEP; NULL: unknown (no memory) */
} rs_loss_set_t;

void rs_loss_init(rs_loss_set_t *ls);
void rs_loss_fini(rs_loss_set_t *ls);

#endif
