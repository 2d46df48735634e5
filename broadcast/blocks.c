/* Block helpers (see blocks.h). */
#include "broadcast/blocks.h"

#include "common/checksum.h"

uint64_t rs_bc_block_sum(const void *data, size_t len, uint32_t index)
{
    return rs_checksum64_seeded(data, len, 0x5253424c4b000000ull | index);
}

uint32_t rs_bc_map_count(const uint8_t *m, uint32_t nbits)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < nbits / 8; i++)
        n += (uint32_t)__builtin_popcount(m[i]);
    for (uint32_t i = nbits / 8 * 8; i < nbits; i++)
        n += (uint32_t)rs_bc_map_test(m, i);
    return n;
}

void rs_bc_order(uint64_t seed, uint32_t start, uint32_t n, uint32_t *order)
{
    uint64_t st = seed;
    if (n == 0)
        return;
    start %= n;
    /* The shared permutation (Fisher-Yates), then rotated left by start. */
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = rs_bc_rand_below(&st, i + 1);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    if (start == 0)
        return;
    /* Rotate: reverse the two parts, then the whole. */
    for (uint32_t a = 0, b = start - 1; a < b; a++, b--) {
        uint32_t t = order[a];
        order[a] = order[b];
        order[b] = t;
    }
    for (uint32_t a = start, b = n - 1; a < b; a++, b--) {
        uint32_t t = order[a];
        order[a] = order[b];
        order[b] = t;
    }
    for (uint32_t a = 0, b = n - 1; a < b; a++, b--) {
        uint32_t t = order[a];
        order[a] = order[b];
        order[b] = t;
    }
}

uint32_t rs_bc_own_count(uint32_t ticket, uint32_t start, const rs_bc_active_t *active,
                         uint32_t n_active, uint32_t n)
{
    uint32_t next = n;
    if (n == 0)
        return 0;
    start %= n;
    for (uint32_t i = 0; i < n_active; i++) {
        if (active[i].ticket == ticket)
            continue;
        uint32_t s = active[i].start % n;
        if (s == start) {
            if (active[i].ticket < ticket)
                return 0;
            continue;
        }
        uint32_t d = (s + n - start) % n;
        if (d < next)
            next = d;
    }
    return next;
}

uint32_t rs_bc_start_pick(const uint8_t *busy, uint32_t n)
{
    uint32_t first_busy = n, best_len = 0, best_at = 0;
    for (uint32_t i = 0; i < n && first_busy == n; i++)
        if (busy[i])
            first_busy = i;
    if (first_busy == n)
        return 0; /* nothing taken yet */
    /* Walk once around from a busy position, measuring the free runs. */
    uint32_t run = 0, run_at = 0;
    for (uint32_t k = 1; k <= n; k++) {
        uint32_t pos = (first_busy + k) % n;
        if (!busy[pos]) {
            if (run == 0)
                run_at = pos;
            run++;
            continue;
        }
        if (run > best_len) {
            best_len = run;
            best_at = run_at;
        }
        run = 0;
    }
    if (best_len == 0)
        return 0;
    return (best_at + best_len / 2) % n;
}
