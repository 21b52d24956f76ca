// fuzz_utf8.c: libFuzzer target for the UTF-8 decoder and the tokenizer.
//
// The input bytes are the text: tokenizer_build makes a vocabulary of them,
// tokenizer_encode turns them into ids (which must then succeed, as every
// character is in the vocabulary), each id is decoded back and the bytes
// must come out the same. Invalid UTF-8 must be refused by both, cleanly.
// Built and run by `make fuzz`; seeds are in corpus/utf8/.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    Tokenizer tok;
    Error err;
    if (!tokenizer_build(&tok, text, size, "fuzz", &err)) return 0;
    int *ids = NULL;
    size_t n = 0;
    if (!tokenizer_encode(&tok, text, size, &ids, &n, "fuzz", &err)) abort();  // built from this text
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *out = tokenizer_piece(&tok, ids[i], &len);
        if (len < 1 || len > 4 || pos + len > size || memcmp(out, text + pos, len) != 0) abort();
        pos += len;
    }
    if (pos != size) abort();
    free(ids);
    tokenizer_free(&tok);
    return 0;
}
