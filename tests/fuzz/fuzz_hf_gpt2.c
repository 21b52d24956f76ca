// fuzz_hf_gpt2.c: libFuzzer target for the Hugging Face GPT-2 reader
// (model/hf_gpt2.c: config.json and model.safetensors' names, shapes and
// dtypes; safetensors.c's listing and its F16/BF16 reading).
//
// Each input is config.json, then a NUL, then model.safetensors (no NUL:
// all config.json, and an empty model.safetensors), written into a
// directory beside a fixed valid vocab.json and merges.txt (GPT-2's 256
// byte tokens and <|endoftext|>, V = 257), and read with hf_gpt2_load, the
// way `tinygpt sample --model DIR` would. A directory it accepts is freed
// again, so a leak is a finding too. Built and run by `make fuzz`; the
// seeds in corpus/hf_gpt2/ are valid directories (F32, F16, BF16, the
// "transformer." names) and a few near misses.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf_gpt2.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void write_or_abort(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(bytes, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
}

// The tokenizer's files, once: GPT-2's byte characters (bytes_to_unicode),
// numbered in GPT-2's order, then <|endoftext|>.
static void write_tokenizer(const char *dir) {
    char path[128], vocab[8192];
    size_t n = (size_t)snprintf(vocab, sizeof vocab, "{");
    int id = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0, extra = 0; b < 256; b++) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            if (!printable) extra++;
            if (printable != (pass == 0)) continue;
            char utf8[4];
            const int k = utf8_encode(printable ? (uint32_t)b : 255u + (uint32_t)extra, utf8);
            const bool escape = k == 1 && (utf8[0] == '"' || utf8[0] == '\\');
            n += (size_t)snprintf(vocab + n, sizeof vocab - n, "\"%s%.*s\": %d, ", escape ? "\\" : "", k, utf8, id++);
        }
    n += (size_t)snprintf(vocab + n, sizeof vocab - n, "\"<|endoftext|>\": 256}");
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    write_or_abort(path, vocab, n);
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    write_or_abort(path, "#version: 0.2\n", 14);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char dir[64];
    char path[128];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_hf_gpt2_%d", (int)getpid());
        if (mkdir(dir, 0700) != 0) abort();
        write_tokenizer(dir);
    }
    const uint8_t *nul = memchr(data, 0, size);
    const size_t config_len = nul ? (size_t)(nul - data) : size;
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_or_abort(path, data, config_len);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_or_abort(path, nul ? nul + 1 : data, nul ? size - config_len - 1 : 0);

    Model m;
    Tokenizer tok;
    Error err;
    if (hf_gpt2_load(dir, &m, &tok, 1, false, &err)) {
        model_free(&m);
        tokenizer_free(&tok);
    }
    return 0;
}
