/*
 * The free ranges are a treap keyed by offset: a binary search tree in
 * offset order that is also a heap on a random priority per node, which
 * keeps its height O(log n) whatever order ranges come and go in. Each node
 * holds the longest free range of its subtree (max), so the first fit is
 * one descent: left while the left subtree has a range long enough, else
 * this node if it fits, else right. Taking from a range's front or growing
 * it at either end keeps it between its neighbours, so only the maxima on
 * its path change. Nodes live in one array and link by index (0: none).
 */
#include "common/range_alloc.h"
#include "common/assert.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

struct rs_range_node {
    uint64_t off, len;
    uint64_t max;    /* longest len in this subtree */
    uint32_t kid[2]; /* lower offsets, higher offsets; a spare node chains through kid[0] */
    uint32_t prio;   /* a parent's is at least its children's */
};

typedef struct rs_range_node node_t;

#define RANGE_NODES_MIN 16

static uint32_t next_prio(rs_range_alloc_t *ra)
{
    uint32_t x = ra->seed; /* xorshift32: never 0 from a non-zero seed */
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    ra->seed = x;
    return x;
}

static void pull(node_t *nd, uint32_t t)
{
    node_t *n = &nd[t];
    uint64_t l = nd[n->kid[0]].max, r = nd[n->kid[1]].max;
    uint64_t m = n->len > l ? n->len : l;
    n->max = m > r ? m : r;
}

/* Joins two trees, every offset of a below every offset of b. */
static uint32_t join(node_t *nd, uint32_t a, uint32_t b)
{
    if (a == 0 || b == 0)
        return a | b;
    if (nd[a].prio >= nd[b].prio) {
        nd[a].kid[1] = join(nd, nd[a].kid[1], b);
        pull(nd, a);
        return a;
    }
    nd[b].kid[0] = join(nd, a, nd[b].kid[0]);
    pull(nd, b);
    return b;
}

/* Splits t into offsets below off (*lo) and above it (*hi). */
static void split(node_t *nd, uint32_t t, uint64_t off, uint32_t *lo, uint32_t *hi)
{
    if (t == 0) {
        *lo = *hi = 0;
    } else if (nd[t].off < off) {
        split(nd, nd[t].kid[1], off, &nd[t].kid[1], hi);
        pull(nd, t);
        *lo = t;
    } else {
        split(nd, nd[t].kid[0], off, lo, &nd[t].kid[0]);
        pull(nd, t);
        *hi = t;
    }
}

/* Puts the new node x in its place: under every node of a higher priority. */
static void insert(rs_range_alloc_t *ra, uint32_t x)
{
    node_t *nd = ra->node, *n = &nd[x];
    uint32_t *link = &ra->root;
    while (*link != 0 && nd[*link].prio >= n->prio) {
        node_t *p = &nd[*link];
        if (p->max < n->len)
            p->max = n->len;
        link = &p->kid[n->off > p->off];
    }
    split(nd, *link, n->off, &n->kid[0], &n->kid[1]);
    pull(nd, x);
    *link = x;
}

static void node_release(rs_range_alloc_t *ra, uint32_t t)
{
    ra->node[t].kid[0] = ra->spare;
    ra->spare = t;
    ra->n_free--;
}

/* Removes the node at offset off (present) from t. */
static uint32_t erase(rs_range_alloc_t *ra, uint32_t t, uint64_t off)
{
    node_t *nd = ra->node;
    RS_ASSERT(t != 0);
    if (nd[t].off == off) {
        uint32_t j = join(nd, nd[t].kid[0], nd[t].kid[1]);
        node_release(ra, t);
        return j;
    }
    int d = off > nd[t].off;
    nd[t].kid[d] = erase(ra, nd[t].kid[d], off);
    pull(nd, t);
    return t;
}

/*
 * Makes node x [off, off + len), a range holding its old one: it stays
 * between its neighbours and the maxima on its path can only rise.
 */
static void grow(node_t *nd, uint32_t root, uint32_t x, uint64_t off, uint64_t len)
{
    uint64_t key = nd[x].off;
    RS_ASSERT(off <= key && off + len >= key + nd[x].len);
    for (uint32_t t = root; t != x; t = nd[t].kid[key > nd[t].off]) {
        RS_ASSERT(t != 0);
        if (nd[t].max < len)
            nd[t].max = len;
    }
    nd[x].off = off;
    nd[x].len = len;
    if (nd[x].max < len)
        nd[x].max = len;
}

/* Takes len bytes from the lowest range of t that holds them (t's max is at least len). */
static uint32_t take(rs_range_alloc_t *ra, uint32_t t, uint64_t len, uint64_t *off_p)
{
    node_t *nd = ra->node, *n = &nd[t];
    if (nd[n->kid[0]].max >= len) {
        n->kid[0] = take(ra, n->kid[0], len, off_p);
    } else if (n->len >= len) {
        *off_p = n->off;
        n->off += len;
        n->len -= len;
        if (n->len == 0) {
            uint32_t j = join(nd, n->kid[0], n->kid[1]);
            node_release(ra, t);
            return j;
        }
    } else {
        RS_ASSERT(nd[n->kid[1]].max >= len);
        n->kid[1] = take(ra, n->kid[1], len, off_p);
    }
    pull(nd, t);
    return t;
}

/* A spare node (growing the array when none is left); 0 when out of memory. */
static uint32_t node_new(rs_range_alloc_t *ra, uint64_t off, uint64_t len)
{
    if (ra->spare == 0) {
        if (ra->cap == 0 || ra->cap > UINT32_MAX / 2) /* cleaned up, or 2^31 ranges */
            return 0;
        node_t *n = realloc(ra->node, 2 * (size_t)ra->cap * sizeof(*n));
        if (n == NULL)
            return 0;
        ra->node = n;
        for (uint32_t i = 2 * ra->cap - 1; i >= ra->cap; i--) {
            n[i].kid[0] = ra->spare;
            ra->spare = i;
        }
        ra->cap *= 2;
    }
    uint32_t t = ra->spare;
    node_t *n = &ra->node[t];
    ra->spare = n->kid[0];
    *n = (node_t){.off = off, .len = len, .max = len, .prio = next_prio(ra)};
    ra->n_free++;
    return t;
}

rs_status_t rs_range_alloc_init(rs_range_alloc_t *ra, uint64_t size, uint64_t align)
{
    if (align == 0 || (align & (align - 1)) != 0)
        return RS_ERR_INVALID;
    node_t *nd = calloc(RANGE_NODES_MIN, sizeof(*nd));
    if (nd == NULL)
        return RS_ERR_NOMEM;
    memset(ra, 0, sizeof(*ra));
    ra->node = nd;
    ra->cap = RANGE_NODES_MIN;
    ra->seed = 0x9e3779b9u;
    ra->align = align;
    ra->size = size & ~(align - 1);
    for (uint32_t i = RANGE_NODES_MIN - 1; i > 0; i--) {
        nd[i].kid[0] = ra->spare;
        ra->spare = i;
    }
    if (ra->size > 0)
        ra->root = node_new(ra, 0, ra->size); /* cannot fail: spare nodes are there */
    return RS_OK;
}

void rs_range_alloc_cleanup(rs_range_alloc_t *ra)
{
    free(ra->node);
    ra->node = NULL;
    ra->root = ra->spare = ra->cap = 0;
    ra->n_free = 0;
}

rs_status_t rs_range_get(rs_range_alloc_t *ra, uint64_t len, uint64_t *off_p)
{
    len = rs_range_round(ra, len);
    if (len == 0)
        return RS_ERR_INVALID;
    if (ra->node == NULL || ra->node[ra->root].max < len) /* none after cleanup */
        return RS_ERR_NO_SPACE;
    uint64_t off = 0;
    ra->root = take(ra, ra->root, len, &off);
    ra->used += len;
    RS_ASSERT(off % ra->align == 0 && off + len <= ra->size && ra->used <= ra->size);
    *off_p = off;
    return RS_OK;
}

void rs_range_put(rs_range_alloc_t *ra, uint64_t off, uint64_t len)
{
    len = rs_range_round(ra, len);
    node_t *nd = ra->node;
    uint32_t prev = 0, next = 0; /* the free ranges just below and above off */
    for (uint32_t t = ra->root; t != 0;) {
        if (nd[t].off > off) {
            next = t;
            t = nd[t].kid[0];
        } else {
            prev = t;
            t = nd[t].kid[1];
        }
    }
    /* Given back once, inside the region, overlapping no free range. */
    RS_ASSERT(len > 0 && off % ra->align == 0 && off + len <= ra->size && len <= ra->used);
    RS_ASSERT(prev == 0 || nd[prev].off + nd[prev].len <= off);
    RS_ASSERT(next == 0 || off + len <= nd[next].off);
    int merge_prev = prev != 0 && nd[prev].off + nd[prev].len == off;
    int merge_next = next != 0 && off + len == nd[next].off;
    if (merge_prev && merge_next) {
        uint64_t plen = nd[prev].len + len + nd[next].len;
        ra->root = erase(ra, ra->root, nd[next].off);
        grow(nd, ra->root, prev, nd[prev].off, plen);
    } else if (merge_prev) {
        grow(nd, ra->root, prev, nd[prev].off, nd[prev].len + len);
    } else if (merge_next) {
        grow(nd, ra->root, next, off, nd[next].len + len);
    } else {
        /* Growing can only fail under memory exhaustion: then the range leaks
         * (stays unusable) rather than corrupting the allocator. */
        uint32_t x = node_new(ra, off, len);
        if (x == 0) {
            rs_error("range allocator: out of memory, %llu bytes lost", (unsigned long long)len);
            return;
        }
        insert(ra, x);
    }
    ra->used -= len;
}

uint64_t rs_range_largest(const rs_range_alloc_t *ra)
{
    return ra->node != NULL ? ra->node[ra->root].max : 0;
}

/* Checks the subtree t (offsets in [lo, hi)), counts its ranges and bytes, returns its height. */
static unsigned check(const rs_range_alloc_t *ra, uint32_t t, uint64_t lo, uint64_t hi, size_t *n,
                      uint64_t *bytes)
{
    if (t == 0)
        return 0;
    const node_t *nd = ra->node, *x = &nd[t];
    RS_ASSERT(t < ra->cap && *n < ra->n_free);
    RS_ASSERT(x->len > 0 && x->off % ra->align == 0 && x->len % ra->align == 0);
    RS_ASSERT(x->off >= lo && x->off + x->len <= hi && x->off + x->len > x->off);
    RS_ASSERT(x->kid[0] == 0 || nd[x->kid[0]].prio <= x->prio);
    RS_ASSERT(x->kid[1] == 0 || nd[x->kid[1]].prio <= x->prio);
    uint64_t m = x->len;
    m = nd[x->kid[0]].max > m ? nd[x->kid[0]].max : m;
    m = nd[x->kid[1]].max > m ? nd[x->kid[1]].max : m;
    RS_ASSERT(x->max == m);
    *n += 1;
    *bytes += x->len;
    /* Never adjacent: a gap of at least one unit on either side. */
    unsigned hl = check(ra, x->kid[0], lo, x->off >= ra->align ? x->off - ra->align : 0, n, bytes);
    unsigned hr = check(ra, x->kid[1], x->off + x->len + ra->align, hi, n, bytes);
    return 1 + (hl > hr ? hl : hr);
}

unsigned rs_range_check(const rs_range_alloc_t *ra)
{
    size_t n = 0;
    uint64_t bytes = 0;
    RS_ASSERT(ra->node[0].max == 0 && ra->node[0].len == 0);
    unsigned h = check(ra, ra->root, 0, ra->size, &n, &bytes);
    RS_ASSERT(n == ra->n_free && bytes + ra->used == ra->size);
    return h;
}
