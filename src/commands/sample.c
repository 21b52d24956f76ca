// sample.c: temperature / top-k sampling and the `sample` command.
#include "sample.h"

#include <assert.h>
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

void generator_init(Generator *g, Model *m, int capacity, bool use_cache) {
    g->model = m;
    g->tokens = xmalloc((size_t)capacity * sizeof(int));
    g->len = 0;
    g->capacity = capacity;
    g->window_start = 0;
    g->cached = 0;
    g->use_cache = use_cache;
    if (use_cache) transposed_weights_init(&g->weights_t, m);
}

void generator_free(Generator *g) {
    if (g->use_cache) transposed_weights_free(&g->weights_t);
    free(g->tokens);
    g->tokens = NULL;
}

void generator_push(Generator *g, int token) {
    assert(g->len < g->capacity);
    g->tokens[g->len++] = token;
}

const float *generator_logits(Generator *g) {
    const int T = g->model->config.block_size, V = g->model->config.vocab_size;
    assert(g->len > 0);
    if (g->len - g->window_start > T) {  // outgrown: keep the newest half
        g->window_start = g->len - (T + 1) / 2;
        g->cached = 0;
    }
    const int *window = g->tokens + g->window_start;
    const int n = g->len - g->window_start;
    if (!g->use_cache) {
        model_forward(g->model, window, NULL, 1, n, false, 0);
        return g->model->acts.logits + (size_t)(n - 1) * V;
    }
    const float *logits = NULL;
    for (; g->cached < n; g->cached++)
        logits = model_forward_position(g->model, &g->weights_t, window[g->cached], g->cached);
    return logits;
}

// Write token "id" to stdout at once, so text appears as it is generated
// (whole characters only: a bpe token can end inside one, see Utf8Stream).
static void emit_token(const Tokenizer *tok, Utf8Stream *stream, int id) {
    size_t len;
    const char *piece = tokenizer_piece(tok, id, &len);
    utf8_stream_write(stream, piece, len, stdout);
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
    bool no_cache = false;          // recompute the whole window for every token
    Flag flags[] = {
        {"--model", FLAG_STRING, &model_path, "FILE", "checkpoint written by 'tinygpt train' (required)", 0, 0, false, NULL},
        {"--prompt", FLAG_STRING, &prompt, "TEXT", "text to continue", 0, 0, false, NULL},
        {"--tokens", FLAG_INT, &tokens, "N", "number of tokens to generate (characters, or bpe pieces)", 0, 1e9, false, NULL},
        {"--temperature", FLAG_FLOAT, &temperature, "X", "sampling temperature, 0 = always the likeliest", 0, 100, false, NULL},
        {"--top-k", FLAG_INT, &top_k, "K", "draw only from the K likeliest tokens, 0 = all", 0, 1e9, false, NULL},
        {"--seed", FLAG_LONG, &seed, "S", "random seed", 0, 9.2e18, false, NULL},
        {"--threads", FLAG_INT, &threads, "N", "OpenMP threads, 0 = default", 0, 1024, false, NULL},
        {"--no-cache", FLAG_SWITCH, &no_cache, NULL, "no key/value cache: a full forward pass per token (same text, slower)", 0, 0, false, NULL},
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

    // The text: the prompt's tokens, then each generated one.
    size_t prompt_len = strlen(prompt);
    int *prompt_ids = NULL;
    size_t n_prompt = 0;
    if (prompt_len > 0 && !tokenizer_encode(&tok, prompt, prompt_len, &prompt_ids, &n_prompt, "--prompt", &err)) {
        tokenizer_free(&tok);
        model_free(&model);
        usage_error(&cmd, "%s", err.msg);
    }
    Generator gen;
    generator_init(&gen, &model, (int)n_prompt + tokens + 1, !no_cache);
    if (n_prompt == 0) {
        // Nothing to continue: start from a newline (or token 0), not printed.
        int newline = tokenizer_id(&tok, '\n');
        generator_push(&gen, newline >= 0 ? newline : 0);
    }
    for (size_t i = 0; i < n_prompt; i++) generator_push(&gen, prompt_ids[i]);
    fwrite(prompt, 1, prompt_len, stdout);
    fflush(stdout);

    Rng rng;
    rng_init(&rng, (uint64_t)seed);
    float *scratch = xmalloc((size_t)tok.vocab_size * sizeof(float));
    Utf8Stream stream = {0};
    double start = now_seconds();
    for (int i = 0; i < tokens; i++) {
        const float *logits = generator_logits(&gen);
        int next = sample_token(logits, model.config.vocab_size, temperature, top_k, &rng, scratch);
        generator_push(&gen, next);
        emit_token(&tok, &stream, next);
    }
    utf8_stream_finish(&stream, stdout);
    double elapsed = now_seconds() - start;
    // stdout carries only the text; the newline that ends it on a terminal
    // goes to stderr with the status.
    fprintf(stderr, "\n");
    fprintf(stderr, "sampled %d tokens in %.2f s (%.0f tokens/s)\n", tokens, elapsed,
            elapsed > 0 ? tokens / elapsed : 0.0);

    free(scratch);
    generator_free(&gen);
    free(prompt_ids);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}
