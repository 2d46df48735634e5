/*
 * Broadcast pieces that need no fabric: wire formats (round trips and every
 * kind of damage), block geometry and checksums, the block order readers
 * follow, the ownership split between concurrent readers, configuration.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rshuffle/broadcast.h>
#include "broadcast/blocks.h"
#include "broadcast/proto.h"
#include "common/checksum.h"

static rs_bc_desc_t sample_desc(uint64_t size)
{
    rs_bc_desc_t d;
    memset(&d, 0, sizeof(d));
    d.node_id = 0xabcdef0123456789ull;
    d.seq = 42;
    d.size = size;
    d.block_size = 1u << 20;
    d.nblocks = rs_bc_nblocks(size, d.block_size);
    d.flags = size <= 65536 ? RS_BDESC_F_INLINE : 0;
    d.src.kind = RS_BCAST_ADDR_HOSTPORT;
    d.src.port = 12345;
    d.src.bytes.p = (const uint8_t *)"127.0.0.1";
    d.src.bytes.len = 9;
    return d;
}

static void test_desc_round_trip(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {0, 1, 65535, 65536, 65537, 1u << 20, (10u << 20) + 512};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        rs_bc_desc_t d = sample_desc(sizes[i]), e;
        uint8_t buf[RS_BCAST_DESC_MAX];
        size_t len;
        assert_int_equal(rs_bc_desc_encode(&d, buf, sizeof(buf), &len), RS_OK);
        assert_int_equal(len, rs_bc_desc_len(&d));
        assert_true(len < 80); /* small enough to ship inside every task */
        assert_int_equal(rs_bc_desc_decode(buf, len, &e), RS_OK);
        assert_true(e.node_id == d.node_id && e.seq == d.seq && e.size == d.size);
        assert_int_equal(e.block_size, d.block_size);
        assert_int_equal(e.nblocks, d.nblocks);
        assert_int_equal(e.flags, d.flags);
        assert_int_equal(e.src.port, 12345);
        assert_memory_equal(e.src.bytes.p, "127.0.0.1", 9);
        /* Too small a buffer: a clear error, nothing promised. */
        assert_int_equal(rs_bc_desc_encode(&d, buf, len - 1, &len), RS_ERR_NO_SPACE);
    }
}

/* An embedded object and a one-block object's key and checksum travel intact; misuse is refused. */
static void test_desc_embed_direct(void **state)
{
    (void)state;
    static const uint8_t bytes[100] = {1, 2, 3}, key[60] = {7, 7, 7};
    uint8_t buf[RS_BCAST_DESC_MAX];
    size_t len;
    rs_bc_desc_t d = sample_desc(sizeof(bytes)), e;
    d.flags |= RS_BDESC_F_EMBED;
    d.embed = bytes;
    assert_int_equal(rs_bc_desc_encode(&d, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(len, rs_bc_desc_len(&d));
    assert_int_equal(rs_bc_desc_decode(buf, len, &e), RS_OK);
    assert_int_equal(e.flags, d.flags);
    assert_memory_equal(e.embed, bytes, sizeof(bytes));
    assert_true(rs_bc_desc_decode(buf, len - 1, &e) < 0);

    d = sample_desc(1u << 20); /* one block */
    d.flags |= RS_BDESC_F_DIRECT;
    d.rkey = (rs_bc_view_t){.p = key, .len = sizeof(key)};
    d.sum = 0xfeedfacecafebeefull;
    assert_int_equal(rs_bc_desc_encode(&d, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(rs_bc_desc_decode(buf, len, &e), RS_OK);
    assert_int_equal(e.rkey.len, sizeof(key));
    assert_memory_equal(e.rkey.p, key, sizeof(key));
    assert_true(e.sum == d.sum);

    /* Embedded without inline, direct for an inline or a multi-block object: refused. */
    d = sample_desc(sizeof(bytes));
    d.flags = RS_BDESC_F_EMBED;
    d.embed = bytes;
    assert_int_equal(rs_bc_desc_encode(&d, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(rs_bc_desc_decode(buf, len, &e), RS_ERR_PROTOCOL);
    d = sample_desc((10u << 20) + 512);
    d.flags |= RS_BDESC_F_DIRECT;
    d.rkey = (rs_bc_view_t){.p = key, .len = sizeof(key)};
    assert_int_equal(rs_bc_desc_encode(&d, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(rs_bc_desc_decode(buf, len, &e), RS_ERR_PROTOCOL);
}

static void test_desc_damage(void **state)
{
    (void)state;
    rs_bc_desc_t d = sample_desc(3u << 20), e;
    uint8_t buf[RS_BCAST_DESC_MAX], bad[RS_BCAST_DESC_MAX + 8];
    size_t len;
    assert_int_equal(rs_bc_desc_encode(&d, buf, sizeof(buf), &len), RS_OK);
    /* Every truncation fails, and *d stays untouched. */
    for (size_t n = 0; n < len; n++) {
        memset(&e, 0x77, sizeof(e));
        rs_status_t st = rs_bc_desc_decode(buf, n, &e);
        assert_true(st < 0);
        assert_int_equal(e.seq, 0x7777777777777777ull);
    }
    /* Every single bit flip is caught (checksum or a field check). */
    for (size_t i = 0; i < len * 8; i++) {
        memcpy(bad, buf, len);
        bad[i / 8] ^= (uint8_t)(1u << (i % 8));
        assert_true(rs_bc_desc_decode(bad, len, &e) < 0);
    }
    /* Trailing bytes are not ignored. */
    memcpy(bad, buf, len);
    bad[len] = 0;
    assert_true(rs_bc_desc_decode(bad, len + 1, &e) < 0);
    assert_int_equal(rs_bc_desc_decode(NULL, 0, &e), RS_ERR_TRUNCATED);
    assert_int_equal(rs_bc_desc_decode(buf, len, &e), RS_OK);

    /* Inconsistent geometry is refused even with a valid checksum. */
    rs_bc_desc_t g = d;
    g.nblocks++;
    assert_int_equal(rs_bc_desc_encode(&g, bad, sizeof(bad), &len), RS_OK);
    assert_int_equal(rs_bc_desc_decode(bad, len, &e), RS_ERR_BAD_LENGTH);
    g = d;
    g.block_size = 100;
    g.nblocks = rs_bc_nblocks(g.size, g.block_size);
    assert_int_equal(rs_bc_desc_encode(&g, bad, sizeof(bad), &len), RS_OK);
    assert_int_equal(rs_bc_desc_decode(bad, len, &e), RS_ERR_BAD_LENGTH);
    g = d;
    g.flags = RS_BDESC_F_INLINE; /* 3 MiB cannot ride inline */
    assert_int_equal(rs_bc_desc_encode(&g, bad, sizeof(bad), &len), RS_OK);
    assert_int_equal(rs_bc_desc_decode(bad, len, &e), RS_ERR_BAD_LENGTH);
    g = d;
    g.src.bytes.p = (const uint8_t *)"evil host";
    assert_int_equal(rs_bc_desc_encode(&g, bad, sizeof(bad), &len), RS_OK);
    assert_int_equal(rs_bc_desc_decode(bad, len, &e), RS_ERR_PROTOCOL);
}

static rs_bc_req_t sample_req(uint8_t kind, uint16_t flags, const uint8_t *bitmap)
{
    static const uint8_t rkey[30] = {1, 2, 3};
    rs_bc_req_t q;
    memset(&q, 0, sizeof(q));
    q.kind = kind;
    q.flags = flags;
    q.req_id = 99;
    q.nblocks = 11;
    q.node_id = 1;
    q.seq = 2;
    q.source_reads = 3;
    q.holder_reads = 8;
    q.known = 17;
    q.reply_off = 1u << 16;
    q.reply_cap = 80000;
    q.reply_rkey.p = rkey;
    q.reply_rkey.len = sizeof(rkey);
    q.holder_addr.kind = RS_BCAST_ADDR_HOSTPORT;
    q.holder_addr.port = 777;
    q.holder_addr.bytes.p = (const uint8_t *)"10.1.2.3";
    q.holder_addr.bytes.len = 8;
    q.holder_rkey.p = rkey;
    q.holder_rkey.len = 20;
    q.bitmap.p = bitmap;
    q.bitmap.len = 2;
    return q;
}

static void test_req_round_trip_and_damage(void **state)
{
    (void)state;
    static const uint8_t bitmap[2] = {0xff, 0x07};
    const rs_bc_req_t qs[] = {
        sample_req(RS_BREQ_GET, 0, bitmap),
        sample_req(RS_BREQ_GET, RS_BREQ_F_HOLDER, bitmap),
        sample_req(RS_BREQ_UPDATE, RS_BREQ_F_HOLDER | RS_BREQ_F_WAIT, bitmap),
        sample_req(RS_BREQ_ANNOUNCE, RS_BREQ_F_HOLDER | RS_BREQ_F_BITMAP, bitmap),
        sample_req(RS_BREQ_ANNOUNCE, RS_BREQ_F_HOLDER | RS_BREQ_F_COMPLETE, bitmap),
    };
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        uint8_t buf[512], bad[512];
        size_t len;
        rs_bc_req_t r;
        assert_int_equal(rs_bc_req_encode(&qs[i], buf, sizeof(buf), &len), RS_OK);
        assert_int_equal(len, rs_bc_req_len(&qs[i]));
        assert_int_equal(rs_bc_req_decode(buf, len, &r), RS_OK);
        assert_int_equal(r.kind, qs[i].kind);
        assert_int_equal(r.flags, qs[i].flags);
        assert_int_equal(r.req_id, 99);
        assert_int_equal(r.known, 17);
        assert_int_equal(r.holder_reads, 8);
        if (r.kind != RS_BREQ_ANNOUNCE) {
            assert_int_equal(r.reply_cap, 80000);
            assert_int_equal(r.reply_rkey.len, 30);
        }
        if (r.flags & RS_BREQ_F_BITMAP)
            assert_memory_equal(r.bitmap.p, bitmap, 2);
        for (size_t n = 0; n < len; n++)
            assert_true(rs_bc_req_decode(buf, n, &r) < 0);
        memcpy(bad, buf, len);
        bad[len] = 1;
        assert_int_equal(rs_bc_req_decode(bad, len + 1, &r), RS_ERR_BAD_LENGTH);
        assert_int_equal(rs_bc_req_encode(&qs[i], buf, len - 1, &len), RS_ERR_MSG_SIZE);
    }
    /* Bits beyond nblocks in a bitmap, unknown flags and kinds: protocol errors. */
    uint8_t buf[512];
    size_t len;
    rs_bc_req_t r;
    static const uint8_t high[2] = {0xff, 0x08};
    rs_bc_req_t q = sample_req(RS_BREQ_ANNOUNCE, RS_BREQ_F_HOLDER | RS_BREQ_F_BITMAP, high);
    assert_int_equal(rs_bc_req_encode(&q, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(rs_bc_req_decode(buf, len, &r), RS_ERR_PROTOCOL);
    q = sample_req(RS_BREQ_ANNOUNCE, RS_BREQ_F_BITMAP,
                   bitmap); /* blocks, but no key to read them */
    assert_int_equal(rs_bc_req_encode(&q, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(rs_bc_req_decode(buf, len, &r), RS_ERR_PROTOCOL);
    q = sample_req(RS_BREQ_GET, RS_BREQ_F_WAIT, bitmap); /* only updates wait */
    assert_int_equal(rs_bc_req_encode(&q, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(rs_bc_req_decode(buf, len, &r), RS_ERR_PROTOCOL);
    q = sample_req(7, 0, bitmap);
    assert_int_equal(rs_bc_req_encode(&q, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(rs_bc_req_decode(buf, len, &r), RS_ERR_PROTOCOL);
}

/* A reply with sums, three active tickets, the source and two holders, and maybe inline data. */
static size_t build_reply(uint8_t *buf, size_t cap, int with_inline, const uint8_t *data,
                          uint64_t size)
{
    static const rs_bc_active_t tickets[3] = {{0, 0}, {2, 1}, {5, 2}};
    static const uint8_t rkey[16] = {7};
    static const uint8_t bitmap[1] = {0x02};
    uint64_t sums[4];
    rs_bc_reply_t h;
    rs_bc_reply_enc_t e;
    size_t len;
    memset(&h, 0, sizeof(h));
    h.kind = RS_BREQ_GET;
    h.node_id = 3;
    h.seq = 4;
    h.size = size;
    h.block_size = 4096;
    h.nblocks = rs_bc_nblocks(size, 4096);
    h.flags = RS_BREPLY_F_SUMS | (with_inline ? RS_BREPLY_F_INLINE : 0);
    h.ticket = 2;
    h.active = 2;
    h.version = 9;
    h.rversion = 3;
    h.start = 1;
    h.perm_seed = 123;
    for (uint32_t i = 0; i < h.nblocks; i++)
        sums[i] =
            rs_bc_block_sum(data + rs_bc_block_off(i, 4096), rs_bc_block_len(i, size, 4096), i);
    rs_bc_reply_begin(&e, buf, cap, &h);
    rs_bc_reply_put_sums(&e, sums, h.nblocks);
    rs_bc_reply_put_active(&e, tickets, 3);
    rs_bc_holder_wire_t w;
    memset(&w, 0, sizeof(w));
    w.flags = RS_BHOLDER_F_SOURCE | RS_BHOLDER_F_COMPLETE;
    w.addr.kind = RS_BCAST_ADDR_HOSTPORT;
    w.addr.port = 1;
    w.addr.bytes.p = (const uint8_t *)"src";
    w.addr.bytes.len = 3;
    w.rkey.p = rkey;
    w.rkey.len = sizeof(rkey);
    assert_int_equal(rs_bc_reply_add_holder(&e, &w), RS_OK);
    w.id = 6;
    w.flags = 0;
    w.addr.bytes.p = (const uint8_t *)"peer";
    w.addr.bytes.len = 4;
    w.bitmap.p = bitmap;
    w.bitmap.len = 1;
    assert_int_equal(rs_bc_reply_add_holder(&e, &w), RS_OK);
    assert_int_equal(
        rs_bc_reply_finish(&e, with_inline ? data : NULL, with_inline ? size : 0, &len), RS_OK);
    return len;
}

static void test_reply_round_trip_and_damage(void **state)
{
    (void)state;
    uint8_t data[3 * 4096];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 7);
    for (int with_inline = 0; with_inline < 2; with_inline++) {
        uint8_t buf[16384], bad[16384];
        size_t len = build_reply(buf, sizeof(buf), with_inline, data, sizeof(data) - 5);
        rs_bc_reply_t r;
        assert_int_equal(rs_bc_reply_decode(buf, sizeof(buf), &r), RS_OK);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.nblocks, 3);
        assert_int_equal(r.ticket, 2);
        assert_int_equal(r.version, 9);
        assert_int_equal(r.rversion, 3);
        assert_int_equal(r.n_active, 3);
        assert_int_equal(rs_bc_reply_active(&r, 2).ticket, 5);
        assert_int_equal(rs_bc_reply_active(&r, 2).start, 2);
        assert_int_equal(r.start, 1);
        assert_int_equal(r.n_holders, 2);
        assert_true(rs_bc_reply_sum(&r, 1) == rs_bc_block_sum(data + 4096, 4096, 1));
        rs_bc_holder_wire_t h;
        size_t off = 0;
        assert_true(rs_bc_reply_next_holder(&r, &off, &h));
        assert_true(h.flags & RS_BHOLDER_F_SOURCE);
        assert_true(rs_bc_reply_next_holder(&r, &off, &h));
        assert_int_equal(h.id, 6);
        assert_int_equal(h.bitmap.len, 1);
        assert_false(rs_bc_reply_next_holder(&r, &off, &h));
        if (with_inline) {
            assert_int_equal(r.data.len, sizeof(data) - 5);
            assert_memory_equal(r.data.p, data, sizeof(data) - 5);
            assert_int_equal((uintptr_t)(r.data.p - buf) % RS_BCAST_DATA_ALIGN, 0);
            assert_int_equal(len, (size_t)(r.data.p - buf) + sizeof(data) - 5);
        } else {
            assert_int_equal(len, r.meta_len);
        }
        /* A slot too small for what the reply says it holds. */
        assert_true(rs_bc_reply_decode(buf, len - 1, &r) < 0);
        /* Any flipped metadata bit is caught by the checksum or a field check. */
        for (size_t i = 0; i < r.meta_len * 8; i += 3) {
            memcpy(bad, buf, len);
            bad[i / 8] ^= (uint8_t)(1u << (i % 8));
            assert_true(rs_bc_reply_decode(bad, sizeof(bad), &r) < 0);
            assert_int_equal(rs_bc_reply_decode(buf, sizeof(buf), &r), RS_OK);
        }
    }
    /* A status-only reply. */
    uint8_t buf[256];
    rs_bc_reply_t h, r;
    rs_bc_reply_enc_t e;
    size_t len;
    memset(&h, 0, sizeof(h));
    h.kind = RS_BREQ_UPDATE;
    h.status = RS_ERR_DESTROYED;
    rs_bc_reply_begin(&e, buf, sizeof(buf), &h);
    assert_int_equal(rs_bc_reply_finish(&e, NULL, 0, &len), RS_OK);
    assert_int_equal(len, RS_BREPLY_MIN_LEN);
    assert_int_equal(rs_bc_reply_decode(buf, len, &r), RS_OK);
    assert_int_equal(r.status, RS_ERR_DESTROYED);
    /* An encoder out of room says so instead of writing past its buffer. */
    rs_bc_reply_begin(&e, buf, 100, &h);
    uint64_t sums[20] = {0};
    rs_bc_reply_put_sums(&e, sums, 20);
    assert_int_equal(rs_bc_reply_finish(&e, NULL, 0, &len), RS_ERR_NO_SPACE);
}

static void test_news_and_destroy(void **state)
{
    (void)state;
    rs_bc_active_t t[5] = {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {900, 4}};
    uint8_t buf[96];
    size_t len;
    rs_bc_news_t n;
    assert_int_equal(rs_bc_news_encode(1, 2, 3, t, 5, buf, sizeof(buf), &len), RS_OK);
    assert_int_equal(rs_bc_news_decode(buf, len, &n), RS_OK);
    assert_int_equal(n.n_active, 5);
    assert_int_equal(rs_bc_news_active(&n, 4).ticket, 900);
    assert_int_equal(rs_bc_news_active(&n, 4).start, 4);
    for (size_t k = 0; k < len; k++)
        assert_true(rs_bc_news_decode(buf, k, &n) < 0);
    /* Tickets beyond the message budget are dropped, not overflowed. */
    assert_int_equal(rs_bc_news_encode(1, 2, 3, t, 5, buf, RS_BNEWS_FIXED + 16, &len), RS_OK);
    assert_int_equal(rs_bc_news_decode(buf, len, &n), RS_OK);
    assert_int_equal(n.n_active, 2);

    uint64_t a, b;
    rs_bc_destroy_encode(5, 6, buf);
    assert_int_equal(rs_bc_destroy_decode(buf, RS_BDESTROY_LEN, &a, &b), RS_OK);
    assert_true(a == 5 && b == 6);
    assert_int_equal(rs_bc_destroy_decode(buf, RS_BDESTROY_LEN - 1, &a, &b), RS_ERR_TRUNCATED);
    buf[0] ^= 1;
    assert_int_equal(rs_bc_destroy_decode(buf, RS_BDESTROY_LEN, &a, &b), RS_ERR_BAD_MAGIC);
}

static void test_blocks(void **state)
{
    (void)state;
    assert_int_equal(rs_bc_nblocks(0, 4096), 0);
    assert_int_equal(rs_bc_nblocks(1, 4096), 1);
    assert_int_equal(rs_bc_nblocks(4096, 4096), 1);
    assert_int_equal(rs_bc_nblocks(4097, 4096), 2);
    assert_int_equal(rs_bc_block_len(2, 10000, 4096), 10000 - 8192);
    assert_int_equal(rs_bc_block_len(1, 8192, 4096), 4096);
    /* The same bytes as another block do not verify. */
    uint8_t b[100] = {1};
    assert_true(rs_bc_block_sum(b, sizeof(b), 0) != rs_bc_block_sum(b, sizeof(b), 1));
    assert_true(rs_bc_block_sum(b, sizeof(b), 3) == rs_bc_block_sum(b, sizeof(b), 3));
    uint8_t m[3] = {0};
    rs_bc_map_set(m, 0);
    rs_bc_map_set(m, 9);
    rs_bc_map_set(m, 17);
    assert_true(rs_bc_map_test(m, 9) && !rs_bc_map_test(m, 8));
    assert_int_equal(rs_bc_map_count(m, 18), 3);
    assert_int_equal(rs_bc_map_count(m, 17), 2);
}

static void test_order(void **state)
{
    (void)state;
    enum { N = 16 };
    uint32_t o0[N], o1[N], seen[N];
    /* Each order is a permutation; readers share it, rotated to their start. */
    rs_bc_order(77, 0, N, o0);
    rs_bc_order(77, 5, N, o1);
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < N; i++)
        seen[o0[i]]++;
    for (int i = 0; i < N; i++)
        assert_int_equal(seen[i], 1);
    for (int i = 0; i < N; i++)
        assert_int_equal(o1[i], o0[(i + 5) % N]);
    /* Another object shuffles differently. */
    rs_bc_order(78, 0, N, o1);
    assert_true(memcmp(o0, o1, sizeof(o0)) != 0);
    rs_bc_order(1, 0, 1, o0);
    assert_int_equal(o0[0], 0);
}

static void test_start_pick(void **state)
{
    (void)state;
    uint8_t busy[16];
    /* Nothing taken: the first reader starts at 0. */
    memset(busy, 0, sizeof(busy));
    assert_int_equal(rs_bc_start_pick(busy, 16), 0);
    /* A lone reader at 0 that read 0..3: the newcomer lands mid-way through 4..15. */
    for (int i = 0; i < 4; i++)
        busy[i] = 1;
    assert_int_equal(rs_bc_start_pick(busy, 16), 4 + 12 / 2);
    /* 0..5 and 10..12 taken: the longest free run is 6..9. */
    busy[4] = busy[5] = busy[10] = busy[11] = busy[12] = 1;
    assert_int_equal(rs_bc_start_pick(busy, 16), 6 + 4 / 2);
    /* Of equally long runs (6..9 and 12..15), the first. */
    busy[12] = 0;
    assert_int_equal(rs_bc_start_pick(busy, 16), 8);
    /* Runs wrap around the end. */
    memset(busy, 1, sizeof(busy));
    busy[15] = busy[0] = busy[1] = 0;
    assert_int_equal(rs_bc_start_pick(busy, 16), 0);
    /* Everything taken: anywhere (0). */
    memset(busy, 1, sizeof(busy));
    assert_int_equal(rs_bc_start_pick(busy, 16), 0);
}

static void test_ownership(void **state)
{
    (void)state;
    rs_bc_active_t a[8];
    /* Alone: everything. */
    a[0] = (rs_bc_active_t){0, 3};
    assert_int_equal(rs_bc_own_count(0, 3, a, 1, 16), 16);
    assert_int_equal(rs_bc_own_count(0, 3, NULL, 0, 16), 16);
    /* Eight readers two apart over sixteen blocks: two each, every block once. */
    for (uint32_t t = 0; t < 8; t++)
        a[t] = (rs_bc_active_t){t, (t * 6) % 16 / 2 * 2};
    uint32_t total = 0, starts = 0;
    for (uint32_t t = 0; t < 8; t++) {
        total += rs_bc_own_count(t, a[t].start, a, 8, 16);
        starts |= 1u << a[t].start;
    }
    assert_int_equal(total, 16);
    assert_int_equal(starts, 0x5555); /* the starts 0, 2, .., 14 */
    /* Up to the next start, wrapping: 3 readers at 1, 9, 12 of 16. */
    a[0] = (rs_bc_active_t){0, 1};
    a[1] = (rs_bc_active_t){1, 9};
    a[2] = (rs_bc_active_t){2, 12};
    assert_int_equal(rs_bc_own_count(0, 1, a, 3, 16), 8);
    assert_int_equal(rs_bc_own_count(1, 9, a, 3, 16), 3);
    assert_int_equal(rs_bc_own_count(2, 12, a, 3, 16), 5);
    /* The same start: the lower ticket owns it, the other nothing. */
    a[2] = (rs_bc_active_t){2, 9};
    assert_int_equal(rs_bc_own_count(1, 9, a, 3, 16), 8);
    assert_int_equal(rs_bc_own_count(2, 9, a, 3, 16), 0);
    /* A reader that left gives its share to the one before it. */
    assert_int_equal(rs_bc_own_count(0, 1, a, 1, 16), 16);
}

static void test_config(void **state)
{
    (void)state;
    rs_bcast_config_t c;
    rs_bcast_config_defaults(&c);
    assert_int_equal(c.block_size, 4u << 20);
    assert_int_equal(c.inline_max, 64u << 10);
    assert_int_equal(rs_bcast_config_validate(&c), RS_OK);
    setenv("RSHUFFLE_BCAST_BLOCK_SIZE", "1M", 1);
    setenv("RSHUFFLE_BCAST_MODE", "source", 1);
    setenv("RSHUFFLE_BCAST_INLINE_MAX", "8K", 1);
    assert_int_equal(rs_bcast_config_from_env(&c), RS_OK);
    assert_int_equal(c.block_size, 1u << 20);
    assert_int_equal(c.mode, RS_BCAST_SOURCE);
    assert_int_equal(c.inline_max, 8192);
    setenv("RSHUFFLE_BCAST_BLOCK_SIZE", "100", 1); /* below the minimum block */
    rs_bcast_config_t before = c;
    assert_int_equal(rs_bcast_config_from_env(&c), RS_ERR_CONFIG);
    assert_memory_equal(&c, &before, sizeof(c));
    setenv("RSHUFFLE_BCAST_BLOCK_SIZE", "4M", 1);
    setenv("RSHUFFLE_BCAST_HOST", "bad host!", 1);
    assert_int_equal(rs_bcast_config_from_env(&c), RS_ERR_CONFIG);
    unsetenv("RSHUFFLE_BCAST_HOST");
    unsetenv("RSHUFFLE_BCAST_BLOCK_SIZE");
    unsetenv("RSHUFFLE_BCAST_MODE");
    unsetenv("RSHUFFLE_BCAST_INLINE_MAX");
    c.inline_max = RS_BCAST_INLINE_CAP + 1;
    assert_int_equal(rs_bcast_config_validate(&c), RS_ERR_CONFIG);
    rs_bcast_config_defaults(&c);
    c.block_size = 1000;
    assert_int_equal(rs_bcast_config_validate(&c), RS_ERR_CONFIG);
    assert_int_equal(rs_bcast_config_validate(NULL), RS_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_desc_round_trip),
        cmocka_unit_test(test_desc_embed_direct),
        cmocka_unit_test(test_desc_damage),
        cmocka_unit_test(test_req_round_trip_and_damage),
        cmocka_unit_test(test_reply_round_trip_and_damage),
        cmocka_unit_test(test_news_and_destroy),
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_start_pick),
        cmocka_unit_test(test_ownership),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
