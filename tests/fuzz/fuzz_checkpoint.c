// fuzz_checkpoint.c: libFuzzer target for the checkpoint loader.
//
// Each input is written to a temporary file and loaded with checkpoint_load
// (and its header read with checkpoint_read_header and the run's settings
// with settings_read_kept, the --resume path), the
// way `tinygpt sample --model FILE` would. A file it accepts is freed again,
// so a leak is a finding too. Built and run by `make fuzz`; seeds, including
// a real checkpoint saved by tinygpt, are in corpus/checkpoint/.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "checkpoint.h"
#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64];
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/fuzz_checkpoint_%d.safetensors", (int)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();

    Model m;
    Tokenizer tok;
    long step = 0;
    Error err;
    if (checkpoint_load(path, &m, &tok, 1, false, &step, &err)) {
        model_free(&m);
        tokenizer_free(&tok);
    }
    CheckpointHeader h;
    if (checkpoint_read_header(path, &h, &err)) {
        // What --resume does next with it: the run's settings, strictly.
        TrainSettings s;
        memset(&s, 0, sizeof s);
        (void)settings_read_kept(&s, &h.metadata, KEPT_IN_RUN, path, &err);
        metadata_free(&h.metadata);
    }
    unlink(path);
    return 0;
}
