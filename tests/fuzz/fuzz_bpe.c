// fuzz_bpe.c: libFuzzer target for the byte-level BPE (bpe.c).
//
// Each input is used twice:
// (a) as merges text, the way a checkpoint's metadata is read: the parser
//     must refuse bad text cleanly; text it accepts must give a tokenizer
//     whose encoding of the input decodes back to the input.
// (b) as training text: a few merges (1 to 32, from the first byte) are
//     learned from it; when there is enough text, encoding it must decode
//     back to it, and the merges must survive their text form.
// Built and run by `make fuzz`; seeds are in corpus/bpe/.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// check_round_trip: encode "text" ("len" bytes) and decode it again; abort
// unless the bytes come back and every id is in the vocabulary.
static void check_round_trip(Bpe *bpe, const char *text, size_t len) {
    int *ids = malloc((len > 0 ? len : 1) * sizeof *ids);
    if (!ids) abort();
    size_t n = bpe_encode(bpe, text, len, ids);
    if (n > len) abort();
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= bpe->vocab_size) abort();
        size_t k;
        const unsigned char *piece = bpe_piece(bpe, ids[i], &k);
        if (k == 0 || pos + k > len || memcmp(piece, text + pos, k) != 0) abort();
        pos += k;
    }
    if (pos != len) abort();
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    Bpe bpe;
    Error err;

    // (a) The input as merges text.
    if (bpe_from_merges_text(&bpe, text, size, &err)) {
        check_round_trip(&bpe, text, size);
        bpe_free(&bpe);
    } else if (strncmp(err.msg, "merges", 6) != 0 || strchr(err.msg, '\n') || bpe.vocab_size != 0) {
        abort();
    }

    // (b) The input as training text.
    int n_merges = size > 0 ? 1 + data[0] % 32 : 1;
    if (bpe_learn(&bpe, text, size, BPE_BYTES + n_merges, "fuzz", &err)) {
        check_round_trip(&bpe, text, size);
        char *merges = bpe_merges_text(&bpe);
        Bpe loaded;
        if (!bpe_from_merges_text(&loaded, merges, strlen(merges), &err)) abort();
        if (loaded.n_merges != bpe.n_merges ||
            memcmp(loaded.merges, bpe.merges, (size_t)bpe.n_merges * sizeof *bpe.merges) != 0)
            abort();
        bpe_free(&loaded);
        free(merges);
        bpe_free(&bpe);
        bpe_free(&bpe);  // twice is safe
    } else if (bpe.vocab_size != 0 || bpe.merges != NULL) {
        abort();
    }
    return 0;
}
