/* Peers this node connects to, endpoint state, and remote-key caches. */
#include "broadcast/internal.h"
#include "broadcast/rcache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

rs_status_t rs_bc_addr_copy(rs_bc_addr_own_t *dst, const rs_bc_addr_t *src)
{
    uint8_t *buf = malloc(src->bytes.len + 1u);
    if (buf == NULL) {
        rs_error("out of memory copying a peer address");
        return RS_ERR_NOMEM;
    }
    memcpy(buf, src->bytes.p, src->bytes.len);
    buf[src->bytes.len] = '\0'; /* a host name is usable as a C string */
    dst->a = *src;
    dst->a.bytes.p = buf;
    dst->buf = buf;
    return RS_OK;
}

void rs_bc_addr_release(rs_bc_addr_own_t *a)
{
    free(a->buf);
    a->buf = NULL;
}

rs_bc_peer_t *rs_bc_peer_get(rs_bcast_node_t *node, const rs_bc_addr_t *addr)
{
    rs_list_t *pos, *tmp;
    pthread_mutex_lock(&node->lock);
    rs_list_for_each_safe(pos, tmp, &node->peers)
    {
        rs_bc_peer_t *p = RS_CONTAINER_OF(pos, rs_bc_peer_t, link);
        if (rs_bc_addr_equal(&p->addr.a, addr)) {
            pthread_mutex_unlock(&node->lock);
            return p;
        }
    }
    rs_bc_peer_t *p = calloc(1, sizeof(*p));
    if (p == NULL || rs_bc_addr_copy(&p->addr, addr) != RS_OK) {
        pthread_mutex_unlock(&node->lock);
        free(p);
        rs_error("out of memory adding a broadcast peer");
        return NULL;
    }
    p->state = RS_BPEER_NEW;
    p->info.peer = p;
    pthread_mutex_init(&p->info.lock, NULL);
    rs_list_init(&p->info.rkeys);
    rs_list_add_tail(&node->peers, &p->link);
    pthread_mutex_unlock(&node->lock);
    return p;
}

static rs_status_t peer_dial(rs_bcast_node_t *node, rs_bc_peer_t *p, rs_ep_t **ep_p)
{
    if (p->addr.a.kind == RS_BCAST_ADDR_HOSTPORT)
        return rs_connect(node->ctx, (const char *)p->addr.buf, p->addr.a.port, ep_p);
    return rs_connect_address(node->ctx, p->addr.buf, p->addr.a.bytes.len, ep_p);
}

rs_status_t rs_bc_peer_connect(rs_bcast_node_t *node, rs_bc_peer_t *p, int *connected)
{
    /* Bounded: a connect attempt ends within connect_timeout_ms. */
    uint64_t deadline =
        rs_now_ns() + RS_MS_TO_NS(rs_ctx_config(node->ctx)->connect_timeout_ms + 1000u);
    rs_status_t st;

    *connected = 0;
    pthread_mutex_lock(&node->lock);
    for (;;) {
        if (p->state == RS_BPEER_READY) {
            st = RS_OK;
            break;
        }
        if (p->state == RS_BPEER_DEAD) {
            st = p->err;
            break;
        }
        if (p->state == RS_BPEER_NEW) {
            rs_ep_t *ep = NULL;
            p->state = RS_BPEER_CONNECTING;
            pthread_mutex_unlock(&node->lock);
            st = peer_dial(node, p, &ep);
            if (st == RS_OK) {
                p->info.ep = ep;
            } else {
                char name[300];
                rs_bc_addr_format(&p->addr.a, name, sizeof(name));
                rs_warn("broadcast: cannot connect to %s: %s", name, rs_strerror(st));
            }
            pthread_mutex_lock(&node->lock);
            p->ep = ep;
            p->state = st == RS_OK ? RS_BPEER_READY : RS_BPEER_DEAD;
            p->err = st;
            *connected = st == RS_OK;
            pthread_cond_broadcast(&node->cond);
            break;
        }
        /* Another thread is connecting: wait for its outcome. */
        struct timespec ts = rs_ns_to_timespec(deadline);
        if (pthread_cond_timedwait(&node->cond, &node->lock, &ts) == ETIMEDOUT &&
            p->state == RS_BPEER_CONNECTING) {
            st = RS_ERR_TIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&node->lock);
    return st;
}

int rs_bc_peer_take_read(rs_bcast_node_t *node, rs_bc_peer_t *p)
{
    uint32_t cur = __atomic_load_n(&p->reads, __ATOMIC_RELAXED);
    while (cur < node->cfg.reads_per_ep) {
        if (__atomic_compare_exchange_n(&p->reads, &cur, cur + 1, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            /* High-water mark, so tests can see the cap hold. */
            uint64_t seen = __atomic_load_n(&node->stats.peer_reads_max, __ATOMIC_RELAXED);
            while (cur + 1u > seen &&
                   !__atomic_compare_exchange_n(&node->stats.peer_reads_max, &seen, cur + 1u, 0,
                                                __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                ;
            return 1;
        }
    }
    return 0;
}

void rs_bc_peer_put_read(rs_bc_peer_t *p)
{
    __atomic_fetch_sub(&p->reads, 1, __ATOMIC_RELAXED);
}

/* A cached key for blob (info->lock held). */
static rs_rkey_t *key_find(rs_bc_epinfo_t *info, const void *blob, size_t len)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &info->rkeys)
    {
        rs_bc_key_cache_t *k = RS_CONTAINER_OF(pos, rs_bc_key_cache_t, link);
        if (k->len == len && memcmp(k->blob, blob, len) == 0)
            return k->rkey;
    }
    return NULL;
}

rs_status_t rs_bc_epinfo_rkey(rs_bc_epinfo_t *info, const void *blob, size_t len,
                              rs_rkey_t **rkey_p)
{
    pthread_mutex_lock(&info->lock);
    rs_rkey_t *found = key_find(info, blob, len);
    pthread_mutex_unlock(&info->lock);
    if (found != NULL) {
        *rkey_p = found;
        return RS_OK;
    }
    rs_bc_key_cache_t *k = malloc(sizeof(*k) + len);
    if (k == NULL) {
        rs_error("out of memory caching a remote key");
        return RS_ERR_NOMEM;
    }
    /* Unpacked outside the lock (a transport call); another thread may have won meanwhile. */
    rs_status_t st = rs_rkey_unpack(info->ep, blob, len, &k->rkey);
    if (st != RS_OK) {
        free(k);
        return st;
    }
    k->len = len;
    memcpy(k->blob, blob, len);
    pthread_mutex_lock(&info->lock);
    found = key_find(info, blob, len);
    if (found == NULL)
        rs_list_add_tail(&info->rkeys, &k->link);
    pthread_mutex_unlock(&info->lock);
    if (found != NULL) {
        rs_rkey_destroy(k->rkey);
        free(k);
        *rkey_p = found;
        return RS_OK;
    }
    *rkey_p = k->rkey;
    return RS_OK;
}

static void epinfo_fini(rs_bc_epinfo_t *info)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &info->rkeys)
    {
        rs_list_del(pos);
        free(RS_CONTAINER_OF(pos, rs_bc_key_cache_t, link));
    }
    pthread_mutex_destroy(&info->lock);
}

void rs_bc_peers_fini(rs_bcast_node_t *node)
{
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &node->peers)
    {
        rs_bc_peer_t *p = RS_CONTAINER_OF(pos, rs_bc_peer_t, link);
        rs_list_del(&p->link);
        rs_bc_rcache_fini(p);
        epinfo_fini(&p->info);
        rs_bc_addr_release(&p->addr);
        free(p);
    }
    rs_list_for_each_safe(pos, tmp, &node->epinfos)
    {
        rs_bc_epinfo_t *info = RS_CONTAINER_OF(pos, rs_bc_epinfo_t, link);
        rs_list_del(&info->link);
        epinfo_fini(info);
        free(info);
    }
}
