/*
 * The process-local registry of worker arenas (docs/shuffle.md, "Co-located
 * layout"). A worker embedded in a process registers its listening address
 * and the arena it serves; a reader in the same process that finds the
 * worker it attached to here reads that partition's frames in place (the
 * snapshot exchange with the worker stays on the transport: it pins the
 * extents until the reader closes the snapshot) instead of copying them
 * through the transport.
 *
 * A worker is identified by its address and by the packed remote key of its
 * arena, which the reader also receives in the attach reply: a registered
 * worker listening on a wildcard host matches any host name at its port only
 * if that key is byte for byte the same, so a worker of the same port on
 * another host is never taken for the local one.
 *
 * Thread-safe. A registration must be removed before its arena is freed;
 * every lookup that succeeded must be released before that (a worker removed
 * while lookups hold it logs an error: readers of its partitions must be
 * closed before it is destroyed).
 */
#ifndef RS_SHUFFLE_LOCAL_H
#define RS_SHUFFLE_LOCAL_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/status.h>

#define RS_LOCAL_KEY_MAX 256 /* bytes of the identifying key kept (longer keys are refused) */

typedef struct rs_local_reg rs_local_reg_t;

/*
 * Registers the arena [base, base+len) of the worker listening on host:port
 * (host NULL, "", "0.0.0.0" or "::": any host name at that port), identified
 * also by key (key_len bytes, copied). RS_ERR_INVALID for a bad argument or a
 * key longer than RS_LOCAL_KEY_MAX, RS_ERR_NOMEM. *reg_p is set on success.
 */
rs_status_t rs_sproto_local_register(const char *host, uint16_t port, const void *key,
                                     size_t key_len, void *base, uint64_t len,
                                     rs_local_reg_t **reg_p);

/* Removes and frees a registration (NULL: nothing). */
void rs_sproto_local_unregister(rs_local_reg_t *reg);

/*
 * Finds the worker at addr ("host:port", as a shuffle descriptor names it)
 * whose arena's packed key is key: sets *base_p, *len_p and *reg_p (to pass
 * to rs_sproto_local_release) and holds the registration. RS_ERR_NOT_FOUND
 * when no worker of this process matches (the reader then copies through
 * the transport as for any remote worker).
 */
rs_status_t rs_sproto_local_lookup(const char *addr, const void *key, size_t key_len,
                                   const uint8_t **base_p, uint64_t *len_p, rs_local_reg_t **reg_p);

/* Releases a registration a lookup held (NULL: nothing). */
void rs_sproto_local_release(rs_local_reg_t *reg);

#endif
