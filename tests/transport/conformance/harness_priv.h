/* What harness.c and remote.c share; the tests see only harness.h. */
#ifndef RS_TEST_CONFORMANCE_HARNESS_PRIV_H
#define RS_TEST_CONFORMANCE_HARNESS_PRIV_H

#include "harness.h"

/* Most arguments of a role, its name included. */
#define H_MAX_ARGS 20

/* The role this process plays ("test" in the test process), for messages. */
extern const char *h_role_name;

bool h_write_all(int fd, const void *data, size_t len);
/* h_recv_any, optionally without the timeout message; handles H_EXIT. */
ssize_t h_recv_frame(h_chan_t *ch, uint32_t *tag_p, void *buf, size_t cap, int timeout_ms,
                     bool quiet);
/* Exit code of a waitpid status: the code, 128 + signal, or -1. */
int h_decode(int wstatus);
/* Registers a child for teardown and the alarm; releases its channel. */
void h_track(h_child_t *c);
void h_child_release(h_child_t *c);

/* args: role, arguments, NULL. Here (fork + exec) or on the role server's host. */
void h_spawn_local(h_child_t *c, const char *const *args);
void h_spawn_remote(h_child_t *c, const char *const *args);
/* h_child_wait and h_child_kill of a child on the other host. */
int h_remote_wait(h_child_t *c, int timeout_ms);
void h_remote_kill(h_child_t *c);

#endif
