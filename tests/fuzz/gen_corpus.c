/*
 * Writes a fuzz target's seed corpus into a directory, emptied first so every
 * run starts from the same seeds: gen_corpus frame|manifest|sproto|hello|rkey|handshake|amhdr DIR
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_amhdr.h"
#include "fuzz_frame.h"
#include "fuzz_handshake.h"
#include "fuzz_hello.h"
#include "fuzz_manifest.h"
#include "fuzz_rkey.h"
#include "fuzz_sproto.h"

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

/* Inputs a previous fuzz run added go: every run starts from the same seeds. */
static int empty_dir(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return -1;
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[4096];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return 0;
}

int main(int argc, char **argv)
{
    void (*corpus)(void (*)(void *, const uint8_t *, size_t), void *) = NULL;
    if (argc == 3 && strcmp(argv[1], "frame") == 0)
        corpus = frame_corpus;
    else if (argc == 3 && strcmp(argv[1], "manifest") == 0)
        corpus = manifest_corpus;
    else if (argc == 3 && strcmp(argv[1], "sproto") == 0)
        corpus = sproto_corpus;
    else if (argc == 3 && strcmp(argv[1], "hello") == 0)
        corpus = hello_corpus;
    else if (argc == 3 && strcmp(argv[1], "rkey") == 0)
        corpus = rkey_corpus;
    else if (argc == 3 && strcmp(argv[1], "amhdr") == 0)
        corpus = amhdr_corpus;
    else if (argc == 3 && strcmp(argv[1], "handshake") == 0)
        corpus = handshake_corpus;
    if (corpus == NULL) {
        fprintf(stderr, "usage: gen_corpus frame|manifest|sproto|hello|rkey|handshake|amhdr DIR\n");
        return 2;
    }
    if (empty_dir(argv[2]) != 0) {
        perror(argv[2]);
        return 1;
    }
    out_t o = {argv[2], 0, 0};
    corpus(write_seed, &o);
    if (o.failed || o.count == 0) {
        fprintf(stderr, "gen_corpus: could not write the %s corpus into %s\n", argv[1], argv[2]);
        return 1;
    }
    printf("gen_corpus: %d %s seeds in %s\n", o.count, argv[1], argv[2]);
    return 0;
}
