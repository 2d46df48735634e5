/* Making memory resident before a transfer touches it (resident.c). */
#ifndef RS_COMMON_RESIDENT_H
#define RS_COMMON_RESIDENT_H

#include <stddef.h>
#include <rshuffle/status.h>

/*
 * Backs [addr, addr + len) with pages now and touches each once (our own
 * bytes only: each is rewritten with itself, so the range may hold data).
 * RS_ERR_NOMEM, logged, when the system cannot back it (nothing touched).
 */
rs_status_t rs_resident_make(void *addr, size_t len);

#endif
