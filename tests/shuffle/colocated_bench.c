/*
 * A timing driver for the co-located layout (not a test): one process is
 * mapper, worker and reducer. It pushes SIZE bytes of 100-byte records into
 * its own worker, then reads every partition back, consuming each record
 * (a sum over its bytes) and checking the record count, with local reads in
 * place and, for comparison, copied through the transport
 * (RSHUFFLE_READ_LOCAL=0 behaviour). Prints one JSON line per read mode.
 *   colocated-bench [SIZE_MIB] [PARTITIONS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/worker.h>

#define REC 100

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int die(const char *what, rs_status_t s)
{
    fprintf(stderr, "colocated-bench: %s: %s\n", what, rs_strerror(s));
    return 1;
}

int main(int argc, char **argv)
{
    uint64_t size = (argc > 1 ? strtoull(argv[1], NULL, 10) : 256) << 20;
    uint32_t parts = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 64;
    uint64_t n = size / (REC + RS_RECORD_HDR);
    rs_worker_config_t wc;
    rs_worker_config_defaults(&wc);
    rs_worker_config_from_env(&wc);
    wc.mem_limit = size + size / 2 + (64 << 20); /* no spill: the in-memory path is measured */
    rs_worker_t *w;
    rs_status_t s = rs_worker_create(NULL, &wc, &w);
    if (s != RS_OK || (s = rs_worker_listen(w, "127.0.0.1", 0)) != RS_OK)
        return die("worker", s);
    char addr[RS_SHUFFLE_ADDR_MAX];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", rs_worker_port(w));
    const char *addrs[1] = {addr};
    rs_shuffle_desc_t d = {
        .shuffle_id = 1, .n_partitions = parts, .n_workers = 1, .workers = addrs};

    double t0 = now_s();
    rs_pusher_t *p;
    if ((s = rs_pusher_open(&d, 0, 0, NULL, &p)) != RS_OK)
        return die("pusher", s);
    uint8_t rec[REC];
    for (uint64_t i = 0; i < n && s == RS_OK; i++) {
        memset(rec, (int)(i & 0xff), sizeof(rec));
        memcpy(rec, &i, sizeof(i));
        s = rs_pusher_append(p, (uint32_t)(i % parts), rec, REC);
    }
    if (s == RS_OK)
        s = rs_pusher_close(p, NULL);
    rs_pusher_destroy(p);
    if (s != RS_OK)
        return die("push", s);
    double push_s = now_s() - t0;

    for (int local = 1; local >= 0; local--) {
        rs_reader_config_t rc;
        rs_reader_config_defaults(&rc);
        rs_reader_config_from_env(&rc);
        rc.local_reads = local;
        uint32_t attempt = 0;
        double t1 = now_s();
        rs_reader_session_t *sess;
        if ((s = rs_reader_session_open(&d, 1, &attempt, &rc, &sess)) != RS_OK)
            return die("session", s);
        uint64_t records = 0, sum = 0, reads = 0, local_batches = 0;
        for (uint32_t q = 0; q < parts; q++) {
            rs_reader_t *r;
            if ((s = rs_reader_open_in(sess, q, &r)) != RS_OK)
                return die("open", s);
            const void *v;
            uint32_t len;
            while ((s = rs_reader_next(r, &v, &len)) == RS_OK && v != NULL) {
                const uint8_t *b = v;
                for (uint32_t k = 0; k < len; k++)
                    sum += b[k];
                records++;
            }
            rs_reader_stats_t st;
            rs_reader_stats(r, &st);
            reads += st.reads;
            local_batches += st.local_batches;
            rs_reader_close(r);
            if (s != RS_OK)
                return die("read", s);
        }
        rs_reader_session_close(sess);
        double read_s = now_s() - t1;
        printf("{\"layout\": \"colocated\", \"local_reads\": %d, \"bytes\": %llu, \"records\": "
               "%llu, \"push_s\": %.4f, \"read_s\": %.4f, \"push_gbps\": %.3f, \"read_gbps\": "
               "%.3f, \"reads\": %llu, \"local_batches\": %llu, \"sum\": %llu, \"ok\": %s}\n",
               local, (unsigned long long)(n * REC), (unsigned long long)records, push_s, read_s,
               (double)(n * REC) * 8e-9 / push_s, (double)(n * REC) * 8e-9 / read_s,
               (unsigned long long)reads, (unsigned long long)local_batches,
               (unsigned long long)sum, records == n ? "true" : "false");
    }
    rs_worker_destroy(w);
    return 0;
}
