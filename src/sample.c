// sample.c: temperature / top-k sampling and the `sample` command.
#include "sample.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "checkpoint.h"
#include "tokenizer.h"

static int compare_descending(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int sample_token(const float *logits, int V, float temperature, int top_k, Rng *rng, float *scratch) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    if (temperature == 0.0f) return best;

    // Only logits >= threshold may be drawn: all of them, or the top k.
    float threshold = -INFINITY;
    if (top_k > 0 && top_k < V) {
        memcpy(scratch, logits, (size_t)V * sizeof(float));
        qsort(scratch, (size_t)V, sizeof(float), compare_descending);
        threshold = scratch[top_k - 1];
    }
    // softmax(logits / temperature), unnormalised; dividing by the total is
    // folded into the draw below.
    double total = 0.0;
    for (int v = 0; v < V; v++) {
        scratch[v] = logits[v] >= threshold ? expf((logits[v] - logits[best]) / temperature) : 0.0f;
        total += scratch[v];
    }
    // Walk the cumulative distribution until it passes a uniform draw.
    double target = rng_uniform(rng) * total, cumulative = 0.0;
    for (int v = 0; v < V; v++) {
        cumulative += scratch[v];
        if (target < cumulative) return v;
    }
    return best;  // only reached through rounding when target ~ total
}

const float *next_token_logits(Model *m, const int *context, int len) {
    int T = len < m->config.block_size ? len : m->config.block_size;
    model_forward(m, context + (len - T), NULL, 1, T, false, 0);
    return m->acts.logits + (size_t)(T - 1) * m->config.vocab_size;
}

// Write token "id" to stdout at once, so text appears as it is generated.
static void emit_token(const Tokenizer *tok, int id) {
    char bytes[4];
    int n = tokenizer_decode(tok, id, bytes);
    fwrite(bytes, 1, (size_t)n, stdout);
    fflush(stdout);
}

int cmd_sample(int argc, char **argv) {
    const char *model_path = NULL;  // checkpoint to load (required)
    const char *prompt = "";        // text to continue; printed first
    int tokens = 500;               // characters to generate
    float temperature = 1.0f;       // 0 = greedy; < 1 sharper, > 1 more random
    int top_k = 0;                  // 0 = no top-k cut
    long seed = 1337;               // sampling seed
    int threads = 0;                // 0 = OpenMP's default
    Flag flags[] = {
        {"--model", FLAG_STRING, &model_path, "FILE", "checkpoint written by 'tinygpt train' (required)", 0, 0, false},
        {"--prompt", FLAG_STRING, &prompt, "TEXT", "text to continue", 0, 0, false},
        {"--tokens", FLAG_INT, &tokens, "N", "number of characters to generate", 0, 1e9, false},
        {"--temperature", FLAG_FLOAT, &temperature, "X", "sampling temperature, 0 = always the likeliest", 0, 100, false},
        {"--top-k", FLAG_INT, &top_k, "K", "draw only from the K likeliest characters, 0 = all", 0, 1e9, false},
        {"--seed", FLAG_LONG, &seed, "S", "random seed", 0, 9.2e18, false},
        {"--threads", FLAG_INT, &threads, "N", "OpenMP threads, 0 = default", 0, 1024, false},
    };
    Command cmd = {"sample", NULL, "Generate text from a trained model; stdout gets the prompt and the generated text.",
                   "tinygpt sample --model runs/default/model.safetensors --prompt \"Call me\" --tokens 200",
                   flags, (int)(sizeof flags / sizeof flags[0])};
    parse_flags(&cmd, argc, argv);
    if (!model_path) usage_error(&cmd, "missing --model FILE");
    if (threads > 0) omp_set_num_threads(threads);

    Model model;
    Tokenizer tok;
    Error err;
    if (!checkpoint_load(model_path, &model, &tok, 1, false, NULL, &err)) die(EXIT_RUNTIME, "%s", err.msg);

    // The context: the prompt's tokens, then each generated one.
    size_t prompt_len = strlen(prompt);
    int *prompt_ids = NULL;
    size_t n_prompt = 0;
    if (prompt_len > 0 && !tokenizer_encode(&tok, prompt, prompt_len, &prompt_ids, &n_prompt, "--prompt", &err)) {
        tokenizer_free(&tok);
        model_free(&model);
        usage_error(&cmd, "%s", err.msg);
    }
    int *context = xmalloc((n_prompt + (size_t)tokens + 1) * sizeof(int));
    int len = 0;
    if (n_prompt == 0) {
        // Nothing to continue: start from a newline (or token 0), not printed.
        int newline = tokenizer_id(&tok, '\n');
        context[len++] = newline >= 0 ? newline : 0;
    }
    for (size_t i = 0; i < n_prompt; i++) context[len++] = prompt_ids[i];
    fwrite(prompt, 1, prompt_len, stdout);
    fflush(stdout);

    Rng rng;
    rng_init(&rng, (uint64_t)seed);
    float *scratch = xmalloc((size_t)tok.vocab_size * sizeof(float));
    double start = now_seconds();
    for (int i = 0; i < tokens; i++) {
        const float *logits = next_token_logits(&model, context, len);
        int next = sample_token(logits, model.config.vocab_size, temperature, top_k, &rng, scratch);
        context[len++] = next;
        emit_token(&tok, next);
    }
    double elapsed = now_seconds() - start;
    // stdout carries only the text; the newline that ends it on a terminal
    // goes to stderr with the status.
    fprintf(stderr, "\n");
    fprintf(stderr, "sampled %d tokens in %.2f s (%.0f tokens/s)\n", tokens, elapsed,
            elapsed > 0 ? tokens / elapsed : 0.0);

    free(scratch);
    free(context);
    free(prompt_ids);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}
