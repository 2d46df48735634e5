/*
 * Torrent broadcast pulled with one-sided RDMA reads.
 *
 * A process runs one broadcast node (rs_bcast_node_t): a transport context of
 * its own, a listener, and a service thread that answers peers. A source
 * publishes an object: the node cuts it into blocks kept in registered memory
 * and returns a descriptor a driver ships inside a task: plain bytes, about
 * 130 to 340 with the default address blob (an embedded object adds its
 * own bytes, up to embed_max), never above RS_BCAST_DESC_MAX.
 * A reader's node turns the descriptor into the object's bytes:
 *
 *   - an object of at most embed_max bytes travels inside its descriptor:
 *     a get verifies it and copies it, with no message at all;
 *   - otherwise one request to the source returns the manifest (sizes,
 *     per-block checksums, holders and their remote keys); an object of at
 *     most inline_max bytes comes inside that reply (one round trip, no read);
 *   - larger objects are read block by block with one-sided reads, in random
 *     order, from a random holder that has the block (the source included),
 *     verified, and announced so later readers read from this reader too;
 *   - concurrent getters of one broadcast in one process share the fetch:
 *     every block is read once.
 *
 * Every call is thread-safe. Every wait is bounded (rs_bcast_config_t
 * .timeout_ms and the transport's peer_timeout_ms). See docs/broadcast.md.
 * Thread-safe means: different objects, references and getters may be used
 * from any threads at once; one object or reference is not to be used
 * while another thread destroys or releases it, and nothing of a node
 * while another thread destroys the node.
 */
#ifndef RSHUFFLE_BROADCAST_H
#define RSHUFFLE_BROADCAST_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/config.h>
#include <rshuffle/status.h>
#include <rshuffle/transport.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rs_bcast_node rs_bcast_node_t; /* one per process: fetches, serves, publishes */
typedef struct rs_bcast rs_bcast_t;           /* a published object, at its source */
typedef struct rs_bcast_ref rs_bcast_ref_t;   /* a reader's reference to an object's bytes */

typedef enum rs_bcast_mode {
    RS_BCAST_TORRENT = 0, /* read blocks from any holder, serve them on */
    RS_BCAST_SOURCE = 1,  /* read every block from the source (baseline, no serving) */
} rs_bcast_mode_t;

typedef enum rs_bcast_addr_kind {
    RS_BCAST_ADDR_HOSTPORT = 0, /* peers reach this node at host:port (its listener) */
    RS_BCAST_ADDR_BLOB = 1,     /* peers reach it by its transport address blob (the
                                   default: it names every interface the transport uses,
                                   so a remote reader can connect with nothing configured) */
} rs_bcast_addr_kind_t;

#define RS_BCAST_HOST_MAX   255        /* bytes of a host name or address, without the NUL */
#define RS_BCAST_INLINE_CAP (1u << 20) /* inline_max never exceeds this */
#define RS_BCAST_EMBED_CAP  2048       /* embed_max never exceeds this */
#define RS_BCAST_DESC_MAX   (RS_ADDR_BLOB_MAX + 64) /* a descriptor never exceeds this */

typedef struct rs_bcast_config {
    uint64_t block_size;   /* RSHUFFLE_BCAST_BLOCK_SIZE: 4 KiB .. 1 GiB (4 MiB) */
    uint32_t inline_max;   /* RSHUFFLE_BCAST_INLINE_MAX: objects <= this ride inline (64 KiB) */
    uint32_t embed_max;    /* RSHUFFLE_BCAST_EMBED_MAX: objects <= this ride in the descriptor,
                              as far as it stays within RS_BCAST_DESC_MAX (1 KiB) */
    uint32_t reads_per_ep; /* RSHUFFLE_BCAST_READS_PER_EP: outstanding reads per peer (4) */
    uint32_t source_reads; /* RSHUFFLE_BCAST_SOURCE_READS: torrent reads in flight to the
                              source per broadcast (2) */
    uint32_t holders_max;  /* RSHUFFLE_BCAST_HOLDERS_MAX: holders listed per reply (32) */
    uint32_t timeout_ms;   /* RSHUFFLE_BCAST_TIMEOUT_MS: longest rs_bcast_get (30000) */
    uint32_t grace_ms;     /* RSHUFFLE_BCAST_GRACE_MS: memory of a retired object that does
                              not fit in the cache stays mapped this long for peers' reads
                              already in flight (500) */
    uint32_t patience_ms;  /* RSHUFFLE_BCAST_PATIENCE_MS: how long a torrent reader waits for
                              blocks other readers are fetching before it reads them from the
                              source, one block per period; at least 4 block read times
                              (100) */
    uint64_t cache_bytes;  /* RSHUFFLE_BCAST_CACHE_BYTES: registered memory of retired objects
                              kept for the next ones (128 MiB) */
    rs_bcast_mode_t mode;  /* RSHUFFLE_BCAST_MODE: torrent|source (torrent) */
    rs_bcast_addr_kind_t addr_kind;   /* RSHUFFLE_BCAST_ADDRESS: hostport|blob (blob) */
    char host[RS_BCAST_HOST_MAX + 1]; /* RSHUFFLE_BCAST_HOST: hostport: listen on and advertise
                                         ("127.0.0.1"); blob: every interface */
    uint16_t port;                    /* RSHUFFLE_BCAST_PORT: 0 = any free port (0) */
} rs_bcast_config_t;

/* Counters. Reader fields count what this node did to fetch; source fields what it served. */
typedef struct rs_bcast_stats {
    /* reader side */
    uint64_t gets;              /* rs_bcast_get calls that returned RS_OK */
    uint64_t joins;             /* ... of which joined a fetch or copy already in this node */
    uint64_t round_trips;       /* requests that waited for a reply (manifest, update) */
    uint64_t messages;          /* one-way messages sent (final announcements) */
    uint64_t reads;             /* one-sided reads issued */
    uint64_t source_reads;      /* ... from the source */
    uint64_t holder_reads;      /* ... from other holders */
    uint64_t read_failures;     /* reads that completed with an error */
    uint64_t checksum_failures; /* blocks whose checksum did not match */
    uint64_t source_fallbacks;  /* times patience ran out and the source served others' blocks */
    uint64_t bytes_read;        /* bytes landed by successful reads */
    uint64_t inline_gets;       /* fetches answered inline (no read) */
    uint64_t connects;          /* connections opened to peers */
    uint64_t peer_reads_max;    /* most reads ever in flight to one peer (node counters only) */
    /* source side */
    uint64_t requests_served;       /* manifest requests answered */
    uint64_t updates_served;        /* holder updates answered */
    uint64_t announces;             /* announcements received (partial and complete) */
    uint64_t copies_complete;       /* ... of which announced a complete copy */
    uint64_t reported_source_reads; /* block reads readers reported taking from this source */
    uint64_t reported_holder_reads; /* block reads they reported taking from other holders */
    uint64_t holders;               /* holders registered (sum over objects) */
} rs_bcast_stats_t;

/* Fills *cfg with the built-in defaults only. Cannot fail. */
RS_API void rs_bcast_config_defaults(rs_bcast_config_t *cfg);

/* Applies RSHUFFLE_BCAST_* variables; a bad value returns RS_ERR_CONFIG, *cfg unchanged. */
RS_API rs_status_t rs_bcast_config_from_env(rs_bcast_config_t *cfg);

/* rs_bcast_config_defaults followed by rs_bcast_config_from_env; *cfg written only on RS_OK. */
RS_API rs_status_t rs_bcast_config_init(rs_bcast_config_t *cfg);

/*
 * Checks ranges of a config built in code (those of the variables, known
 * enum values, a NUL-terminated host name or address); RS_ERR_CONFIG names
 * the field; RS_ERR_INVALID for a NULL cfg.
 */
RS_API rs_status_t rs_bcast_config_validate(const rs_bcast_config_t *cfg);

/* ------------------------------------------------------------------ node */

/*
 * Creates a node: a transport context from tcfg, a listener on bcfg->host
 * (port bcfg->port) and a service thread. NULL configs: defaults + environment.
 * Both configs are copied (and validated); the context always gets a
 * progress thread, whatever tcfg->progress_thread says. The node listens
 * on host:port with either addr_kind. RS_ERR_INVALID: NULL node_p;
 * RS_ERR_CONFIG: a bad field or variable; rs_ctx_create's errors;
 * rs_listen's (e.g. the port is taken); rs_ctx_address's (blob address);
 * RS_ERR_NOMEM (also: the thread did not start). *node_p is set only on
 * RS_OK.
 */
RS_API rs_status_t rs_bcast_node_create(const rs_config_t *tcfg, const rs_bcast_config_t *bcfg,
                                        rs_bcast_node_t **node_p);

/*
 * Destroys the node: the service thread stops, every object it published is
 * destroyed, connections close and memory is freed. Release every reference
 * and destroy every published object before; pointers into them die here.
 * Objects still published are destroyed as by rs_bcast_destroy (their
 * rs_bcast_t pointers die too); it waits up to 100 ms for those notices to
 * leave. Getters still waiting in rs_bcast_get must have returned. NULL is
 * ignored.
 */
RS_API void rs_bcast_node_destroy(rs_bcast_node_t *node);

/* The port the node listens on (0 when it advertises an address blob). */
RS_API uint16_t rs_bcast_node_port(const rs_bcast_node_t *node);

/*
 * The node's counters (readers and sources together), a consistent snapshot
 * per field (not across fields). Cannot fail.
 */
RS_API void rs_bcast_node_stats(rs_bcast_node_t *node, rs_bcast_stats_t *stats);

/* ---------------------------------------------------------------- source */

/*
 * Creates an object of len bytes in registered memory and returns it open for
 * writing (rs_bcast_buffer): fill it, then rs_bcast_seal. No copy.
 * The object belongs to the caller until rs_bcast_destroy (or the node's
 * destroy). RS_ERR_INVALID: NULL node or bc_p, len needing more than 2^20
 * blocks of block_size; RS_ERR_NOMEM; rs_mem_alloc's errors. *bc_p is set
 * only on RS_OK.
 */
RS_API rs_status_t rs_bcast_create(rs_bcast_node_t *node, size_t len, rs_bcast_t **bc_p);

/*
 * The object's writable bytes (len bytes; NULL when len is 0) until sealed;
 * NULL once sealed or destroyed. The writer (one thread) fills them before
 * rs_bcast_seal.
 */
RS_API void *rs_bcast_buffer(rs_bcast_t *bc);

/*
 * Computes the block checksums and starts serving; the bytes must not change
 * after. RS_ERR_INVALID: NULL bc; RS_ERR_STATE: already sealed or
 * destroyed; RS_ERR_NO_SPACE should the prebuilt inline reply not fit
 * (never expected).
 */
RS_API rs_status_t rs_bcast_seal(rs_bcast_t *bc);

/*
 * rs_bcast_create, one copy of data, rs_bcast_seal: the len bytes of data
 * are copied before it returns (the caller keeps data). Errors as those;
 * RS_ERR_INVALID also for NULL data with len > 0. On an error nothing is
 * left published and *bc_p is not written.
 */
RS_API rs_status_t rs_bcast_publish(rs_bcast_node_t *node, const void *data, size_t len,
                                    rs_bcast_t **bc_p);

/*
 * The node's transport context: memory for rs_bcast_publish_mr comes from
 * rs_mem_alloc(rs_bcast_node_context(node), len, RS_MEM_REMOTE_READ, &mr).
 * Owned by the node (valid until rs_bcast_node_destroy, which also frees
 * memory still registered on it); use it for memory only, never for its
 * handlers, its progress or rs_ctx_destroy.
 */
RS_API rs_ctx_t *rs_bcast_node_context(rs_bcast_node_t *node);

/*
 * Publishes the first len bytes of mr, already written, without copying
 * them: readers read them straight from mr; their block checksums are
 * computed once, here. mr must come from rs_mem_alloc or rs_mem_reg on
 * rs_bcast_node_context(node) with RS_MEM_REMOTE_READ. Objects of at most
 * inline_max bytes travel inside the reply and are copied once (as
 * rs_bcast_publish does) into the node's own reply region.
 *
 * Ownership: mr stays the caller's. Keep it registered and the len bytes
 * unchanged until rs_bcast_destroy(*bc_p) has returned; after that the node
 * no longer touches mr (a reader still reading it then fails its checksum or
 * learns RS_ERR_DESTROYED) and the caller may change or free it. Remote
 * readers may keep the region mapped (cached keys) after it is freed; they
 * can only read bytes that fail their checksums.
 *
 * Errors: RS_ERR_INVALID (node, mr or bc_p NULL, len larger than mr, more
 * than 2^20 blocks of block_size), RS_ERR_NOMEM, and the transport's error
 * when mr's key cannot be packed (e.g. no remote access). Nothing is
 * published on error.
 */
RS_API rs_status_t rs_bcast_publish_mr(rs_bcast_node_t *node, rs_mr_t *mr, size_t len,
                                       rs_bcast_t **bc_p);

/*
 * Writes the sealed object's descriptor into buf (<= RS_BCAST_DESC_MAX
 * bytes); *len_p receives its length. RS_ERR_NO_SPACE when buflen is
 * short: then *len_p receives the length needed and buf is untouched (buf
 * NULL with buflen 0 asks for the length only). RS_ERR_INVALID: NULL bc or
 * len_p, NULL buf with buflen > 0; RS_ERR_STATE: not sealed (or
 * destroyed); *len_p is otherwise set only on RS_OK. The descriptor is
 * plain bytes, valid in any process: until the object is destroyed, and
 * for an embedded object (its bytes inside the descriptor) for as long as
 * the descriptor is kept (a get of it needs no source: destroy cannot
 * recall it).
 */
RS_API rs_status_t rs_bcast_descriptor(const rs_bcast_t *bc, void *buf, size_t buflen,
                                       size_t *len_p);

/*
 * This object's serving counters (the source-side fields of
 * rs_bcast_stats_t; the others are 0), a snapshot per field. Cannot fail.
 */
RS_API void rs_bcast_source_stats(const rs_bcast_t *bc, rs_bcast_stats_t *stats);

/*
 * Destroys the object: requests for it are answered RS_ERR_DESTROYED, every
 * reader that fetched it is told (holders drop their copies, later gets fail
 * with RS_ERR_DESTROYED; not for an embedded object, whose bytes travel in
 * the descriptor: a get of that descriptor needs no source and still
 * succeeds after the destroy), and its memory is released once no reply is in
 * flight (reused for a later object, or unmapped after grace_ms). bc is
 * invalid after the call. Does not wait for the readers' answers. Getters
 * in this process holding a reference keep their bytes until they release
 * it. Once per object, and not after rs_bcast_node_destroy. NULL is ignored.
 */
RS_API void rs_bcast_destroy(rs_bcast_t *bc);

/* ---------------------------------------------------------------- reader */

/*
 * Fetches the object a descriptor names, or joins a fetch or copy of it
 * already in this node, waiting at most timeout_ms. Errors: RS_ERR_DESTROYED
 * (the source destroyed it), RS_ERR_UNREACHABLE / RS_ERR_REFUSED (source and
 * every holder gone), RS_ERR_CHECKSUM (no holder served correct bytes),
 * RS_ERR_TIMEOUT, and the descriptor decoder's RS_ERR_BAD_* / TRUNCATED.
 * Also RS_ERR_INVALID: NULL node or ref_p; RS_ERR_NOT_FOUND: the source
 * does not know the object (another node answers at its address);
 * RS_ERR_PROTOCOL: a malformed descriptor or reply; RS_ERR_NOMEM. desc is
 * read only during the call. *ref_p is set only on RS_OK; the reference
 * belongs to the caller until rs_bcast_release. Concurrent getters of one
 * object share one fetch; each waits until its own timeout_ms.
 */
RS_API rs_status_t rs_bcast_get(rs_bcast_node_t *node, const void *desc, size_t desc_len,
                                rs_bcast_ref_t **ref_p);

/*
 * The object's bytes: contiguous, registered, read-only, valid until
 * rs_bcast_release (even when the source destroys the object meanwhile),
 * and never after rs_bcast_node_destroy.
 */
RS_API const void *rs_bcast_ref_data(const rs_bcast_ref_t *ref);
RS_API size_t rs_bcast_ref_len(const rs_bcast_ref_t *ref);

/*
 * Counters of the fetch behind ref (shared by every getter that joined it):
 * round_trips, messages, reads, source_reads, holder_reads, failures, ...
 * A consistent snapshot. Cannot fail.
 */
RS_API void rs_bcast_ref_stats(const rs_bcast_ref_t *ref, rs_bcast_stats_t *stats);

/*
 * Releases a reference. The node keeps serving its copy to other readers
 * until the source destroys the object (or the source is gone). Pointers
 * from rs_bcast_ref_data die here. Once per reference; NULL is ignored.
 */
RS_API void rs_bcast_release(rs_bcast_ref_t *ref);

#ifdef __cplusplus
}
#endif
#endif
