/* Status codes shared by every rshuffle module. */
#ifndef RSHUFFLE_STATUS_H
#define RSHUFFLE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RS_BUILDING_LIBRARY)
#define RS_API __attribute__((visibility("default")))
#else
#define RS_API
#endif

/*
 * Every fallible call returns an rs_status_t: RS_OK (0) on success, a
 * negative code otherwise. Output parameters are written only on RS_OK;
 * the header of a call says where that is not so (e.g. a destination
 * buffer that a failed decompression may have partly written).
 *
 * NULL arguments, in every public call: a call that returns a status
 * answers a NULL handle or NULL output pointer with RS_ERR_INVALID before
 * it touches anything else; a void call (destroy, close, release, stats,
 * config defaults, handler setters) given NULL does nothing; a getter given
 * a NULL handle returns its "none" value (NULL, 0, or -1 for rs_ctx_fd).
 * tests/common/test_api_null.c holds every public call to this.
 */
typedef enum rs_status {
    RS_OK = 0,

    /* generic */
    RS_ERR_INVALID = -1,     /* bad argument from the caller */
    RS_ERR_NOMEM = -2,       /* allocation failed */
    RS_ERR_IO = -3,          /* file or OS call failed */
    RS_ERR_CONFIG = -4,      /* bad RSHUFFLE_* value or configuration field */
    RS_ERR_UNSUPPORTED = -5, /* not available in this build, backend or device */
    RS_ERR_BUSY = -6,        /* temporarily exhausted: progress and retry */
    RS_ERR_TIMEOUT = -7,     /* a bounded wait ran out */
    RS_ERR_CANCELED = -8,    /* the operation was canceled by a close or destroy */
    RS_ERR_NOT_FOUND = -9,   /* unknown id (shuffle, partition, broadcast, ...) */
    RS_ERR_EXISTS = -10,     /* id already in use */
    RS_ERR_NO_SPACE = -11,   /* destination buffer too small */
    RS_ERR_STATE = -12,      /* call not valid in the object's current state */

    /* transport */
    RS_ERR_TRANSPORT = -20,    /* the fabric library reported an error */
    RS_ERR_UNREACHABLE = -21,  /* the peer is dead or cannot be reached */
    RS_ERR_REFUSED = -22,      /* nobody accepted the connection */
    RS_ERR_AUTH = -23,         /* the peer's job token does not match */
    RS_ERR_BAD_RKEY = -24,     /* remote-key blob truncated, corrupted or foreign */
    RS_ERR_OUT_OF_RANGE = -25, /* remote range outside the registered region */
    RS_ERR_MSG_SIZE = -26,     /* message longer than the configured maximum */

    /* bytes from a peer (frames, manifests, protocol messages) */
    RS_ERR_TRUNCATED = -30,   /* fewer bytes than the header or lengths need */
    RS_ERR_BAD_MAGIC = -31,   /* not an rshuffle frame */
    RS_ERR_BAD_VERSION = -32, /* frame or message version not understood */
    RS_ERR_BAD_CODEC = -33,   /* unknown codec id */
    RS_ERR_BAD_LENGTH = -34,  /* a length field exceeds its buffer or limit */
    RS_ERR_CHECKSUM = -35,    /* checksum mismatch */
    RS_ERR_DECOMPRESS = -36,  /* the codec rejected the compressed bytes */
    RS_ERR_PROTOCOL = -37,    /* malformed or unexpected protocol message */

    /* shuffle and broadcast */
    RS_ERR_BACKPRESSURE = -40, /* the worker has no memory to grant; retried, then failed */
    RS_ERR_DESTROYED = -41,    /* the object was destroyed by its owner */
} rs_status_t;

/*
 * A short, constant, human-readable description of a status code: a static
 * string, never NULL ("unknown status" for a value not listed above). Cannot
 * fail; thread-safe.
 */
RS_API const char *rs_strerror(rs_status_t status);

#ifdef __cplusplus
}
#endif
#endif
