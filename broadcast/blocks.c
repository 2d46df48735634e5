/* Block helpers (see blocks.h). */
#include "broadcast/blocks.h"

#include "common/checksum.h"

uint64_t rs_bblock_sum(const void *data, size_t len, uint32_t index)
{
    return rs_checksum64_seeded(data, len, 0x5253424c4b000000ull | index);
}

uint32_t rs_bmap_count(const uint8_t *m, uint32_t nbits)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < nbits / 8; i++)
        n += (uint32_t)__builtin_popcount(m[i]);
    for (uint32_t i = nbits / 8 * 8; i < nbits; i++)
        n += (uint32_t)rs_bmap_test(m, i);
    return n;
}

static uint32_t bitrev32(uint32_t v)
{
    v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
    v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
    v = ((v >> 4) & 0x0f0f0f0fu) | ((v & 0x0f0f0f0fu) << 4);
    v = ((v >> 8) & 0x00ff00ffu) | ((v & 0x00ff00ffu) << 8);
    return (v >> 16) | (v << 16);
}

uint32_t rs_border_start(uint32_t ticket, uint32_t n)
{
    return (uint32_t)(((uint64_t)bitrev32(ticket) * n) >> 32);
}

void rs_border(uint64_t seed, uint32_t ticket, uint32_t n, uint32_t *order)
{
    uint64_t st = seed;
    if (n == 0)
        return;
    /* The shared permutation (Fisher-Yates), written rotated by the start. */
    uint32_t start = rs_border_start(ticket, n);
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = rs_brand_below(&st, i + 1);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    if (start == 0)
        return;
    /* Rotate left by start: reverse the two parts, then the whole. */
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

uint32_t rs_bown_count(uint32_t ticket, const uint32_t *active, uint32_t n_active, uint32_t n)
{
    uint32_t me = rs_border_start(ticket, n), next = n;
    for (uint32_t i = 0; i < n_active; i++) {
        if (active[i] == ticket)
            continue;
        uint32_t s = rs_border_start(active[i], n);
        if (s == me) {
            if (active[i] < ticket)
                return 0;
            continue;
        }
        uint32_t d = (s + n - me) % n;
        if (d < next)
            next = d;
    }
    return next;
}
