// fuzz_flags.c: libFuzzer target for the flag parser.
//
// The input is split at spaces, tabs and newlines into argv words (argv[0]
// is the command name) and handed to parse_flags_report, the parser core
// that reports instead of exiting, with a copy of `train`'s flag table: every
// flag type (int, long, float, string, switch) and range checks. Built and
// run by `make fuzz`; seeds are in corpus/flags/.
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_WORDS = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) abort();
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_WORDS + 1];
    int argc = 0;
    argv[argc++] = "train";
    for (char *word = strtok(buf, " \t\n"); word && argc < MAX_WORDS; word = strtok(NULL, " \t\n")) argv[argc++] = word;
    argv[argc] = NULL;

    const char *out_dir = "out", *init_path = NULL, *order = "random";
    long steps = 7000, seed = 1337;
    int batch = 32, context = 64, embd = 128, heads = 4, eval_interval = 500, eval_batches = 20, threads = 0;
    float dropout = 0.1f, lr = 0.5f, val_fraction = 0.1f;
    bool quiet = false;
    Flag flags[] = {
        {"--out", FLAG_STRING, &out_dir, "DIR", "output directory", 0, 0, false, NULL},
        {"--steps", FLAG_LONG, &steps, "N", "number of SGD steps", 0, 1e12, false, NULL},
        {"--batch", FLAG_INT, &batch, "B", "windows per step", 1, 1 << 20, false, NULL},
        {"--context", FLAG_INT, &context, "T", "characters per window", 1, 1 << 16, false, NULL},
        {"--embd", FLAG_INT, &embd, "C", "embedding channels", 1, 1 << 16, false, NULL},
        {"--heads", FLAG_INT, &heads, "NH", "attention heads", 1, 1 << 16, false, NULL},
        {"--dropout", FLAG_FLOAT, &dropout, "P", "dropout", 0, 0.999f, false, NULL},
        {"--lr", FLAG_FLOAT, &lr, "LR", "SGD learning rate", 0, 1e6, false, NULL},
        {"--val-fraction", FLAG_FLOAT, &val_fraction, "F", "validation fraction", 0, 0.9f, false, NULL},
        {"--eval-interval", FLAG_INT, &eval_interval, "N", "steps between validation losses", 1, 1e9, false, NULL},
        {"--eval-batches", FLAG_INT, &eval_batches, "N", "batches per validation loss", 1, 1e6, false, NULL},
        {"--init", FLAG_STRING, &init_path, "MODEL", "start from this .safetensors", 0, 0, false, NULL},
        {"--order", FLAG_STRING, &order, "ORDER", "random or sequential", 0, 0, false, NULL},
        {"--seed", FLAG_LONG, &seed, "S", "random seed", 0, 9.2e18, false, NULL},
        {"--threads", FLAG_INT, &threads, "N", "OpenMP threads", 0, 1024, false, NULL},
        {"--quiet", FLAG_SWITCH, &quiet, NULL, "a switch, as in sample's --no-cache", 0, 0, false, NULL},
    };
    Command cmd = {"train", "FILE", "fuzzed train", "tinygpt train FILE", flags, (int)(sizeof flags / sizeof flags[0])};
    const char *positional = NULL;
    Error err;
    ParseResult r = parse_flags_report(&cmd, argc, argv, &positional, &err);
    if (r == PARSE_OK) {
        // Whatever was accepted is within its range.
        if (batch < 1 || context < 1 || embd < 1 || heads < 1 || threads < 0 || steps < 0) abort();
        if (!(dropout >= 0 && dropout <= 0.999f) || !(lr >= 0 && lr <= 1e6f)) abort();
    }
    free(buf);
    return 0;
}
