/*
 * The push-buffer swap (Celeborn's DataPusher tests, in C) and the
 * pool's bounds: the writer hands full buffers to the engine thread through
 * the bounded queue and keeps filling the buffers it gets back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rshuffle/pusher.h>

#include "tests/resident.h"

#define N_TASKS      1000
#define N_PARTITIONS 10
#define BUF_SIZE     (64 << 10)

typedef struct seen {
    uint32_t partitions[N_TASKS];
    uint32_t values[N_TASKS];
    unsigned n;
    unsigned bad_payload;
    size_t last_used;
} seen_t;

/* The engine: checks the payload is intact (every word is the first one). */
static void check_push(void *arg, rs_pushq_t *q, uint32_t partition, rs_pbuf_t *buf, size_t used)
{
    seen_t *s = arg;
    uint32_t value, w;
    memcpy(&value, buf->data, 4);
    for (size_t i = 4; i < used; i += 4) {
        memcpy(&w, buf->data + i, 4);
        if (w != value) {
            s->bad_payload++;
            break;
        }
    }
    if (s->n < N_TASKS) {
        s->partitions[s->n] = partition;
        s->values[s->n] = value;
    }
    s->n++;
    s->last_used = used;
    /* Hold some buffers a little: the writer keeps filling others meanwhile. */
    if (s->n % 37 == 0)
        usleep(100);
    rs_pushq_release(q, buf);
}

static void fill(rs_pbuf_t *buf, uint32_t value)
{
    for (size_t j = 0; j + 4 <= buf->len; j += 4)
        memcpy(buf->data + j, &value, 4);
}

static void test_swap_buffers(void **state)
{
    (void)state;
    alarm(60);
    seen_t *s = calloc(1, sizeof(*s));
    rs_pushq_config_t cfg;
    rs_pushq_config_defaults(&cfg);
    cfg.buf_len = BUF_SIZE;
    rs_pushq_t *q;
    assert_int_equal(rs_pushq_create(&cfg, check_push, s, &q), RS_OK);

    rs_pbuf_t *buf;
    assert_int_equal(rs_pushq_buf_get(q, BUF_SIZE, &buf), RS_OK);
    for (uint32_t i = 0; i < N_TASKS; i++) {
        fill(buf, i);
        rs_pbuf_t *pushed = buf;
        assert_int_equal(rs_pushq_swap(q, i % N_PARTITIONS, pushed, BUF_SIZE, &buf), RS_OK);
        assert_ptr_not_equal(buf, pushed);
        assert_ptr_not_equal(buf->data, pushed->data);
        assert_int_equal(buf->len, BUF_SIZE);
    }
    assert_int_equal(rs_pushq_drain(q, 10000), RS_OK);

    assert_int_equal(s->n, N_TASKS);
    assert_int_equal(s->bad_payload, 0);
    assert_int_equal(s->last_used, BUF_SIZE);
    for (uint32_t i = 0; i < N_TASKS; i++) {
        assert_int_equal(s->partitions[i], i % N_PARTITIONS);
        assert_int_equal(s->values[i], i);
    }
    rs_pushq_buf_put(q, buf);
    rs_pushq_destroy(q);
    free(s);
}

static void noop_push(void *arg, rs_pushq_t *q, uint32_t partition, rs_pbuf_t *buf, size_t used)
{
    (void)arg;
    (void)partition;
    (void)used;
    rs_pushq_release(q, buf);
}

static void test_swap_pooled_other_size(void **state)
{
    (void)state;
    alarm(60);
    rs_pushq_config_t cfg;
    rs_pushq_config_defaults(&cfg);
    cfg.buf_len = BUF_SIZE / 2; /* idle buffers of a writer with a smaller size */
    cfg.queue_depth = 8;
    cfg.slab_bytes = 16 * (BUF_SIZE + RS_PBUF_HEAD_ROOM);
    rs_pushq_t *q;
    assert_int_equal(rs_pushq_create(&cfg, noop_push, NULL, &q), RS_OK);

    /* Leave the pool full of idle half-size buffers. */
    rs_pbuf_t *small[16];
    for (int i = 0; i < 16; i++) {
        assert_int_equal(rs_pushq_buf_get(q, BUF_SIZE / 2, &small[i]), RS_OK);
        assert_int_equal(small[i]->len, BUF_SIZE / 2);
    }
    for (int i = 0; i < 16; i++)
        rs_pushq_buf_put(q, small[i]);

    rs_pbuf_t *buf;
    assert_int_equal(rs_pushq_buf_get(q, BUF_SIZE, &buf), RS_OK);
    assert_int_equal(buf->len, BUF_SIZE);
    for (unsigned i = 0; i < 2 * cfg.queue_depth; i++) {
        fill(buf, i);
        assert_int_equal(rs_pushq_swap(q, 0, buf, BUF_SIZE, &buf), RS_OK);
        assert_int_equal(buf->len, BUF_SIZE);
        /* The writer may use every byte of the buffer it got back. */
        memset(buf->data, 0xab, buf->len);
    }
    assert_int_equal(rs_pushq_drain(q, 10000), RS_OK);
    rs_pushq_buf_put(q, buf);
    rs_pushq_destroy(q);
}

/* The copy path hands an idle pooled buffer holding a copy of the bytes. */
static void test_copy_path(void **state)
{
    (void)state;
    alarm(60);
    seen_t *s = calloc(1, sizeof(*s));
    rs_pushq_config_t cfg;
    rs_pushq_config_defaults(&cfg);
    rs_pushq_t *q;
    assert_int_equal(rs_pushq_create(&cfg, check_push, s, &q), RS_OK);
    uint32_t *src = malloc(cfg.buf_len);
    for (uint32_t i = 0; i < 100; i++) {
        for (size_t j = 0; j < cfg.buf_len / 4; j++)
            src[j] = i;
        assert_int_equal(rs_pushq_copy(q, 3, src, cfg.buf_len - 4 * (i % 3)), RS_OK);
    }
    assert_int_equal(rs_pushq_drain(q, 10000), RS_OK);
    assert_int_equal(s->n, 100);
    assert_int_equal(s->bad_payload, 0);
    for (uint32_t i = 0; i < 100; i++) {
        assert_int_equal(s->values[i], i);
        assert_int_equal(s->partitions[i], 3);
    }
    free(src);
    rs_pushq_destroy(q);
    free(s);
}

/* An engine that keeps every buffer: the writer's wait is bounded. */
static rs_pbuf_t *held[64];
static unsigned n_held;
static void hold_push(void *arg, rs_pushq_t *q, uint32_t partition, rs_pbuf_t *buf, size_t used)
{
    (void)arg;
    (void)q;
    (void)partition;
    (void)used;
    held[n_held++] = buf;
}

static void test_bounded_memory_and_wait(void **state)
{
    (void)state;
    alarm(60);
    rs_pushq_config_t cfg;
    rs_pushq_config_defaults(&cfg);
    cfg.buf_len = 4096;
    cfg.slab_bytes = 4 * (4096 + RS_PBUF_HEAD_ROOM);
    cfg.queue_depth = 2;
    cfg.wait_ms = 200;
    rs_pushq_t *q;
    n_held = 0;
    assert_int_equal(rs_pushq_create(&cfg, hold_push, NULL, &q), RS_OK);
    rs_pbuf_t *buf;
    assert_int_equal(rs_pushq_buf_get(q, 4096, &buf), RS_OK);
    rs_status_t st = RS_OK;
    unsigned swaps = 0;
    while (st == RS_OK && swaps < 16) {
        st = rs_pushq_swap(q, 0, buf, 4096, &buf);
        swaps++;
    }
    /* Four buffers fit in the slab: the fourth swap finds no idle buffer. */
    assert_int_equal(st, RS_ERR_TIMEOUT);
    assert_true(swaps <= 4);
    /* A buffer larger than the slab is refused at once. */
    rs_pbuf_t *big;
    assert_int_equal(rs_pushq_buf_get(q, 1 << 20, &big), RS_ERR_NO_SPACE);
    usleep(20000);
    for (unsigned i = 0; i < n_held; i++)
        rs_pushq_release(q, held[i]);
    assert_int_equal(rs_pushq_drain(q, 1000), RS_OK);
    rs_pushq_destroy(q);
}

/*
 * The slab becomes resident a MiB at a time as carving first reaches it,
 * not whole: a task pays for the buffers it uses. 64 MiB: the C library
 * maps so large a slab afresh, untouched.
 */
static void test_pool_resident_as_carved(void **state)
{
    (void)state;
    alarm(60);
    const size_t slab = 64u << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    rs_pushq_config_t cfg;
    rs_pushq_config_defaults(&cfg);
    cfg.buf_len = BUF_SIZE;
    cfg.slab_bytes = slab;
    rs_pushq_t *q;
    assert_int_equal(rs_pushq_create(&cfg, noop_push, NULL, &q), RS_OK);
    rs_pbuf_t *bufs[48];
    assert_int_equal(rs_pushq_buf_get(q, BUF_SIZE, &bufs[0]), RS_OK);
    uint8_t *base = bufs[0]->data - RS_PBUF_HEAD_ROOM; /* the first carve is at the slab's start */
    assert_int_equal((uintptr_t)base % page, 0);
    size_t first = resident_pages(base, slab);
    if (first < (1u << 20) / page || first > (2u << 20) / page)
        fail_msg("%zu pages resident after one 64 KiB buffer, not the first MiB's %zu", first,
                 (size_t)(1u << 20) / page);
    for (int i = 1; i < 48; i++) /* 3 MiB of buffers */
        assert_int_equal(rs_pushq_buf_get(q, BUF_SIZE, &bufs[i]), RS_OK);
    size_t more = resident_pages(base, slab);
    if (more < (3u << 20) / page || more > (5u << 20) / page)
        fail_msg("%zu pages resident after 3 MiB of buffers, not about %zu", more,
                 (size_t)(3u << 20) / page);
    for (int i = 0; i < 48; i++)
        rs_pushq_buf_put(q, bufs[i]);
    rs_pushq_destroy(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swap_buffers),
        cmocka_unit_test(test_swap_pooled_other_size),
        cmocka_unit_test(test_copy_path),
        cmocka_unit_test(test_bounded_memory_and_wait),
        cmocka_unit_test(test_pool_resident_as_carved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
