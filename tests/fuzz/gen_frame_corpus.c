/* Writes fuzz_frame's seed corpus into a directory (emptied first): gen_frame_corpus DIR */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_frame.h"

typedef struct out {
    const char *dir;
    int count, failed;
} out_t;

static void write_seed(void *user, const uint8_t *seed, size_t len)
{
    out_t *o = user;
    char path[4096];
    snprintf(path, sizeof(path), "%s/seed-%03d", o->dir, o->count++);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(seed, 1, len, f) != len)
        o->failed = 1;
    if (f != NULL && fclose(f) != 0)
        o->failed = 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_frame_corpus DIR\n");
        return 2;
    }
    if (mkdir(argv[1], 0755) != 0 && errno != EEXIST) {
        perror(argv[1]);
        return 1;
    }
    DIR *d = opendir(argv[1]);
    if (d == NULL) {
        perror(argv[1]);
        return 1;
    }
    /* Inputs a previous fuzz run added: start every run from the same seeds. */
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[4096];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
        unlink(path);
    }
    closedir(d);
    out_t o = {argv[1], 0, 0};
    frame_corpus(write_seed, &o);
    if (o.failed || o.count == 0) {
        fprintf(stderr, "gen_frame_corpus: could not write the corpus into %s\n", argv[1]);
        return 1;
    }
    printf("gen_frame_corpus: %d seeds in %s\n", o.count, argv[1]);
    return 0;
}
