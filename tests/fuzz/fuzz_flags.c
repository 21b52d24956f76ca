// fuzz_flags.c: libFuzzer target for the flag parser, on train's own flags.
//
// The input is split at spaces, tabs and newlines into argv words (argv[0]
// is the command name) and handed to parse_flags_report, the parser core
// that reports instead of exiting, with the flags train makes from its
// settings table (settings.c): every flag type (int, long, double, choice,
// string, switch) and range. Whatever it accepts must be in range. Built
// and run by `make fuzz`; seeds are in corpus/flags/.
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_WORDS = 64 };

// in_range: every number and choice of "s" that the command line set is
// within its row's range or list.
static bool in_range(const Command *cmd, const TrainSettings *s) {
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (strncmp(st->flag, "--", 2) != 0 || !command_flag(cmd, st->flag)->seen) continue;
        const char *at = (const char *)s + st->offset;
        double x = st->type == SETTING_INT ? *(const int *)at
                   : st->type == SETTING_LONG ? (double)*(const long *)at
                   : st->type == SETTING_DOUBLE ? *(const double *)at
                                                : 0;
        if ((st->min != 0 || st->max != 0) && !(x >= st->min && x <= st->max)) return false;
        if (st->type == SETTING_CHOICE) {
            int n = 0;
            while (st->choices[n]) n++;
            if (*(const int *)at < 0 || *(const int *)at >= n) return false;
        }
    }
    return true;
}

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

    TrainSettings s;
    memset(&s, 0, sizeof s);
    Flag flags[NUM_TRAIN_SETTINGS_MAX];
    Command cmd = {"train", "[FILE]", "fuzzed train", "tinygpt train FILE", NULL, 0};
    settings_command(&cmd, flags, &s);
    const char *positional = NULL;
    Error err;
    if (parse_flags_report(&cmd, argc, argv, &positional, &err) == PARSE_OK && !in_range(&cmd, &s)) abort();
    free(buf);
    return 0;
}
