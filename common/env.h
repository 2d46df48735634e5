/*
 * Reading RSHUFFLE_* variables. Each reader leaves *out unchanged and
 * returns RS_OK when the variable is unset; a set but invalid value returns
 * RS_ERR_CONFIG after logging the variable's name, its value and what it
 * accepts.
 */
#ifndef RS_COMMON_ENV_H
#define RS_COMMON_ENV_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/status.h>

/* An unsigned integer in [min, max]; size suffixes k/K, m/M, g/G (binary) accepted. */
rs_status_t rs_env_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out);
rs_status_t rs_env_u32(const char *name, uint32_t min, uint32_t max, uint32_t *out);

/* 0/1, true/false, yes/no, on/off. */
rs_status_t rs_env_bool(const char *name, int *out);

/* One of the names in choices (NULL-terminated); *out is its index. */
rs_status_t rs_env_choice(const char *name, const char *const *choices, int *out);

/* A string of at most cap-1 bytes, copied into out[cap]. */
rs_status_t rs_env_str(const char *name, char *out, size_t cap);

/* Parses s as rs_env_u64 does, without the environment (used by CLI flags too). */
rs_status_t rs_parse_size(const char *s, uint64_t *out);

#endif
