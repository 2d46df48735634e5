/*
 * The library's one read of the environment (common/env.h). The logger
 * takes its level from here before anything else runs, so this calls no
 * other file: not the logger, not the unknown-variable warning.
 */
#include "common/env.h"

#include <stdlib.h>
#include <string.h>

extern char **environ;

const char *rs_env_raw(const char *name)
{
    return getenv(name);
}

void rs_env_raw_each(const char *prefix, size_t len, void (*fn)(const char *entry, void *arg),
                     void *arg)
{
    for (char **e = environ; e != NULL && *e != NULL; e++)
        if (strncmp(*e, prefix, len) == 0)
            fn(*e, arg);
}

typedef struct {
    const char *const *names;
    size_t n;
    const char **vals;
} many_t;

static void many_take(const char *entry, void *arg)
{
    many_t *m = arg;
    for (size_t i = 0; i < m->n; i++) {
        size_t len = strlen(m->names[i]);
        if (m->vals[i] == NULL && strncmp(entry, m->names[i], len) == 0 && entry[len] == '=') {
            m->vals[i] = entry + len + 1; /* the first entry of a name, as getenv takes */
            return;
        }
    }
}

void rs_env_raw_many(const char *const *names, size_t n, const char **vals)
{
    /* What every name starts with: entries without it are passed over at one compare. */
    size_t common = n > 0 ? strlen(names[0]) : 0;
    for (size_t i = 0; i < n; i++) {
        vals[i] = NULL;
        size_t k = 0;
        while (k < common && names[i][k] == names[0][k])
            k++;
        common = k;
    }
    many_t m = {names, n, vals};
    if (n > 0)
        rs_env_raw_each(names[0], common, many_take, &m);
}
