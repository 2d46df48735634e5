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
    for (char **e = environ; n > 0 && e != NULL && *e != NULL; e++) {
        if (strncmp(*e, names[0], common) != 0)
            continue;
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(names[i]);
            if (vals[i] == NULL && strncmp(*e, names[i], len) == 0 && (*e)[len] == '=') {
                vals[i] = *e + len + 1; /* the first entry of a name, as getenv takes */
                break;
            }
        }
    }
}
