/*
 * rs_bcast_get: the fetch loop every getter of an object runs. Under the
 * entry's lock a getter plans (claims blocks to read or verify, a holder to
 * connect to, a request to send), then unlocks and does it; completions
 * (from the service thread) only move block states and wake getters. So
 * concurrent getters of one object split its work per block, and getters of
 * different objects never share a lock around a fetch.
 */
#include "broadcast/fetch.h"
#include "broadcast/entry.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "broadcast/blocks.h"
#include "broadcast/getwait.h"
#include "broadcast/rcache.h"
#include "common/clock.h"
#include "common/log.h"

/* ------------------------------------------------------------ completions */

static void read_done(void *arg, rs_status_t status)
{
    rs_bc_block_t *b = arg;
    rs_bc_entry_t *e = b->entry;
    pthread_mutex_lock(&e->lock);
    rs_bc_holder_t *h = e->holders[b->holder];
    rs_bc_peer_t *peer = h->peer; /* outlives e, which may be freed once ops reaches 0 */
    e->ops--;
    e->reads_inflight--;
    if (h->is_source)
        e->source_inflight--;
    if (status == RS_OK) {
        uint64_t now = rs_now_ns(), took = now - b->posted_ns;
        b->state = RS_BLK_LANDED;
        e->progress_ns = now;
        e->read_ns = e->read_ns == 0 ? took : (3 * e->read_ns + took) / 4;
        e->landed[e->n_landed++] = b->index;
        ESTAT(e, bytes_read, rs_bc_block_len(b->index, e->size, e->block_size));
    } else {
        b->state = RS_BLK_MISSING;
        h->bad = 1;
        e->last_err = status;
        ESTAT(e, read_failures, 1);
        rs_debug("broadcast: read of block %u failed: %s", b->index, rs_strerror(status));
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    rs_bc_peer_put_read(peer);
}

/* -------------------------------------------------------------- executing */

/* Connects to a holder and unpacks its key; a holder that cannot be prepared is bad. */
static void prepare_holder(rs_bc_entry_t *e, rs_bc_holder_t *h)
{
    rs_bcast_node_t *node = e->node;
    rs_rkey_t *rkey = NULL;
    int connected = 0;
    rs_status_t st = RS_OK;

    if (h->peer == NULL) {
        h->peer = rs_bc_peer_get(node, &h->addr.a);
        if (h->peer == NULL)
            st = RS_ERR_NOMEM;
    }
    if (st == RS_OK)
        st = rs_bc_peer_connect(node, h->peer, &connected);
    if (st == RS_OK)
        st = rs_bc_rcache_get(node, h->peer, h->rkey_blob, h->rkey_len, &rkey);
    pthread_mutex_lock(&e->lock);
    h->preparing = 0;
    h->rkey = rkey;
    if (st != RS_OK) {
        h->bad = 1;
        e->last_err = st;
    }
    if (connected)
        ESTAT(e, connects, 1);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static void post_read(rs_bc_entry_t *e, uint32_t bi, rs_bc_holder_t *h)
{
    uint64_t off = rs_bc_block_off(bi, e->block_size);
    uint32_t len = rs_bc_block_len(bi, e->size, e->block_size);
    rs_status_t st =
        rs_get(h->peer->ep, e->data + off, len, e->mr, h->rkey, off, read_done, &e->blocks[bi]);
    pthread_mutex_lock(&e->lock);
    if (st == RS_OK) {
        ESTAT(e, reads, 1);
        if (h->is_source)
            ESTAT(e, source_reads, 1);
        else
            ESTAT(e, holder_reads, 1);
        pthread_mutex_unlock(&e->lock);
        return;
    }
    e->blocks[bi].state = RS_BLK_MISSING;
    e->ops--;
    e->reads_inflight--;
    if (h->is_source)
        e->source_inflight--;
    h->bad = 1;
    e->last_err = st;
    pthread_mutex_unlock(&e->lock);
    rs_bc_peer_put_read(h->peer);
    rs_warn("broadcast: cannot read block %u: %s", bi, rs_strerror(st));
}

/* Checksums a landed block; returns 1 when the entry just completed. */
static int verify_block(rs_bc_entry_t *e, uint32_t bi)
{
    uint64_t off = rs_bc_block_off(bi, e->block_size);
    uint32_t len = rs_bc_block_len(bi, e->size, e->block_size);
    uint64_t sum = rs_bc_block_sum(e->data + off, len, bi);
    int completed = 0;

    pthread_mutex_lock(&e->lock);
    rs_bc_block_t *b = &e->blocks[bi];
    rs_bc_holder_t *h = e->holders[b->holder];
    if (sum == e->sums[bi]) {
        b->state = RS_BLK_DONE;
        rs_bc_map_set(e->bitmap, bi);
        e->n_done++;
        e->announce_due = 1;
#ifdef RS_FAULT_INJECTION
        if (e->node->fault_corrupt && len > 0) /* this copy now serves bad bytes */
            e->data[off + len / 2] ^= 0x5a;
#endif
        if (e->n_done == e->nblocks && e->state == RS_BENT_FETCHING) {
            e->state = RS_BENT_READY;
            completed = 1;
        }
    } else {
        b->state = RS_BLK_MISSING;
        ESTAT(e, checksum_failures, 1);
        e->last_err = RS_ERR_CHECKSUM;
        /* A holder serving bad bytes is dropped; the source gets a second chance. */
        if (!h->is_source || ++b->source_fails >= 2)
            h->bad = 1;
        rs_warn("broadcast: block %u of object %llu failed its checksum (from %s)", bi,
                (unsigned long long)e->seq, h->is_source ? "the source" : "a holder");
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return completed;
}

static void execute(rs_bc_entry_t *e, rs_bc_act_t *a)
{
    if (a->send_get) {
        rs_status_t st = rs_bc_fetch_send_get(e);
        if (st != RS_OK) {
            pthread_mutex_lock(&e->lock);
            rs_bc_entry_fail(e, st);
            pthread_mutex_unlock(&e->lock);
        }
        return;
    }
    if (a->send_announce) /* first: claims should reach the source before our reads end */
        rs_bc_fetch_send_announce(e, a->bitmap);
    for (uint32_t i = 0; i < a->n_reads; i++) {
#ifdef RS_FAULT_INJECTION
        if (e->node->fault_slow) /* a slow reader: failures land mid-fetch */
            usleep(20 * 1000);
#endif
        post_read(e, a->rblock[i], a->rholder[i]);
    }
    if (a->verify && verify_block(e, a->vblock) && e->node->cfg.mode == RS_BCAST_TORRENT)
        a->send_complete = 1;
    if (a->send_complete)
        rs_bc_fetch_send_announce(e, NULL);
    if (a->send_update)
        rs_bc_fetch_send_update(e);
    if (a->prepare != NULL)
        prepare_holder(e, a->prepare);
    free(a->bitmap);
}

/* Runs the fetch until it ends or the deadline passes. */
static rs_status_t fetch_run(rs_bc_entry_t *e, uint64_t deadline)
{
    rs_status_t st;
    rs_bc_act_t a;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        if (rs_bc_direct_busy(e->direct)) { /* another getter reads it straight from the source */
            struct timespec ts = rs_ns_to_timespec(deadline);
            if (pthread_cond_timedwait(&e->cond, &e->lock, &ts) == ETIMEDOUT &&
                rs_now_ns() >= deadline) {
                st = RS_ERR_TIMEOUT;
                break;
            }
            continue;
        }
        if (e->state == RS_BENT_READY) {
            st = e->destroyed ? RS_ERR_DESTROYED : RS_OK;
            break;
        }
        if (e->state == RS_BENT_FAILED) {
            st = e->err;
            break;
        }
        uint64_t now = rs_now_ns();
        if (now >= deadline) {
            st = RS_ERR_TIMEOUT;
            break;
        }
        rs_bc_fetch_plan(e, &a);
        if (!rs_bc_act_empty(&a)) {
            pthread_mutex_unlock(&e->lock);
            execute(e, &a);
            pthread_mutex_lock(&e->lock);
            continue;
        }
        /* Wake for the deadline and for patience (waiting readers re-plan when it runs out). */
        uint64_t until = now + RS_MS_TO_NS(e->node->cfg.patience_ms + 1u);
        if (until > now + RS_MS_TO_NS(100))
            until = now + RS_MS_TO_NS(100);
        if (until > deadline)
            until = deadline;
        rs_bc_entry_wait(e, until); /* drives the transport while an answer is due */
    }
    pthread_mutex_unlock(&e->lock);
    return st;
}

/* ------------------------------------------------------------ public API */

rs_status_t rs_bcast_get(rs_bcast_node_t *node, const void *desc, size_t desc_len,
                         rs_bcast_ref_t **ref_p)
{
    rs_bc_desc_t d;
    rs_bc_entry_t *e;
    int joined;

    if (node == NULL || ref_p == NULL || desc == NULL)
        return RS_ERR_INVALID;
    uint64_t deadline = rs_now_ns() + RS_MS_TO_NS(node->cfg.timeout_ms);
    rs_status_t st = rs_bc_desc_decode(desc, desc_len, &d);
    if (st != RS_OK) {
        rs_error("broadcast: invalid descriptor of %zu bytes: %s", desc_len, rs_strerror(st));
        return st;
    }
    rs_bcast_ref_t *ref = malloc(sizeof(*ref));
    if (ref == NULL) {
        rs_error("out of memory allocating a broadcast reference");
        return RS_ERR_NOMEM;
    }
    st = rs_bc_entry_acquire(node, &d, &e, &joined);
    if (st != RS_OK) {
        free(ref);
        return st;
    }
    if ((d.flags & RS_BDESC_F_DIRECT) && !joined)
        rs_bc_fetch_direct(e, &d, deadline);
    st = fetch_run(e, deadline);
    if (st != RS_OK) {
        rs_bc_entry_unref(e);
        free(ref);
        if (st != RS_ERR_DESTROYED)
            rs_warn("broadcast: get of object %llu failed: %s", (unsigned long long)d.seq,
                    rs_strerror(st));
        return st;
    }
    pthread_mutex_lock(&e->lock);
    ESTAT(e, gets, 1);
    if (joined)
        ESTAT(e, joins, 1);
    pthread_mutex_unlock(&e->lock);
    ref->entry = e;
    *ref_p = ref;
    return RS_OK;
}

const void *rs_bcast_ref_data(const rs_bcast_ref_t *ref)
{
    if (ref == NULL)
        return NULL;
    return ref->entry->data;
}

size_t rs_bcast_ref_len(const rs_bcast_ref_t *ref)
{
    if (ref == NULL)
        return 0;
    return (size_t)ref->entry->size;
}

void rs_bcast_ref_stats(const rs_bcast_ref_t *ref, rs_bcast_stats_t *stats)
{
    if (ref == NULL || stats == NULL)
        return;
    rs_bc_entry_t *e = ref->entry;
    pthread_mutex_lock(&e->lock);
    *stats = e->stats;
    pthread_mutex_unlock(&e->lock);
}

void rs_bcast_release(rs_bcast_ref_t *ref)
{
    if (ref == NULL)
        return;
    rs_bc_entry_unref(ref->entry);
    free(ref);
}
