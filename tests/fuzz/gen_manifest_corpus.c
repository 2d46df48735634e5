/* Writes fuzz_manifest's seed corpus into a directory (for the libFuzzer build). */
#include <stdio.h>
#include <sys/stat.h>

#include "fuzz_manifest.h"

static int written;

static void write_seed(void *user, const uint8_t *seed, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/seed-%03d", (const char *)user, written++);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return;
    fwrite(seed, 1, len, f);
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_manifest_corpus DIR\n");
        return 2;
    }
    mkdir(argv[1], 0755);
    manifest_corpus(write_seed, argv[1]);
    printf("gen_manifest_corpus: %d seeds in %s\n", written, argv[1]);
    return written > 0 ? 0 : 1;
}
