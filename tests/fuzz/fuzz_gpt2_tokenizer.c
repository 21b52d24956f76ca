// fuzz_gpt2_tokenizer.c: libFuzzer target for GPT-2's tokenizer files
// (gpt2_tokenizer.c: vocab.json and merges.txt).
//
// The first byte chooses how the rest is used:
// - even: vocab.json, then a NUL, then merges.txt (no NUL: all vocab.json).
//   Mostly bad files: each must be refused in one line naming a file.
// - odd: merges.txt alone, with a vocab.json made here to match it (the 256
//   byte characters, each line's two texts joined, then <|endoftext|>), so
//   that well-formed merges load and the encoder runs.
// A tokenizer that loads must number its tokens 0..V-1 both ways, and
// encode the input (when it is text) into ids that decode back to it.
// Built and run by `make fuzz`; seeds are in corpus/gpt2_tokenizer/.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_tokenizer.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// byte_char: GPT-2's character for byte "b" (bytes_to_unicode), written out
// again here so that the harness does not trust the loader's.
static uint32_t byte_char(int b) {
    uint32_t next = 256;
    for (int c = 0; c < 256; c++) {
        bool prints = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
        if (c == b) return prints ? (uint32_t)c : next;
        if (!prints) next++;
    }
    abort();
}

// matching_vocab: a vocab.json for "merges" ("len" bytes) into "out". Any
// numbering will do; this one is the bytes in byte order, then the merges.
static void matching_vocab(const char *merges, size_t len, JsonBuf *out) {
    int id = 0;
    json_buf_printf(out, "{");
    for (int b = 0; b < 256; b++) {
        char utf8[4];
        int n = utf8_encode(byte_char(b), utf8);
        json_buf_printf(out, "%s", b > 0 ? ", " : "");
        json_buf_string(out, utf8, (size_t)n);
        json_buf_printf(out, ": %d", id++);
    }
    const char *end = merges + len, *line = memchr(merges, '\n', len);
    for (line = line ? line + 1 : end; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol) eol = end;
        const char *space = memchr(line, ' ', (size_t)(eol - line));
        if (space) {
            // The two texts joined; json_buf_string wants UTF-8, and a line
            // that is not gives JSON the loader refuses, which is fine too.
            json_buf_printf(out, ", ");
            char *joined = malloc((size_t)(eol - line));
            if (!joined) abort();
            memcpy(joined, line, (size_t)(space - line));
            memcpy(joined + (space - line), space + 1, (size_t)(eol - space - 1));
            json_buf_string(out, joined, (size_t)(eol - line - 1));
            free(joined);
            json_buf_printf(out, ": %d", id++);
        }
        line = eol + 1;
    }
    json_buf_printf(out, ", \"<|endoftext|>\": %d}", id);
}

// check_tokenizer: the numbering both ways, and the input through it.
static void check_tokenizer(Tokenizer *tok, const char *text, size_t len) {
    if (tok->kind != TOKENIZER_GPT2 || tok->vocab_size != tok->bpe.vocab_size + 1) abort();
    for (int id = 0; id < tok->vocab_size; id++) {
        int t = tok->bpe_of_gpt2[id];
        if (id == tok->end_of_text ? t != -1 : (t < 0 || tok->gpt2_of_bpe[t] != id)) abort();
    }
    int *ids;
    size_t n;
    Error err;
    if (!tokenizer_encode(tok, text, len, &ids, &n, "fuzz", &err)) return;  // not text
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= tok->vocab_size || ids[i] == tok->end_of_text) abort();
    size_t back_len;
    char *back = tokenizer_decode(tok, ids, n, &back_len);
    if (back_len != len || memcmp(back, text, len) != 0) abort();
    free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    bool matching = data[0] & 1;
    const char *rest = (const char *)data + 1;
    size_t rest_len = size - 1;
    JsonBuf vocab = {0};
    const char *merges;
    size_t merges_len;
    if (matching) {
        merges = rest;
        merges_len = rest_len;
        matching_vocab(merges, merges_len, &vocab);
    } else {
        const char *nul = memchr(rest, '\0', rest_len);
        size_t vocab_len = nul ? (size_t)(nul - rest) : rest_len;
        json_buf_append(&vocab, rest, vocab_len);
        merges = nul ? nul + 1 : rest + rest_len;
        merges_len = rest_len - (nul ? vocab_len + 1 : vocab_len);
    }
    Tokenizer tok;
    Error err;
    if (gpt2_tokenizer_from_text(&tok, vocab.data ? vocab.data : "", vocab.len, "vocab.json", merges, merges_len,
                                 "merges.txt", &err)) {
        check_tokenizer(&tok, merges, merges_len);
        tokenizer_free(&tok);
    } else if (err.msg[0] != '\'' || strchr(err.msg, '\n') || tok.vocab_size != 0 || tok.gpt2_of_bpe != NULL) {
        abort();
    }
    json_buf_free(&vocab);
    return 0;
}
