// gpt2_dump.c: GPT-2's tokenizer (read from a directory's vocab.json and
// merges.txt) on many texts at once, for scripts/gpt2_tokenizer_check.py
// to compare with GPT-2's reference encoder (`make gpt2-tokenizer-check`).
//
//   gpt2_dump DIR RECORDS
//
// RECORDS holds the texts one after another, each as its length in bytes in
// decimal, a newline, then the bytes (so a text may hold any byte, newlines
// included). Prints a first line "vocab V end_of_text E", then one line per
// text: its ids separated by spaces. Exits 1 if a text does not decode back
// to itself, or if one is refused (a text tinygpt does not take: invalid
// UTF-8, a NUL), naming it by its number.
// Not part of the Check runner: a program of its own, linked with the library.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_tokenizer.h"

// next_record: the text at "*pos" of "records" ("len" bytes) into "*text"
// and "*text_len", advancing "*pos"; false at the end.
static bool next_record(const char *records, size_t len, size_t *pos, const char **text, size_t *text_len) {
    if (*pos >= len) return false;
    char *end;
    unsigned long long n = strtoull(records + *pos, &end, 10);
    if (end == records + *pos || (size_t)(end - records) >= len || *end != '\n' || n > len - (size_t)(end + 1 - records))
        die(EXIT_USAGE, "gpt2_dump: a malformed record at byte %zu", *pos);
    *text = end + 1;
    *text_len = (size_t)n;
    *pos = (size_t)(end + 1 - records) + (size_t)n;
    return true;
}

int main(int argc, char **argv) {
    if (argc != 3) die(EXIT_USAGE, "usage: gpt2_dump DIR RECORDS");
    Error err;
    Tokenizer tok;
    if (!tokenizer_load_gpt2(&tok, argv[1], &err)) die(EXIT_RUNTIME, "%s", err.msg);
    char *records;
    size_t len;
    if (!read_file(argv[2], &records, &len, &err)) die(EXIT_RUNTIME, "%s", err.msg);

    printf("vocab %d end_of_text %d\n", tok.vocab_size, tok.end_of_text);
    const char *text;
    size_t text_len, pos = 0;
    for (int record = 0; next_record(records, len, &pos, &text, &text_len); record++) {
        int *ids;
        size_t n;
        if (!tokenizer_encode(&tok, text, text_len, &ids, &n, "the text", &err))
            die(EXIT_RUNTIME, "gpt2_dump: text %d: %s", record, err.msg);
        for (size_t i = 0; i < n; i++) printf(i > 0 ? " %d" : "%d", ids[i]);
        printf("\n");
        size_t back_len;
        char *back = tokenizer_decode(&tok, ids, n, &back_len);
        if (back_len != text_len || memcmp(back, text, text_len) != 0)
            die(EXIT_RUNTIME, "gpt2_dump: text %d does not decode back to itself", record);
        free(back);
        free(ids);
    }
    free(records);
    tokenizer_free(&tok);
    return 0;
}
