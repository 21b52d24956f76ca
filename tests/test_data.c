// test_data.c: tests for src/io/data.c: loading (every kind of bad file
// refused, naming it; a large file in about its own size of memory; ids in
// the fewest bytes that hold the vocabulary), the train/validation split
// (the same text for char and bpe, bpe learned from the training split
// only), the text's hash, bits per byte, and the two ways of cutting
// batches.
//
// Files are written into a fresh mkdtemp directory under /tmp for each test
// and removed afterwards (a checked fixture, so it runs inside each test's
// forked process).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data.h"
#include "helpers.h"
#include "sanitized.h"
#include "tests.h"

// ---- Temporary files --------------------------------------------------------

enum { MAX_TEMP_FILES = 8 };
static char temp_dir[64];
static char temp_files[MAX_TEMP_FILES][128];
static int n_temp_files;

// make_temp_dir: fixture setup; a new empty directory for this test.
static void make_temp_dir(void) {
    scratch_dir_create(temp_dir, sizeof temp_dir);
    n_temp_files = 0;
}

// remove_temp_dir: fixture teardown; delete the directory and its files.
static void remove_temp_dir(void) { scratch_dir_remove(temp_dir); }

// write_temp_file: write "len" bytes of "bytes" to a file called "name" in
// the test's directory; returns its path (valid until the test ends, unlike
// path_in's rotating buffers).
static const char *write_temp_file(const char *name, const char *bytes, size_t len) {
    ck_assert_int_lt(n_temp_files, MAX_TEMP_FILES);
    char *path = temp_files[n_temp_files++];
    snprintf(path, sizeof temp_files[0], "%s/%s", temp_dir, name);
    write_bytes(path, bytes, len);
    return path;
}

// write_letters_file: a file of "n_chars" ASCII letters in a repeating,
// non-trivial pattern (so n_chars tokens), for split-size tests.
static const char *write_letters_file(const char *name, size_t n_chars) {
    char *text = malloc(n_chars + 1);
    ck_assert_ptr_nonnull(text);
    for (size_t i = 0; i < n_chars; i++) text[i] = (char)('a' + (i * 7) % 26);
    const char *path = write_temp_file(name, text, n_chars);
    free(text);
    return path;
}

// ---- dataset_load -------------------------------------------------------------

START_TEST(load_splits_at_the_floor_of_n_tokens_times_val_fraction) {
    const char *path = write_letters_file("split.txt", 1000);
    const struct {
        double val_fraction;
        size_t n_val;
    } cases[] = {
        {0.0, 0}, {0.1, 100}, {0.25, 250}, {0.3333, 333}, {0.0025, 2}, {0.5, 500}, {0.9985, 998},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Dataset ds;
        Tokenizer tok;
        Error err = {0};
        ck_assert_msg(dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, cases[i].val_fraction, 1, &err),
                      "val_fraction %g: %s", cases[i].val_fraction, err.msg);
        ck_assert_uint_eq(ds.n_tokens, 1000);
        ck_assert_msg(ds.n_train == 1000 - cases[i].n_val, "val_fraction %g: n_train %zu, want %zu",
                      cases[i].val_fraction, ds.n_train, 1000 - cases[i].n_val);
        dataset_free(&ds);
        tokenizer_free(&tok);
    }
}
END_TEST

START_TEST(load_encodes_the_whole_file_with_a_vocabulary_built_from_it) {
    const char *text = "Call me Ishmael" "\xE2\x80\x94" "some years ago" "\xE2\x80\x99" "s\n";
    const char *path = write_temp_file("moby.txt", text, strlen(text));
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    ck_assert_msg(dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, 0.0, 4, &err), "%s", err.msg);
    char back[64];
    size_t back_len = 0;
    for (size_t i = 0; i < ds.n_tokens; i++) {
        size_t piece_len;
        const char *piece = tokenizer_piece(&tok, token_at(dataset_train(&ds), i), &piece_len);
        memcpy(back + back_len, piece, piece_len);
        back_len += piece_len;
    }
    ck_assert_uint_eq(back_len, strlen(text));
    ck_assert_mem_eq(back, text, back_len);
    ck_assert_uint_eq(ds.n_tokens, strlen(text) - 4);  // two 3-byte characters, one token each
    dataset_free(&ds);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(load_with_a_given_vocabulary_uses_it_and_keeps_it) {
    const char *path = write_temp_file("abc.txt", "cabbage", 7);
    Tokenizer tok;
    ck_assert(tokenizer_from_vocab(&tok, "abceg", 5, NULL));  // no 'd': not the text's own vocabulary
    Dataset ds;
    Error err = {0};
    ck_assert_msg(dataset_load(&ds, &tok, NULL, path, STDIN_MAX_BYTES, 0.0, 2, &err), "%s", err.msg);
    const int want[] = {2, 0, 1, 1, 0, 4, 3};  // ids in the given vocabulary: a=0 b=1 c=2 e=3 g=4
    ck_assert_uint_eq(ds.n_tokens, 7);
    for (size_t i = 0; i < 7; i++) ck_assert_int_eq(token_at(dataset_train(&ds), i), want[i]);
    ck_assert_int_eq(tok.vocab_size, 5);
    dataset_free(&ds);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(load_with_a_given_vocabulary_rejects_an_unknown_character) {
    const char *path = write_temp_file("new.txt", "abcd", 4);
    Tokenizer tok;
    ck_assert(tokenizer_from_vocab(&tok, "abc", 3, NULL));
    Dataset ds;
    Error err = {0};
    ck_assert(!dataset_load(&ds, &tok, NULL, path, STDIN_MAX_BYTES, 0.0, 1, &err));
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "U+0064") && strstr(err.msg, "byte 3"),
                  "message was: %s", err.msg);
    ck_assert_int_eq(tok.vocab_size, 3);  // the caller's tokenizer is left alone
    tokenizer_free(&tok);
}
END_TEST

START_TEST(load_rejects_a_missing_file_naming_the_path) {
    char path[128];
    snprintf(path, sizeof path, "%s/no_such_file.txt", temp_dir);
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    ck_assert(!dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, 0.1, 8, &err));
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "no such file; check the name"), "message was: %s", err.msg);
}
END_TEST

START_TEST(load_with_a_given_vocabulary_reports_a_binary_file_as_binary) {
    // As `train --init MODEL FILE` and `--resume` load it: the vocabulary
    // comes from the checkpoint, and the file is a binary's first bytes.
    const char elf[] = "\x7F" "ELF\x02\x01\x01\x00\x00\x00";
    const char *path = write_temp_file("ls", elf, sizeof elf - 1);
    Tokenizer tok;
    ck_assert(tokenizer_from_vocab(&tok, "abc", 3, NULL));
    Dataset ds;
    Error err = {0};
    ck_assert(!dataset_load(&ds, &tok, NULL, path, STDIN_MAX_BYTES, 0.0, 1, &err));
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "looks like binary data"), "message was: %s", err.msg);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(load_refuses_a_fifo_or_a_device_instead_of_blocking_or_reading_forever) {
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo.txt", temp_dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    alarm(10);  // both used to hang (the FIFO) or fill memory (/dev/zero): fail rather than wait
    const char *paths[] = {fifo, "/dev/zero"};
    const char *kinds[] = {"is a named pipe (FIFO), not a regular file", "is a character device, not a regular file"};
    for (int i = 0; i < 2; i++) {
        Dataset ds;
        Tokenizer tok;
        Error err = {0};
        ck_assert(!dataset_load(&ds, &tok, &LEARN_CHARS, paths[i], STDIN_MAX_BYTES, 0.1, 8, &err));
        ck_assert_msg(strstr(err.msg, paths[i]) && strstr(err.msg, kinds[i]) && !strchr(err.msg, '\n'),
                      "message was: %s", err.msg);
    }
    alarm(0);
}
END_TEST

START_TEST(load_rejects_a_directory) {
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    ck_assert(!dataset_load(&ds, &tok, &LEARN_CHARS, temp_dir, STDIN_MAX_BYTES, 0.1, 8, &err));
    ck_assert_msg(strstr(err.msg, temp_dir) && strstr(err.msg, "directory"), "message was: %s", err.msg);
}
END_TEST

START_TEST(load_rejects_an_empty_file) {
    const char *path = write_temp_file("empty.txt", "", 0);
    Tokenizer given;
    ck_assert(tokenizer_from_vocab(&given, "ab", 2, NULL));
    const bool build_vocab[] = {true, false};
    for (int i = 0; i < 2; i++) {
        Dataset ds;
        Tokenizer built;
        Error err = {0};
        ck_assert(!dataset_load(&ds, build_vocab[i] ? &built : &given, build_vocab[i] ? &LEARN_CHARS : NULL, path, STDIN_MAX_BYTES, 0.1, 8, &err));
        ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "is empty"), "message was: %s", err.msg);
    }
    tokenizer_free(&given);
}
END_TEST

START_TEST(load_rejects_a_file_larger_than_memory_before_reading_it) {
    // A sparse file: 1 TB long, no disk space used.
    const char *path = write_temp_file("huge.txt", "", 0);
    ck_assert_int_eq(truncate(path, (off_t)1 << 40), 0);
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    ck_assert(!dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, 0.1, 8, &err));
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "is 1099.5 GB, more than the") && strstr(err.msg, "head -c"),
                  "message was: %s", err.msg);
}
END_TEST

START_TEST(load_rejects_invalid_utf8_naming_the_file_and_byte) {
    const char *path = write_temp_file("latin1.txt", "na\xEFve text", 10);  // ï in Latin-1
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    ck_assert(!dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, 0.0, 2, &err));
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "not valid UTF-8 at byte 2"), "message was: %s",
                  err.msg);
}
END_TEST

START_TEST(load_rejects_a_training_split_shorter_than_one_window) {
    // 64 tokens cannot hold a window of 64 + 1; 65 tokens can.
    const char *short_path = write_letters_file("short.txt", 64);
    const char *exact_path = write_letters_file("exact.txt", 65);
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    ck_assert(!dataset_load(&ds, &tok, &LEARN_CHARS, short_path, STDIN_MAX_BYTES, 0.0, 64, &err));
    ck_assert_msg(strstr(err.msg, short_path) && strstr(err.msg, "only 64 training tokens") &&
                      strstr(err.msg, "--context 64 + 1") && strstr(err.msg, "smaller --context"),
                  "message was: %s", err.msg);
    ck_assert_ptr_null(tok.chars.codepoints);  // the vocabulary built for it was freed
    ck_assert_msg(dataset_load(&ds, &tok, &LEARN_CHARS, exact_path, STDIN_MAX_BYTES, 0.0, 64, &err), "%s", err.msg);
    ck_assert_uint_eq(ds.n_train, 65);
    dataset_free(&ds);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(load_rejects_a_short_validation_split_but_allows_none) {
    // 1000 tokens at --val-fraction 0.01 leave 10 validation tokens: too few
    // for --context 16, but fine with no validation split at all.
    const char *path = write_letters_file("val.txt", 1000);
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    ck_assert(!dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, 0.01, 16, &err));
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "only 10 validation tokens") &&
                      strstr(err.msg, "--val-fraction 0"),
                  "message was: %s", err.msg);
    ck_assert_msg(dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, 0.0, 16, &err), "%s", err.msg);
    ck_assert_uint_eq(ds.n_train, 1000);
    dataset_free(&ds);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(load_rejects_a_val_fraction_outside_zero_one) {
    const char *path = write_letters_file("f.txt", 100);
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    ck_assert(!dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, 1.0, 4, &err));
    ck_assert_msg(strstr(err.msg, "--val-fraction 1"), "message was: %s", err.msg);
    ck_assert(!dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, -0.1, 4, &err));
    ck_assert_msg(strstr(err.msg, "--val-fraction -0.1"), "message was: %s", err.msg);
}
END_TEST

// ---- Compact ids ---------------------------------------------------------------

// write_codepoints_file: a file holding each code point of [first, first + count)
// once, as UTF-8, then a newline; returns its path. The vocabulary is those
// count characters plus the newline.
static const char *write_codepoints_file(const char *name, uint32_t first, size_t count) {
    char *text = malloc(4 * count + 1);
    ck_assert_ptr_nonnull(text);
    size_t len = 0;
    for (size_t i = 0; i < count; i++) len += (size_t)utf8_encode(first + (uint32_t)i, text + len);
    text[len++] = '\n';
    const char *path = write_temp_file(name, text, len);
    free(text);
    return path;
}

// check_round_trip: the dataset decodes back to exactly the file's bytes.
static void check_round_trip(const Dataset *ds, const Tokenizer *tok, const char *path) {
    char *text;
    size_t len;
    Error err = {0};
    ck_assert_msg(read_file(path, &text, &len, &err), "%s", err.msg);
    size_t at = 0;
    TokenSpan all = {ds->ids, ds->n_tokens, ds->width};
    for (size_t i = 0; i < ds->n_tokens; i++) {
        size_t n;
        const char *bytes = tokenizer_piece(tok, token_at(all, i), &n);
        ck_assert_msg(at + n <= len && memcmp(text + at, bytes, n) == 0, "token %zu differs", i);
        at += n;
    }
    ck_assert_uint_eq(at, len);
    free(text);
}

START_TEST(load_stores_ids_in_the_fewest_bytes_that_hold_the_vocabulary) {
    // count distinct characters + the newline: V = count + 1.
    const struct {
        uint32_t first;  // first code point: 2-byte, then 4-byte UTF-8
        size_t count;
        int width;
    } cases[] = {
        {0x100, 255, 1},     // V = 256: ids 0..255 fit a byte
        {0x100, 256, 2},     // V = 257
        {0x10000, 65535, 2}, // V = 65536: ids 0..65535 fit two bytes
        {0x10000, 65536, 4}, // V = 65537
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "v%zu.txt", i);
        const char *path = write_codepoints_file(name, cases[i].first, cases[i].count);
        Dataset ds;
        Tokenizer tok;
        Error err = {0};
        ck_assert_msg(dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, 0.0, 1, &err), "%s", err.msg);
        ck_assert_int_eq(tok.vocab_size, (int)cases[i].count + 1);
        ck_assert_int_eq(ds.width, cases[i].width);
        ck_assert_uint_eq(ds.n_tokens, cases[i].count + 1);
        check_round_trip(&ds, &tok, path);
        dataset_free(&ds);
        tokenizer_free(&tok);
    }
}
END_TEST

START_TEST(hash_is_the_same_for_the_same_text_and_differs_for_another) {
    const char *a = write_temp_file("a.txt", "the whale, the sea", 18);
    const char *b = write_temp_file("b.txt", "the whale, the see", 18);
    Tokenizer tok;
    ck_assert(tokenizer_from_vocab(&tok, " ,aehlstw", 9, NULL));
    Dataset first, again, other;
    Error err = {0};
    ck_assert_msg(dataset_load(&first, &tok, NULL, a, STDIN_MAX_BYTES, 0.0, 1, &err), "%s", err.msg);
    ck_assert_msg(dataset_load(&again, &tok, NULL, a, STDIN_MAX_BYTES, 0.0, 1, &err), "%s", err.msg);
    ck_assert_msg(dataset_load(&other, &tok, NULL, b, STDIN_MAX_BYTES, 0.0, 1, &err), "%s", err.msg);
    ck_assert_uint_eq(dataset_hash(&first), dataset_hash(&again));
    ck_assert_uint_ne(dataset_hash(&first), dataset_hash(&other));
    dataset_free(&first);
    dataset_free(&again);
    dataset_free(&other);
    tokenizer_free(&tok);
}
END_TEST

// ---- Memory ---------------------------------------------------------------------
// Linux reports a process's peak resident memory as VmHWM in /proc/self/status,
// and writing "5" to /proc/self/clear_refs resets that peak to the current
// resident size (since Linux 4.0). So a test can measure the peak of one call.

// status_kb: the "field" line of /proc/self/status in KiB, or -1.
static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') kb = atol(line + n + 1);
    fclose(f);
    return kb;
}

// reset_peak_memory: VmHWM = VmRSS from now on; false where Linux cannot.
static bool reset_peak_memory(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

// The file for the memory test, and the bound: the peak may exceed the
// memory held before the load by at most 1.25 times the file's size. (The
// text and its one-byte ids share one buffer, so the peak is about 1.0x;
// AddressSanitizer's shadow memory adds 1/8. Before ids were packed, the
// peak was the text plus 4-byte ids: 5x.)
enum { LARGE_FILE_BYTES = 16 << 20 };
static const double LARGE_FILE_PEAK_RATIO = 1.25;

START_TEST(loading_a_large_file_takes_about_its_own_size_in_memory) {
    // Write the file a line at a time: building it in memory would spoil the measurement.
    ck_assert_int_lt(n_temp_files, MAX_TEMP_FILES);
    char *path = temp_files[n_temp_files++];
    snprintf(path, sizeof temp_files[0], "%s/large.txt", temp_dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    const char line[] = "Call me Ishmael. Some years ago, never mind how long precisely.\n";
    for (size_t written = 0; written < LARGE_FILE_BYTES; written += sizeof line - 1) fputs(line, f);
    ck_assert_int_eq(fclose(f), 0);
    if (TINYGPT_SANITIZED) {
        fprintf(stderr, "skipped: under AddressSanitizer, whose realloc copies even when it shrinks\n");
        return;
    }
    if (!reset_peak_memory()) {
        fprintf(stderr, "skipped: this kernel cannot reset the peak memory (/proc/self/clear_refs)\n");
        return;
    }

    long before_kb = status_kb("VmRSS");
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    ck_assert_msg(dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, 0.1, 64, &err), "%s", err.msg);
    long peak_kb = status_kb("VmHWM");
    ck_assert(before_kb > 0 && peak_kb > 0);
    double ratio = (double)(peak_kb - before_kb) * 1024.0 / LARGE_FILE_BYTES;
    ck_assert_msg(ratio <= LARGE_FILE_PEAK_RATIO, "loading %d MiB raised the peak memory by %.2f times the file size",
                  LARGE_FILE_BYTES >> 20, ratio);
    ck_assert_int_eq(ds.width, 1);
    dataset_free(&ds);
    tokenizer_free(&tok);
}
END_TEST


// ---- bpe ----------------------------------------------------------------------

// decode_span: the bytes of "span"'s tokens, joined, into "out" (room for "cap").
static size_t decode_span(Tokenizer *tok, TokenSpan span, char *out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < span.n; i++) {
        size_t len;
        const char *piece = tokenizer_piece(tok, token_at(span, i), &len);
        ck_assert_uint_le(n + len, cap);
        memcpy(out + n, piece, len);
        n += len;
    }
    return n;
}

START_TEST(bpe_learns_from_the_training_split_only_and_encodes_each_split_apart) {
    // The training text repeats "ab "; the validation text (the last 40%
    // of the characters) repeats "xy ", so a merge of x and y could only
    // come from validation.
    char text[1001];
    for (int i = 0; i < 600; i++) text[i] = "ab "[i % 3];
    for (int i = 600; i < 1000; i++) text[i] = "xy "[i % 3];
    text[1000] = '\0';
    const char *path = write_temp_file("bpe.txt", text, 1000);
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    TokenizerSpec spec = {TOKENIZER_BPE, 258, false};  // "ab", then " ab": all the training text has to merge
    ck_assert_msg(dataset_load(&ds, &tok, &spec, path, STDIN_MAX_BYTES, 0.4, 4, &err), "%s", err.msg);
    ck_assert_int_eq(tok.kind, TOKENIZER_BPE);
    for (int m = 0; m < tok.bpe.n_merges; m++) {
        BpeMerge merge = tok.bpe.merges[m];
        ck_assert_msg(merge.left != 'x' && merge.left != 'y' && merge.right != 'x' && merge.right != 'y',
                      "merge %d (%d, %d) was learned from the validation text", m, merge.left, merge.right);
    }
    char back[1000];
    ck_assert_uint_eq(decode_span(&tok, dataset_train(&ds), back, sizeof back), 600);
    ck_assert_mem_eq(back, text, 600);
    ck_assert_uint_eq(decode_span(&tok, dataset_val(&ds), back, sizeof back), 400);
    ck_assert_mem_eq(back, text + 600, 400);
    ck_assert_uint_lt(ds.n_train, 600);  // merges made tokens longer than a byte
    ck_assert_uint_eq(ds.val_bytes, 400);
    ck_assert_int_eq(ds.width, 2);
    size_t n_train = ds.n_train, n_tokens = ds.n_tokens;
    dataset_free(&ds);

    // Given the tokenizer (a checkpoint's), the same file gives the same ids.
    Dataset again;
    ck_assert_msg(dataset_load(&again, &tok, NULL, path, STDIN_MAX_BYTES, 0.4, 4, &err), "%s", err.msg);
    ck_assert_uint_eq(again.n_train, n_train);
    ck_assert_uint_eq(again.n_tokens, n_tokens);
    dataset_free(&again);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(the_split_is_the_same_text_for_char_and_bpe_and_counts_its_bytes) {
    // 30 characters, of which the last floor(0.34 * 30) = 10 hold two 3-byte
    // em dashes: 14 bytes of validation.
    const char *text = "abcabcabcabcabcabcab" "c\xE2\x80\x94" "ab\xE2\x80\x94" "cabca";
    const char *path = write_temp_file("split_bytes.txt", text, strlen(text));
    Dataset ds;
    Tokenizer tok;
    Error err = {0};
    ck_assert_msg(dataset_load(&ds, &tok, &LEARN_CHARS, path, STDIN_MAX_BYTES, 0.34, 2, &err), "%s", err.msg);
    ck_assert_uint_eq(ds.n_tokens, 30);
    ck_assert_uint_eq(ds.n_tokens - ds.n_train, 10);
    ck_assert_uint_eq(ds.val_bytes, 14);
    dataset_free(&ds);
    tokenizer_free(&tok);
    TokenizerSpec spec = {TOKENIZER_BPE, 257, false};
    ck_assert_msg(dataset_load(&ds, &tok, &spec, path, STDIN_MAX_BYTES, 0.34, 2, &err), "%s", err.msg);
    ck_assert_uint_eq(ds.val_bytes, 14);
    char back[64];
    ck_assert_uint_eq(decode_span(&tok, dataset_val(&ds), back, sizeof back), 14);
    ck_assert_mem_eq(back, text + strlen(text) - 14, 14);
    dataset_free(&ds);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(bits_per_byte_spreads_the_loss_of_every_token_over_the_bytes) {
    ck_assert_double_eq_tol(bits_per_byte(log(2.0), 10, 10), 1.0, 1e-12);
    ck_assert_double_eq_tol(bits_per_byte(log(2.0), 10, 40), 0.25, 1e-12);  // 4 bytes per token
    ck_assert_double_eq_tol(bits_per_byte(2.0, 3, 6), 1.0 / log(2.0), 1e-12);
}
END_TEST

// ---- Batches ----------------------------------------------------------------

// Token i is the number i, so a batch entry shows where it came from.
enum { N_COUNTING = 100 };
static int counting[N_COUNTING];

// counting_span: the first "n" counting tokens, as 4-byte ids.
static TokenSpan counting_span(size_t n) { return (TokenSpan){counting, n, 4}; }

// fill_counting: fixture setup for the batch tests.
static void fill_counting(void) {
    for (int i = 0; i < N_COUNTING; i++) counting[i] = i;
}

// check_windows: every row of inputs/targets [B,T] is a run of consecutive
// tokens inside [0, n), and targets are inputs shifted by one.
static void check_windows(const int *inputs, const int *targets, int B, int T, int n) {
    for (int b = 0; b < B; b++) {
        const int *in_b = inputs + b * T, *tgt_b = targets + b * T;
        ck_assert_int_ge(in_b[0], 0);
        ck_assert_int_lt(in_b[0], n - T);
        for (int t = 0; t < T; t++) {
            ck_assert_int_eq(in_b[t], in_b[0] + t);
            ck_assert_int_eq(tgt_b[t], in_b[t] + 1);
        }
    }
}

START_TEST(batch_targets_are_the_inputs_shifted_by_one) {
    enum { B = 4, T = 8 };
    int inputs[B * T], targets[B * T];
    Rng rng;
    rng_init(&rng, 1);
    for (long step = 0; step < 50; step++) {
        batch_random(counting_span(N_COUNTING), B, T, &rng, inputs, targets);
        check_windows(inputs, targets, B, T, N_COUNTING);
        batch_sequential(counting_span(N_COUNTING), step, B, T, inputs, targets);
        check_windows(inputs, targets, B, T, N_COUNTING);
    }
}
END_TEST

START_TEST(sequential_batch_starts_follow_the_formula_exactly) {
    enum { B = 3, T = 7 };
    int inputs[B * T], targets[B * T];
    // Small steps wrap around many times; the huge ones check 64-bit arithmetic
    // (step * B * T overflows 32 bits, and would overflow a 32-bit long).
    const long steps[] = {0, 1, 2, 3, 4, 5, 13, 14, 99, 1000003, 4000000000L, 123456789012L};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        batch_sequential(counting_span(N_COUNTING), steps[i], B, T, inputs, targets);
        for (int b = 0; b < B; b++) {
            uint64_t want = (((uint64_t)steps[i] * B + (uint64_t)b) * T) % (N_COUNTING - T);
            ck_assert_msg((uint64_t)inputs[b * T] == want, "step %ld row %d starts at %d, want %llu", steps[i],
                          b, inputs[b * T], (unsigned long long)want);
        }
    }
}
END_TEST

// A batch cut into parts (a --grad-accum micro-batch, one process's rows
// under mpirun): each part is exactly its rows of the whole batch, and the
// random stream ends where the whole batch leaves it, whichever part drew.
START_TEST(a_batch_cut_into_parts_is_the_whole_batch_row_for_row) {
    enum { B = 6, T = 5 };
    int whole_in[B * T], whole_tgt[B * T], part_in[B * T], part_tgt[B * T];
    const int parts[][2] = {{0, 6}, {0, 3}, {3, 3}, {2, 1}, {5, 1}, {0, 0}};  // first row, rows
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const int first = parts[i][0], rows = parts[i][1];
        Rng whole_rng, part_rng;
        rng_init(&whole_rng, 7);
        rng_init(&part_rng, 7);
        for (int step = 0; step < 3; step++) {
            batch_random(counting_span(N_COUNTING), B, T, &whole_rng, whole_in, whole_tgt);
            batch_random_rows(counting_span(N_COUNTING), B, first, rows, T, &part_rng, part_in, part_tgt);
            ck_assert_mem_eq(part_in, whole_in + first * T, (size_t)rows * T * sizeof(int));
            ck_assert_mem_eq(part_tgt, whole_tgt + first * T, (size_t)rows * T * sizeof(int));
            ck_assert_uint_eq(part_rng.state, whole_rng.state);
        }
        batch_sequential(counting_span(N_COUNTING), 11, B, T, whole_in, whole_tgt);
        batch_sequential_rows(counting_span(N_COUNTING), 11 * B + (uint64_t)first, rows, T, part_in, part_tgt);
        ck_assert_mem_eq(part_in, whole_in + first * T, (size_t)rows * T * sizeof(int));
        ck_assert_mem_eq(part_tgt, whole_tgt + first * T, (size_t)rows * T * sizeof(int));
    }
}
END_TEST

START_TEST(random_batches_are_deterministic_for_a_seed) {
    enum { B = 4, T = 8 };
    int in_a[B * T], tgt_a[B * T], in_b[B * T], tgt_b[B * T];
    Rng a, b, c;
    rng_init(&a, 42);
    rng_init(&b, 42);
    rng_init(&c, 43);
    int differs_from_other_seed = 0;
    for (int step = 0; step < 20; step++) {
        batch_random(counting_span(N_COUNTING), B, T, &a, in_a, tgt_a);
        batch_random(counting_span(N_COUNTING), B, T, &b, in_b, tgt_b);
        ck_assert_mem_eq(in_a, in_b, sizeof in_a);
        ck_assert_mem_eq(tgt_a, tgt_b, sizeof tgt_a);
        batch_random(counting_span(N_COUNTING), B, T, &c, in_b, tgt_b);
        differs_from_other_seed += memcmp(in_a, in_b, sizeof in_a) != 0;
    }
    ck_assert_int_gt(differs_from_other_seed, 15);
}
END_TEST

START_TEST(random_batch_starts_stay_in_range_and_reach_both_ends) {
    // n = T + 3 leaves exactly three possible starts: 0, 1 and 2.
    enum { B = 2, T = 5, N = T + 3 };
    int inputs[B * T], targets[B * T];
    int seen[N - T] = {0};
    Rng rng;
    rng_init(&rng, 3);
    for (int step = 0; step < 200; step++) {
        batch_random(counting_span(N), B, T, &rng, inputs, targets);
        check_windows(inputs, targets, B, T, N);
        for (int b = 0; b < B; b++) seen[inputs[b * T]]++;
    }
    for (int s = 0; s < N - T; s++) ck_assert_msg(seen[s] > 0, "start %d never drawn", s);
}
END_TEST

START_TEST(batches_are_the_same_at_every_id_width) {
    // The counting tokens 0..99 stored in 1, 2 and 4 bytes are the same text.
    uint8_t narrow[N_COUNTING];
    uint16_t wide[N_COUNTING];
    for (int i = 0; i < N_COUNTING; i++) narrow[i] = (uint8_t)i, wide[i] = (uint16_t)i;
    const TokenSpan spans[] = {{narrow, N_COUNTING, 1}, {wide, N_COUNTING, 2}, counting_span(N_COUNTING)};
    enum { B = 3, T = 6 };
    int in_ref[B * T], tgt_ref[B * T], in[B * T], tgt[B * T];
    Rng ref_rng;
    rng_init(&ref_rng, 5);
    batch_random(spans[2], B, T, &ref_rng, in_ref, tgt_ref);
    for (int w = 0; w < 2; w++) {
        Rng rng;
        rng_init(&rng, 5);
        batch_random(spans[w], B, T, &rng, in, tgt);
        ck_assert_mem_eq(in, in_ref, sizeof in);
        ck_assert_mem_eq(tgt, tgt_ref, sizeof tgt);
    }
    batch_sequential(spans[2], 7, B, T, in_ref, tgt_ref);
    for (int w = 0; w < 2; w++) {
        batch_sequential(spans[w], 7, B, T, in, tgt);
        ck_assert_mem_eq(in, in_ref, sizeof in);
        ck_assert_mem_eq(tgt, tgt_ref, sizeof tgt);
    }
}
END_TEST

START_TEST(a_stream_of_exactly_one_window_gives_that_window) {
    enum { B = 2, T = 9 };
    int inputs[B * T], targets[B * T];
    Rng rng;
    rng_init(&rng, 8);
    batch_random(counting_span(T + 1), B, T, &rng, inputs, targets);
    check_windows(inputs, targets, B, T, T + 1);
    batch_sequential(counting_span(T + 1), 17, B, T, inputs, targets);
    check_windows(inputs, targets, B, T, T + 1);
}
END_TEST

// shuffled_start_and_check: window "g" of "order" over the counting
// tokens 0..n-1, checked to be a window in range; returns its start.
static int shuffled_start_and_check(const ShuffledOrder *order, int n, uint64_t g, int T) {
    int inputs[64], targets[64];
    ck_assert_int_le(T, 64);
    batch_shuffled_rows(order, counting_span(n), g, 1, T, inputs, targets);
    check_windows(inputs, targets, 1, T, n);
    return inputs[0];
}

// An epoch of the shuffled order reads every window once: its starts are
// one offset in [0, T) plus 0, T, 2T, ..., laid end to end; the next epoch
// reads them again in another order, from another offset.
START_TEST(a_shuffled_epoch_reads_every_window_once_and_the_next_in_a_new_order) {
    enum { T = 7, EPOCHS = 6 };
    ShuffledOrder order = shuffled_order(counting_span(N_COUNTING), T, 11);
    ck_assert_uint_eq(order.phases, T);
    ck_assert_uint_eq(order.windows, (N_COUNTING - T) / T);  // 13 windows of 7 from any offset below 7
    const size_t W = order.windows;
    int starts[EPOCHS][16], phases_seen[T] = {0}, orders_differ = 0;
    for (int e = 0; e < EPOCHS; e++) {
        bool read[16] = {false};
        for (size_t i = 0; i < W; i++) starts[e][i] = shuffled_start_and_check(&order, N_COUNTING, e * W + i, T);
        const int phase = starts[e][0] % T;
        phases_seen[phase]++;
        for (size_t i = 0; i < W; i++) {
            ck_assert_int_eq(starts[e][i] % T, phase);
            const int k = starts[e][i] / T;
            ck_assert_msg(!read[k], "epoch %d reads window %d twice", e, k);
            read[k] = true;
        }
        if (e > 0) {  // the order of the windows (start / T), not the offset
            bool same = true;
            for (size_t i = 0; i < W; i++) same = same && starts[e][i] / T == starts[0][i] / T;
            orders_differ += !same;
        }
    }
    ck_assert_int_eq(orders_differ, EPOCHS - 1);
    int offsets = 0;
    for (int p = 0; p < T; p++) offsets += phases_seen[p] > 0;
    ck_assert_int_ge(offsets, 3);  // six epochs' offsets drawn from seven
}
END_TEST

// Window g is a function of (seed, g) alone: an order made afresh (a
// resumed run's) gives what the run's own gave, a part of a batch is that
// batch's rows, and another seed reads another order.
START_TEST(a_shuffled_window_is_the_same_from_any_starting_point) {
    enum { B = 5, T = 6, STEPS = 40 };  // 40 batches of 5 are 13 epochs of 15 windows
    const ShuffledOrder own = shuffled_order(counting_span(N_COUNTING), T, 3);
    const ShuffledOrder other = shuffled_order(counting_span(N_COUNTING), T, 4);
    int whole_in[B * T], whole_tgt[B * T], part_in[B * T], part_tgt[B * T], other_in[B * T], other_tgt[B * T];
    int differs_from_other_seed = 0;
    for (int step = 0; step < STEPS; step++) {
        const uint64_t first_window = (uint64_t)step * B;
        batch_shuffled_rows(&own, counting_span(N_COUNTING), first_window, B, T, whole_in, whole_tgt);
        const ShuffledOrder fresh = shuffled_order(counting_span(N_COUNTING), T, 3);
        const int first = step % B, rows = B - first;
        batch_shuffled_rows(&fresh, counting_span(N_COUNTING), first_window + (uint64_t)first, rows, T, part_in,
                            part_tgt);
        ck_assert_mem_eq(part_in, whole_in + first * T, (size_t)rows * T * sizeof(int));
        ck_assert_mem_eq(part_tgt, whole_tgt + first * T, (size_t)rows * T * sizeof(int));
        batch_shuffled_rows(&other, counting_span(N_COUNTING), first_window, B, T, other_in, other_tgt);
        differs_from_other_seed += memcmp(whole_in, other_in, sizeof whole_in) != 0;
    }
    ck_assert_int_gt(differs_from_other_seed, STEPS - 5);
}
END_TEST

// A split shorter than two windows has fewer offsets than T: with n = T + 3
// there is one window an epoch, at 0, 1 or 2, and the epochs reach all three.
START_TEST(a_short_split_shuffles_its_one_window_over_the_offsets_that_fit) {
    enum { T = 5, N = T + 3 };
    ShuffledOrder order = shuffled_order(counting_span(N), T, 9);
    ck_assert_uint_eq(order.windows, 1);
    ck_assert_uint_eq(order.phases, 3);
    int seen[N - T] = {0};
    for (uint64_t g = 0; g < 60; g++) seen[shuffled_start_and_check(&order, N, g, T)]++;
    for (int s = 0; s < N - T; s++) ck_assert_msg(seen[s] > 0, "start %d never read", s);
    order = shuffled_order(counting_span(T + 1), T, 9);  // exactly one window: always it
    for (uint64_t g = 0; g < 5; g++) ck_assert_int_eq(shuffled_start_and_check(&order, T + 1, g, T), 0);
}
END_TEST

Suite *data_suite(void) {
    Suite *s = suite_create("data");
    TCase *load = tcase_create("load");
    tcase_add_checked_fixture(load, make_temp_dir, remove_temp_dir);
    tcase_add_test(load, load_splits_at_the_floor_of_n_tokens_times_val_fraction);
    tcase_add_test(load, load_encodes_the_whole_file_with_a_vocabulary_built_from_it);
    tcase_add_test(load, load_with_a_given_vocabulary_uses_it_and_keeps_it);
    tcase_add_test(load, load_with_a_given_vocabulary_rejects_an_unknown_character);
    tcase_add_test(load, load_rejects_a_missing_file_naming_the_path);
    tcase_add_test(load, load_with_a_given_vocabulary_reports_a_binary_file_as_binary);
    tcase_add_test(load, load_refuses_a_fifo_or_a_device_instead_of_blocking_or_reading_forever);
    tcase_add_test(load, load_rejects_a_directory);
    tcase_add_test(load, load_rejects_an_empty_file);
    tcase_add_test(load, load_rejects_a_file_larger_than_memory_before_reading_it);
    tcase_add_test(load, load_rejects_invalid_utf8_naming_the_file_and_byte);
    tcase_add_test(load, load_rejects_a_training_split_shorter_than_one_window);
    tcase_add_test(load, load_rejects_a_short_validation_split_but_allows_none);
    tcase_add_test(load, load_rejects_a_val_fraction_outside_zero_one);
    tcase_add_test(load, load_stores_ids_in_the_fewest_bytes_that_hold_the_vocabulary);
    tcase_add_test(load, hash_is_the_same_for_the_same_text_and_differs_for_another);
    tcase_add_test(load, loading_a_large_file_takes_about_its_own_size_in_memory);
    tcase_add_test(load, bpe_learns_from_the_training_split_only_and_encodes_each_split_apart);
    tcase_add_test(load, the_split_is_the_same_text_for_char_and_bpe_and_counts_its_bytes);
    tcase_add_test(load, bits_per_byte_spreads_the_loss_of_every_token_over_the_bytes);
    suite_add_tcase(s, load);

    TCase *batch = tcase_create("batch");
    tcase_add_checked_fixture(batch, fill_counting, NULL);
    tcase_add_test(batch, batch_targets_are_the_inputs_shifted_by_one);
    tcase_add_test(batch, sequential_batch_starts_follow_the_formula_exactly);
    tcase_add_test(batch, random_batches_are_deterministic_for_a_seed);
    tcase_add_test(batch, a_batch_cut_into_parts_is_the_whole_batch_row_for_row);
    tcase_add_test(batch, random_batch_starts_stay_in_range_and_reach_both_ends);
    tcase_add_test(batch, batches_are_the_same_at_every_id_width);
    tcase_add_test(batch, a_stream_of_exactly_one_window_gives_that_window);
    tcase_add_test(batch, a_shuffled_epoch_reads_every_window_once_and_the_next_in_a_new_order);
    tcase_add_test(batch, a_shuffled_window_is_the_same_from_any_starting_point);
    tcase_add_test(batch, a_short_split_shuffles_its_one_window_over_the_offsets_that_fit);
    suite_add_tcase(s, batch);
    return s;
}
