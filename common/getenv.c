/*
 * The library's one read of the environment (common/env.h). The logger
 * takes its level from here before anything else runs, so this calls no
 * other file: not the logger, not the unknown-variable warning.
 */
#include "common/env.h"

#include <stdlib.h>

const char *rs_env_raw(const char *name)
{
    return getenv(name);
}
