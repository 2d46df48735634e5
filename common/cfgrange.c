/*
 * A row's range as text (cfgtab.h, rs_cfg_range): a file of its own, as
 * common/vars.c needs it and cfgtab.c calls back into the environment code
 * that warns through vars.c.
 */
#include "common/cfgtab.h"

#include <inttypes.h>
#include <stdio.h>

/* v as a variable would be written: a multiple of G or M from 1M up, else decimal. */
static void size_text(uint64_t v, char *buf, size_t cap)
{
    if (v >= (1u << 20) && v % (1u << 30) == 0)
        snprintf(buf, cap, "%" PRIu64 "G", v >> 30);
    else if (v >= (1u << 20) && v % (1u << 20) == 0)
        snprintf(buf, cap, "%" PRIu64 "M", v >> 20);
    else
        snprintf(buf, cap, "%" PRIu64, v);
}

void rs_cfg_range(const rs_cfg_row_t *r, char *buf, size_t cap)
{
    char lo[32], hi[32];
    if (cap == 0)
        return;
    buf[0] = '\0';
    if (r->kind != RS_CFG_UINT)
        return;
    size_text(r->min, lo, sizeof(lo));
    size_text(r->max, hi, sizeof(hi));
    if (r->max == UINT64_MAX && r->min == 0)
        snprintf(buf, cap, "any");
    else if (r->max == UINT64_MAX)
        snprintf(buf, cap, "at least %s", lo);
    else
        snprintf(buf, cap, "%s .. %s", lo, hi);
}
