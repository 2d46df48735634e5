/* Job tokens compared in constant time (the handshake, the front door). */
#include "common/token.h"

#include <string.h>

int rs_token_equal(const unsigned char *a, size_t a_len, const char *b, size_t b_len)
{
    if (a_len > RS_JOB_TOKEN_MAX || b_len > RS_JOB_TOKEN_MAX)
        return 0;
    /* Both padded to the maximum: every comparison touches the same bytes. */
    unsigned char pa[RS_JOB_TOKEN_MAX] = {0}, pb[RS_JOB_TOKEN_MAX] = {0};
    memcpy(pa, a, a_len);
    memcpy(pb, b, b_len);
    volatile unsigned diff = (unsigned)(a_len ^ b_len);
    for (size_t i = 0; i < RS_JOB_TOKEN_MAX; i++)
        diff |= (unsigned)(pa[i] ^ pb[i]);
    return diff == 0;
}
