// eval.c: loss and perplexity of a model on a text file (see eval.h).
#include "eval.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "args.h"
#include "checkpoint.h"
#include "data.h"
#include "tokenizer.h"

double evaluate_tokens(Model *m, const int *tokens, size_t n, size_t *predicted) {
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
    }
    free(targets);
    free(inputs);
    return total / (double)*predicted;
}

int cmd_eval(int argc, char **argv) {
    const char *model_path = NULL;  // checkpoint to evaluate (required)
    bool json = false;              // print one JSON object instead of text
    int batch = 16;                 // windows per forward pass (speed only)
    int threads = 0;                // 0 = OpenMP's default
    Flag flags[] = {
        {"--model", FLAG_STRING, &model_path, "FILE", "checkpoint written by 'tinygpt train' (required)", 0, 0, false, NULL, NULL},
        {"--json", FLAG_SWITCH, &json, NULL, "print {\"loss\": ..., \"perplexity\": ..., \"tokens\": ..., \"bits_per_byte\": ...}", 0, 0, false, NULL, NULL},
        {"--batch", FLAG_INT, &batch, "B", "windows per forward pass (does not change the result)", 1, 1 << 16, false, NULL, NULL},
        {"--threads", FLAG_INT, &threads, "N", "OpenMP threads, 0 = default", 0, 1024, false, NULL, NULL},
    };
    Command cmd = {"eval", "TEXTFILE",
                   "Mean cross-entropy (nats per token), perplexity and bits per byte of a model over every full window of a text file.",
                   "tinygpt eval --model runs/default/model.safetensors data/moby-dick.txt", flags,
                   (int)(sizeof flags / sizeof flags[0])};
    const char *text_path = parse_flags(&cmd, argc, argv);
    if (!model_path) usage_error(&cmd, "missing --model FILE");
    if (threads > 0) omp_set_num_threads(threads);

    Model model;
    Tokenizer tok;
    Error err;
    if (!checkpoint_load(model_path, &model, &tok, batch, false, NULL, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    char *text;
    size_t len;
    int *tokens;
    size_t n;
    if (!read_file(text_path, &text, &len, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    if (!tokenizer_encode(&tok, text, len, &tokens, &n, text_path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    free(text);

    size_t predicted;
    double loss = evaluate_tokens(&model, tokens, n, &predicted);
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
    if (json)
        printf("{\"loss\": %.6f, \"perplexity\": %.6f, \"tokens\": %zu, \"bits_per_byte\": %.6f}\n", loss, exp(loss),
               predicted, bpb);
    else
        printf("loss %.4f nats/token | perplexity %.3f | %.4f bits/byte | %zu predicted tokens\n", loss, exp(loss), bpb,
               predicted);

    free(tokens);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}
