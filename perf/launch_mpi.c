/*
 * The MPI launcher of the benches (perf/launch.h): ranks are the bench's
 * processes; addresses and results travel by MPI collectives.
 */
#include "launch.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <mpi.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int started, rank, size;
static const char *who = "launch";

static void check(int rc, const char *call)
{
    if (rc == MPI_SUCCESS)
        return;
    fprintf(stderr, "%s: rank %d: %s failed (%d)\n", who, rank, call, rc);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

int launch_start(const char *prog, const char *name, int *argc, char ***argv)
{
    who = prog;
    if (strcmp(name, "mpi") != 0) {
        fprintf(stderr, "%s: --launcher is local or mpi, not '%s'\n", prog, name);
        exit(2);
    }
    check(MPI_Init(argc, argv), "MPI_Init");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    started = 1;
    return 0;
}

int launch_rank(void)
{
    return started ? rank : 0;
}

int launch_size(void)
{
    return started ? size : 1;
}

void launch_allgather(const void *mine, void *all, size_t len)
{
    if (!started) {
        memmove(all, mine, len);
        return;
    }
    if (len > INT_MAX)
        check(MPI_ERR_COUNT, "MPI_Allgather (too large)");
    check(MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgather");
}

void launch_bcast(void *buf, size_t len, int root)
{
    for (size_t off = 0; started && off < len; off += 1u << 30) {
        size_t n = len - off < (1u << 30) ? len - off : 1u << 30;
        check(MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    }
}

/* In place, in chunks that an int counts. */
static void allreduce(void *v, size_t n, size_t elem, MPI_Datatype type, MPI_Op op)
{
    for (size_t off = 0; started && off < n; off += 1u << 28) {
        size_t k = n - off < (1u << 28) ? n - off : 1u << 28;
        check(MPI_Allreduce(MPI_IN_PLACE, (char *)v + off * elem, (int)k, type, op, MPI_COMM_WORLD),
              "MPI_Allreduce");
    }
}

void launch_sum_u64(uint64_t *v, size_t n)
{
    allreduce(v, n, sizeof(*v), MPI_UINT64_T, MPI_SUM);
}

void launch_max_f64(double *v, size_t n)
{
    allreduce(v, n, sizeof(*v), MPI_DOUBLE, MPI_MAX);
}

void launch_or_bytes(uint8_t *v, size_t n)
{
    allreduce(v, n, 1, MPI_UINT8_T, MPI_BOR);
}

void launch_barrier(void)
{
    if (started)
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

/* Does UCX_NET_DEVICES (a comma list of devices, "mlx5_0:1" or "eth0") name interface ifname? */
static int named_by_ucx(const char *ifname)
{
    const char *list = getenv("UCX_NET_DEVICES");
    size_t n = strlen(ifname);
    for (const char *p = list; p != NULL && *p != '\0';
         p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, ifname, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

void launch_host(char *buf, size_t cap)
{
    char name[MPI_MAX_PROCESSOR_NAME + 1] = {0};
    char *all = NULL;
    int len = 0, one_host = 1;
    if (started) {
        check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
        all = calloc((size_t)size, sizeof(name));
        if (all == NULL)
            check(MPI_ERR_NO_MEM, "calloc");
        launch_allgather(name, all, sizeof(name));
        for (int i = 1; i < size; i++)
            if (strcmp(all, all + (size_t)i * sizeof(name)) != 0)
                one_host = 0;
        free(all);
    }
    snprintf(buf, cap, "127.0.0.1");
    if (one_host)
        return;
    struct ifaddrs *ifs, *best = NULL;
    if (getifaddrs(&ifs) != 0) {
        gethostname(buf, cap);
        return;
    }
    for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        if (best == NULL || (named_by_ucx(i->ifa_name) && !named_by_ucx(best->ifa_name)))
            best = i;
    }
    if (best != NULL)
        inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)best->ifa_addr)->sin_addr, buf,
                  (socklen_t)cap);
    else
        gethostname(buf, cap);
    freeifaddrs(ifs);
}

void launch_end(void)
{
    if (started)
        MPI_Finalize();
    started = 0;
}
