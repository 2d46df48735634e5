/*
 * The UCX backend's address blob (what rs_ctx_address, the front door and
 * a connect-back carry): UCX's full worker address, its network-only one
 * and a place key, so that a peer decides reachability itself. UCX takes
 * shared memory (SysV, POSIX, CMA) as reachable from the same kernel,
 * whatever the namespaces: a process in another network namespace (a
 * container on the same host) would wire up through it and never get a
 * handshake. A peer whose place key differs from ours connects by the
 * network-only address.
 *
 *   u32 magic "RSUA", u32 version 1, u64 place key, u32 full_len,
 *   u32 net_len, full_len bytes, net_len bytes (0: none)
 */
#include "transport/ucx/ucx.h"

#include "common/checksum.h"
#include "common/cursor.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ADDR_MAGIC   0x41555352u
#define ADDR_VERSION 1u
#define ADDR_HDR     24u

/* Mixes the inode (and device) of path into key; 0 when it cannot be read. */
static uint64_t mix_file(uint64_t key, const char *path)
{
    struct stat st;
    if (key == 0 || stat(path, &st) != 0)
        return 0;
    uint64_t v[2] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino};
    return rs_checksum64_seeded(v, sizeof(v), key);
}

uint64_t rs_ucx_place_key(void)
{
    char boot[64] = {0};
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == NULL)
        return 0;
    size_t n = fread(boot, 1, sizeof(boot) - 1, f);
    fclose(f);
    if (n == 0)
        return 0;
    /* Shared memory needs the kernel, the IPC and pid namespaces (CMA) and
     * /dev/shm; loopback TCP the network namespace. */
    uint64_t key = rs_checksum64_seeded(boot, n, 0x9e3779b97f4a7c15ull);
    static const char *const parts[] = {"/proc/self/ns/net", "/proc/self/ns/ipc",
                                        "/proc/self/ns/pid", "/dev/shm"};
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        key = mix_file(key, parts[i]);
    return key;
}

rs_status_t rs_ucx_addr_pack(uint64_t place_key, const void *full, size_t full_len, const void *net,
                             size_t net_len, unsigned char **blob_p, size_t *len_p)
{
    size_t len = ADDR_HDR + full_len + net_len;
    if (full_len == 0 || len > RS_ADDR_BLOB_MAX) {
        rs_error("UCX worker address of %zu + %zu bytes: more than a blob holds", full_len,
                 net_len);
        return RS_ERR_NO_SPACE;
    }
    unsigned char *b = malloc(len);
    if (b == NULL)
        return RS_ERR_NOMEM;
    rs_wbuf_t w;
    rs_wbuf_init(&w, b, len);
    rs_w_u32(&w, ADDR_MAGIC);
    rs_w_u32(&w, ADDR_VERSION);
    rs_w_u64(&w, place_key);
    rs_w_u32(&w, (uint32_t)full_len);
    rs_w_u32(&w, (uint32_t)net_len);
    rs_w_bytes(&w, full, full_len);
    rs_w_bytes(&w, net, net_len);
    *blob_p = b;
    *len_p = len;
    return RS_OK;
}

rs_status_t rs_ucx_addr_pick(uint64_t place_key, const void *blob, size_t len, const void **addr_p,
                             int *full_p)
{
    rs_rbuf_t r;
    rs_rbuf_init(&r, blob, len);
    uint32_t magic = rs_r_u32(&r), version = rs_r_u32(&r);
    uint64_t key = rs_r_u64(&r);
    uint32_t full_len = rs_r_u32(&r), net_len = rs_r_u32(&r);
    if (r.truncated || magic != ADDR_MAGIC)
        return RS_ERR_BAD_MAGIC;
    if (version != ADDR_VERSION)
        return RS_ERR_BAD_VERSION;
    if (full_len == 0 || (uint64_t)full_len + net_len != rs_r_left(&r))
        return RS_ERR_BAD_LENGTH;
    const uint8_t *full = rs_r_take(&r, full_len), *net = rs_r_take(&r, net_len);
    /* Another place (or ours unknown): shared memory is not to be tried. */
    int same = place_key != 0 && key == place_key;
    int use_full = same || net_len == 0;
    *addr_p = use_full ? (const void *)full : (const void *)net;
    if (full_p != NULL)
        *full_p = use_full;
    return RS_OK;
}
