/*
 * What the map side, the workers and the reduce side agree on: a shuffle's
 * identity, where its partitions live, and how records are framed inside a
 * batch. Used by pusher.h, reader.h and worker.h.
 */
#ifndef RSHUFFLE_SHUFFLE_H
#define RSHUFFLE_SHUFFLE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <rshuffle/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_SHUFFLE_ADDR_MAX     128  /* "host:port" of a worker, with its NUL */
#define RS_SHUFFLE_NAME_MAX     8200 /* any worker name ("blob:" + 2 x RS_ADDR_BLOB_MAX), NUL too */
#define RS_SHUFFLE_REPLICAS_MAX 3    /* largest replication factor (rs_shuffle_desc_t.replicas) */

/*
 * Placement: the worker (index into the workers array) that stores a
 * partition. Must be deterministic and identical in every mapper and reader,
 * and return a value < n_workers. Called only while rs_pusher_open or
 * rs_reader_open_in runs, on the caller's thread.
 */
typedef uint32_t (*rs_placement_fn_t)(void *arg, uint32_t shuffle_id, uint32_t partition,
                                      uint32_t n_workers);

typedef struct rs_shuffle_desc {
    uint32_t shuffle_id;
    uint32_t n_partitions;
    uint32_t n_workers;
    /*
     * n_workers names: "host:port" ("[IPv6 literal]:port"; a host that is not
     * a numeric address goes to the system resolver, getaddrinfo), or
     * "blob:HEX" (rs_worker_name).
     */
    const char *const *workers;
    rs_placement_fn_t placement; /* NULL: rs_placement_default */
    void *placement_arg;
    /*
     * Replication factor R, 1 .. RS_SHUFFLE_REPLICAS_MAX and at most
     * n_workers; 0: RSHUFFLE_REPLICAS from the environment, else 1. Every
     * batch of partition p is written to the R workers rs_shuffle_replica
     * names (p's placement first, then the next ones, wrapping), and a
     * reader takes p from the first of them that answers. A pusher that
     * lost one of them before p's first batch uses the next live worker of
     * that ring instead, where readers look for it too. Mappers and
     * readers of a shuffle must use the same R (docs/shuffle.md,
     * "Replication and failover"). Added last, so descriptors built with
     * designated initializers keep R = 1.
     */
    uint32_t replicas;
    /*
     * The registration's identity: one value per job's use of shuffle_id,
     * the same in all its mappers and readers (a job nonce, a generation
     * counter). A worker holds a shuffle id for one generation at a time:
     * pushers and readers of another get RS_ERR_EXISTS until the held one
     * is dropped, so a reused id never serves another job's records. 0 is a
     * generation like any other (descriptors that never set it keep
     * working together, and a reused id is then not told apart). Added
     * last, so designated initializers keep 0.
     */
    uint64_t generation;
} rs_shuffle_desc_t;

/* The default placement: (partition + shuffle_id) % n_workers (n_workers must be > 0). */
RS_API uint32_t rs_placement_default(void *arg, uint32_t shuffle_id, uint32_t partition,
                                     uint32_t n_workers);

/*
 * The worker index of a partition under desc's placement. RS_ERR_INVALID:
 * NULL desc, n_workers 0, partition >= n_partitions, or a placement that
 * returned an index >= n_workers (logged). *worker_p is set only on RS_OK.
 */
RS_API rs_status_t rs_shuffle_place(const rs_shuffle_desc_t *desc, uint32_t partition,
                                    uint32_t *worker_p);

/*
 * The replication factor of desc: desc->replicas, or with 0 RSHUFFLE_REPLICAS
 * (1 .. 3) when set, else 1. RS_ERR_CONFIG: a bad RSHUFFLE_REPLICAS (logged);
 * RS_ERR_INVALID: NULL desc, n_workers 0, a factor above
 * RS_SHUFFLE_REPLICAS_MAX or above n_workers (logged). *replicas_p is set
 * only on RS_OK.
 */
RS_API rs_status_t rs_shuffle_replicas(const rs_shuffle_desc_t *desc, uint32_t *replicas_p);

/*
 * Replica k (0 .. R-1) of a partition: (rs_shuffle_place + k) % n_workers,
 * so a partition's R replicas are R distinct workers and replica 0 is its
 * placement. Errors as rs_shuffle_place, and RS_ERR_INVALID for k >=
 * RS_SHUFFLE_REPLICAS_MAX or k >= n_workers. *worker_p is set only on RS_OK.
 */
RS_API rs_status_t rs_shuffle_replica(const rs_shuffle_desc_t *desc, uint32_t partition, uint32_t k,
                                      uint32_t *worker_p);

/*
 * Records inside a batch: a 4-byte little-endian length, then the bytes.
 * rs_pusher_append writes this framing; rs_reader_next parses it. Writers
 * filling a buffer for rs_pusher_swap use rs_record_put.
 */
#define RS_RECORD_HDR 4u

static inline size_t rs_record_size(size_t len)
{
    return RS_RECORD_HDR + len;
}

/* Writes a record's length header at dst (RS_RECORD_HDR bytes); its len bytes follow. */
static inline void rs_record_hdr_put(void *dst, uint32_t len)
{
    unsigned char *d = (unsigned char *)dst;
    d[0] = (unsigned char)len;
    d[1] = (unsigned char)(len >> 8);
    d[2] = (unsigned char)(len >> 16);
    d[3] = (unsigned char)(len >> 24);
}

/* Writes one framed record at dst (rs_record_size(len) bytes); returns the bytes written. */
static inline size_t rs_record_put(void *dst, const void *rec, uint32_t len)
{
    unsigned char *d = (unsigned char *)dst;
    rs_record_hdr_put(d, len);
    if (len > 0)
        memcpy(d + RS_RECORD_HDR, rec, len);
    return RS_RECORD_HDR + len;
}

#ifdef __cplusplus
}
#endif
#endif
