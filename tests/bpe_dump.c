// bpe_dump.c: learn BPE merges from a file and print them and the file's ids,
// for scripts/bpe_reference.py to compare with its own (`make bpe-check`).
//
//   bpe_dump [--time] FILE VOCAB_SIZE
//
// Prints two lines: the merges as bpe_merges_text writes them, then the ids
// of the whole file, encoded with those merges, separated by spaces. With
// --time it prints only the timings instead: learning in seconds, encoding
// in MB/s (the cache empty, then filled).
// Not part of the Check runner: a program of its own, linked with the library.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"

int main(int argc, char **argv) {
    bool timing = argc == 4 && strcmp(argv[1], "--time") == 0;
    if (argc != 3 + timing) die(EXIT_USAGE, "usage: bpe_dump [--time] FILE VOCAB_SIZE");
    const char *path = argv[1 + timing];
    int vocab_size = atoi(argv[2 + timing]);
    Error err;
    char *text;
    size_t len;
    if (!read_file(path, &text, &len, &err)) die(EXIT_RUNTIME, "%s", err.msg);

    Bpe bpe;
    double start = now_seconds();
    if (!bpe_learn(&bpe, text, len, vocab_size, path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    double learned = now_seconds();
    int *ids = xmalloc((len > 0 ? len : 1) * sizeof *ids);
    size_t n = bpe_encode(&bpe, text, len, ids);
    double encoded = now_seconds();
    size_t again = bpe_encode(&bpe, text, len, ids);
    double encoded_again = now_seconds();
    if (again != n) die(EXIT_RUNTIME, "encoding twice gave %zu then %zu ids", n, again);

    if (timing) {
        double mb = (double)len / 1e6;
        printf("%.1f MB: learn %d merges %.3f s, encode %.1f MB/s (cache filled: %.1f MB/s), %zu ids\n", mb,
               bpe.n_merges, learned - start, mb / (encoded - learned), mb / (encoded_again - encoded), n);
    } else {
        char *merges = bpe_merges_text(&bpe);
        printf("%s\n", merges);
        free(merges);
        for (size_t i = 0; i < n; i++) printf(i > 0 ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    free(ids);
    bpe_free(&bpe);
    free(text);
    return 0;
}
