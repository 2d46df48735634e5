/*
 * rshuffle_info --worker HOST:PORT [--json]: a live worker's state, asked
 * over the shuffle protocol (rs_worker_query) with RSHUFFLE_JOB_TOKEN.
 */
#include "info_worker.h"

#include <rshuffle/worker.h>

#include <stdio.h>

static const char *role_name(int role)
{
    return role == 1 ? "pusher" : role == 2 ? "reader" : "none";
}

static void print_text(const char *addr, const rs_worker_info_t *in)
{
    const rs_worker_stats_t *st = &in->stats;
    printf("# worker %s%s\n", addr, in->draining ? " (draining)" : "");
    printf("arena: %llu of %llu bytes in use, peak %llu\n", (unsigned long long)st->arena_used,
           (unsigned long long)in->arena_len, (unsigned long long)st->arena_peak);
    printf("committed: %llu maps, %llu batches, %llu bytes; refused %llu batches, "
           "%llu stray retires, %llu backpressure answers\n",
           (unsigned long long)st->commits, (unsigned long long)st->batches,
           (unsigned long long)st->bytes, (unsigned long long)st->refused,
           (unsigned long long)st->stray_retires, (unsigned long long)st->backpressure);
    printf("spilled: %llu bytes, %llu files open\n", (unsigned long long)st->spilled_bytes,
           (unsigned long long)in->spill_files);
    printf("shuffles held: %u\n", in->n_shuffles);
    for (uint32_t i = 0; i < in->n_shuffles; i++) {
        const rs_worker_shuffle_info_t *s = &in->shuffles[i];
        printf("  shuffle %u: %u partitions, %u maps committed, %llu batches, %llu bytes, "
               "%llu spilled, replicas %u, %u open snapshots%s\n",
               s->shuffle_id, s->n_partitions, s->maps_committed, (unsigned long long)s->batches,
               (unsigned long long)s->bytes, (unsigned long long)s->spilled_bytes, s->replicas,
               s->open_snapshots, s->dropped ? ", dropped" : "");
    }
    printf("connections: %u\n", in->n_conns);
    for (uint32_t i = 0; i < in->n_conns; i++) {
        const rs_worker_conn_info_t *c = &in->conns[i];
        printf("  %s", role_name(c->role));
        if (c->shuffle_id != UINT32_MAX)
            printf(" shuffle %u", c->shuffle_id);
        if (c->role == 1)
            printf(" map %u attempt %u, %llu batches, %u open grants", c->map_id, c->attempt,
                   (unsigned long long)c->batches, c->open_grants);
        if (c->role == 2)
            printf(", %u open snapshots", c->open_snapshots);
        printf("\n");
    }
    if (in->truncated)
        printf("# (more shuffles or connections than one answer holds: the first ones)\n");
}

static void print_json(const char *addr, const rs_worker_info_t *in)
{
    const rs_worker_stats_t *st = &in->stats;
    printf("{\"worker\": \"%s\", \"draining\": %s, \"truncated\": %s,\n", addr,
           in->draining ? "true" : "false", in->truncated ? "true" : "false");
    printf(" \"arena_len\": %llu, \"arena_used\": %llu, \"arena_peak\": %llu,\n",
           (unsigned long long)in->arena_len, (unsigned long long)st->arena_used,
           (unsigned long long)st->arena_peak);
    printf(" \"commits\": %llu, \"batches\": %llu, \"bytes\": %llu, \"refused\": %llu, "
           "\"stray_retires\": %llu, \"backpressure\": %llu,\n",
           (unsigned long long)st->commits, (unsigned long long)st->batches,
           (unsigned long long)st->bytes, (unsigned long long)st->refused,
           (unsigned long long)st->stray_retires, (unsigned long long)st->backpressure);
    printf(" \"spilled_bytes\": %llu, \"spill_files\": %llu,\n",
           (unsigned long long)st->spilled_bytes, (unsigned long long)in->spill_files);
    printf(" \"shuffles\": [");
    for (uint32_t i = 0; i < in->n_shuffles; i++) {
        const rs_worker_shuffle_info_t *s = &in->shuffles[i];
        printf("%s\n  {\"id\": %u, \"partitions\": %u, \"maps_committed\": %u, "
               "\"batches\": %llu, \"bytes\": %llu, \"spilled_bytes\": %llu, \"replicas\": %u, "
               "\"open_snapshots\": %u, \"dropped\": %s}",
               i ? "," : "", s->shuffle_id, s->n_partitions, s->maps_committed,
               (unsigned long long)s->batches, (unsigned long long)s->bytes,
               (unsigned long long)s->spilled_bytes, s->replicas, s->open_snapshots,
               s->dropped ? "true" : "false");
    }
    printf("],\n \"connections\": [");
    for (uint32_t i = 0; i < in->n_conns; i++) {
        const rs_worker_conn_info_t *c = &in->conns[i];
        printf("%s\n  {\"role\": \"%s\"", i ? "," : "", role_name(c->role));
        if (c->shuffle_id != UINT32_MAX)
            printf(", \"shuffle\": %u", c->shuffle_id);
        if (c->role == 1)
            printf(", \"map\": %u, \"attempt\": %u, \"batches\": %llu, \"open_grants\": %u",
                   c->map_id, c->attempt, (unsigned long long)c->batches, c->open_grants);
        printf(", \"open_snapshots\": %u}", c->open_snapshots);
    }
    printf("]}\n");
}

int rs_info_worker(const char *addr, int json, int drain)
{
    rs_worker_info_t *in = NULL;
    rs_status_t s =
        drain ? rs_worker_request_drain(addr, NULL, &in) : rs_worker_query(addr, NULL, &in);
    if (s != RS_OK) {
        fprintf(stderr, "rshuffle_info: worker %s: %s%s\n", addr, rs_strerror(s),
                s == RS_ERR_AUTH ? " (set RSHUFFLE_JOB_TOKEN to the worker's token)" : "");
        return 1;
    }
    if (json)
        print_json(addr, in);
    else
        print_text(addr, in);
    rs_worker_info_free(in);
    return 0;
}
