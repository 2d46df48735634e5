#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testdata.h"

uint64_t next_rand(uint64_t *state)
{
    uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

const char *data_kind_name(data_kind_t kind)
{
    static const char *const names[] = {"random", "compressible", "kv"};
    return kind < DATA_KINDS ? names[kind] : "?";
}

void fill_data(data_kind_t kind, uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t r = seed * 0x2545f4914f6cdd1dull + 1;
    size_t i = 0;
    switch (kind) {
        case DATA_RANDOM:
            for (; i + 8 <= len; i += 8) {
                uint64_t v = next_rand(&r);
                memcpy(buf + i, &v, 8);
            }
            for (; i < len; i++)
                buf[i] = (uint8_t)next_rand(&r);
            break;
        case DATA_COMPRESSIBLE:
            for (; i < len; i++)
                buf[i] = (i / 4096) % 2 ? (uint8_t) "abcab"[i % 5] : 0;
            break;
        case DATA_KV:
            while (i < len) {
                char rec[64];
                uint64_t v = next_rand(&r);
                int n = snprintf(rec, sizeof(rec), "user%06u\tcity=%s;visits=%u\n",
                                 (unsigned)(v % 1000000), (v >> 20) % 3 ? "Berlin" : "Montevideo",
                                 (unsigned)(v >> 40) % 97);
                size_t take = (size_t)n < len - i ? (size_t)n : len - i;
                memcpy(buf + i, rec, take);
                i += take;
            }
            break;
        default:
            break;
    }
}

uint8_t *make_data(data_kind_t kind, size_t len, uint64_t seed)
{
    uint8_t *buf = malloc(len > 0 ? len : 1);
    if (buf != NULL)
        fill_data(kind, buf, len, seed);
    return buf;
}

static int count_fail(count_alloc_t *c)
{
    c->calls++;
    return c->fail_at != 0 && c->calls == c->fail_at;
}

static void *count_malloc(void *user, size_t size)
{
    count_alloc_t *c = user;
    if (count_fail(c))
        return NULL;
    void *p = malloc(size);
    if (p != NULL) {
        c->allocated += size;
        c->live += size;
        if (c->live > c->peak)
            c->peak = c->live;
    }
    return p;
}

static void *count_realloc(void *user, void *ptr, size_t old_size, size_t new_size)
{
    count_alloc_t *c = user;
    if (count_fail(c))
        return NULL;
    void *p = realloc(ptr, new_size);
    if (p != NULL) {
        if (new_size > old_size)
            c->allocated += new_size - old_size;
        c->live = c->live - old_size + new_size;
        if (c->live > c->peak)
            c->peak = c->live;
    }
    return p;
}

static void count_free(void *user, void *ptr, size_t size)
{
    count_alloc_t *c = user;
    c->live -= size;
    free(ptr);
}

rs_allocator_t count_allocator(count_alloc_t *c)
{
    return (rs_allocator_t){count_malloc, count_realloc, count_free, c};
}

static rs_status_t collect_commit(void *user, const void *frame, size_t frame_len)
{
    collect_sink_t *c = user;
    if (c->fail_with != RS_OK)
        return c->fail_with;
    if (c->cap - c->len < frame_len) {
        size_t cap = (c->cap + frame_len) * 2;
        uint8_t *buf = realloc(c->buf, cap);
        if (buf == NULL)
            return RS_ERR_NOMEM;
        c->buf = buf;
        c->cap = cap;
    }
    memcpy(c->buf + c->len, frame, frame_len);
    c->len += frame_len;
    c->commits++;
    return RS_OK;
}

rs_sink_t collect_sink(collect_sink_t *c)
{
    return (rs_sink_t){NULL, collect_commit, c};
}

void collect_sink_free(collect_sink_t *c)
{
    free(c->buf);
    *c = (collect_sink_t){0};
}
