/*
 * A whole shuffle against one running worker: two map tasks push records
 * into 4 partitions, then every partition is read back and counted.
 *
 *   rshuffled --listen 127.0.0.1:0 &      # prints the port it took
 *   ./shuffle 127.0.0.1:PORT
 */
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/shuffle.h>

#include <stdio.h>
#include <string.h>

#define MAPS       2
#define PARTITIONS 4
#define RECORDS    10000

static int fail(const char *what, rs_status_t st)
{
    fprintf(stderr, "shuffle: %s: %s\n", what, rs_strerror(st));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: shuffle HOST:PORT (of a running rshuffled)\n");
        return 2;
    }
    const char *workers[] = {argv[1]};
    rs_shuffle_desc_t desc = {
        .shuffle_id = 42, .n_partitions = PARTITIONS, .n_workers = 1, .workers = workers};

    /* Map side: each map task appends records; close commits them. */
    for (uint32_t map = 0; map < MAPS; map++) {
        rs_pusher_t *p;
        rs_status_t st = rs_pusher_open(&desc, map, 0, NULL, &p);
        if (st != RS_OK)
            return fail("rs_pusher_open", st);
        for (uint32_t i = 0; i < RECORDS && st == RS_OK; i++) {
            char rec[32];
            int len = snprintf(rec, sizeof(rec), "map %u record %u", map, i);
            st = rs_pusher_append(p, i % PARTITIONS, rec, (uint32_t)len);
        }
        if (st == RS_OK)
            st = rs_pusher_close(p, NULL);
        rs_pusher_destroy(p);
        if (st != RS_OK)
            return fail("push", st);
    }

    /* Reduce side: read every partition of the winning attempts (0). */
    uint32_t attempts[MAPS] = {0};
    uint64_t total = 0;
    for (uint32_t part = 0; part < PARTITIONS; part++) {
        rs_reader_t *r;
        rs_status_t st = rs_reader_open(&desc, part, MAPS, attempts, NULL, &r);
        if (st != RS_OK)
            return fail("rs_reader_open", st);
        const void *rec;
        uint32_t len;
        while ((st = rs_reader_next(r, &rec, &len)) == RS_OK && rec != NULL) {
            if (len < 4 || memcmp(rec, "map ", 4) != 0) {
                rs_reader_close(r);
                fprintf(stderr, "shuffle: unexpected record in partition %u\n", part);
                return 1;
            }
            total++;
        }
        rs_reader_close(r);
        if (st != RS_OK)
            return fail("rs_reader_next", st);
    }
    rs_shuffle_drop(&desc, NULL);
    if (total != (uint64_t)MAPS * RECORDS) {
        fprintf(stderr, "shuffle: read %llu records, pushed %u\n", (unsigned long long)total,
                MAPS * RECORDS);
        return 1;
    }
    printf("shuffle: %llu records pushed and read back\n", (unsigned long long)total);
    return 0;
}
