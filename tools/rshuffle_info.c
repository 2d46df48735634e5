/*
 * rshuffle_info: what this rshuffle is and sees, like ucx_info.
 *
 *   rshuffle_info [-v] [-d] [-c] [--worker HOST:PORT [--json] [--drain]] [--help] [--version]
 *     -v  version and build options
 *     -d  backends and devices found (UCX transports and devices; verbs
 *         devices with ports, link layer and GIDs)
 *     -c  every RSHUFFLE_* variable: effective value, default, source, meaning;
 *         a value the library refuses is marked INVALID (exit status 1)
 *     --worker  a live worker's state (tools/info_worker.c)
 * With no option: -v.
 */
#include "info_worker.h"

#include <rshuffle/broadcast.h>
#include <rshuffle/config.h>
#include <rshuffle/log.h>
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/transport.h>
#include <rshuffle/version.h>
#include <rshuffle/worker.h>

#include "rs_build_info.h" /* RS_BUILD_COMMIT, RS_BUILD_TYPE (tools/build_info.cmake) */

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RS_HAVE_UCX
#include <ucp/api/ucp.h>
#endif
#ifdef RS_HAVE_VERBS
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#endif

static void usage(FILE *out)
{
    fprintf(out, "usage: rshuffle_info [-v] [-d] [-c] [--help] [--version]\n"
                 "  -v, --build    version and build options (the default)\n"
                 "  -d, --devices  backends and devices found\n"
                 "  -c, --config   every RSHUFFLE_* variable: value, default, source, meaning\n"
                 "                 (a refused value: INVALID, and exit status 1)\n"
                 "  --worker HOST:PORT  a live worker's state (RSHUFFLE_JOB_TOKEN); --json;\n"
                 "                 --drain: ask it to drain first (as SIGTERM)\n"
                 "  -h, --help     this text\n"
                 "  -V, --version  the version\n");
}

static void print_build(void)
{
    unsigned f = rs_build_features();
    printf("# rshuffle %s (headers %d.%d.%d)\n", rs_version(), RS_VERSION_MAJOR, RS_VERSION_MINOR,
           RS_VERSION_PATCH);
    printf("# backends: %s%s\n", (f & RS_FEATURE_UCX) ? "ucx " : "",
           (f & RS_FEATURE_VERBS) ? "verbs" : "");
    printf("# fault injection hooks: %s\n", (f & RS_FEATURE_FAULT_INJECTION) ? "yes" : "no");
    printf("# commit %s, build type %s\n", RS_BUILD_COMMIT, RS_BUILD_TYPE);
#ifdef RS_HAVE_UCX
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    printf("# UCX %u.%u.%u\n", major, minor, release);
#endif
}

#ifdef RS_HAVE_UCX
static int print_ucx(void)
{
    ucp_config_t *config;
    if (ucp_config_read(NULL, NULL, &config) != UCS_OK) {
        printf("# ucx: cannot read UCX's configuration\n");
        return 1;
    }
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                           .features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_AMO64};
    ucp_context_h ctx;
    ucs_status_t st = ucp_init(&params, config, &ctx);
    ucp_config_release(config);
    if (st != UCS_OK) {
        printf("# ucx: ucp_init failed: %s\n", ucs_status_string(st));
        return 1;
    }
    printf("# ucx: transports and devices UCX selected (UCX_TLS, UCX_NET_DEVICES apply)\n");
    fflush(stdout);
    ucp_context_print_info(ctx, stdout);
    ucp_cleanup(ctx);
    return 0;
}
#endif

#ifdef RS_HAVE_VERBS
static const char *link_layer(uint8_t ll)
{
    return ll == IBV_LINK_LAYER_ETHERNET     ? "Ethernet"
           : ll == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
                                             : "unspecified";
}

static void print_gids(struct ibv_context *ctx, uint8_t port, int n)
{
    for (int i = 0; i < n; i++) {
        union ibv_gid gid;
        if (ibv_query_gid(ctx, port, i, &gid) != 0)
            break;
        static const union ibv_gid zero;
        if (memcmp(&gid, &zero, sizeof(gid)) == 0)
            continue;
        char text[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
        printf("#       gid[%d] %s\n", i, text);
    }
}

static int print_verbs(void)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL || n == 0) {
        printf("# verbs: no RDMA device\n");
        if (list != NULL)
            ibv_free_device_list(list);
        return 0;
    }
    for (int d = 0; d < n; d++) {
        struct ibv_context *ctx = ibv_open_device(list[d]);
        if (ctx == NULL) {
            printf("# verbs: %s: cannot open\n", ibv_get_device_name(list[d]));
            continue;
        }
        struct ibv_device_attr attr;
        if (ibv_query_device(ctx, &attr) == 0) {
            printf("# verbs: %s: %u port(s), max_qp_rd_atom %d, max_mr_size %llu\n",
                   ibv_get_device_name(list[d]), attr.phys_port_cnt, attr.max_qp_rd_atom,
                   (unsigned long long)attr.max_mr_size);
            for (uint8_t p = 1; p <= attr.phys_port_cnt; p++) {
                struct ibv_port_attr pa;
                if (ibv_query_port(ctx, p, &pa) != 0)
                    continue;
                printf("#   port %u: %s, link layer %s, active mtu %d\n", p,
                       ibv_port_state_str(pa.state), link_layer(pa.link_layer),
                       128 << pa.active_mtu);
                print_gids(ctx, p, pa.gid_tbl_len);
            }
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    return 0;
}
#endif

/* The backend RSHUFFLE_TRANSPORT=auto (the default) picks here: one context made and closed. */
static int print_auto(void)
{
    rs_config_t cfg;
    if (rs_config_init(&cfg) != RS_OK) {
        printf("# backend: RSHUFFLE_* configuration invalid (see -c)\n");
        return 1;
    }
    cfg.transport = RS_TRANSPORT_AUTO;
    rs_ctx_t *ctx;
    rs_status_t s = rs_ctx_create(&cfg, &ctx);
    if (s != RS_OK) {
        printf("# backend: auto finds none: %s\n", rs_strerror(s));
        return 1;
    }
    printf("# backend: auto picks %s\n", rs_ctx_backend(ctx));
    rs_ctx_destroy(ctx);
    return 0;
}

static int print_devices(void)
{
    int bad = print_auto();
    unsigned f = rs_build_features();
    if (!(f & RS_FEATURE_UCX))
        printf("# ucx: not built (RS_WITH_UCX=OFF)\n");
    if (!(f & RS_FEATURE_VERBS))
        printf("# verbs: not built (RS_WITH_VERBS=OFF)\n");
#ifdef RS_HAVE_UCX
    bad |= print_ucx();
#endif
#ifdef RS_HAVE_VERBS
    bad |= print_verbs();
#endif
    return bad;
}

extern char **environ;

static int listed(const rs_config_var_t *vars, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(vars[i].name) == len && strncmp(vars[i].name, name, len) == 0)
            return 1;
    return 0;
}

static char refusal[256]; /* the parsers' last error line: why a value was refused */

static void capture(void *arg, rs_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg;
    (void)file;
    (void)line;
    if (level == RS_LOG_ERROR)
        snprintf(refusal, sizeof(refusal), "%s", msg);
}

/*
 * Every configuration parser of the library over the environment as it is
 * now. The UCX backend reads its variables (name, when one of them) as a
 * context is made: one is made and closed for them.
 */
static rs_status_t parse_all(const char *name)
{
    static const char *const two[] = {"127.0.0.1:1", "127.0.0.1:2"};
    rs_config_t t;
    rs_pusher_config_t p;
    rs_reader_config_t r;
    rs_worker_config_t w;
    rs_bcast_config_t b;
    rs_client_config_t cl;
    rs_shuffle_desc_t d = {.n_partitions = 1, .n_workers = 2, .workers = two};
    uint32_t replicas;
    rs_status_t s;
    rs_pusher_config_defaults(&p);
    rs_reader_config_defaults(&r);
    rs_worker_config_defaults(&w);
    rs_client_config_defaults(&cl);
    if ((s = rs_config_init(&t)) != RS_OK || (s = rs_pusher_config_from_env(&p)) != RS_OK ||
        (s = rs_reader_config_from_env(&r)) != RS_OK ||
        (s = rs_worker_config_from_env(&w)) != RS_OK || (s = rs_bcast_config_init(&b)) != RS_OK ||
        (s = rs_client_config_from_env(&cl)) != RS_OK)
        return s;
#ifdef RS_HAVE_UCX
    if (strncmp(name, "RSHUFFLE_UCX_", 13) == 0) {
        rs_ctx_t *ctx;
        t.transport = RS_TRANSPORT_UCX;
        s = rs_ctx_create(&t, &ctx);
        if (s == RS_OK)
            rs_ctx_destroy(ctx);
        else if (s == RS_ERR_CONFIG)
            return s; /* other failures (no usable transport) are -d's to tell */
    }
#else
    (void)name;
#endif
    return rs_shuffle_replicas(&d, &replicas);
}

/*
 * Whether the library takes the value of variable name: every parser runs
 * with that variable alone set (the others set aside for the call), so a
 * refusal names its own variable. RS_OK, or the refusal with its line in
 * refusal.
 */
static rs_status_t check_var(const char *name)
{
    size_t n = 0, cap = 16;
    char **saved = malloc(cap * sizeof(*saved));
    for (char **e = environ; saved != NULL && *e != NULL; e++) {
        size_t len = strlen(name);
        if (strncmp(*e, "RSHUFFLE_", 9) != 0 || (strncmp(*e, name, len) == 0 && (*e)[len] == '='))
            continue;
        if (n == cap) {
            char **more = realloc(saved, 2 * cap * sizeof(*saved));
            if (more == NULL)
                break;
            saved = more;
            cap *= 2;
        }
        saved[n++] = strdup(*e);
    }
    for (size_t i = 0; i < n; i++) {
        char *eq = saved[i] != NULL ? strchr(saved[i], '=') : NULL;
        if (eq != NULL) {
            *eq = '\0';
            unsetenv(saved[i]);
            *eq = '=';
        }
    }
    refusal[0] = '\0';
    rs_log_set_handler(capture, NULL);
    rs_status_t s = parse_all(name);
    rs_log_set_handler(NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        char *eq = saved[i] != NULL ? strchr(saved[i], '=') : NULL;
        if (eq != NULL) {
            *eq = '\0';
            setenv(saved[i], eq + 1, 1);
        }
        free(saved[i]);
    }
    free(saved);
    return s;
}

static int print_config(void)
{
    const rs_config_var_t *vars;
    size_t n = rs_config_vars(&vars);
    int bad = 0;
    printf("# %-30s %-12s %-12s %-11s %s\n", "variable", "value", "default", "source", "meaning");
    for (size_t i = 0; i < n; i++) {
        const char *env = getenv(vars[i].name);
        const char *value = env != NULL ? env : vars[i].default_value;
        if (env != NULL && strstr(vars[i].name, "TOKEN") != NULL)
            value = "(hidden)"; /* a secret: say only that it is set */
        rs_status_t s = env != NULL ? check_var(vars[i].name) : RS_OK;
        printf("%-32s %-12s %-12s %-11s %s\n", vars[i].name, value, vars[i].default_value,
               s != RS_OK    ? "INVALID"
               : env != NULL ? "environment"
                             : "default",
               vars[i].description);
        if (s != RS_OK) {
            printf("#   %s is refused: %s\n", vars[i].name, refusal[0] ? refusal : rs_strerror(s));
            bad = 1;
        }
    }
    for (char **e = environ; *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        size_t len = eq != NULL ? (size_t)(eq - *e) : strlen(*e);
        if (strncmp(*e, "RSHUFFLE_", 9) == 0 && strncmp(*e, "RSHUFFLE_TEST_", 14) != 0 &&
            !listed(vars, n, *e, len))
            printf("# %.*s: not a variable rshuffle reads (misspelt?)\n", (int)len, *e);
    }
    return bad;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"build", no_argument, NULL, 'v'},
        {"devices", no_argument, NULL, 'd'},
        {"config", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"worker", required_argument, NULL, 'W'},
        {"json", no_argument, NULL, 'J'},
        {"drain", no_argument, NULL, 'D'},
        {NULL, 0, NULL, 0},
    };
    int build = 0, devices = 0, config = 0, json = 0, drain = 0, c;
    const char *worker = NULL;
    while ((c = getopt_long(argc, argv, "vdchV", longopts, NULL)) != -1) {
        switch (c) {
            case 'v':
                build = 1;
                break;
            case 'd':
                devices = 1;
                break;
            case 'c':
                config = 1;
                break;
            case 'W':
                worker = optarg;
                break;
            case 'J':
                json = 1;
                break;
            case 'D':
                drain = 1;
                break;
            case 'h':
                usage(stdout);
                return 0;
            case 'V':
                printf("rshuffle_info %s\n", rs_version());
                return 0;
            default:
                usage(stderr);
                return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rshuffle_info: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (worker != NULL || json || drain) {
        if (worker == NULL || build || devices || config) {
            fprintf(stderr,
                    "rshuffle_info: --json and --drain go with --worker, which goes alone\n");
            return 2;
        }
        return rs_info_worker(worker, json, drain);
    }
    if (!build && !devices && !config)
        build = 1;
    int bad = 0;
    if (build)
        print_build();
    if (devices)
        bad = print_devices();
    if (config)
        bad |= print_config();
    return bad;
}
