/*
 * A worker's configuration checked against the host before anything is
 * allocated (limits.c): a limit the host cannot back would otherwise be
 * found out by the OOM killer or a full /dev/shm, long after start-up.
 */
#ifndef RS_WORKER_LIMITS_H
#define RS_WORKER_LIMITS_H

#include <rshuffle/worker.h>

/*
 * RS_OK when an arena of mem_limit bytes fits in the memory the host has
 * available (MemAvailable in meminfo_path) and, when shm_dir is not NULL (a
 * context whose rs_mem_alloc takes shared memory: RS_CAP_MEM_SHM), in
 * shm_dir's free space.
 * Otherwise logs the limit and both figures and returns RS_ERR_CONFIG.
 * Paths are parameters for tests; the worker passes /proc/meminfo, /dev/shm.
 */
rs_status_t rs_wk_check_mem(uint64_t mem_limit, const char *meminfo_path, const char *shm_dir);

/*
 * RS_OK when dir is a directory a new file can be created in (checked by
 * creating and removing one: permissions, read-only mounts). Otherwise logs
 * why and returns RS_ERR_CONFIG.
 */
rs_status_t rs_wk_check_spill_dir(const char *dir);

/*
 * Raises the soft descriptor limit to the hard one (every client costs the
 * worker descriptors: about two over TCP) and logs what it got, at info,
 * or at warn when the limit stays below 1024. Cannot fail.
 */
void rs_wk_raise_nofile(void);

/*
 * SIGPIPE ignored when its action is the default: UCX's TCP transport
 * writes to sockets whose peer closed them (measured: a client that
 * connected to UCX's port and closed killed the worker by SIGPIPE). A
 * handler the application installed stays. Cannot fail.
 */
void rs_wk_ignore_sigpipe(void);

#endif
