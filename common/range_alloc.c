#include "common/range_alloc.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

rs_status_t rs_range_alloc_init(rs_range_alloc_t *ra, uint64_t size, uint64_t align)
{
    if (align == 0 || (align & (align - 1)) != 0)
        return RS_ERR_INVALID;
    memset(ra, 0, sizeof(*ra));
    ra->align = align;
    ra->size = size & ~(align - 1);
    ra->cap = 16;
    ra->free = malloc(ra->cap * sizeof(*ra->free));
    if (ra->free == NULL)
        return RS_ERR_NOMEM;
    if (ra->size > 0) {
        ra->free[0] = (rs_range_t){0, ra->size};
        ra->n_free = 1;
    }
    return RS_OK;
}

void rs_range_alloc_cleanup(rs_range_alloc_t *ra)
{
    free(ra->free);
    ra->free = NULL;
    ra->n_free = ra->cap = 0;
}

rs_status_t rs_range_get(rs_range_alloc_t *ra, uint64_t len, uint64_t *off_p)
{
    len = rs_range_round(ra, len);
    if (len == 0)
        return RS_ERR_INVALID;
    for (size_t i = 0; i < ra->n_free; i++) {
        rs_range_t *r = &ra->free[i];
        if (r->len < len)
            continue;
        *off_p = r->off;
        r->off += len;
        r->len -= len;
        if (r->len == 0) {
            memmove(r, r + 1, (ra->n_free - i - 1) * sizeof(*r));
            ra->n_free--;
        }
        ra->used += len;
        return RS_OK;
    }
    return RS_ERR_NO_SPACE;
}

/* Index of the first free range with off > the given offset. */
static size_t range_upper(const rs_range_alloc_t *ra, uint64_t off)
{
    size_t lo = 0, hi = ra->n_free;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ra->free[mid].off > off)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void rs_range_put(rs_range_alloc_t *ra, uint64_t off, uint64_t len)
{
    len = rs_range_round(ra, len);
    size_t i = range_upper(ra, off); /* ranges before i start at or below off */
    int merge_prev = i > 0 && ra->free[i - 1].off + ra->free[i - 1].len == off;
    int merge_next = i < ra->n_free && off + len == ra->free[i].off;
    ra->used -= len;
    if (merge_prev && merge_next) {
        ra->free[i - 1].len += len + ra->free[i].len;
        memmove(&ra->free[i], &ra->free[i + 1], (ra->n_free - i - 1) * sizeof(rs_range_t));
        ra->n_free--;
    } else if (merge_prev) {
        ra->free[i - 1].len += len;
    } else if (merge_next) {
        ra->free[i].off = off;
        ra->free[i].len += len;
    } else {
        if (ra->n_free == ra->cap) {
            /* Growing can only fail under memory exhaustion: then the range leaks
             * (stays unusable) rather than corrupting the allocator. */
            rs_range_t *n = realloc(ra->free, 2 * ra->cap * sizeof(*n));
            if (n == NULL) {
                rs_error("range allocator: out of memory, %llu bytes lost",
                         (unsigned long long)len);
                return;
            }
            ra->free = n;
            ra->cap *= 2;
        }
        memmove(&ra->free[i + 1], &ra->free[i], (ra->n_free - i) * sizeof(rs_range_t));
        ra->free[i] = (rs_range_t){off, len};
        ra->n_free++;
    }
}

uint64_t rs_range_largest(const rs_range_alloc_t *ra)
{
    uint64_t best = 0;
    for (size_t i = 0; i < ra->n_free; i++)
        if (ra->free[i].len > best)
            best = ra->free[i].len;
    return best;
}
