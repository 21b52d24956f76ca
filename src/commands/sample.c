// sample.c: temperature / top-k / top-p sampling and the `sample` command.
#include "sample.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "hf_gpt2.h"
#include "tokenizer.h"
#include "utf8.h"  // Utf8Stream

static int compare_descending(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

// The k-th largest of values[V], found by sorting a copy in "scratch" [V].
static float kth_largest(const float *values, int V, int k, float *scratch) {
    memcpy(scratch, values, (size_t)V * sizeof(float));
    qsort(scratch, (size_t)V, sizeof(float), compare_descending);
    return scratch[k - 1];
}

double sampling_weights(const float *logits, int V, const SamplerConfig *s, float *weights, float *scratch) {
    assert(s->temperature > 0.0f && s->top_p > 0.0f && s->top_p <= 1.0f);
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    // 1. Temperature and top-k: only logits >= threshold may be drawn (all
    //    of them, or the top k), each with weight exp((logit - max) / temperature).
    float threshold = s->top_k > 0 && s->top_k < V ? kth_largest(logits, V, s->top_k, scratch) : -INFINITY;
    double total = 0.0;
    for (int v = 0; v < V; v++) {
        weights[v] = logits[v] >= threshold ? expf((logits[v] - logits[best]) / s->temperature) : 0.0f;
        total += weights[v];
    }
    if (s->top_p >= 1.0f) return total;  // P = 1 keeps everything: skip the sort, change no bit
    // 2. Top-p on what is left: walk the weights from the largest down until
    //    they hold a fraction P of the total; that weight is the smallest one
    //    kept. Ties with it are kept too, so the set does not depend on the
    //    order of equal weights.
    qsort(memcpy(scratch, weights, (size_t)V * sizeof(float)), (size_t)V, sizeof(float), compare_descending);
    double wanted = (double)s->top_p * total, cumulative = 0.0;
    float smallest_kept = scratch[0];
    for (int i = 0; i < V && cumulative < wanted; i++) {
        cumulative += scratch[i];
        smallest_kept = scratch[i];
    }
    // 3. Renormalise: the new total is that of the kept weights.
    total = 0.0;
    for (int v = 0; v < V; v++) {
        if (weights[v] < smallest_kept) weights[v] = 0.0f;
        total += weights[v];
    }
    return total;
}

int sample_token(const float *logits, int V, const SamplerConfig *s, Rng *rng, float *scratch) {
    if (s->temperature == 0.0f) {  // greedy: no draw
        int best = 0;
        for (int v = 1; v < V; v++)
            if (logits[v] > logits[best]) best = v;
        return best;
    }
    float *weights = scratch, *sort_scratch = scratch + V;
    // Dividing by the total is folded into the draw: a uniform draw scaled
    // by the total, against the running sum of the unnormalised weights.
    double total = sampling_weights(logits, V, s, weights, sort_scratch);
    double target = rng_uniform(rng) * total, cumulative = 0.0;
    int last_kept = 0;
    for (int v = 0; v < V; v++) {
        if (weights[v] == 0.0f) continue;
        cumulative += weights[v];
        last_kept = v;
        if (target < cumulative) return v;
    }
    return last_kept;  // only reached through rounding when target ~ total
}

void generator_init(Generator *g, Model *m, int capacity, bool use_cache) {
    g->model = m;
    g->tokens = xmalloc((size_t)capacity * sizeof(int));
    g->len = 0;
    g->capacity = capacity;
    g->window_start = 0;
    g->cached = 0;
    g->use_cache = use_cache;
}

void generator_free(Generator *g) {
    free(g->tokens);
    g->tokens = NULL;
}

void generator_reset(Generator *g) {
    g->len = 0;
    g->window_start = 0;
    g->cached = 0;  // the cache is rebuilt from position 0 as the new text comes in
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
        logits = model_forward_position(g->model, window[g->cached], g->cached);
    return logits;
}

// start_text: a text with no prompt starts from a newline (or token 0, for
// a vocabulary without one), which is not printed: what follows reads as
// the start of a line.
static void start_text(Generator *g, const Tokenizer *tok) {
    int newline = tokenizer_id(tok, '\n');
    generator_push(g, newline >= 0 ? newline : 0);
}

// sample_line: the text is printed through a Utf8Stream into a buffer, as
// cmd_sample prints it to stdout (the same characters, U+FFFD included),
// then copied into "out" with its newlines made visible.
void sample_line(Generator *g, const Tokenizer *tok, long seed, int tokens, float *scratch, char *out, size_t cap) {
    static const char NEWLINE_SIGN[] = "\u21b5";
    const SamplerConfig plain = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f};  // sample's defaults
    Rng rng;
    rng_init(&rng, (uint64_t)seed);
    generator_reset(g);
    start_text(g, tok);
    out[0] = '\0';
    char *text = xmalloc(cap);
    FILE *f = fmemopen(text, cap, "w");  // writes past "cap" are dropped: the line is cut
    if (!f) {
        free(text);
        return;
    }
    Utf8Stream stream = {0};
    for (int i = 0; i < tokens; i++) {
        int next = sample_token(generator_logits(g), g->model->config.vocab_size, &plain, &rng, scratch);
        if (tok->kind == TOKENIZER_GPT2 && next == tok->end_of_text) break;  // the text ends, as in sample
        generator_push(g, next);
        size_t len;
        const char *piece = tokenizer_piece(tok, next, &len);
        utf8_stream_write(&stream, piece, len, f);
    }
    utf8_stream_finish(&stream, f);
    long n = ftell(f);
    fclose(f);
    // Whole characters only, each newline as its sign, while they fit.
    size_t used = 0;
    for (long i = 0; i < n;) {
        uint32_t cp;
        int k = utf8_decode((const unsigned char *)text + i, (size_t)(n - i), &cp);
        if (k == 0) break;  // a character cut at "cap"
        const char *bytes = cp == '\n' ? NEWLINE_SIGN : text + i;
        size_t len = cp == '\n' ? sizeof NEWLINE_SIGN - 1 : (size_t)k;
        if (used + len + 1 > cap) break;
        memcpy(out + used, bytes, len);
        used += len;
        i += k;
    }
    out[used] = '\0';
    free(text);
}

// Write token "id" to stdout at once, so text appears as it is generated
// (whole characters only: a bpe token can end inside one, see Utf8Stream).
// "*ends_line" tells whether the text printed so far ends with a newline.
static void emit_token(const Tokenizer *tok, Utf8Stream *stream, int id, bool *ends_line) {
    size_t len;
    const char *piece = tokenizer_piece(tok, id, &len);
    utf8_stream_write(stream, piece, len, stdout);
    if (len > 0) *ends_line = piece[len - 1] == '\n';  // a newline is never held back
    stdout_flush_or_die("the sample");
}

// read_prompt_file: the whole of "path" ("-" = stdin, a pipe included) as
// the prompt, through the same checked reader as every other file. The text
// is used as it is, its last newline included: a file that ends in one is a
// prompt that ends in one.
static char *read_prompt_file(const char *path, size_t max_bytes, size_t *len) {
    char *text = NULL;
    Error err;
    if (!read_text_source(path, max_bytes, &text, len, &err)) die(EXIT_RUNTIME, "--prompt-file: %s", err.msg);
    return text;
}

int cmd_sample(int argc, char **argv) {
    const char *model_path = NULL;   // checkpoint to load (required)
    const char *prompt_arg = NULL;   // text to continue; printed first (none: start from a newline)
    const char *prompt_file = NULL;  // or the text of this file ("-" = stdin)
    int tokens = 500;                // tokens to generate per sample
    int num_samples = 1;             // independent samples, each from the prompt
    double temperature = 1.0;        // 0 = greedy; < 1 sharper, > 1 more random
    double top_p = 1.0;              // 1 = no top-p cut
    SamplerConfig sampler = {.top_k = 0};  // 0 = no top-k cut
    long seed = 1337;                // sampling seed
    int threads = 0;                 // 0 = OpenMP's default
    bool no_cache = false;           // recompute the whole window for every token
    bool past_end_of_text = false;   // gpt2 tokenizer: go on after <|endoftext|> instead of stopping there
    long max_bytes = STDIN_MAX_BYTES;  // the most of standard input read as a prompt
    Flag flags[] = {
        model_flag(&model_path, NULL),
        {"--prompt", FLAG_STRING, &prompt_arg, "TEXT", "text to continue", 0, 0, false, NULL, NULL},
        {"--prompt-file", FLAG_STRING, &prompt_file, "FILE", "continue the text of FILE instead, as it is (- = stdin)", 0, 0, false, NULL, NULL},
        {"--tokens", FLAG_INT, &tokens, "N", "number of tokens (characters, or bpe pieces) to generate per sample", 0, 1e9, false, NULL, NULL},
        {"--num-samples", FLAG_INT, &num_samples, "N", "independent samples, each from the prompt, separated by a line '---'", 1, 1e6, false, NULL, NULL},
        {"--temperature", FLAG_DOUBLE, &temperature, "X", "sampling temperature, 0 = always the likeliest", 0, 100, false, NULL, NULL},
        {"--top-k", FLAG_INT, &sampler.top_k, "K", "draw only from the K likeliest tokens, 0 = all", 0, 1e9, false, NULL, NULL},
        {"--top-p", FLAG_DOUBLE_ABOVE_MIN, &top_p, "P", "draw only from the likeliest tokens that hold probability P, in (0, 1]; 1 = all", 0, 1, false, NULL, NULL},
        seed_flag(&seed, NULL),
        threads_flag(&threads, NULL),
        {"--past-end-of-text", FLAG_SWITCH, &past_end_of_text, NULL, "gpt2 tokenizer: generate past <|endoftext|> (50256 in GPT-2's files); without it a sample ends there, unprinted, as Hugging Face's generate ends at eos", 0, 0, false, NULL, NULL},
        {"--no-cache", FLAG_SWITCH, &no_cache, NULL, "no key/value cache: a full forward pass per token (same text, slower)", 0, 0, false, NULL, NULL},
        max_bytes_flag(&max_bytes, "with --prompt-file -: the most text read from standard input; more is an error"),
    };
    Command cmd = {"sample", NULL, "Generate text from a trained model; stdout gets the prompt and the generated text.",
                   "tinygpt sample --model runs/default/model.safetensors --prompt \"Call me\" --tokens 200",
                   flags, (int)(sizeof flags / sizeof flags[0])};
    parse_flags(&cmd, argc, argv);
    sampler.temperature = (float)temperature;  // the sampler computes in float
    sampler.top_p = (float)top_p;
    char run_model[4200];  // a run directory's model.safetensors
    model_path = required_model_path(&cmd, model_path, run_model, sizeof run_model);
    // The flag's range [0, 1] lets 0 in; a nucleus of probability 0 holds nothing.
    if (prompt_arg && prompt_file)
        usage_error(&cmd, "give --prompt or --prompt-file, not both");
    if (threads > 0) omp_set_num_threads(threads);

    // The prompt first: a missing file is found before a large model loads.
    char *file_text = NULL;
    const char *prompt = prompt_arg ? prompt_arg : "", *prompt_source = "--prompt";
    size_t prompt_len = strlen(prompt);
    if (prompt_file) {
        prompt = file_text = read_prompt_file(prompt_file, (size_t)max_bytes, &prompt_len);
        prompt_source = strcmp(prompt_file, "-") == 0 ? "stdin" : prompt_file;
    }

    Model model;
    Tokenizer tok;
    Error err;
    if (!model_load(model_path, &model, &tok, 1, false, &err)) die(EXIT_RUNTIME, "%s", err.msg);

    // The text: the prompt's tokens, then each generated one.
    int *prompt_ids = NULL;
    size_t n_prompt = 0;
    if (prompt_len > 0 && !tokenizer_encode(&tok, prompt, prompt_len, &prompt_ids, &n_prompt, prompt_source, &err)) {
        free(file_text);
        tokenizer_free(&tok);
        model_free(&model);
        usage_error(&cmd, "%s", err.msg);
    }
    if (n_prompt > (size_t)(INT_MAX - 1 - tokens)) {  // the text's length must fit an int
        const int block = model.config.block_size;
        free(prompt_ids);
        free(file_text);
        tokenizer_free(&tok);
        model_free(&model);
        usage_error(&cmd, "the prompt has %zu tokens; give at most %d (the model reads only its last %d)", n_prompt,
                    INT_MAX - 1 - tokens, block);
    }
    Generator gen;
    generator_init(&gen, &model, (int)n_prompt + tokens + 1, !no_cache);
    Rng rng;  // one stream for all samples: sample i does not depend on how many follow it
    rng_init(&rng, (uint64_t)seed);
    float *scratch = xmalloc(2 * (size_t)tok.vocab_size * sizeof(float));
    double start = now_seconds();
    bool printed = false, ends_line = false;  // stdout has text, which ends with a newline
    long generated = 0;  // tokens drawn, in all samples
    // GPT-2 put <|endoftext|> between documents: drawing it ends the text.
    const int end_of_text = tok.kind == TOKENIZER_GPT2 && !past_end_of_text ? tok.end_of_text : -1;
    for (int sample = 0; sample < num_samples; sample++) {
        // stdout carries only the text: samples are told apart by a line
        // "---" between them.
        if (sample > 0) fputs("\n---\n", stdout), printed = ends_line = true;
        generator_reset(&gen);
        if (n_prompt == 0) start_text(&gen, &tok);  // nothing to continue
        for (size_t i = 0; i < n_prompt; i++) generator_push(&gen, prompt_ids[i]);
        fwrite(prompt, 1, prompt_len, stdout);
        if (prompt_len > 0) printed = true, ends_line = prompt[prompt_len - 1] == '\n';
        stdout_flush_or_die("the sample");
        Utf8Stream stream = {0};
        for (int i = 0; i < tokens; i++) {
            const float *logits = generator_logits(&gen);
            int next = sample_token(logits, model.config.vocab_size, &sampler, &rng, scratch);
            generated++;
            if (next == end_of_text) break;
            generator_push(&gen, next);
            emit_token(&tok, &stream, next, &ends_line);
            printed = true;
        }
        if (stream.n_held > 0) ends_line = false;  // printed as U+FFFD
        utf8_stream_finish(&stream, stdout);
    }
    // The text ends with a newline, as text does (a shell prompt then starts
    // on a line of its own): added unless the text already ends in one, and
    // never to an empty output.
    if (printed && !ends_line) fputc('\n', stdout);
    stdout_flush_or_die("the sample");
    double elapsed = now_seconds() - start;
    long total = generated;
    fprintf(stderr, "sampled %ld tokens in %.2f s (%.0f tokens/s)\n", total, elapsed,
            elapsed > 0 ? total / elapsed : 0.0);

    free(scratch);
    generator_free(&gen);
    free(prompt_ids);
    free(file_text);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}
