// tokenize.c: the `tinygpt tokenize` command (see tokenize.h).
#include "tokenize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "checkpoint.h"
#include "gpt2_tokenizer.h"
#include "hf_gpt2.h"
#include "tokenizer.h"
#include "utf8.h"

// print_piece: token bytes as they look in text, between bars, with what
// would not show escaped: \n, \t, \r, a backslash, a bar, and any byte
// that is not printable ASCII and not part of a whole UTF-8 character (a
// bpe piece can hold half of one) as \xNN. Unlike show() (messages: '?' and
// a cut) and attention_label (signs for a picture), it loses no byte.
static void print_piece(const char *piece, size_t len) {
    putchar('|');
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)piece[i];
        uint32_t cp;
        int n = c >= 0x80 ? utf8_decode((const unsigned char *)piece + i, len - i, &cp) : 0;
        if (n > 0) {
            fwrite(piece + i, 1, (size_t)n, stdout);
            i += (size_t)n;
            continue;
        }
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\' || c == '|') printf("\\%c", c);
        else if (c >= 0x20 && c < 0x7F) putchar(c);
        else printf("\\x%02X", c);
        i++;
    }
}

// show_tokens: the pieces of "text" between bars, then the ids.
static void show_tokens(Tokenizer *tok, const char *text, size_t len, const char *source) {
    int *ids;
    size_t n;
    Error err;
    if (!tokenizer_encode(tok, text, len, &ids, &n, source, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    for (size_t i = 0; i < n; i++) {
        size_t piece_len;
        const char *piece = tokenizer_piece(tok, ids[i], &piece_len);
        print_piece(piece, piece_len);
    }
    printf("|\nids:");
    for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
    printf("\n%zu tokens for %zu bytes (%.2f bytes per token, %s tokenizer of %d tokens)\n", n, len,
           n > 0 ? (double)len / (double)n : 0.0, tokenizer_kind_name(tok->kind), tok->vocab_size);
    free(ids);
}

// learn_and_report: a bpe tokenizer learned from the whole of "path" ("-":
// standard input, at most "max_bytes" of it), timed, then the whole text
// encoded with it, timed: the numbers `make bench` reports.
static void learn_and_report(Tokenizer *tok, const char *path, size_t max_bytes, int vocab_size, bool json) {
    char *text;
    size_t len;
    Error err;
    if (!read_text_source(path, max_bytes, &text, &len, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    path = text_source_name(path);  // "-" is "standard input" in what follows
    TokenizerSpec spec = {TOKENIZER_BPE, vocab_size, false};
    double start = now_seconds();
    if (!tokenizer_learn(tok, &spec, text, len, path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    double learn_seconds = now_seconds() - start;
    int *ids = xmalloc((len > 0 ? len : 1) * sizeof *ids);
    start = now_seconds();
    size_t n = bpe_encode(&tok->bpe, text, len, ids);
    double encode_seconds = now_seconds() - start;
    free(ids);
    free(text);
    if (json) {
        printf("{\"bytes\": %zu, \"merges\": %d, \"learn_seconds\": %.6f, \"encode_seconds\": %.6f, \"tokens\": %zu}\n",
               len, tok->bpe.n_merges, learn_seconds, encode_seconds, n);
        return;
    }
    printf("learned %d merges from '%s' (%.2f MB) in %.3f s; encoded it in %.3f s (%.1f MB/s): %zu tokens, %.2f bytes per token\n",
           tok->bpe.n_merges, path, (double)len / 1e6, learn_seconds, encode_seconds,
           encode_seconds > 0 ? (double)len / 1e6 / encode_seconds : 0.0, n, n > 0 ? (double)len / (double)n : 0.0);
    printf("first merges: ");
    for (int i = 0; i < tok->bpe.n_merges && i < 12; i++) {
        size_t piece_len;
        const char *piece = tokenizer_piece(tok, BPE_BYTES + i, &piece_len);
        print_piece(piece, piece_len);
    }
    printf("|\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *model_path = NULL;  // the checkpoint whose tokenizer to use
    const char *learn_path = NULL;  // or: learn a bpe tokenizer from this file
    int vocab_size = 512;           // with --learn: tokens to learn
    bool json = false;              // with --learn: one JSON line of numbers
    long max_bytes = STDIN_MAX_BYTES;  // the most of standard input read
    Flag flags[] = {
        model_flag(&model_path, "checkpoint (or its run directory), or GPT-2 directory (vocab.json + merges.txt), whose tokenizer to use"),
        {"--learn", FLAG_STRING, &learn_path, "FILE", "instead: learn a bpe tokenizer from FILE (- reads standard input) and report its speed and first merges", 0, 0, false, NULL, NULL},
        {"--vocab-size", FLAG_INT, &vocab_size, "N", "with --learn: tokens to learn (256 bytes + N - 256 merges)", BPE_BYTES + 1, BPE_MAX_VOCAB, false, NULL, NULL},
        {"--json", FLAG_SWITCH, &json, NULL, "with --learn: print {\"bytes\", \"merges\", \"learn_seconds\", \"encode_seconds\", \"tokens\"}", 0, 0, false, NULL, NULL},
        max_bytes_flag(&max_bytes, NULL),
    };
    Command cmd = {"tokenize", "[TEXT]",
                   "Show the tokens a model reads in TEXT (or standard input, if TEXT is left out or is -): each piece "
                   "between bars, then the ids.",
                   "echo 'Call me Ishmael.' | tinygpt tokenize --model runs/default/model.safetensors", flags,
                   (int)(sizeof flags / sizeof flags[0])};
    const char *text_arg = parse_flags(&cmd, argc, argv);
    if (!model_path == !learn_path) usage_error(&cmd, "give one of --model PATH or --learn FILE");
    char run_model[4200];  // a run directory's model.safetensors (run_model_path)
    if (model_path) model_path = run_model_path(model_path, run_model, sizeof run_model);
    if (!learn_path && (command_flag(&cmd, "--vocab-size")->seen || json))
        usage_error(&cmd, "--vocab-size and --json go with --learn; drop them");
    if (learn_path && strcmp(learn_path, "-") == 0 && text_arg && strcmp(text_arg, "-") == 0)
        usage_error(&cmd, "--learn - and TEXT - would both read standard input; give one of them as a file");

    Tokenizer tok;
    Error err;
    if (learn_path) {
        learn_and_report(&tok, learn_path, (size_t)max_bytes, vocab_size, json);
        if (!text_arg) {
            tokenizer_free(&tok);
            return 0;
        }
    } else if (path_is_directory(model_path)) {  // a Hugging Face GPT-2 directory: its tokenizer alone
        if (!tokenizer_load_gpt2(&tok, model_path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    } else {
        Model model;
        if (!checkpoint_load(model_path, &model, &tok, 1, false, NULL, &err)) die(EXIT_RUNTIME, "%s", err.msg);
        model_free(&model);
    }
    if (text_arg && strcmp(text_arg, "-") != 0) {
        show_tokens(&tok, text_arg, strlen(text_arg), "TEXT");
    } else {
        char *text;
        size_t len;
        if (!read_stream(stdin, "standard input", (size_t)max_bytes, &text, &len, &err)) die(EXIT_RUNTIME, "%s", err.msg);
        show_tokens(&tok, text, len, "standard input");
        free(text);
    }
    tokenizer_free(&tok);
    return 0;
}
