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

/* Warns once per process about RSHUFFLE_* variables the library does not read. */
void rs_env_warn_unknown_once(void);

/*
 * The library's one getenv: a variable's value or NULL; first warns (once)
 * about misspelt RSHUFFLE_* names.
 */
const char *rs_env_get(const char *name);

/* An unsigned integer in [min, max]; size suffixes k/K, m/M, g/G (binary) accepted. */
rs_status_t rs_env_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out);
rs_status_t rs_env_u32(const char *name, uint32_t min, uint32_t max, uint32_t *out);

/* 0/1, true/false, yes/no, on/off. */
rs_status_t rs_env_bool(const char *name, int *out);

/* One of the names in choices (NULL-terminated); *out is its index. */
rs_status_t rs_env_choice(const char *name, const char *const *choices, int *out);

/* A string of at most cap-1 bytes, copied into out[cap]. */
rs_status_t rs_env_str(const char *name, char *out, size_t cap);

/*
 * A numeric field of a config struct (uint32_t or uint64_t): its variable,
 * name, place and bounds. One table serves both the environment reader and
 * the validator, so the two cannot disagree.
 */
typedef struct rs_env_field {
    const char *env;
    const char *field;
    size_t offset, size;
    uint64_t min, max;
} rs_env_field_t;

#define RS_ENV_FIELD(type, env, field, min, max)                                   \
    {                                                                              \
        (env), #field, offsetof(type, field),                                      \
            _Generic(((type *)0)->field, uint32_t : 4, uint64_t : 8), (min), (max) \
    }

/* Reads each field's variable into cfg as rs_env_u32/u64 do; stops at the first error. */
rs_status_t rs_env_fields(const rs_env_field_t *fields, size_t n, void *cfg);

/* RS_OK if every field of cfg is within its bounds, else logs the first that is not
 * ("<what> field <name> = <v> is out of range ...") and returns RS_ERR_CONFIG. */
rs_status_t rs_env_fields_check(const rs_env_field_t *fields, size_t n, const void *cfg,
                                const char *what);

#endif
