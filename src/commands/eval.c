// eval.c: loss and perplexity of a model on a text file (see eval.h).
#include "eval.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "hf_gpt2.h"
#include "data.h"
#include "safetensors.h"
#include "settings.h"  // train's --val-fraction, whose split eval repeats
#include "tokenizer.h"
#include "utf8.h"
#include "watch.h"  // watch_format_duration, for the progress line

const char *const EVAL_SPLIT_NAMES[] = {"all", "val", NULL};

double evaluate_tokens(Model *m, const int *tokens, size_t n, size_t *predicted, EvalProgress progress, void *ctx) {
    const int T = m->config.block_size;
    size_t windows = n > (size_t)T ? (n - 1) / T : 0;
    *predicted = windows * (size_t)T;
    if (windows == 0) return NAN;
    int *inputs = xmalloc((size_t)m->max_batch * T * sizeof(int));
    int *targets = xmalloc((size_t)m->max_batch * T * sizeof(int));
    double total = 0.0;  // sum of per-position losses, in double
    for (size_t first = 0; first < windows; first += (size_t)m->max_batch) {
        int B = windows - first < (size_t)m->max_batch ? (int)(windows - first) : m->max_batch;
        for (int b = 0; b < B; b++) {
            const int *window = tokens + (first + (size_t)b) * T;
            for (int t = 0; t < T; t++) {
                inputs[b * T + t] = window[t];
                targets[b * T + t] = window[t + 1];
            }
        }
        model_forward(m, inputs, targets, B, T, false, 0);
        for (int i = 0; i < B * T; i++) total += m->acts.losses[i];
        if (progress) progress(first + (size_t)B, windows, ctx);
    }
    free(targets);
    free(inputs);
    return total / (double)*predicted;
}

// ---- Progress on a terminal ---------------------------------------------------

// A line on stderr, redrawn in place at most ten times a second while the
// windows go by, and erased before the result is printed; only when stderr
// is a terminal (through a pipe or into a file, stderr stays as it was).
typedef struct {
    double start, last_draw;
    bool shown;
} Progress;

static void show_progress(size_t done, size_t total, void *ctx) {
    Progress *p = ctx;
    double now = now_seconds();
    if (p->shown && now - p->last_draw < 0.1 && done < total) return;
    p->last_draw = now;
    char left[32];
    watch_format_duration(left, sizeof left, (now - p->start) / (double)done * (double)(total - done));
    fprintf(stderr, "\reval: %3.0f%% (%zu of %zu windows) ETA %s\033[K", 100.0 * (double)done / (double)total, done,
            total, left);
    p->shown = true;
}

static void clear_progress(const Progress *p) {
    if (p->shown) fputs("\r\033[K", stderr);
}

// ---- The validation split ----------------------------------------------------------

// run_val_fraction: the --val-fraction the run that wrote "model_path"
// trained with, from its metadata (a checkpoint of `train`'s records it);
// false when the file does not say. A file older than "settings_format" 2
// wrote it as a float, to 9 digits, and train read it back as that float
// (settings.h, Setting.was_float): so is it here. A damaged value is an
// error (exit 1) naming the file.
static bool run_val_fraction(const char *model_path, double *fraction) {
    SafetensorsFile st;
    Error err;
    bool found = false;
    if (safetensors_open(&st, model_path, "checkpoint", &err) && safetensors_meta_has(&st, "val_fraction")) {
        if (!safetensors_meta_double(&st, "val_fraction", fraction)) {
            safetensors_close(&st);
            die(EXIT_RUNTIME, "%s", err.msg);
        }
        if (!(*fraction < 1.0)) {
            safetensors_close(&st);
            die(EXIT_RUNTIME, "'%s' says its run's val_fraction is %g, outside [0, 1); the file is damaged: give --val-fraction F",
                model_path, *fraction);
        }
        if (!safetensors_meta_has(&st, "settings_format")) *fraction = (float)*fraction;
        found = true;
    }
    safetensors_close(&st);
    return found;
}

// encode_val_split: the ids of the last floor(n_chars * fraction)
// characters of "text", as train's split cuts them (data.h, dataset_load):
// the same characters for both kinds of tokenizer, and bpe encodes that
// part on its own (no token spans the boundary). The whole text is checked
// first, so an error names its byte offset in the file. "*n_chars" gets the
// split's characters, "*n" its tokens.
static int *encode_val_split(Tokenizer *tok, const char *text, size_t len, double fraction, const char *path,
                             size_t *n_chars, size_t *n) {
    Error err;
    int *ids;
    if (!tokenizer_check_text(text, len, path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    size_t total_chars = utf8_count(text, len);
    *n_chars = (size_t)floor((double)total_chars * fraction);
    if (tok->kind != TOKENIZER_CHAR) {  // bpe and gpt2
        size_t start = utf8_prefix(text, len, total_chars - *n_chars);
        if (!tokenizer_encode(tok, text + start, len - start, &ids, n, path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
        return ids;
    }
    // char: one token per character, so the split's ids are the last ones.
    size_t all;
    if (!tokenizer_encode(tok, text, len, &ids, &all, path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    memmove(ids, ids + (all - *n_chars), *n_chars * sizeof *ids);
    *n = *n_chars;
    return ids;
}

// ---- Output --------------------------------------------------------------------------

// json_double: "x" (finite) in the fewest digits that read back as the same
// double, for a JSON number.
static void json_double(char *buf, size_t cap, double x) {
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, cap, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) return;
    }
}


int cmd_eval(int argc, char **argv) {
    const char *model_path = NULL;  // checkpoint to evaluate (required)
    EvalSplit split = EVAL_ALL;     // the whole text, or the validation split as train cut it
    // For --split val: the checkpoint's when not given, else train's
    // default, from train's settings row, so the two cut the text alike.
    const Setting *train_fraction = setting_named("val_fraction");
    double val_fraction = strtod(train_fraction->gpt_default, NULL);
    char fraction_help[128], fraction_default[64];
    snprintf(fraction_help, sizeof fraction_help,
             "with --split val: the split's fraction of the text, above 0 and at most %g", train_fraction->max);
    snprintf(fraction_default, sizeof fraction_default, "the run's, from the checkpoint; else %s",
             train_fraction->gpt_default);
    bool json = false;              // print one JSON object instead of text
    int batch = 16;                 // windows per forward pass (speed only)
    int threads = 0;                // 0 = OpenMP's default
    long max_bytes = STDIN_MAX_BYTES;  // with TEXTFILE -: the most of standard input read
    Flag flags[] = {
        model_flag(&model_path, NULL),
        {"--split", FLAG_CHOICE, &split, "all|val", "score every full window of the text, or only of its validation split as train cut it (the last floor(n_chars * val_fraction) characters)", 0, 0, false, NULL, EVAL_SPLIT_NAMES},
        {"--val-fraction", FLAG_DOUBLE_ABOVE_MIN, &val_fraction, "F", fraction_help, 0, train_fraction->max, false, fraction_default, NULL},
        {"--json", FLAG_SWITCH, &json, NULL, "print {\"loss\": ..., \"perplexity\": ..., \"tokens\": ..., \"bits_per_byte\": ..., \"split\": ...}", 0, 0, false, NULL, NULL},
        {"--batch", FLAG_INT, &batch, "B", "windows per forward pass (does not change the result)", 1, 1 << 16, false, NULL, NULL},
        threads_flag(&threads, NULL),
        max_bytes_flag(&max_bytes, "with TEXTFILE -: the most text read from standard input; more is an error"),
    };
    Command cmd = {"eval", "TEXTFILE",
                   "Mean cross-entropy (nats per token), perplexity and bits per byte of a model over every full window of a text file (- reads standard input), or of its validation split.",
                   "tinygpt eval --model runs/default/model.safetensors data/moby-dick.txt --split val", flags,
                   (int)(sizeof flags / sizeof flags[0])};
    const char *text_path = parse_flags(&cmd, argc, argv);
    const bool fraction_given = command_flag(&cmd, "--val-fraction")->seen;
    if (fraction_given && split != EVAL_VAL) usage_error(&cmd, "--val-fraction is for --split val");
    char run_model[4200];  // a run directory's model.safetensors
    model_path = required_model_path(&cmd, model_path, run_model, sizeof run_model);
    if (threads > 0) omp_set_num_threads(threads);

    Model model;
    Tokenizer tok;
    Error err;
    if (!model_load(model_path, &model, &tok, batch, false, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    char *text;
    size_t len;
    int *tokens;
    size_t n, split_chars = 0;
    if (!read_text_source(text_path, (size_t)max_bytes, &text, &len, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    text_path = text_source_name(text_path);  // "-" is "standard input" in what follows
    if (split == EVAL_ALL) {
        if (!tokenizer_encode(&tok, text, len, &tokens, &n, text_path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    } else {
        // The fraction: given, or the run's (from its checkpoint), or else
        // train's default, each said on stderr when it is not the run's.
        double saved;
        bool known = run_val_fraction(model_path, &saved);
        if (!fraction_given && known) {
            val_fraction = saved;
            if (saved == 0.0)
                die(EXIT_RUNTIME, "'%s' was trained with --val-fraction 0: its run had no validation split; give --val-fraction F to score the last F of '%s'",
                    model_path, text_path);
        } else if (!fraction_given) {
            fprintf(stderr, "note: '%s' does not record its run's --val-fraction; scoring the last %g%% of the characters of '%s' (--val-fraction %g, train's default)\n",
                    model_path, 100 * val_fraction, text_path, val_fraction);
        } else if (known && saved != val_fraction) {
            fprintf(stderr, "note: '%s' trained with --val-fraction %g; scoring the last %g%% of the characters instead, as --val-fraction says\n",
                    model_path, saved, 100 * val_fraction);
        }
        tokens = encode_val_split(&tok, text, len, val_fraction, text_path, &split_chars, &n);
    }
    free(text);

    Progress progress = {now_seconds(), 0.0, false};
    size_t predicted;
    double loss = evaluate_tokens(&model, tokens, n, &predicted, isatty(STDERR_FILENO) ? show_progress : NULL,
                                  &progress);
    clear_progress(&progress);
    if (predicted == 0 && split == EVAL_VAL)
        die(EXIT_RUNTIME, "the validation split of '%s' (its last %zu characters, --val-fraction %g) has %zu tokens, fewer than one window of %d + 1 for this model; give a longer text or a larger --val-fraction",
            text_path, split_chars, val_fraction, n, model.config.block_size);
    if (predicted == 0)
        die(EXIT_RUNTIME, "'%s' has %zu tokens, fewer than one window of %d + 1 for this model; give a longer text",
            text_path, n, model.config.block_size);
    // The loader refuses non-finite and absurd weights, but weights within
    // its bound can still overflow float somewhere in the forward pass: a
    // NaN printed as a result with exit status 0 would pass for a measurement.
    if (!isfinite(loss))
        die(EXIT_RUNTIME, "the loss of '%s' on '%s' is %s: its weights overflow float arithmetic, so it cannot be evaluated; retrain it, with a lower --lr",
            model_path, text_path, isnan(loss) ? "NaN" : "infinite");
    // Bits per byte: the windows predict tokens 1..predicted, so the loss
    // is spread over the bytes of those pieces.
    size_t covered_bytes = 0;
    for (size_t i = 1; i <= predicted; i++) {
        size_t piece_len;
        tokenizer_piece(&tok, tokens[i], &piece_len);
        covered_bytes += piece_len;
    }
    double bpb = bits_per_byte(loss, predicted, covered_bytes);
    // A finite loss above ln(DBL_MAX), about 709.8 nats, has a perplexity no
    // double holds: JSON says null (it has no infinity), the text says so.
    double perplexity = exp(loss);
    if (json) {
        char fraction[32] = "";
        if (split == EVAL_VAL) json_double(fraction, sizeof fraction, val_fraction);
        char ppl[32] = "null";
        if (isfinite(perplexity)) snprintf(ppl, sizeof ppl, "%.6f", perplexity);
        printf("{\"loss\": %.6f, \"perplexity\": %s, \"tokens\": %zu, \"bits_per_byte\": %.6f, \"split\": \"%s\"%s%s}\n",
               loss, ppl, predicted, bpb, EVAL_SPLIT_NAMES[split], split == EVAL_VAL ? ", \"val_fraction\": " : "",
               fraction);
    } else {
        char ppl[48] = "above 1.8e308";
        if (isfinite(perplexity)) snprintf(ppl, sizeof ppl, "%.3f", perplexity);
        printf("loss %.4f nats/token | perplexity %s | %.4f bits/byte | %zu predicted tokens", loss, ppl, bpb,
               predicted);
        if (split == EVAL_VAL)
            printf(" of the validation split (the last %zu characters, --val-fraction %g)", split_chars, val_fraction);
        printf("\n");
    }
    stdout_flush_or_die("the result");

    free(tokens);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}
