/*
 * UCX backend: UCP context and its worker (opened by worker.c; with
 * RSHUFFLE_UCX_QUEUE=own also the connections' own, own.c), progress and
 * arm over them, the worker's renewal (rs_ctx_renew), and the ops table.
 */
#include "transport/ucx/ucx.h"
#include "transport/ucx/config.h"

#include "common/checksum.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/stat.h>

/*
 * UCX keepalive finds peers that died silently (no RST on shared memory).
 * Unless the user configured it, run it often enough to notice within a
 * fraction of peer_timeout_ms.
 */
static void ucx_config_set_default(ucp_config_t *config, const char *name, const char *value);

static void ucx_config_keepalive(ucp_config_t *config, uint32_t peer_timeout_ms)
{
    char value[32];
    uint32_t ms = peer_timeout_ms / 4;
    snprintf(value, sizeof(value), "%ums", ms < 10 ? 10 : ms);
    ucx_config_set_default(config, "KEEPALIVE_INTERVAL", value);
}

/* Longest knob name built here (MM_<knob> and the like), terminator included. */
#define UCX_NAME_MAX 64

/* Sets UCX's name to value in config (a failure only logged: a default, not a need). */
static void ucx_config_put(ucp_config_t *config, const char *name, const char *value)
{
    ucs_status_t s = ucp_config_modify(config, name, value);
    if (s != UCS_OK)
        rs_debug("cannot set UCX %s=%s: %s", name, value, ucs_status_string(s));
}

/* Sets UCX's name to value in config, unless the user set UCX_<name>. */
static void ucx_config_set_default(ucp_config_t *config, const char *name, const char *value)
{
    char env[sizeof("UCX_") - 1 + UCX_NAME_MAX];
    snprintf(env, sizeof(env), "UCX_%s", name);
    if (rs_env_get(env) == NULL)
        ucx_config_put(config, name, value);
}

/*
 * Does UCX_TLS (unset: everything) enable transport tl? A list may name it,
 * its alias (sm and shm: the shared-memory transports), or all; a list
 * starting with ^ enables what it does not name.
 */
static int ucx_tls_enables(const char *tl)
{
    const char *tls = rs_env_get("UCX_TLS");
    if (tls == NULL)
        return 1;
    int shm = strcmp(tl, "tcp") != 0;
    int named = strstr(tls, tl) != NULL || (shm && strstr(tls, "sm") != NULL);
    if (tls[0] == '^')
        return !named;
    return named || strstr(tls, "all") != NULL;
}

/*
 * A knob of UCX's shared-memory transports (UCX 1.13 keeps them out of
 * ucp's own table). ucp_config_modify still takes one, by its name in the
 * table those transports share (MM_<knob>; the POSIX_ and SYSV_ names are
 * refused as invalid), and hands it to every such transport when a worker
 * opens them. Set unless the user set either transport's own name (or the
 * MM_ one), and only when such a transport is enabled, so UCX does not
 * warn about an unused setting. No setenv: the library may run inside a
 * multithreaded host.
 */
static void ucx_shm_set_default(ucp_config_t *config, const char *knob, const char *value)
{
    char posix[sizeof("UCX_POSIX_") - 1 + UCX_NAME_MAX],
        sysv[sizeof("UCX_SYSV_") - 1 + UCX_NAME_MAX], mm[UCX_NAME_MAX];
    snprintf(posix, sizeof(posix), "UCX_POSIX_%s", knob);
    snprintf(sysv, sizeof(sysv), "UCX_SYSV_%s", knob);
    if (rs_env_get(posix) != NULL || rs_env_get(sysv) != NULL)
        return;
    if (!ucx_tls_enables("posix") && !ucx_tls_enables("sysv"))
        return;
    snprintf(mm, sizeof(mm), "MM_%s", knob);
    ucx_config_set_default(config, mm, value);
}

/*
 * Error handling: every endpoint uses peer error handling, and UCX 1.13
 * leaves shared-memory transports out of such endpoints unless theirs is on.
 *
 * Receive buffers: a shared-memory transport's come in chunks of
 * RX_BUFS_GROW segments (UCX 1.13: 512 of 8,256 bytes, 4.2 MB, zeroed
 * when made), one chunk at once for each such transport of every UCX
 * worker. With a worker per connection to a peer of this host (own.c,
 * accept.c) that was most of a worker's creation: 8.4 MB written per
 * connection, at both ends, over posix and sysv. Chunks of 16 segments
 * (132 KB) are plenty for our messages (control and notifications) and
 * grow like any other chunk when a worker receives more.
 */
static void ucx_shm_defaults(ucp_config_t *config)
{
    ucx_shm_set_default(config, "ERROR_HANDLING", "y");
    ucx_shm_set_default(config, "RX_BUFS_GROW", "16");
}

/*
 * Non-blocking TCP connects (UCX_TCP_CONN_NB, UCX's default n). With a
 * blocking connect UCX 1.13.1 sends its connection request before the
 * endpoint is marked as sending; if that send fails (the peer died just
 * after accepting) and the reconnect is refused, it queues the endpoint
 * for destruction as receive-only, marks it sending on return, and aborts
 * the process on an assertion at the next progress call (docs/transport.md,
 * "Peers that die while we connect"). A non-blocking connect completes in
 * progress, after the endpoint is marked, so a failure there reaches the
 * error handler instead. Unless the user set UCX_TCP_CONN_NB; only when
 * tcp is enabled (UCX warns about unused settings).
 */
static void ucx_tcp_defaults(ucp_config_t *config)
{
    /* Named as in the tcp transport's own table, as the MM_ knobs above are. */
    if (rs_env_get("UCX_TCP_CONN_NB") == NULL && ucx_tls_enables("tcp"))
        ucx_config_put(config, "CONN_NB", "y");
}

/*
 * Does the context have a transport that does remote RMA natively (rc_*,
 * dc_*)? Without one, UCX emulates one-sided ops to memory it cannot map.
 * UCX 1.13 has no query for this; its resource list is printed only.
 */
static int ucx_has_rdma_transport(ucp_context_h context)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (f == NULL)
        return 0;
    ucp_context_print_info(context, f);
    fclose(f);
    int native = 0;
    char *save = NULL; /* strtok_r: contexts may be created on several threads at once */
    for (char *line = strtok_r(text, "\n", &save); line != NULL && !native;
         line = strtok_r(NULL, "\n", &save)) {
        const char *tl = strstr(line, "resource") ? strstr(line, "-- ") : NULL;
        if (tl != NULL && (strncmp(tl + 3, "rc", 2) == 0 || strncmp(tl + 3, "dc", 2) == 0))
            native = 1;
    }
    free(text);
    return native;
}

/*
 * This kernel and pid namespace (cross-memory attach works within them):
 * the boot id and the namespace's inode, mixed. 0 when unknown (then no
 * key matches ours).
 */
static uint64_t ucx_host_key(void)
{
    char boot[64] = {0};
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == NULL)
        return 0;
    size_t n = fread(boot, 1, sizeof(boot) - 1, f);
    fclose(f);
    struct stat st;
    if (n == 0 || stat("/proc/self/ns/pid", &st) != 0)
        return 0;
    uint64_t key = rs_checksum64_seeded(boot, n, (uint64_t)st.st_ino);
    return key != 0 ? key : 1;
}

static rs_status_t ucx_init_context(rs_ucx_ctx_t *uc, const rs_config_t *cfg)
{
    rs_ucx_log_route(); /* before UCX parses its variables: it warns about bad ones */
    ucp_config_t *config;
    ucs_status_t s = ucp_config_read(NULL, NULL, &config);
    if (s != UCS_OK) {
        rs_error("ucp_config_read failed: %s", ucs_status_string(s));
        return RS_ERR_TRANSPORT;
    }
    ucx_config_keepalive(config, cfg->peer_timeout_ms);
    ucx_shm_defaults(config);
    ucx_tcp_defaults(config);
    ucp_params_t params = {
        .field_mask =
            UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME,
        .features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
        .mt_workers_shared = 0,
        .name = "rshuffle",
    };
    s = ucp_init(&params, config, &uc->context);
    ucp_config_release(config);
    if (s != UCS_OK) {
        rs_error("ucp_init failed: %s", ucs_status_string(s));
        return s == UCS_ERR_NO_DEVICE ? RS_ERR_UNSUPPORTED : RS_ERR_TRANSPORT;
    }
    ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE};
    s = ucp_context_query(uc->context, &attr);
    if (s != UCS_OK) {
        rs_error("ucp_context_query failed: %s", ucs_status_string(s));
        ucp_cleanup(uc->context);
        return RS_ERR_TRANSPORT;
    }
    uc->req_size = attr.request_size;
    /* Only the automatic RMA choice needs to know (RSHUFFLE_UCX_RMA unset or auto). */
    uc->native_remote = uc->force_am == 0 && ucx_has_rdma_transport(uc->context);
    /* UCX_TLS without shared memory (tcp,self: a test meaning TCP) keeps data off attach too. */
    if (ucx_tls_enables("posix") || ucx_tls_enables("sysv") || ucx_tls_enables("cma"))
        uc->host_key = ucx_host_key();
    uc->place_key = rs_ucx_place_key();
    return RS_OK;
}

static void ucx_worker_use(rs_ucx_ctx_t *uc, const rs_ucx_worker_t *w)
{
    uc->worker = w->worker;
    uc->ucp_addr = w->addr;
    uc->addr = w->blob;
    uc->addr_len = w->blob_len;
    uc->efd = w->efd;
}

static rs_status_t ucx_init_worker(rs_ctx_t *ctx, rs_ucx_ctx_t *uc)
{
    rs_ucx_worker_t w;
    rs_status_t st = rs_ucx_worker_open(ctx, uc, &w);
    if (st != RS_OK)
        return st;
    ucx_worker_use(uc, &w);
    st = rs_ucx_front_open(uc); /* waits on the worker's efd too */
    if (st != RS_OK)
        rs_ucx_worker_close(&w);
    return st;
}

/*
 * A new worker takes over before the old one goes, so a failure leaves the
 * old one in place. The old one's closing endpoints are cut (no endpoint is
 * open: rs_ctx_renew checks).
 */
static rs_status_t ucx_renew(rs_ctx_t *ctx)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    rs_ucx_worker_t old = {uc->worker, uc->ucp_addr, uc->addr, uc->addr_len, uc->efd, 0, {0}}, w;
    rs_status_t st = rs_ucx_worker_open(ctx, uc, &w);
    if (st != RS_OK)
        return st;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = w.efd};
    if (epoll_ctl(uc->wait_fd, EPOLL_CTL_ADD, w.efd, &ev) != 0) {
        rs_error("cannot wait on the new UCX worker: errno %d", errno);
        rs_ucx_worker_close(&w);
        return RS_ERR_IO;
    }
    (void)epoll_ctl(uc->wait_fd, EPOLL_CTL_DEL, old.efd, NULL);
    rs_ucx_conn_cleanup(ctx, 0);
    rs_ucx_worker_close(&old);
    rs_ucx_conn_cleanup(ctx, 1);
    ucx_worker_use(uc, &w);
    rs_debug("UCX worker renewed");
    return RS_OK;
}

static rs_status_t ucx_ctx_open(rs_ctx_t *ctx)
{
    rs_status_t st = rs_ucx_fork_open();
    if (st != RS_OK)
        return st;
    rs_ucx_ctx_t *uc = calloc(1, sizeof(*uc));
    if (uc == NULL) {
        rs_error("out of memory allocating the UCX context");
        st = RS_ERR_NOMEM;
        goto err_uncount;
    }
    rs_list_init(&uc->pending);
    rs_list_init(&uc->conn_reqs);
    rs_list_init(&uc->closes);
    rs_list_init(&uc->zombies);
    rs_list_init(&uc->owns);
    rs_list_init(&uc->own_dead);
    uc->own_ep = -1;
    rs_list_init(&uc->accept_waits);
    rs_list_init(&uc->amo_reqs);
    rs_list_init(&uc->regions);
    rs_ucx_config_t ucfg;
    st = rs_ucx_config_read(&ucfg);
    if (st != RS_OK)
        goto err_free_uc;
    uc->force_am = ucfg.rma == RS_UCX_RMA_AM ? 1 : ucfg.rma == RS_UCX_RMA_UCX ? -1 : 0;
    uc->mem_shared = ucfg.mem == RS_UCX_MEM_SHARED;
    uc->mem_attach = ucfg.mem == RS_UCX_MEM_ATTACH;
    uc->map_max = rs_ucx_map_max(ucfg.map_max);
    uc->mem_huge = ucfg.huge; /* on by default: docs/shuffle.md, "Huge pages" */
    uc->notify_flush = ucfg.notify == RS_UCX_NOTIFY_FLUSH;
    uc->queue = ucfg.queue;
    uc->am_cb = rs_ucx_am_recv;

    st = ucx_init_context(uc, rs_tp_ctx_cfg(ctx));
    if (st != RS_OK)
        goto err_free_uc;
    rs_tp_ctx_set_be(ctx, uc);
    st = ucx_init_worker(ctx, uc);
    if (st != RS_OK)
        goto err_cleanup_context;
    return RS_OK;

err_cleanup_context:
    rs_tp_ctx_set_be(ctx, NULL);
    ucp_cleanup(uc->context);
err_free_uc:
    free(uc);
err_uncount:
    rs_ucx_fork_close();
    return st;
}

static void ucx_ctx_close(rs_ctx_t *ctx)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    rs_ucx_front_close_all(uc);
    rs_ucx_conn_cleanup(ctx, 0);
    rs_ucx_own_close_all(uc);
    rs_ucx_worker_close(
        &(rs_ucx_worker_t){.worker = uc->worker, .addr = uc->ucp_addr, .blob = uc->addr});
    rs_ucx_conn_cleanup(ctx, 1);
    rs_ucx_amo_reqs_free(uc);
    rs_ucx_amrma_free(uc);
    ucp_cleanup(uc->context);
    free(uc->slots);
    free(uc->gens);
    free(uc->free_ids);
    free(uc);
    rs_tp_ctx_set_be(ctx, NULL);
    rs_ucx_fork_close();
}

static unsigned ucx_progress(rs_ctx_t *ctx)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    /* One pass, like ucx_perftest: with tcp enabled every pass costs an
     * epoll_wait, and callers loop on rs_progress anyway. */
    uc->in_worker++;
    unsigned n = ucp_worker_progress(uc->worker);
    uc->in_worker--;
    n += rs_ucx_own_progress(uc);
    n += rs_ucx_conn_progress(ctx);
    /* The front door's sockets: when arm saw them ready, else once per
     * coarse tick (a syscall per pass would cost the data path). */
    if (uc->front_n > 0) {
        uint64_t now = rs_now_coarse_ns();
        if (uc->front_kick || now != uc->front_seen) {
            uc->front_seen = now;
            n += rs_ucx_front_progress(ctx);
        }
    }
    return n;
}

static int ucx_fd(rs_ctx_t *ctx)
{
    return rs_ucx_ctx(ctx)->wait_fd; /* the worker's fd and the front door's */
}

static rs_status_t ucx_arm(rs_ctx_t *ctx)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    if (!rs_list_empty(&uc->pending) || !rs_list_empty(&uc->conn_reqs) ||
        !rs_list_empty(&uc->closes))
        return RS_ERR_BUSY;
    if (rs_ucx_front_ready(uc)) {
        uc->front_kick = 1; /* the next progress handles them */
        return RS_ERR_BUSY;
    }
    ucs_status_t s = rs_ucx_own_arm(uc);
    if (s == UCS_OK)
        s = ucp_worker_arm(uc->worker);
    if (s == UCS_OK)
        return RS_OK;
    if (s == UCS_ERR_BUSY)
        return RS_ERR_BUSY;
    rs_error("ucp_worker_arm failed: %s", ucs_status_string(s));
    return RS_ERR_TRANSPORT;
}

static rs_status_t ucx_address(rs_ctx_t *ctx, void *buf, size_t buflen, size_t *len_p)
{
    rs_ucx_ctx_t *uc = rs_ucx_ctx(ctx);
    if (uc->addr_len > RS_ADDR_BLOB_MAX || buflen < uc->addr_len) {
        rs_error("rs_ctx_address: %zu bytes needed, %zu given", uc->addr_len, buflen);
        return RS_ERR_NO_SPACE;
    }
    memcpy(buf, uc->addr, uc->addr_len);
    *len_p = uc->addr_len;
    return RS_OK;
}

static unsigned ucx_caps(const rs_ctx_t *ctx)
{
    /* With a queue per connection a dead peer blocks only its own: nothing to renew. */
    unsigned renew = rs_ucx_ctx(ctx)->queue == RS_UCX_QUEUE_SHARED ? RS_CAP_RENEW : 0;
    return renew | RS_CAP_OWN_LISTENERS | (rs_ucx_mem_alloc_shm(ctx) ? RS_CAP_MEM_SHM : 0);
}

const rs_backend_ops_t rs_ucx_ops = {
    .name = "ucx",
    .ctx_open = ucx_ctx_open,
    .ctx_close = ucx_ctx_close,
    .caps = ucx_caps,
    .renew = ucx_renew,
    .progress = ucx_progress,
    .fd = ucx_fd,
    .arm = ucx_arm,
    .mem_reg = rs_ucx_mem_reg,
    .mem_dereg = rs_ucx_mem_dereg,
    .rkey_pack = rs_ucx_rkey_pack,
    .rkey_unpack = rs_ucx_rkey_unpack,
    .rkey_release = rs_ucx_rkey_release,
    .listen = rs_ucx_listen,
    .listener_close = rs_ucx_listener_close,
    .connect = rs_ucx_connect,
    .address = ucx_address,
    .connect_address = rs_ucx_connect_address,
    .ep_fail = rs_ucx_ep_fail,
    .ep_close = rs_ucx_ep_close,
    .put = rs_ucx_put,
    .get = rs_ucx_get,
    .getv = rs_ucx_getv,
    .fetch_add = rs_ucx_fetch_add,
    .flush = rs_ucx_flush,
    .msg_send = rs_ucx_msg_send,
};
