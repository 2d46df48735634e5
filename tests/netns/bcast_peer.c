/*
 * One side of a broadcast between two hosts (tests/netns/two-hosts):
 *   bcast_peer publish BYTES   publishes a pattern, prints the descriptor in
 *                              hex on one line, serves until stdin closes
 *   bcast_peer get HEX BYTES   gets the object and checks every byte
 */
#include <rshuffle/broadcast.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char byte_at(size_t i)
{
    return (unsigned char)(i * 131 + 17);
}

static int publish(rs_bcast_node_t *node, size_t len)
{
    unsigned char *data = malloc(len);
    if (data == NULL)
        return 1;
    for (size_t i = 0; i < len; i++)
        data[i] = byte_at(i);
    rs_bcast_t *bc;
    unsigned char desc[RS_BCAST_DESC_MAX];
    size_t desc_len;
    rs_status_t st = rs_bcast_publish(node, data, len, &bc);
    free(data);
    if (st == RS_OK && (st = rs_bcast_descriptor(bc, desc, sizeof(desc), &desc_len)) != RS_OK)
        rs_bcast_destroy(bc);
    if (st != RS_OK) {
        fprintf(stderr, "bcast_peer: publish: %s\n", rs_strerror(st));
        return 1;
    }
    for (size_t i = 0; i < desc_len; i++)
        printf("%02x", desc[i]);
    printf("\n");
    fflush(stdout);
    while (getchar() != EOF) /* serve until the harness closes stdin */
        ;
    rs_bcast_destroy(bc);
    return 0;
}

static int get(rs_bcast_node_t *node, const char *hex, size_t len)
{
    unsigned char desc[RS_BCAST_DESC_MAX];
    size_t n = strlen(hex) / 2;
    if (n == 0 || n > sizeof(desc))
        return 2;
    for (size_t i = 0; i < n; i++)
        if (sscanf(hex + 2 * i, "%2hhx", &desc[i]) != 1)
            return 2;
    rs_bcast_ref_t *ref;
    rs_status_t st = rs_bcast_get(node, desc, n, &ref);
    if (st != RS_OK) {
        fprintf(stderr, "bcast_peer: get: %s\n", rs_strerror(st));
        return 1;
    }
    const unsigned char *data = rs_bcast_ref_data(ref);
    int bad = rs_bcast_ref_len(ref) != len;
    for (size_t i = 0; !bad && i < len; i++)
        bad = data[i] != byte_at(i);
    rs_bcast_release(ref);
    printf("bcast_peer: %zu bytes %s\n", len, bad ? "CORRUPT" : "verified");
    return bad;
}

int main(int argc, char **argv)
{
    int is_get = argc == 4 && strcmp(argv[1], "get") == 0;
    if (!is_get && !(argc == 3 && strcmp(argv[1], "publish") == 0)) {
        fprintf(stderr, "usage: bcast_peer publish BYTES | bcast_peer get HEX BYTES\n");
        return 2;
    }
    uint64_t len;
    if (rs_parse_size(argv[argc - 1], &len) != RS_OK || len == 0) {
        fprintf(stderr, "bcast_peer: bad size '%s'\n", argv[argc - 1]);
        return 2;
    }
    rs_bcast_node_t *node;
    rs_status_t st = rs_bcast_node_create(NULL, NULL, &node);
    if (st != RS_OK) {
        fprintf(stderr, "bcast_peer: node: %s\n", rs_strerror(st));
        return 1;
    }
    int rc = is_get ? get(node, argv[2], (size_t)len) : publish(node, (size_t)len);
    rs_bcast_node_destroy(node);
    return rc;
}
