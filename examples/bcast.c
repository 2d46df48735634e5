/*
 * A broadcast between two processes: the parent publishes 8 MiB (two
 * blocks), the child turns the descriptor into the bytes and checks them.
 * The child is forked before any node exists (UCX state does not survive a
 * fork); the descriptor reaches it through a pipe, as it would in a task.
 *
 *   ./bcast
 */
#include <rshuffle/broadcast.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN ((size_t)8 << 20)

static unsigned char byte_at(size_t i)
{
    return (unsigned char)(i * 31 + 7);
}

/* The reader: one get, then every byte checked. */
static int reader(int fd)
{
    unsigned char desc[RS_BCAST_DESC_MAX];
    ssize_t desc_len = read(fd, desc, sizeof(desc));
    if (desc_len <= 0)
        return 1; /* the parent failed before publishing */
    rs_bcast_node_t *node;
    rs_status_t st = rs_bcast_node_create(NULL, NULL, &node);
    if (st != RS_OK) {
        fprintf(stderr, "bcast reader: rs_bcast_node_create: %s\n", rs_strerror(st));
        return 1;
    }
    rs_bcast_ref_t *ref;
    st = rs_bcast_get(node, desc, (size_t)desc_len, &ref);
    int bad = st != RS_OK;
    if (st == RS_OK) {
        const unsigned char *data = rs_bcast_ref_data(ref);
        bad = rs_bcast_ref_len(ref) != LEN;
        for (size_t i = 0; !bad && i < LEN; i++)
            bad = data[i] != byte_at(i);
        rs_bcast_release(ref);
    } else {
        fprintf(stderr, "bcast reader: rs_bcast_get: %s\n", rs_strerror(st));
    }
    rs_bcast_node_destroy(node);
    return bad;
}

int main(void)
{
    int p[2];
    if (pipe(p) != 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[1]);
        _exit(reader(p[0]));
    }
    close(p[0]);

    rs_bcast_node_t *node;
    rs_status_t st = rs_bcast_node_create(NULL, NULL, &node);
    if (st != RS_OK) {
        fprintf(stderr, "bcast: rs_bcast_node_create: %s\n", rs_strerror(st));
        return 1;
    }
    unsigned char *data = malloc(LEN);
    if (data == NULL)
        return 1;
    for (size_t i = 0; i < LEN; i++)
        data[i] = byte_at(i);
    rs_bcast_t *bc;
    unsigned char desc[RS_BCAST_DESC_MAX];
    size_t desc_len = 0;
    st = rs_bcast_publish(node, data, LEN, &bc); /* copied: data may go */
    free(data);
    if (st == RS_OK)
        st = rs_bcast_descriptor(bc, desc, sizeof(desc), &desc_len);
    if (st != RS_OK) {
        fprintf(stderr, "bcast: publish: %s\n", rs_strerror(st));
        return 1;
    }

    /* In a data engine the descriptor travels in a task; here, to the child. */
    if (write(p[1], desc, desc_len) != (ssize_t)desc_len)
        return 1;
    close(p[1]);
    int status = 1;
    waitpid(pid, &status, 0);
    rs_bcast_destroy(bc);
    rs_bcast_node_destroy(node);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bcast: the reader failed\n");
        return 1;
    }
    printf("bcast: %zu bytes published and read back verified\n", LEN);
    return 0;
}
