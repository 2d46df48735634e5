/*
 * Verbs connections through librdmacm, all asynchronous on the context's
 * CM event channel: a client resolves the address, then the route, creates
 * its RC QP and connects; a listener accepts each request with a new QP
 * (RTS at once, so the handshake reply can go out before ESTABLISHED).
 * Every QP shares the context's PD, CQ and SRQ.
 *
 * rs_ctx_address names a listener: the first one bound to a concrete
 * address, else a wildcard listener (with an address of this device), else
 * one the context creates for the purpose (port chosen by the system).
 */
#include "transport/verbs/verbs.h"

#include "common/byteorder.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RS_V_ADDR_MAGIC   0x41565352u /* "RSVA" */
#define RS_V_ADDR_VERSION 1
#define RS_V_ADDR_LEN     26 /* magic 4, version 2, family 2, port 2, address 16 */
#define RS_V_BACKLOG      128
#define RS_V_CM_EVENTS    32 /* CM events handled per progress call */
/*
 * How long a sender that found no posted receive waits before retrying:
 * IB encoding 12 = 0.64 ms. rdma_cm leaves 0, which means 655 ms: a burst
 * of messages into a busy shared receive queue would crawl.
 */
#define RS_V_MIN_RNR_TIMER 12

/* ------------------------------------------------------------- addresses */

static int is_wildcard(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return 0;
}

static void sa_set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
    else
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
}

static const char *sa_str(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
    }
    snprintf(buf, len, "%s:%u", host, port);
    return buf;
}

/* host:port to a socket address; host NULL or "" means any (listeners only). */
static rs_status_t resolve(const char *host, uint16_t port, int passive,
                           struct sockaddr_storage *ss)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
    struct addrinfo *res = NULL;
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%u", port);
    if (host != NULL && host[0] == '\0')
        host = NULL;
    int rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0) {
        rs_error("verbs: cannot resolve %s: %s", host != NULL ? host : "(any)", gai_strerror(rc));
        return passive ? RS_ERR_INVALID : RS_ERR_UNREACHABLE;
    }
    /* IPv4 first: RoCE deployments and IPoIB both have it. */
    const struct addrinfo *pick = NULL;
    for (const struct addrinfo *a = res; a != NULL; a = a->ai_next) {
        if (a->ai_family == AF_INET || (a->ai_family == AF_INET6 && pick == NULL))
            pick = a;
        if (pick != NULL && pick->ai_family == AF_INET)
            break;
    }
    if (pick == NULL) {
        freeaddrinfo(res);
        rs_error("verbs: %s has no IPv4 or IPv6 address", host != NULL ? host : "(any)");
        return RS_ERR_UNREACHABLE;
    }
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    freeaddrinfo(res);
    return RS_OK;
}

/* An address of this context's device (for blobs), from the interfaces rdma_cm can bind. */
static rs_status_t device_address(rs_vctx_t *vc, struct sockaddr_storage *out)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) {
        rs_error("verbs: getifaddrs failed: %s", strerror(errno));
        return RS_ERR_IO;
    }
    rs_status_t st = RS_ERR_UNSUPPORTED;
    for (int want = AF_INET; st != RS_OK && want != 0; want = want == AF_INET ? AF_INET6 : 0) {
        for (struct ifaddrs *i = ifs; i != NULL && st != RS_OK; i = i->ifa_next) {
            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != want ||
                (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
                continue;
            if (want == AF_INET6 &&
                IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
                continue;
            struct sockaddr_storage ss;
            memset(&ss, 0, sizeof(ss));
            memcpy(&ss, i->ifa_addr,
                   want == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
            struct rdma_cm_id *probe = NULL;
            if (rdma_create_id(vc->cm, &probe, NULL, RDMA_PS_TCP) != 0)
                continue;
            if (rdma_bind_addr(probe, (struct sockaddr *)&ss) == 0 && probe->verbs == vc->dev) {
                *out = ss;
                st = RS_OK;
            }
            rdma_destroy_id(probe);
        }
    }
    freeifaddrs(ifs);
    if (st != RS_OK)
        rs_error("verbs: no interface address belongs to device %s",
                 ibv_get_device_name(vc->dev->device));
    return st;
}

/* ------------------------------------------------------------- endpoints */

static rs_vep_t *vep_new(rs_vctx_t *vc, rs_ep_t *ep)
{
    rs_vep_t *v = calloc(1, sizeof(*v));
    if (v == NULL) {
        rs_error("verbs: out of memory for an endpoint");
        return NULL;
    }
    v->kind = RS_VCM_EP;
    v->vc = vc;
    v->ep = ep;
    v->uid = vc->next_uid++;
    if (vc->next_uid == 0 || vc->next_uid > 0x7fffffffu)
        vc->next_uid = 1;
    rs_list_init(&v->backlog);
    rs_list_add_tail(&vc->eps, &v->link);
    ep->be = v;
    return v;
}

static void vep_free(rs_vep_t *v)
{
    rs_list_del(&v->link);
    v->ep->be = NULL;
    free(v);
}

/* The endpoint's QP on the context's PD, CQ and SRQ (its id is on the context's device). */
static rs_status_t vep_create_qp(rs_vep_t *v)
{
    rs_vctx_t *vc = v->vc;
    if (vc->cq_free < 2) {
        rs_error("verbs: the CQ has no room for another endpoint (RSHUFFLE_VERBS_CQ_DEPTH)");
        return RS_ERR_BUSY;
    }
    uint32_t inl = vc->inline_req;
    for (;;) {
        struct ibv_qp_init_attr a = {
            .send_cq = vc->cq,
            .recv_cq = vc->cq,
            .srq = vc->srq,
            .qp_type = IBV_QPT_RC,
            .cap = {.max_send_wr = vc->sq_depth + 1, .max_send_sge = 1, .max_inline_data = inl},
        };
        if (rdma_create_qp(v->id, vc->pd, &a) == 0) {
            if (a.cap.max_inline_data < inl)
                inl = a.cap.max_inline_data;
            break;
        }
        if (inl == 0) {
            rs_error("verbs: rdma_create_qp failed: %s", strerror(errno));
            return RS_ERR_TRANSPORT;
        }
        inl /= 2; /* the device may support less inline data than configured */
    }
    v->qp = v->id->qp;
    v->qp_num = v->qp->qp_num;
    rs_status_t st = rs_verbs_ep_init_sq(v, vc->sq_depth, inl);
    if (st != RS_OK) {
        rdma_destroy_qp(v->id);
        v->qp = NULL;
        return st;
    }
    rs_verbs_qp_table_add(vc, v);
    vc->cq_free--; /* this QP's tail write */
    v->counted = 1;
    return RS_OK;
}

/* Once the QP is ready to send: a short receiver-not-ready delay (see RS_V_MIN_RNR_TIMER). */
static void tune_rts_qp(rs_vep_t *v)
{
    struct ibv_qp_attr a = {.min_rnr_timer = RS_V_MIN_RNR_TIMER};
    int rc = ibv_modify_qp(v->qp, &a, IBV_QP_MIN_RNR_TIMER);
    if (rc != 0)
        rs_debug("verbs: cannot shorten the RNR timer of QP %u: %s", v->qp_num, strerror(rc));
}

static uint8_t resp_resources(const rs_vctx_t *vc)
{
    int r = vc->dattr.max_qp_rd_atom;
    return (uint8_t)(r > 255 ? 255 : r);
}

static void vep_fail(rs_vep_t *v, rs_status_t st)
{
    if (!v->failed)
        rs_tp_ep_failed(v->ep, st);
}

static rs_status_t start_connect(rs_vctx_t *vc, rs_ep_t *ep, struct sockaddr_storage *ss)
{
    char str[80];
    rs_vep_t *v = vep_new(vc, ep);
    if (v == NULL)
        return RS_ERR_NOMEM;
    if (rdma_create_id(vc->cm, &v->id, v, RDMA_PS_TCP) != 0) {
        rs_error("verbs: rdma_create_id failed: %s", strerror(errno));
        vep_free(v);
        return RS_ERR_TRANSPORT;
    }
    int ms = (int)vc->cfg->connect_timeout_ms;
    if (rdma_resolve_addr(v->id, NULL, (struct sockaddr *)ss, ms) != 0) {
        rs_error("verbs: cannot resolve %s to an RDMA device: %s",
                 sa_str((struct sockaddr *)ss, str, sizeof(str)), strerror(errno));
        rdma_destroy_id(v->id);
        vep_free(v);
        return RS_ERR_UNREACHABLE;
    }
    rs_debug("verbs: connecting to %s", sa_str((struct sockaddr *)ss, str, sizeof(str)));
    return RS_OK;
}

rs_status_t rs_verbs_connect(rs_ctx_t *ctx, rs_ep_t *ep, const char *host, uint16_t port)
{
    struct sockaddr_storage ss;
    if (host == NULL || host[0] == '\0') {
        rs_error("verbs: connect needs a host");
        return RS_ERR_INVALID;
    }
    rs_status_t st = resolve(host, port, 0, &ss);
    if (st != RS_OK)
        return st;
    return start_connect(rs_verbs_vctx(ctx), ep, &ss);
}

void rs_verbs_ep_close(rs_ep_t *ep)
{
    rs_vep_t *v = ep->be;
    if (v == NULL)
        return;
    rs_vctx_t *vc = v->vc;
    rs_verbs_ep_fail(ep);
    rs_verbs_qp_table_del(vc, v);
    if (v->qp != NULL)
        rdma_destroy_qp(v->id);
    v->qp = NULL;
    rs_verbs_ep_release_sq(v);
    if (v->counted)
        vc->cq_free++;
    if (v->id != NULL && rdma_destroy_id(v->id) != 0)
        rs_warn("verbs: rdma_destroy_id failed: %s", strerror(errno));
    vep_free(v);
}

/* ------------------------------------------------------------- listeners */

static rs_status_t listen_on(rs_vctx_t *vc, rs_listener_t *l, struct sockaddr_storage *ss,
                             rs_vlistener_t **vl_p)
{
    char str[80];
    rs_status_t st;
    rs_vlistener_t *vl = calloc(1, sizeof(*vl));
    if (vl == NULL) {
        rs_error("verbs: out of memory for a listener");
        return RS_ERR_NOMEM;
    }
    vl->kind = RS_VCM_LISTENER;
    vl->vc = vc;
    vl->l = l;
    if (rdma_create_id(vc->cm, &vl->id, vl, RDMA_PS_TCP) != 0) {
        rs_error("verbs: rdma_create_id failed: %s", strerror(errno));
        st = RS_ERR_TRANSPORT;
        goto err_free;
    }
    sa_str((struct sockaddr *)ss, str, sizeof(str));
    if (rdma_bind_addr(vl->id, (struct sockaddr *)ss) != 0) {
        int e = errno;
        rs_error("verbs: cannot listen on %s: %s%s", str, strerror(e),
                 e == ENODEV || e == EADDRNOTAVAIL ? " (not an address of an RDMA device)" : "");
        st = e == EADDRINUSE ? RS_ERR_EXISTS : RS_ERR_UNREACHABLE;
        goto err_destroy_id;
    }
    if (vl->id->verbs != NULL && vl->id->verbs != vc->dev) {
        rs_error("verbs: %s belongs to device %s, this context uses %s (RSHUFFLE_VERBS_DEVICE)",
                 str, ibv_get_device_name(vl->id->verbs->device),
                 ibv_get_device_name(vc->dev->device));
        st = RS_ERR_UNREACHABLE;
        goto err_destroy_id;
    }
    if (rdma_listen(vl->id, RS_V_BACKLOG) != 0) {
        rs_error("verbs: rdma_listen on %s failed: %s", str, strerror(errno));
        st = RS_ERR_TRANSPORT;
        goto err_destroy_id;
    }
    rs_list_add_tail(&vc->listeners, &vl->link);
    rs_debug("verbs: listening on %s port %u", str, ntohs(rdma_get_src_port(vl->id)));
    *vl_p = vl;
    return RS_OK;

err_destroy_id:
    rdma_destroy_id(vl->id);
err_free:
    free(vl);
    return st;
}

rs_status_t rs_verbs_listen(rs_ctx_t *ctx, rs_listener_t *l, const char *host, uint16_t port)
{
    struct sockaddr_storage ss;
    rs_vlistener_t *vl;
    rs_status_t st = resolve(host, port, 1, &ss);
    if (st != RS_OK)
        return st;
    st = listen_on(rs_verbs_vctx(ctx), l, &ss, &vl);
    if (st != RS_OK)
        return st;
    l->port = ntohs(rdma_get_src_port(vl->id));
    l->be = vl;
    return RS_OK;
}

void rs_verbs_listener_free(rs_vlistener_t *vl)
{
    if (vl->vc->own_listener == vl)
        vl->vc->own_listener = NULL;
    rs_list_del(&vl->link);
    if (rdma_destroy_id(vl->id) != 0)
        rs_warn("verbs: rdma_destroy_id of a listener failed: %s", strerror(errno));
    free(vl);
}

void rs_verbs_listener_close(rs_listener_t *l)
{
    if (l->be != NULL)
        rs_verbs_listener_free(l->be);
    l->be = NULL;
}

/* ---------------------------------------------------- address blobs */

rs_status_t rs_verbs_address(rs_ctx_t *ctx, void *buf, size_t buflen, size_t *len_p)
{
    rs_vctx_t *vc = rs_verbs_vctx(ctx);
    struct sockaddr_storage ss;
    rs_vlistener_t *pick = NULL;
    rs_list_t *pos, *tmp;
    if (buflen < RS_V_ADDR_LEN)
        return RS_ERR_NO_SPACE;
    rs_list_for_each_safe(pos, tmp, &vc->listeners)
    {
        rs_vlistener_t *vl = RS_CONTAINER_OF(pos, rs_vlistener_t, link);
        if (pick == NULL || (is_wildcard(rdma_get_local_addr(pick->id)) &&
                             !is_wildcard(rdma_get_local_addr(vl->id))))
            pick = vl;
    }
    if (pick != NULL) {
        struct sockaddr *sa = rdma_get_local_addr(pick->id);
        if (is_wildcard(sa)) {
            rs_status_t st = device_address(vc, &ss);
            if (st != RS_OK)
                return st;
        } else {
            memset(&ss, 0, sizeof(ss));
            memcpy(&ss, sa,
                   sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                             : sizeof(struct sockaddr_in));
        }
        sa_set_port(&ss, ntohs(rdma_get_src_port(pick->id)));
    } else {
        rs_status_t st = device_address(vc, &ss);
        if (st == RS_OK)
            st = listen_on(vc, NULL, &ss, &pick);
        if (st != RS_OK)
            return st;
        vc->own_listener = pick;
        sa_set_port(&ss, ntohs(rdma_get_src_port(pick->id)));
    }

    unsigned char *p = buf;
    memset(p, 0, RS_V_ADDR_LEN);
    rs_put_le(p, RS_V_ADDR_MAGIC, 4);
    rs_put_le(p + 4, RS_V_ADDR_VERSION, 2);
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        rs_put_le(p + 6, 4, 2);
        rs_put_le(p + 8, ntohs(in->sin_port), 2);
        memcpy(p + 10, &in->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        rs_put_le(p + 6, 6, 2);
        rs_put_le(p + 8, ntohs(in6->sin6_port), 2);
        memcpy(p + 10, &in6->sin6_addr, 16);
    }
    *len_p = RS_V_ADDR_LEN;
    return RS_OK;
}

rs_status_t rs_verbs_connect_address(rs_ctx_t *ctx, rs_ep_t *ep, const void *blob, size_t len)
{
    const unsigned char *p = blob;
    if (len != RS_V_ADDR_LEN || rs_get_le(p, 4) != RS_V_ADDR_MAGIC ||
        rs_get_le(p + 4, 2) != RS_V_ADDR_VERSION) {
        rs_error("verbs: not a verbs context address (%zu bytes)", len);
        return RS_ERR_INVALID;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    uint32_t family = rs_get_le(p + 6, 2);
    uint16_t port = (uint16_t)rs_get_le(p + 8, 2);
    if (family == 4) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, p + 10, 4);
    } else if (family == 6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_addr, p + 10, 16);
    } else {
        rs_error("verbs: context address of unknown family %u", family);
        return RS_ERR_INVALID;
    }
    if (port == 0) {
        rs_error("verbs: context address without a port");
        return RS_ERR_INVALID;
    }
    sa_set_port(&ss, port);
    return start_connect(rs_verbs_vctx(ctx), ep, &ss);
}

/* ------------------------------------------------------------ CM events */

static void on_connect_request(rs_vctx_t *vc, struct rdma_cm_id *id,
                               const struct rdma_conn_param *req)
{
    rs_ep_t *ep = NULL;
    if (id->verbs != vc->dev) {
        rs_warn("verbs: connection request on device %s refused: this context uses %s",
                id->verbs != NULL ? ibv_get_device_name(id->verbs->device) : "?",
                ibv_get_device_name(vc->dev->device));
        goto err_reject;
    }
    ep = rs_tp_ep_new_accepted(vc->ctx);
    if (ep == NULL)
        goto err_reject;
    rs_vep_t *v = vep_new(vc, ep);
    if (v == NULL)
        goto err_reject_ep;
    v->id = id;
    id->context = v;
    rs_status_t st = vep_create_qp(v);
    if (st != RS_OK) {
        rdma_reject(id, NULL, 0);
        vep_fail(v, st); /* the generic layer reaps it: ep_close destroys the id */
        return;
    }
    /* The request's initiator depth is, from here, what we may issue. */
    v->rd_cap = req->initiator_depth < vc->rd_cap ? req->initiator_depth : vc->rd_cap;
    uint8_t resp = resp_resources(vc);
    struct rdma_conn_param cp = {
        .initiator_depth = (uint8_t)v->rd_cap,
        .responder_resources = req->responder_resources < resp ? req->responder_resources : resp,
        .retry_count = 7,
        .rnr_retry_count = 7,
    };
    if (rdma_accept(id, &cp) != 0) {
        rs_error("verbs: rdma_accept failed: %s", strerror(errno));
        vep_fail(v, RS_ERR_TRANSPORT);
        return;
    }
    v->can_post = 1; /* rdma_accept moved the QP to RTS */
    tune_rts_qp(v);
    return;

err_reject_ep:
    rs_tp_ep_failed(ep, RS_ERR_NOMEM);
err_reject:
    rdma_reject(id, NULL, 0);
    if (ep == NULL || ep->be == NULL)
        rdma_destroy_id(id);
}

static void on_resolved_addr(rs_vep_t *v)
{
    if (v->id->verbs != v->vc->dev) {
        rs_error("verbs: the peer is reachable only through device %s, this context uses %s "
                 "(RSHUFFLE_VERBS_DEVICE)",
                 v->id->verbs != NULL ? ibv_get_device_name(v->id->verbs->device) : "?",
                 ibv_get_device_name(v->vc->dev->device));
        vep_fail(v, RS_ERR_UNREACHABLE);
        return;
    }
    if (rdma_resolve_route(v->id, (int)v->vc->cfg->connect_timeout_ms) != 0) {
        rs_error("verbs: rdma_resolve_route failed: %s", strerror(errno));
        vep_fail(v, RS_ERR_UNREACHABLE);
    }
}

static void on_resolved_route(rs_vep_t *v)
{
    rs_vctx_t *vc = v->vc;
    rs_status_t st = vep_create_qp(v);
    if (st != RS_OK) {
        vep_fail(v, st);
        return;
    }
    struct rdma_conn_param cp = {
        .initiator_depth = (uint8_t)vc->rd_cap,
        .responder_resources = resp_resources(vc),
        .retry_count = 7,
        .rnr_retry_count = 7, /* wait for receivers (7: no limit); peer_timeout_ms bounds it */
    };
    if (rdma_connect(v->id, &cp) != 0) {
        rs_error("verbs: rdma_connect failed: %s", strerror(errno));
        vep_fail(v, RS_ERR_TRANSPORT);
    }
}

static void on_established(rs_vep_t *v, const struct rdma_conn_param *p)
{
    if (v->ep->accepted)
        return; /* already RTS since the accept */
    /* The reply's initiator depth is what the server lets us issue. */
    v->rd_cap = p->initiator_depth != 0 && p->initiator_depth < v->vc->rd_cap ? p->initiator_depth
                                                                              : v->vc->rd_cap;
    v->can_post = 1;
    tune_rts_qp(v);
    rs_tp_ep_connected(v->ep);
}

static void on_ep_event(rs_vep_t *v, const struct rdma_cm_event *ev)
{
    if (v->failed)
        return; /* late events (a route after a timeout) must not build a QP for a dead endpoint */
    switch (ev->event) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            on_resolved_addr(v);
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED:
            on_resolved_route(v);
            break;
        case RDMA_CM_EVENT_ESTABLISHED:
            on_established(v, &ev->param.conn);
            break;
        case RDMA_CM_EVENT_REJECTED:
            rs_debug("verbs: connection rejected (status %d)", ev->status);
            vep_fail(v, RS_ERR_REFUSED);
            break;
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_CONNECT_ERROR:
            rs_debug("verbs: %s (status %d)", rdma_event_str(ev->event), ev->status);
            vep_fail(v, RS_ERR_UNREACHABLE);
            break;
        case RDMA_CM_EVENT_DISCONNECTED: /* the peer closed in order */
            rs_debug("verbs: %s on QP %u", rdma_event_str(ev->event), v->qp_num);
            if (!v->failed)
                rs_tp_ep_peer_closed(v->ep);
            break;
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            rs_debug("verbs: %s on QP %u", rdma_event_str(ev->event), v->qp_num);
            vep_fail(v, RS_ERR_UNREACHABLE);
            break;
        default:
            break; /* TIMEWAIT_EXIT, ADDR_CHANGE: nothing to do */
    }
}

unsigned rs_verbs_cm_progress(rs_vctx_t *vc)
{
    unsigned n = 0;
    while (n < RS_V_CM_EVENTS) {
        struct rdma_cm_event *e;
        if (rdma_get_cm_event(vc->cm, &e) != 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                rs_warn("verbs: rdma_get_cm_event failed: %s", strerror(errno));
            break;
        }
        /* Acknowledged before handling: destroying an id waits for its acks. */
        struct rdma_cm_event ev = *e;
        rdma_ack_cm_event(e);
        n++;
        if (ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            on_connect_request(vc, ev.id, &ev.param.conn);
            continue;
        }
        rs_vcm_kind_t *kind = ev.id->context;
        if (kind == NULL)
            continue;
        if (*kind == RS_VCM_EP)
            on_ep_event((rs_vep_t *)kind, &ev);
        else if (ev.event == RDMA_CM_EVENT_DEVICE_REMOVAL)
            rs_error("verbs: the RDMA device of a listener was removed");
    }
    return n;
}
