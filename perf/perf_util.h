/* Helpers shared by the perf drivers (public API only, like the drivers). */
#ifndef RS_PERF_UTIL_H
#define RS_PERF_UTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <string.h>

/*
 * True when the machine's RDMA devices include a software one (Soft-RoCE
 * rxe*, soft-iWARP siw*): numbers measured on it are functional only and
 * say nothing about hardware, so drivers label them "functional": true.
 */
static inline bool perf_soft_rdma_device(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    struct dirent *e;
    bool soft = false;
    if (d == NULL)
        return false;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "rxe", 3) == 0 || strncmp(e->d_name, "siw", 3) == 0)
            soft = true;
    closedir(d);
    return soft;
}

#endif
