// test_attention_map.c: tests for src/attention_map.c (`tinygpt attention`).
//
// A small random model is saved as a checkpoint; the command must print,
// for every head, a T x T matrix whose rows sum to 1 with zeros above the
// diagonal, equal to what model_forward leaves in attn_weights; write one
// PNG per head of the size attention_map_size gives; use the last
// block_size characters of a long prompt; and fail clearly on bad input.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_map.h"
#include "checkpoint.h"
#include "helpers.h"
#include "model.h"
#include "tests.h"
#include "tokenizer.h"

enum { BLOCK = 8, HEADS = 2 };
static const char CORPUS[] = "the quick brown fox jumps over the lazy dog\n";
// Printed with 3 decimals: each printed weight is within 5e-4 of the real one.
static const double PRINTED_TOL = 5e-4;

static char dir[256], model_path[512];

static void setup(void) {
    scratch_dir_create(dir, sizeof dir);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
    Tokenizer tok;
    Error err;
    ck_assert_msg(tokenizer_build(&tok, CORPUS, strlen(CORPUS), "corpus", &err), "%s", err.msg);
    ModelConfig cfg = {tok.vocab_size, BLOCK, 16, HEADS, 0.1f};
    Model m;
    model_init(&m, &cfg, 1, false);
    Rng rng;
    rng_init(&rng, 5);
    model_init_weights(&m, &rng);
    ck_assert_msg(checkpoint_save(&m, &tok, 0, model_path, &err), "%s", err.msg);
    model_free(&m);
    tokenizer_free(&tok);
}

static void teardown(void) { scratch_dir_remove(dir); }

// Head "head" (1-based) as printed: weights[T*T]; labels gets the first byte
// of each column label from the header line.
static void read_head(const char *out, int head, int T, double *weights, char *labels) {
    char needle[64];
    snprintf(needle, sizeof needle, "head %d of %d:", head, HEADS);
    const char *p = strstr(out, needle);
    ck_assert_msg(p != NULL, "no '%s' in: %s", needle, out);
    p = strchr(p, '\n') + 1;  // the header of column labels
    const char *end = strchr(p, '\n');
    int n = 0;
    for (const char *q = p; q < end; q++)
        if (*q != ' ' && n < T) labels[n++] = *q, q += (*q & 0x80) ? 2 : 0;  // ␣ and ↵ are 3 bytes
    ck_assert_int_eq(n, T);
    p = end + 1;
    for (int t = 0; t < T; t++) {
        end = strchr(p, '\n');
        ck_assert_ptr_nonnull(end);
        const char *q = p;
        while (*q != ' ') q++;  // the row label
        for (int j = 0; j < T; j++) {
            char *num_end;
            weights[t * T + j] = strtod(q, &num_end);
            ck_assert_msg(num_end != q, "head %d row %d: fewer than %d numbers", head, t, T);
            q = num_end;
        }
        p = end + 1;
    }
}

static RunResult *run_attention(const char *prompt) {
    char args[2048];
    snprintf(args, sizeof args, "attention --model %s --prompt '%s' --out %s", model_path, prompt, dir);
    return run_binary(tinygpt_binary(), dir, args);
}

START_TEST(each_head_prints_rows_that_sum_to_one_with_zeros_above_the_diagonal) {
    const char *prompt = "the dog";
    const int T = (int)strlen(prompt);
    RunResult *r = run_attention(prompt);
    ck_assert_msg(r->status == 0, "attention failed: %s", r->err);
    for (int h = 1; h <= HEADS; h++) {
        double w[BLOCK * BLOCK];
        char labels[BLOCK];
        read_head(r->out, h, T, w, labels);
        ck_assert_int_eq(memcmp(labels, "the\xe2" "dog", 7), 0);  // the space is printed as "␣", 3 bytes from 0xe2
        for (int t = 0; t < T; t++) {
            double sum = 0;
            for (int j = 0; j < T; j++) {
                if (j > t) ck_assert_msg(w[t * T + j] == 0.0, "head %d [%d,%d] = %g above the diagonal", h, t, j, w[t * T + j]);
                ck_assert(w[t * T + j] >= 0.0);
                sum += w[t * T + j];
            }
            ck_assert_msg(fabs(sum - 1.0) <= (t + 1) * PRINTED_TOL, "head %d row %d sums to %g", h, t, sum);
        }
    }
}
END_TEST

START_TEST(the_printed_weights_are_those_of_model_forward) {
    const char *prompt = "lazy fox";
    const int T = (int)strlen(prompt);
    RunResult *r = run_attention(prompt);
    ck_assert_msg(r->status == 0, "attention failed: %s", r->err);
    Model m;
    Tokenizer tok;
    Error err;
    ck_assert_msg(checkpoint_load(model_path, &m, &tok, 1, false, NULL, &err), "%s", err.msg);
    int *ids;
    size_t n;
    ck_assert(tokenizer_encode(&tok, prompt, (size_t)T, &ids, &n, "prompt", &err));
    model_forward(&m, ids, NULL, 1, T, false, 0);
    for (int h = 0; h < HEADS; h++) {
        double printed[BLOCK * BLOCK];
        char labels[BLOCK];
        read_head(r->out, h + 1, T, printed, labels);
        const float *expected = m.acts.attn_weights + (size_t)h * T * T;  // [B=1,NH,T,T]
        for (int i = 0; i < T * T; i++)
            ck_assert_msg(fabs(printed[i] - expected[i]) <= PRINTED_TOL, "head %d [%d,%d]: printed %.3f, model %.5f",
                          h + 1, i / T, i % T, printed[i], (double)expected[i]);
    }
    free(ids);
    tokenizer_free(&tok);
    model_free(&m);
}
END_TEST

START_TEST(one_png_per_head_is_written_with_the_stated_size) {
    RunResult *r = run_attention("over");
    ck_assert_msg(r->status == 0, "attention failed: %s", r->err);
    int width, height;
    attention_map_size(4, &width, &height);
    for (int h = 1; h <= HEADS + 1; h++) {
        char path[600], why[600];
        snprintf(path, sizeof path, "%s/attention_head%d.png", dir, h);
        int w = 0, ht = 0;
        bool ok = png_size(path, &w, &ht, why, sizeof why);
        if (h > HEADS) {
            ck_assert_msg(!ok, "a PNG for head %d of %d", h, HEADS);
            continue;
        }
        ck_assert_msg(ok, "%s", why);
        ck_assert_int_eq(w, width);
        ck_assert_int_eq(ht, height);
    }
}
END_TEST

START_TEST(a_prompt_longer_than_the_block_size_shows_its_last_block_size_characters) {
    RunResult *r = run_attention("the quick brown fox");  // 19 characters; the model sees 8
    ck_assert_msg(r->status == 0, "attention failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "last 8") != NULL, "no note about the cut: %s", r->err);
    double w[BLOCK * BLOCK];
    char labels[BLOCK];
    read_head(r->out, 1, BLOCK, w, labels);
    ck_assert_int_eq(memcmp(labels, "rown", 4), 0);  // "rown fox"; the space is printed as a 3-byte sign
    ck_assert_int_eq(memcmp(labels + 5, "fox", 3), 0);
    int width, height, w_png = 0, h_png = 0;
    char path[600], why[600];
    attention_map_size(BLOCK, &width, &height);
    snprintf(path, sizeof path, "%s/attention_head2.png", dir);
    ck_assert_msg(png_size(path, &w_png, &h_png, why, sizeof why), "%s", why);
    ck_assert_int_eq(w_png, width);
    ck_assert_int_eq(h_png, height);
}
END_TEST

START_TEST(the_pictures_go_next_to_the_checkpoint_by_default) {
    char args[1024], path[600], why[600];
    snprintf(args, sizeof args, "attention --model %s --prompt 'dog'", model_path);
    RunResult *r = run_binary(tinygpt_binary(), dir, args);
    ck_assert_msg(r->status == 0, "attention failed: %s", r->err);
    snprintf(path, sizeof path, "%s/attention_head1.png", dir);
    int w, h;
    ck_assert_msg(png_size(path, &w, &h, why, sizeof why), "%s", why);
}
END_TEST

START_TEST(bad_input_is_a_one_line_error_naming_the_flag_or_file) {
    RunResult *r = run_attention("Zebra");  // 'Z' is not in the vocabulary
    ck_assert_int_eq(r->status, 2);
    ck_assert_msg(strstr(r->err, "--prompt") != NULL && stderr_is_one_line(r), "%s", r->err);
    char args[1024];
    snprintf(args, sizeof args, "attention --model %s", model_path);
    r = run_binary(tinygpt_binary(), dir, args);
    ck_assert_int_eq(r->status, 2);
    ck_assert_msg(strstr(r->err, "--prompt") != NULL && stderr_is_one_line(r), "%s", r->err);
    r = run_binary(tinygpt_binary(), dir, "attention --prompt dog");
    ck_assert_int_eq(r->status, 2);
    ck_assert_msg(strstr(r->err, "--model") != NULL && stderr_is_one_line(r), "%s", r->err);
    snprintf(args, sizeof args, "attention --model %s/absent.safetensors --prompt dog", dir);
    r = run_binary(tinygpt_binary(), dir, args);
    ck_assert_int_eq(r->status, 1);
    ck_assert_msg(strstr(r->err, "absent.safetensors") != NULL && stderr_is_one_line(r), "%s", r->err);
    snprintf(args, sizeof args, "attention --model %s --prompt dog --out %s/no/such/dir", model_path, dir);
    r = run_binary(tinygpt_binary(), dir, args);
    ck_assert_int_eq(r->status, 1);
    ck_assert_msg(strstr(r->err, "--out") != NULL && stderr_is_one_line(r), "%s", r->err);
    ck_assert_msg(r->out[0] == '\0', "printed before failing: %s", r->out);
}
END_TEST

START_TEST(heatmaps_of_any_length_fit_their_canvas) {
    // Drawing writes only inside the canvas (canvas_fill_rect clips, but the
    // layout should not need it): the right and bottom margins stay white.
    for (int T = 1; T <= 70; T += 23) {
        int width, height;
        attention_map_size(T, &width, &height);
        ck_assert_int_ge(width, T * HEATMAP_CELL_MIN);
        ck_assert_int_ge(height, T * HEATMAP_CELL_MIN);
        float *weights = xcalloc((size_t)T * T, sizeof(float));
        uint32_t *cps = xcalloc((size_t)T, sizeof(uint32_t));
        for (int t = 0; t < T; t++) {
            weights[t * T + t] = 1.0f;
            cps[t] = "a \n\xe9"[t % 4] & 0xff;
        }
        Canvas c;
        canvas_init(&c, width, height);
        attention_map_draw(&c, weights, T, cps, 0, 1);
        for (int x = 0; x < width; x++) {
            const unsigned char *p = c.pixels + ((size_t)(height - 1) * width + x) * 3;
            ck_assert_msg(p[0] == 255 && p[1] == 255 && p[2] == 255, "T=%d: bottom row not white at x=%d", T, x);
        }
        canvas_free(&c);
        free(cps);
        free(weights);
    }
}
END_TEST

Suite *attention_map_suite(void) {
    Suite *s = suite_create("attention_map");
    TCase *tc = tcase_create("attention_map");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);  // runs the binary
    tcase_add_test(tc, each_head_prints_rows_that_sum_to_one_with_zeros_above_the_diagonal);
    tcase_add_test(tc, the_printed_weights_are_those_of_model_forward);
    tcase_add_test(tc, one_png_per_head_is_written_with_the_stated_size);
    tcase_add_test(tc, a_prompt_longer_than_the_block_size_shows_its_last_block_size_characters);
    tcase_add_test(tc, the_pictures_go_next_to_the_checkpoint_by_default);
    tcase_add_test(tc, bad_input_is_a_one_line_error_naming_the_flag_or_file);
    tcase_add_test(tc, heatmaps_of_any_length_fit_their_canvas);
    suite_add_tcase(s, tc);
    return s;
}
