/* Start-up checks of a worker's memory limit and spill directory (limits.h). */
#include "worker/limits.h"

#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* MemAvailable from a meminfo file, else the free pages sysconf reports (older kernels). */
static uint64_t mem_available(const char *meminfo_path)
{
    FILE *f = fopen(meminfo_path, "r");
    if (f != NULL) {
        char line[128];
        unsigned long long kb;
        while (fgets(line, sizeof(line), f) != NULL) {
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return (uint64_t)kb << 10;
            }
        }
        fclose(f);
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* "<n> MiB" or "<n.n> GiB", for messages an operator reads. */
static const char *human(uint64_t bytes, char *buf, size_t cap)
{
    if (bytes >= (10ull << 30))
        snprintf(buf, cap, "%.1f GiB", (double)bytes / (double)(1ull << 30));
    else
        snprintf(buf, cap, "%" PRIu64 " MiB", bytes >> 20);
    return buf;
}

rs_status_t rs_wk_check_mem(uint64_t mem_limit, const char *meminfo_path, const char *shm_dir)
{
    uint64_t avail = mem_available(meminfo_path);
    uint64_t shm_free = UINT64_MAX;
    struct statvfs vfs;
    if (shm_dir != NULL) {
        if (statvfs(shm_dir, &vfs) != 0) {
            rs_error("worker: cannot check the free space of %s: %s", shm_dir, strerror(errno));
            return RS_ERR_CONFIG;
        }
        shm_free = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    }
    if (mem_limit <= avail && mem_limit <= shm_free)
        return RS_OK;
    char l[32], a[32], s[32];
    if (shm_dir != NULL)
        rs_error("worker: memory limit %s (%" PRIu64 " bytes) does not fit this host: %s "
                 "available (MemAvailable), %s free in %s; lower it (--mem, RSHUFFLE_WORKER_MEM)",
                 human(mem_limit, l, sizeof(l)), mem_limit, human(avail, a, sizeof(a)),
                 human(shm_free, s, sizeof(s)), shm_dir);
    else
        rs_error("worker: memory limit %s (%" PRIu64 " bytes) does not fit this host: %s "
                 "available (MemAvailable); lower it (--mem, RSHUFFLE_WORKER_MEM)",
                 human(mem_limit, l, sizeof(l)), mem_limit, human(avail, a, sizeof(a)));
    return RS_ERR_CONFIG;
}

rs_status_t rs_wk_check_spill_dir(const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        rs_error("worker: spill directory %s: %s", dir, strerror(errno));
        return RS_ERR_CONFIG;
    }
    if (!S_ISDIR(sb.st_mode)) {
        rs_error("worker: spill directory %s is not a directory", dir);
        return RS_ERR_CONFIG;
    }
    /* A real file, not access(W_OK): that says yes to root on a read-only mount. */
    char path[RS_SPILL_DIR_MAX + 32];
    snprintf(path, sizeof(path), "%s/rshuffle-probe-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) {
        rs_error("worker: spill directory %s does not take new files: %s", dir, strerror(errno));
        return RS_ERR_CONFIG;
    }
    unlink(path);
    close(fd);
    return RS_OK;
}

void rs_wk_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_cur != rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            rs_warn("worker: cannot raise the descriptor limit from %llu to %llu: %s",
                    (unsigned long long)was, (unsigned long long)rl.rlim_max, strerror(errno));
            rl.rlim_cur = was;
        }
    }
    if (rl.rlim_cur == RLIM_INFINITY)
        rs_info("worker: descriptor limit: unlimited");
    else if (rl.rlim_cur < 1024)
        rs_warn("worker: descriptor limit %llu (raised from %llu, the hard limit): about %llu "
                "clients over TCP before new ones are refused",
                (unsigned long long)rl.rlim_cur, (unsigned long long)was,
                (unsigned long long)(rl.rlim_cur * 7 / 8 / 3));
    else
        rs_info("worker: descriptor limit %llu (raised from %llu, the hard limit)",
                (unsigned long long)rl.rlim_cur, (unsigned long long)was);
}

void rs_wk_ignore_sigpipe(void)
{
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
        return;
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigemptyset(&ign.sa_mask);
    if (sigaction(SIGPIPE, &ign, NULL) == 0)
        rs_info("worker: SIGPIPE ignored (a peer's closed socket must not end the worker)");
}
