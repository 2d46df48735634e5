#include "common/shuffle_proto.h"

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

rs_status_t rs_smsg_status(const void *data, size_t len, unsigned type)
{
    rs_smsg_hdr_t h;
    rs_status_t s = rs_smsg_check(data, len, type, sizeof(h), 0, 0);
    if (s != RS_OK)
        return s;
    memcpy(&h, data, sizeof(h));
    return (rs_status_t)h.status;
}
