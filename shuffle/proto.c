#include "shuffle/proto.h"

#include <stdlib.h>
#include <string.h>

rs_status_t rs_smsg_check(const void *data, size_t len, unsigned type, size_t fixed, size_t item,
                          uint64_t n_items)
{
    rs_smsg_hdr_t h;
    if (len < sizeof(h) || len < fixed)
        return RS_ERR_TRUNCATED;
    memcpy(&h, data, sizeof(h));
    if (h.version != RS_SPROTO_VERSION)
        return RS_ERR_BAD_VERSION;
    if (h.type != type)
        return RS_ERR_PROTOCOL;
    if (item > 0 && (n_items > (len - fixed) / item || fixed + n_items * item != len))
        return RS_ERR_PROTOCOL;
    return RS_OK;
}

rs_status_t rs_sproto_addr_split(const char *addr, char *host, size_t cap, uint16_t *port)
{
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= cap || colon[1] < '0' || colon[1] > '9')
        return RS_ERR_INVALID;
    char *end;
    unsigned long v = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || v == 0 || v > 65535)
        return RS_ERR_INVALID;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    *port = (uint16_t)v;
    return RS_OK;
}

rs_status_t rs_smsg_status(const void *data, size_t len, unsigned type)
{
    rs_smsg_hdr_t h;
    rs_status_t s = rs_smsg_check(data, len, type, sizeof(h), 0, 0);
    if (s != RS_OK)
        return s;
    memcpy(&h, data, sizeof(h));
    return (rs_status_t)h.status;
}
