// main.c: `tinygpt COMMAND [flags]`: finds the command and runs it.
//
// Reading order: file 43, the last but the portable build's launcher (43b).
// Each command lives in its own file and parses its own flags (args.h), so
// this one is only the table of commands.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "attention_map.h"
#include "common.h"
#include "eval.h"
#include "export.h"
#include "fma_peak.h"
#include "gradcheck_model.h"
#include "peak.h"
#include "plot_logs.h"
#include "sample.h"
#include "tokenize.h"
#include "train.h"
#include "walkthrough_backward.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} CommandEntry;

static const CommandEntry COMMANDS[] = {
    {"train", cmd_train, "train a GPT (or the one-block attention model) on a UTF-8 text file"},
    {"sample", cmd_sample, "generate text from a trained model"},
    {"eval", cmd_eval, "loss, perplexity and bits per byte of a model on a text file"},
    {"export", cmd_export, "write a gpt as a Hugging Face GPT-2 directory (config.json, model.safetensors, vocab.json, merges.txt)"},
    {"tokenize", cmd_tokenize, "show the tokens a model reads in a text, or learn a bpe tokenizer"},
    {"walkthrough", cmd_walkthrough, "self-attention step by step on the classic six-token example"},
    {"attention", cmd_attention, "print and draw what each attention head of each layer reads in a prompt"},
    {"gradcheck", cmd_gradcheck, "check every gradient against finite differences on a small card or gpt"},
    {"plot", cmd_plot, "draw the loss curves of a training log.csv as a PNG"},
    {"peak", cmd_peak, "measure this CPU's peak GFLOP/s (fused multiply-adds), on 1 thread and on all"},
};
#define NUM_COMMANDS (int)(sizeof COMMANDS / sizeof COMMANDS[0])

static void print_help(FILE *out) {
    fprintf(out, "usage: tinygpt COMMAND [flags]   (tinygpt COMMAND --help for its flags)\n\n"
                 "A GPT-style attention model with every forward and backward pass written by hand.\n\n"
                 "commands:\n");
    for (int i = 0; i < NUM_COMMANDS; i++) fprintf(out, "  %-12s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(out, "\n  --version    print the version and exit (also after any command)\n");
    fprintf(out, "\nexample:\n  tinygpt train data/moby-dick.txt --out runs/moby && "
                 "tinygpt sample --model runs/moby/model.safetensors --prompt \"Call me\"\n");
}

// OpenMP threads that finish their share of a loop wait for the next one.
// libgomp's default is to spin for 300,000 rounds (about 8 ms here) before
// sleeping: on a machine doing anything else (a browser, a second job), a
// spinning thread steals the core its partner needs, and two threads ran
// 3-6x slower than one. Sleeping at once (OMP_WAIT_POLICY=passive) costs a
// wake-up of 50-100 us at the start of each of the ~25 parallel loops of a
// training step, 10-20% of an M step on 2 threads. A short spin of 1000
// rounds (about 30 us here) covers the gap between one loop and the next
// and then sleeps: measured on the M step, as fast as spinning when the
// machine is idle, and within ~10% of passive when another job holds a core.
// libgomp reads the variable when the program loads, before main, so the
// only way to change its default is to set it and start again. A setting
// of the user's (GOMP_SPINCOUNT or OMP_WAIT_POLICY) is kept.
//
// Start again from the path /proc/self/exe points to, not from the link
// itself: the kernel names a process after the last part of the path it
// was started from, so exec'ing "/proc/self/exe" made every tinygpt show as
// "exe" in ps and top, and `pgrep tinygpt` found none. argv, argv[0]
// included, is passed on unchanged.
static void prefer_short_spinning(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self);
    if (len <= 0 || (size_t)len >= sizeof self) return;  // no /proc, or a path too long: run as we are
    self[len] = '\0';
    if (setenv("GOMP_SPINCOUNT", "1000", 1) != 0) return;
    // Returns only on failure (the binary was deleted since it started, and
    // the link reads "... (deleted)"): then carry on as we are, with
    // libgomp's default.
    execv(self, argv);
    unsetenv("GOMP_SPINCOUNT");
}

// check_stdout: at exit, whatever the command: everything it printed must
// have reached standard output. stdio keeps a buffer, so a full disk
// (`tinygpt walkthrough > /dev/full`) shows only when it is flushed, at exit
// if not before: flush it here and fail then, rather than exit 0 having
// lost the output (coreutils' close_stdout does the same).
static void check_stdout(void) { stdout_flush_or_die(NULL); }

int main(int argc, char **argv) {
    prefer_short_spinning(argv);
    kernel_path_check();
    k_block_check();
    atexit(check_stdout);
    if (argc < 2) {
        print_help(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        print_version(stdout);
        return 0;
    }
    for (int i = 0; i < NUM_COMMANDS; i++)
        if (strcmp(argv[1], COMMANDS[i].name) == 0) return COMMANDS[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tinygpt: unknown command '%s'; run 'tinygpt --help' for the list\n", argv[1]);
    return EXIT_USAGE;
}
