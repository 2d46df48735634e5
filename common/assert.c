/* The failure path of RS_ASSERT (common/assert.h). */
#include "common/assert.h"
#include "common/log.h"

#include <stdlib.h>

void rs_assert_fail(const char *cond, const char *file, int line, const char *func)
{
    /* Logged whatever the level: this is the last line the process writes. */
    rs_log_write(RS_LOG_ERROR, file, line, "assertion failed in %s(): %s", func, cond);
    abort();
}
