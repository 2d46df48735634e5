/* rshuffle_info --worker (tools/info_worker.c). */
#ifndef RS_TOOLS_INFO_WORKER_H
#define RS_TOOLS_INFO_WORKER_H

/*
 * Prints the state of the worker at addr (JSON with json set), after asking
 * it to drain with drain set: 0, or 1 when it cannot be asked.
 */
int rs_info_worker(const char *addr, int json, int drain);

#endif
