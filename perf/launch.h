/*
 * How a bench's processes find each other. The default ("local") is the
 * bench's own: it forks its roles and swaps addresses over pipes. "mpi"
 * (perf/launch_mpi.c, built where CMake finds MPI) makes every MPI rank one
 * process of the bench, on any number of hosts, and exchanges addresses and
 * results with MPI collectives (`mpirun -np N rs-shuffle-bench --launcher
 * mpi`; srun the same way through MPI). Without MPI, perf/launch_none.c
 * answers launch_start with "built without MPI".
 *
 * Every call but launch_start, launch_rank and launch_size is collective:
 * each rank calls it, in the same order. Each answers 0, or dies (exit 1,
 * the MPI job is aborted): a bench that lost a rank measures nothing.
 */
#ifndef RS_PERF_LAUNCH_H
#define RS_PERF_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

/*
 * Starts launcher `name` ("mpi"); 0 on success. Exits 2 after saying why
 * when this build has no such launcher.
 */
int launch_start(const char *prog, const char *name, int *argc, char ***argv);
/* This process's rank and the number of ranks: 0 and 1 when no launcher was started. */
int launch_rank(void);
int launch_size(void);
/* Every rank's len bytes at mine, in rank order at all (size * len bytes). */
void launch_allgather(const void *mine, void *all, size_t len);
/* root's len bytes at buf, at buf on every rank. */
void launch_bcast(void *buf, size_t len, int root);
/* Element-wise over ranks, the result at every rank: sums, maxima, bitwise or. */
void launch_sum_u64(uint64_t *v, size_t n);
void launch_max_f64(double *v, size_t n);
void launch_or_bytes(uint8_t *v, size_t n);
void launch_barrier(void);
/*
 * The address this rank's listeners should use, so every other rank can
 * reach it: 127.0.0.1 when all ranks share one host, else the IPv4 address
 * of the first interface that is up and not loopback (the one UCX_NET_DEVICES
 * names, when it names a network interface). Collective.
 */
void launch_host(char *buf, size_t cap);
/* Ends the launcher (MPI_Finalize); nothing when none was started. */
void launch_end(void);

#endif
