/*
 * Worker names (rs_shuffle_desc_t.workers): "host:port", or "blob:" and the
 * worker context's transport address in hex (rs_worker_name), which reaches
 * it with nothing to configure (no host to name, no port to pick).
 */
#ifndef RS_SHUFFLE_NAME_H
#define RS_SHUFFLE_NAME_H

#include <stddef.h>
#include <rshuffle/shuffle.h>
#include <rshuffle/transport.h>

/* Is name a "blob:" name? */
int rs_sproto_name_is_blob(const char *name);

/* "blob:HEX" of an address blob into buf; RS_ERR_NO_SPACE when cap is short. */
rs_status_t rs_sproto_name_encode(const void *blob, size_t len, char *buf, size_t cap);

/*
 * Connects ctx to the worker name names (rs_connect or rs_connect_address):
 * RS_ERR_INVALID for a malformed name (logged), else what the connect
 * returns. *ep_p is set only on RS_OK.
 */
rs_status_t rs_sproto_name_connect(rs_ctx_t *ctx, const char *name, rs_ep_t **ep_p);

#endif
