/*
 * Reading the environment. A module's RSHUFFLE_* variables are rows of its
 * configuration table (common/cfgtab.h), read by rs_cfg_apply; the readers
 * here serve the table code, the test builds' fault hooks and the
 * transport library's own variables.
 */
#ifndef RS_COMMON_ENV_H
#define RS_COMMON_ENV_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/status.h>

/* Warns once per process about RSHUFFLE_* variables the library does not read. */
void rs_env_warn_unknown_once(void);

/*
 * A variable's value or NULL; first warns (once) about misspelt RSHUFFLE_*
 * names. Every variable a module reads goes through here (or through its
 * table: common/cfgtab.h).
 */
const char *rs_env_get(const char *name);

/*
 * A variable's value or NULL, without the warning: for the logger's own
 * RSHUFFLE_LOG, read before the warning can be logged. The library's only
 * call of the C library's reader is behind it, in common/getenv.c
 * (scripts/check-layering, rule 4).
 */
const char *rs_env_raw(const char *name);

/* Calls fn with each environment entry ("NAME=value") whose first len bytes are prefix's. */
void rs_env_raw_each(const char *prefix, size_t len, void (*fn)(const char *entry, void *arg),
                     void *arg);

/*
 * The values of n variables (vals[i]: names[i]'s, NULL when unset), as n
 * calls of rs_env_raw give them, in one pass over the environment: a
 * configuration table's rows are read at every open of a task handle.
 */
void rs_env_raw_many(const char *const *names, size_t n, const char **vals);

/*
 * One of the names in choices (NULL-terminated): *out is its index. Unset:
 * RS_OK, *out unchanged; a bad value: RS_ERR_CONFIG, logged with what it
 * accepts.
 */
rs_status_t rs_env_choice(const char *name, const char *const *choices, int *out);

#endif
