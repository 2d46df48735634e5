/*
 * A closed reader's arrays, kept by its session or lane for the next open
 * (reader.c, reader_new), freed here: a file of its own so that lane.c and
 * session.c free them without calling into reader.c.
 */
#include "reader/reader_int.h"

#include <stdlib.h>

void rs_rd_reader_free(rs_reader_t *r)
{
    if (r == NULL)
        return;
    free(r->maps);
    free(r->mem);
    free(r->spill);
    free(r->span_off);
    free(r->raw);
    free(r->delivered);
    free(r);
}
