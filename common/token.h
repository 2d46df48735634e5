/* Job tokens compared without leaking where they differ. */
#ifndef RS_COMMON_TOKEN_H
#define RS_COMMON_TOKEN_H

#include <stddef.h>
#include <rshuffle/config.h>

/*
 * 1 if the tokens are equal. Its time depends on neither token's bytes nor
 * on where they differ (both lengths must be <= RS_JOB_TOKEN_MAX; a longer
 * one is unequal).
 */
int rs_token_equal(const unsigned char *a, size_t a_len, const char *b, size_t b_len);

#endif
