/* Backend selection: RSHUFFLE_TRANSPORT=ucx|verbs|auto. */
#include "transport/internal.h"

#include "common/log.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

/*
 * True when some RDMA device has a port in state ACTIVE. Read from sysfs so
 * that the generic layer never links against or loads libibverbs itself.
 */
int rs_tp_rdma_device_active(void)
{
    const char *root = "/sys/class/infiniband";
    DIR *devs = opendir(root);
    if (devs == NULL)
        return 0;
    int active = 0;
    struct dirent *dev;
    while (!active && (dev = readdir(devs)) != NULL) {
        if (dev->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof(path), "%s/%s/ports", root, dev->d_name);
        DIR *ports = opendir(path);
        if (ports == NULL)
            continue;
        struct dirent *port;
        while (!active && (port = readdir(ports)) != NULL) {
            if (port->d_name[0] == '.')
                continue;
            char state_path[800], state[64] = "";
            snprintf(state_path, sizeof(state_path), "%s/%s/state", path, port->d_name);
            FILE *f = fopen(state_path, "r");
            if (f == NULL)
                continue;
            if (fgets(state, sizeof(state), f) != NULL && strstr(state, "ACTIVE") != NULL)
                active = 1;
            fclose(f);
        }
        closedir(ports);
    }
    closedir(devs);
    return active;
}

/* name: the backend's RSHUFFLE_TRANSPORT value; option: its CMake option. */
static rs_status_t built(const rs_backend_ops_t *ops, const char *name, const char *option,
                         const rs_backend_ops_t **ops_p)
{
    if (ops == NULL) {
        rs_error("transport %s: not built into this library (configured with %s=OFF)", name,
                 option);
        return RS_ERR_UNSUPPORTED;
    }
    *ops_p = ops;
    return RS_OK;
}

rs_status_t rs_tp_select_backend(const rs_config_t *cfg, const rs_backend_ops_t **ops_p)
{
    switch (cfg->transport) {
        case RS_TRANSPORT_UCX:
            return built(rs_tp_ucx_backend(), "ucx", "RS_WITH_UCX", ops_p);
        case RS_TRANSPORT_VERBS:
            return built(rs_tp_verbs_backend(), "verbs", "RS_WITH_VERBS", ops_p);
        case RS_TRANSPORT_AUTO:
            if (rs_tp_verbs_backend() != NULL &&
                (rs_tp_ucx_backend() == NULL || rs_tp_rdma_device_active()))
                return built(rs_tp_verbs_backend(), "verbs", "RS_WITH_VERBS", ops_p);
            return built(rs_tp_ucx_backend(), "ucx", "RS_WITH_UCX", ops_p);
    }
    rs_error("unknown transport kind %d", (int)cfg->transport);
    return RS_ERR_CONFIG;
}
