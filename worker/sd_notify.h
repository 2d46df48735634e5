/* rshuffled's sd_notify (worker/sd_notify.c). */
#ifndef RS_WORKER_SD_NOTIFY_H
#define RS_WORKER_SD_NOTIFY_H

/* Sends state ("READY=1", ...) to $NOTIFY_SOCKET: 0 (also when unset), -1 if it failed. */
int rsd_notify(const char *state);

#endif
