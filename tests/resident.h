/*
 * Resident pages of a range (mincore), for tests of what memory is made
 * resident when. Include after <cmocka.h>.
 */
#ifndef RS_TESTS_RESIDENT_H
#define RS_TESTS_RESIDENT_H

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Pages of [addr, addr + len) resident now; addr page-aligned. */
static inline size_t resident_pages(void *addr, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (len + page - 1) / page, count = 0;
    unsigned char *vec = malloc(n);
    assert_non_null(vec);
    assert_int_equal(mincore(addr, len, vec), 0);
    for (size_t i = 0; i < n; i++)
        count += vec[i] & 1;
    free(vec);
    return count;
}

#endif
