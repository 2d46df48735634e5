/*
 * The sort benches' records (rs-sort and mpi-sort generate, partition, sort
 * and validate the very same ones, so their times compare): the Sort
 * Benchmark layout, 100 bytes with a 10-byte key first.
 *
 *   bytes 0..9    the key, compared as 10 unsigned bytes
 *   bytes 10..17  the record's index (little-endian), so it can be regenerated
 *   bytes 18..99  payload: words derived from the index's seed
 *
 * Record i is a function of (seed, i) alone (srec_make), so any process can
 * regenerate any record, and a map task can sample its keys without
 * generating the rest. Keys are uniform; with zipf:S the key's first two
 * bytes are a Zipf(S) rank over 65536 values (scattered by a fixed
 * permutation), the other eight uniform: a range partitioner with fixed
 * splitters comes out uneven, one with splitters from samples does not.
 *
 * Validation (as valsort): a checksum is the sum of every record's
 * srec_hash (order-free), taken at the input and at the output.
 */
#ifndef RS_PERF_SORT_RECORDS_H
#define RS_PERF_SORT_RECORDS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "records.h"

#define SREC_KEY 10

/* A key as an 80-bit integer: hi = bytes 0..7 big-endian, lo = bytes 8..9. */
typedef struct skey {
    uint64_t hi;
    uint16_t lo;
} skey_t;

/* How keys are drawn: uniform (zipf_s 0) or Zipf(zipf_s) on the first 2 bytes. */
typedef struct sgen {
    uint64_t seed;
    double zipf_s;
    double *cdf; /* 65536 entries when zipf_s > 0 (sgen_init) */
} sgen_t;

#define SZIPF_RANKS 65536

/* Fills g; 0, or -1 when out of memory. */
static inline int sgen_init(sgen_t *g, uint64_t seed, double zipf_s)
{
    g->seed = seed;
    g->zipf_s = zipf_s;
    g->cdf = NULL;
    if (zipf_s <= 0)
        return 0;
    g->cdf = malloc(SZIPF_RANKS * sizeof(double));
    if (g->cdf == NULL)
        return -1;
    double sum = 0;
    for (unsigned r = 0; r < SZIPF_RANKS; r++)
        g->cdf[r] = sum += pow((double)(r + 1), -zipf_s);
    for (unsigned r = 0; r < SZIPF_RANKS; r++)
        g->cdf[r] /= sum;
    return 0;
}

static inline void sgen_free(sgen_t *g)
{
    free(g->cdf);
    g->cdf = NULL;
}

/* Record id's key. */
static inline skey_t srec_key(const sgen_t *g, uint64_t id)
{
    uint64_t a = rec_mix(id ^ g->seed), b = rec_mix(a ^ 0x5851f42d4c957f2dull);
    skey_t k = {.hi = a, .lo = (uint16_t)b};
    if (g->cdf != NULL) {
        double u = (double)(b >> 11) * (1.0 / 9007199254740992.0);
        unsigned lo = 0, hi = SZIPF_RANKS - 1;
        while (lo < hi) { /* the first rank whose cdf reaches u */
            unsigned mid = (lo + hi) / 2;
            if (g->cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        uint64_t prefix = (uint64_t)((lo * 40503u + 12345u) & 0xffffu); /* odd: a permutation */
        k.hi = (prefix << 48) | (a >> 16);
    }
    return k;
}

static inline void skey_put(skey_t k, uint8_t *out)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(k.hi >> (56 - 8 * i));
    out[8] = (uint8_t)(k.lo >> 8);
    out[9] = (uint8_t)k.lo;
}

static inline skey_t skey_get(const uint8_t *in)
{
    skey_t k = {0, 0};
    for (int i = 0; i < 8; i++)
        k.hi = k.hi << 8 | in[i];
    k.lo = (uint16_t)(in[8] << 8 | in[9]);
    return k;
}

/* <0, 0, >0 as a, b compare as 10 unsigned bytes. */
static inline int skey_cmp(skey_t a, skey_t b)
{
    if (a.hi != b.hi)
        return a.hi < b.hi ? -1 : 1;
    return a.lo < b.lo ? -1 : a.lo > b.lo;
}

/* Writes record id at rec: REC_LEN bytes. */
static inline void srec_make(const sgen_t *g, uint64_t id, uint8_t *rec)
{
    uint64_t w[REC_LEN / 8 + 1], seed = rec_seed(id ^ g->seed);
    for (unsigned i = 0; i <= REC_LEN / 8; i++)
        w[i] = seed + i * GOLDEN;
    memcpy(rec, w, REC_LEN);
    skey_put(srec_key(g, id), rec);
    memcpy(rec + SREC_KEY, &id, 8);
}

/* A record's hash: every byte counts, and where it is (checksums add these up). */
static inline uint64_t srec_hash(const uint8_t *rec)
{
    uint64_t h = 0, w;
    for (unsigned i = 0; i < REC_LEN / 8; i++) {
        memcpy(&w, rec + 8 * i, 8);
        h += w * (GOLDEN + 2 * i);
        h ^= h >> 29;
    }
    uint32_t tail;
    memcpy(&tail, rec + REC_LEN - 4, 4);
    return rec_mix(h + tail);
}

/*
 * Splitters from samples: sorts the n keys at s and picks parts - 1 of them
 * evenly spaced (out[0 .. parts-2]). A record goes to the number of
 * splitters <= its key (spart).
 */
static inline int skey_qcmp(const void *a, const void *b)
{
    return skey_cmp(*(const skey_t *)a, *(const skey_t *)b);
}

static inline void ssplitters(skey_t *s, uint64_t n, uint32_t parts, skey_t *out)
{
    qsort(s, n, sizeof(*s), skey_qcmp);
    for (uint32_t i = 1; i < parts; i++)
        out[i - 1] = n > 0 ? s[(uint64_t)i * n / parts] : (skey_t){UINT64_MAX, UINT16_MAX};
}

static inline uint32_t spart(const skey_t *spl, uint32_t parts, skey_t k)
{
    uint32_t lo = 0, hi = parts - 1; /* the first splitter > k */
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (skey_cmp(spl[mid], k) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * Sorting a partition: an entry per record, its key and its index in the
 * partition's array (16 bytes: a radix pass moves these, not 100-byte
 * records), then records gathered in key order.
 */
typedef struct sent {
    uint64_t hi;
    uint16_t lo;
    uint16_t pad;
    uint32_t idx;
} sent_t;

/* Key byte b (0..9) of an entry. */
static inline unsigned sent_byte(const sent_t *e, unsigned b)
{
    return b < 8 ? (unsigned)(e->hi >> (56 - 8 * b)) & 0xff : b == 8 ? e->lo >> 8u : e->lo & 0xffu;
}

static inline int sent_less(const sent_t *x, const sent_t *y)
{
    return x->hi < y->hi || (x->hi == y->hi && x->lo < y->lo);
}

#define SSORT_SMALL 48 /* below this many entries: insertion sort */

/*
 * MSD radix sort of the n entries at cur from key byte b on; other: n
 * entries of scratch. in_a: cur is the caller's array (else the sorted
 * result is copied to the same place in other, which then is).
 */
static void ssort_msd(sent_t *cur, sent_t *other, uint64_t n, unsigned b, int in_a)
{
    while (n >= SSORT_SMALL && b < SREC_KEY) {
        uint64_t count[256] = {0}, off[256];
        for (uint64_t i = 0; i < n; i++)
            count[sent_byte(&cur[i], b)]++;
        unsigned v0 = sent_byte(&cur[0], b);
        if (count[v0] == n) { /* every entry shares this byte: next byte, no move */
            b++;
            continue;
        }
        uint64_t o = 0;
        for (unsigned v = 0; v < 256; v++)
            off[v] = o, o += count[v];
        for (uint64_t i = 0; i < n; i++)
            other[off[sent_byte(&cur[i], b)]++] = cur[i];
        for (unsigned v = 0, start = 0; v < 256; start += (unsigned)count[v], v++)
            if (count[v] > 0)
                ssort_msd(other + start, cur + start, count[v], b + 1, !in_a);
        return;
    }
    for (uint64_t i = 1; i < n; i++) { /* small, or all 10 bytes equal */
        sent_t e = cur[i];
        uint64_t j = i;
        for (; j > 0 && sent_less(&e, &cur[j - 1]); j--)
            cur[j] = cur[j - 1];
        cur[j] = e;
    }
    if (!in_a)
        memcpy(other, cur, n * sizeof(*cur));
}

/*
 * Sorts the n entries at a (tmp: n more scratch): an MSD radix sort on the
 * key bytes, most significant first, 256 buckets a pass, buckets below
 * SSORT_SMALL entries finished by insertion sort. A partition of a million
 * uniform keys takes two scatter passes and an insertion sort of ~16 entries
 * per bucket, where an LSD sort would make ten passes over all entries; a
 * byte every entry shares (a skewed prefix) costs one count, no move.
 */
static inline void ssort_radix(sent_t *a, sent_t *tmp, uint64_t n)
{
    if (n > 0)
        ssort_msd(a, tmp, n, 0, 1);
}

static inline int sent_qcmp(const void *a, const void *b)
{
    const sent_t *x = a, *y = b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/*
 * Sorts the n records at recs into out (n * REC_LEN bytes), with ents and
 * tmp n entries each; use_qsort: qsort on the entries instead of the radix
 * sort (the comparison).
 */
static inline void ssort_records(const uint8_t *recs, uint64_t n, uint8_t *out, sent_t *ents,
                                 sent_t *tmp, int use_qsort)
{
    for (uint64_t i = 0; i < n; i++) {
        skey_t k = skey_get(recs + i * REC_LEN);
        ents[i] = (sent_t){.hi = k.hi, .lo = k.lo, .pad = 0, .idx = (uint32_t)i};
    }
    if (use_qsort)
        qsort(ents, n, sizeof(*ents), sent_qcmp);
    else
        ssort_radix(ents, tmp, n);
    for (uint64_t i = 0; i < n; i++) { /* random reads: fetch a few records ahead */
        if (i + 8 < n) {
            const uint8_t *ahead = recs + (uint64_t)ents[i + 8].idx * REC_LEN;
            __builtin_prefetch(ahead);
            __builtin_prefetch(ahead + REC_LEN - 1);
        }
        memcpy(out + i * REC_LEN, recs + (uint64_t)ents[i].idx * REC_LEN, REC_LEN);
    }
}

/*
 * What validation knows of one partition's output: its record count, the
 * sum of its records' hashes, how many neighbours were out of order, and
 * its first and last keys (hi, lo). All u64, so partitions held by
 * different processes combine by a sum (each has one owner).
 */
typedef struct spsum {
    uint64_t records, hash, unsorted, first_hi, first_lo, last_hi, last_lo;
} spsum_t;

#define SPSUM_WORDS 7

/* Checks the n sorted records at out (valsort's per-partition pass) into *ps. */
static inline void svalidate(const uint8_t *out, uint64_t n, spsum_t *ps)
{
    memset(ps, 0, sizeof(*ps));
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *r = out + i * REC_LEN;
        if (i > 0 && memcmp(r - REC_LEN, r, SREC_KEY) > 0)
            ps->unsorted++;
        ps->hash += srec_hash(r);
    }
    ps->records = n;
    if (n > 0) {
        skey_t f = skey_get(out), l = skey_get(out + (n - 1) * REC_LEN);
        ps->first_hi = f.hi, ps->first_lo = f.lo, ps->last_hi = l.hi, ps->last_lo = l.lo;
    }
}

/*
 * The whole output's verdict from every partition's sums (in partition
 * order) against the input's record count and checksum: 0 when valid, else
 * -1 with why in msg.
 */
static inline int sverdict(const spsum_t *ps, uint32_t parts, uint64_t in_records, uint64_t in_hash,
                           char *msg, size_t cap)
{
    uint64_t records = 0, hash = 0;
    int have_prev = 0;
    skey_t prev = {0, 0};
    for (uint32_t p = 0; p < parts; p++) {
        records += ps[p].records;
        hash += ps[p].hash;
        if (ps[p].unsorted) {
            snprintf(msg, cap, "partition %u: %llu records out of order", p,
                     (unsigned long long)ps[p].unsorted);
            return -1;
        }
        if (ps[p].records == 0)
            continue;
        skey_t f = {ps[p].first_hi, (uint16_t)ps[p].first_lo};
        if (have_prev && skey_cmp(prev, f) > 0) {
            snprintf(msg, cap, "partition %u starts below the last key before it", p);
            return -1;
        }
        prev = (skey_t){ps[p].last_hi, (uint16_t)ps[p].last_lo};
        have_prev = 1;
    }
    if (records != in_records) {
        snprintf(msg, cap, "%llu records out, %llu in", (unsigned long long)records,
                 (unsigned long long)in_records);
        return -1;
    }
    if (hash != in_hash) {
        snprintf(msg, cap, "checksum %016llx out, %016llx in", (unsigned long long)hash,
                 (unsigned long long)in_hash);
        return -1;
    }
    snprintf(msg, cap, "valid");
    return 0;
}

/* --skew: "none" or "zipf:S" (S > 0): S, 0 for none; -1 when malformed. */
static inline double sskew_parse(const char *v)
{
    char *end;
    if (strcmp(v, "none") == 0)
        return 0;
    if (strncmp(v, "zipf:", 5) != 0)
        return -1;
    double s = strtod(v + 5, &end);
    return *end == '\0' && s > 0 && s <= 10 ? s : -1;
}

/* Every k-th of a map's n records (ids first ..): at most max samples, their count. */
static inline uint64_t ssample(const sgen_t *g, uint64_t first, uint64_t n, skey_t *out,
                               uint64_t max)
{
    uint64_t step = n / max + 1, k = 0;
    for (uint64_t i = 0; i < n && k < max; i += step)
        out[k++] = srec_key(g, first + i);
    return k;
}

#endif
