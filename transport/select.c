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
int rs__rdma_device_active(void)
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

rs_status_t rs__select_backend(const rs_config_t *cfg, const rs_backend_ops_t **ops_p)
{
    switch (cfg->transport) {
        case RS_TRANSPORT_UCX:
            *ops_p = &rs_ucx_ops;
            return RS_OK;
        case RS_TRANSPORT_VERBS:
            *ops_p = &rs_verbs_ops;
            return RS_OK;
        case RS_TRANSPORT_AUTO:
            *ops_p = rs__rdma_device_active() ? &rs_verbs_ops : &rs_ucx_ops;
            return RS_OK;
    }
    rs_error("unknown transport kind %d", (int)cfg->transport);
    return RS_ERR_CONFIG;
}
