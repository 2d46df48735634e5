/*
 * Strict command-line numbers for the MPI yardsticks (which link MPI, not
 * rshuffle): digits only, an optional K/M/G (powers of 2) for sizes; 0 for
 * anything else or on overflow, which the callers refuse.
 */
#ifndef RS_PERF_MPI_ARGS_H
#define RS_PERF_MPI_ARGS_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static inline uint64_t mpi_parse_size(const char *s)
{
    if (s == NULL || *s < '0' || *s > '9') /* strtoull would take " -1" */
        return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    end += shift != 0;
    if (errno != 0 || *end != '\0' || (shift != 0 && v > (UINT64_MAX >> shift)))
        return 0;
    return (uint64_t)v << shift;
}

/* A count: digits only, at most max. */
static inline uint64_t mpi_parse_count(const char *s, uint64_t max)
{
    uint64_t v = mpi_parse_size(s);
    for (const char *p = s; v != 0 && *p != '\0'; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return v <= max ? v : 0;
}

#endif
