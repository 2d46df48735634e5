/* The launcher of a build without MPI: one process, and --launcher mpi refused (perf/launch.h). */
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int launch_start(const char *prog, const char *name, int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr,
            "%s: --launcher %s: this build has no MPI (install libopenmpi-dev and "
            "reconfigure; scripts/install-deps check)\n",
            prog, name);
    exit(2);
}

int launch_rank(void)
{
    return 0;
}

int launch_size(void)
{
    return 1;
}

void launch_allgather(const void *mine, void *all, size_t len)
{
    memmove(all, mine, len);
}

void launch_bcast(void *buf, size_t len, int root)
{
    (void)buf;
    (void)len;
    (void)root;
}

void launch_sum_u64(uint64_t *v, size_t n)
{
    (void)v;
    (void)n;
}

void launch_max_f64(double *v, size_t n)
{
    (void)v;
    (void)n;
}

void launch_or_bytes(uint8_t *v, size_t n)
{
    (void)v;
    (void)n;
}

void launch_barrier(void)
{
}

void launch_host(char *buf, size_t cap)
{
    snprintf(buf, cap, "127.0.0.1");
}

void launch_end(void)
{
}
