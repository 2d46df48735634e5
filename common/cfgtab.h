/*
 * Configuration tables: one per module, next to its code, one row per
 * variable with its default (as the variable would be written), its
 * description, the field it sets and what it accepts. The defaults, the
 * environment reader, the validator, rshuffle_info -c and man/rshuffle.7
 * (tests/common/check-vars) all read the same row, so none can drift.
 */
#ifndef RS_COMMON_CFGTAB_H
#define RS_COMMON_CFGTAB_H

#include <stddef.h>
#include <stdint.h>
#include <rshuffle/status.h>

typedef enum {
    RS_CFG_UINT,   /* unsigned field of 2, 4 or 8 bytes in [min, max]; K/M/G suffixes */
    RS_CFG_BOOL,   /* int field: 0|1|true|false|yes|no|on|off */
    RS_CFG_CHOICE, /* int-sized enum field: the index of its name in choices */
    RS_CFG_STR,    /* char[size] field, at most size - 1 bytes */
} rs_cfg_kind_t;

typedef struct rs_cfg_row {
    const char *env;  /* RSHUFFLE_... */
    const char *dflt; /* the default, written as the variable would be ("" when empty) */
    const char *desc; /* one line, as rshuffle_info -c prints it */
    const char *field;
    size_t offset, size;
    rs_cfg_kind_t kind;
    uint64_t min, max;                   /* UINT */
    const char *const *choices;          /* CHOICE: NULL-terminated */
    rs_status_t (*check)(const char *s); /* STR (optional): RS_OK when s is acceptable */
    const char *accepts;                 /* STR with check: what it accepts, for the error */
} rs_cfg_row_t;

#define RS_CFG_ROWS_MAX 64 /* rows of one table (rs_cfg_apply reads them all at once) */

typedef struct rs_cfg_table {
    const char *what; /* "broadcast config": names the struct in errors */
    const rs_cfg_row_t *rows;
    size_t n;
} rs_cfg_table_t;

#define RS_CFG_SIZEOF(type, field) sizeof(((type *)0)->field)
#define RS_CFG_UINT_ROW(type, env, field, dflt, min, max, desc)                           \
    {                                                                                     \
        (env), (dflt), (desc), #field, offsetof(type, field), RS_CFG_SIZEOF(type, field), \
            RS_CFG_UINT, (min), (max), NULL, NULL, NULL                                   \
    }
#define RS_CFG_BOOL_ROW(type, env, field, dflt, desc)                                     \
    {                                                                                     \
        (env), (dflt), (desc), #field, offsetof(type, field), RS_CFG_SIZEOF(type, field), \
            RS_CFG_BOOL, 0, 1, NULL, NULL, NULL                                           \
    }
#define RS_CFG_CHOICE_ROW(type, env, field, dflt, choices, desc)                          \
    {                                                                                     \
        (env), (dflt), (desc), #field, offsetof(type, field), RS_CFG_SIZEOF(type, field), \
            RS_CFG_CHOICE, 0, 0, (choices), NULL, NULL                                    \
    }
#define RS_CFG_STR_ROW(type, env, field, dflt, check, accepts, desc)                      \
    {                                                                                     \
        (env), (dflt), (desc), #field, offsetof(type, field), RS_CFG_SIZEOF(type, field), \
            RS_CFG_STR, 0, 0, NULL, (check), (accepts)                                    \
    }

/*
 * Writes every row's default into cfg (other bytes untouched). RS_ERR_CONFIG
 * only for a table whose default its own row refuses (a bug, logged).
 */
rs_status_t rs_cfg_defaults(const rs_cfg_table_t *t, void *cfg);

/*
 * Applies the rows' variables that are set to cfg. A value a row refuses is
 * logged with the variable's name, its value and what it accepts, and
 * returns RS_ERR_CONFIG with cfg unchanged.
 */
rs_status_t rs_cfg_apply(const rs_cfg_table_t *t, void *cfg);

/*
 * RS_OK when every row's field of cfg holds a value its row accepts; else
 * logs the first that does not ("<what> field <name> ...") and returns
 * RS_ERR_CONFIG.
 */
rs_status_t rs_cfg_check(const rs_cfg_table_t *t, const void *cfg);

/*
 * What row r accepts, written into buf[cap] as man/rshuffle.7 says it
 * ("1M .. 16M"; "at least 4096" or "any" for a max of UINT64_MAX; sizes
 * of 1M and up as multiples of M or G where exact) for a UINT row, "" for
 * the others. rshuffle_info -c prints it after the description.
 */
void rs_cfg_range(const rs_cfg_row_t *r, char *buf, size_t cap);

/* The tables common/vars.c lists (each defined next to its module's code). */
extern const rs_cfg_table_t rs_config_table;        /* transport, generic (common/config_table.c) */
extern const rs_cfg_table_t rs_bc_config_table;     /* broadcast (broadcast/config.c) */
extern const rs_cfg_table_t rs_ucx_config_table;    /* UCX backend (transport/ucx/config.c) */
extern const rs_cfg_table_t rs_shuffle_env_table;   /* RSHUFFLE_REPLICAS (shuffle/config.c) */
extern const rs_cfg_table_t rs_client_config_table; /* shuffle client (shuffle/config.c) */
extern const rs_cfg_table_t rs_pusher_config_table; /* pusher (pusher/config.c) */
extern const rs_cfg_table_t rs_worker_config_table; /* worker (worker/config.c) */
extern const rs_cfg_table_t rs_reader_config_table; /* reader (reader/config.c) */

#endif
