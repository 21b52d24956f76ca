// test_attention_map.c: tests for src/commands/attention_map.c (`tinygpt
// attention`).
//
// A small random card model and a gpt of two blocks are saved as
// checkpoints; the command must print, for every layer and head, a T x T
// matrix whose rows sum to 1 with zeros above the diagonal, equal to what
// model_forward leaves in that block's attn_weights (one loop test over
// both models); write one PNG per layer holding all its heads (or only the
// layer asked for) of the size attention_grid_size gives, or with
// --each-head one PNG per head of the size attention_map_size gives, next
// to the checkpoint unless --out says where; use the last block_size
// characters of a long prompt; label each column with its piece, with
// signs for invisible characters; fit heatmaps and grids of any length in
// their canvas, every head's cells in the grid as in its own picture; fall
// back to the bitmap font with one note; and fail clearly on bad input.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attention_map.h"
#include "checkpoint.h"
#include "helpers.h"
#include "model.h"
#include "tests.h"
#include "tokenizer.h"

enum { BLOCK = 8, HEADS = 2, GPT_LAYERS = 2 };
static const char CORPUS[] = "the quick brown fox jumps over the lazy dog\n";
// Printed with 3 decimals: each printed weight is within 5e-4 of the real one.
static const double PRINTED_TOL = 5e-4;

static char dir[256], model_path[512], gpt_path[512];

// save_model: a random model of "cfg" to "path". A gpt's weights are drawn
// from U(-1, 1), not from its training init, whose small weights make every
// head attend almost uniformly: the printed matrices would look alike.
static void save_model(const ModelConfig *cfg, const Tokenizer *tok, const char *path) {
    Model m;
    model_init(&m, cfg, 1, false);
    Rng rng;
    rng_init(&rng, 5);
    model_init_weights(&m, &rng);
    if (cfg->arch == ARCH_GPT) fill_uniform(m.params_memory, m.param_table.total, &rng);
    Error err;
    ck_assert_msg(checkpoint_save(&m, tok, 0, path, &err), "%s", err.msg);
    model_free(&m);
}

static void setup(void) {
    scratch_dir_create(dir, sizeof dir);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
    snprintf(gpt_path, sizeof gpt_path, "%s/gpt.safetensors", dir);
    Tokenizer tok;
    Error err;
    ck_assert_msg(tokenizer_build(&tok, CORPUS, strlen(CORPUS), "corpus", &err), "%s", err.msg);
    const ModelConfig card = {.vocab_size = tok.vocab_size, .block_size = BLOCK, .n_embd = 16, .n_head = HEADS,
                              .dropout = 0.1f, .arch = ARCH_CARD, .n_layer = 1};
    save_model(&card, &tok, model_path);
    ModelConfig gpt = card;
    gpt.arch = ARCH_GPT;
    gpt.n_layer = GPT_LAYERS;
    save_model(&gpt, &tok, gpt_path);
    tokenizer_free(&tok);
}

static void teardown(void) { scratch_dir_remove(dir); }

// Head "head" of layer "layer" (both 1-based; layer 0 for card, whose
// titles name no layer) as printed: weights[T*T]; labels gets the first
// byte of each column label from the header line.
static void read_layer_head(const char *out, int layer, int head, int T, double *weights, char *labels) {
    char needle[64];
    if (layer == 0) snprintf(needle, sizeof needle, "head %d of %d:", head, HEADS);
    else snprintf(needle, sizeof needle, "layer %d of %d, head %d of %d:", layer, GPT_LAYERS, head, HEADS);
    const char *p = strstr(out, needle);
    ck_assert_msg(p != NULL, "no '%s' in: %s", needle, out);
    p = strchr(p, '\n') + 1;  // the header of column labels
    const char *end = strchr(p, '\n');
    int n = 0;
    for (const char *q = p; q < end; q++)
        if (*q != ' ' && n < T) labels[n++] = *q, q += (*q & 0x80) ? 2 : 0;  // ␣ and ↵ are 3 bytes
    ck_assert_msg(n == T, "layer %d head %d: %d column labels, expected %d", layer, head, n, T);
    p = end + 1;
    for (int t = 0; t < T; t++) {
        end = strchr(p, '\n');
        ck_assert_msg(end != NULL, "layer %d head %d: the output ends at row %d of %d", layer, head, t, T);
        const char *q = p;
        while (*q != ' ') q++;  // the row label
        for (int j = 0; j < T; j++) {
            char *num_end;
            weights[t * T + j] = strtod(q, &num_end);
            ck_assert_msg(num_end != q, "layer %d head %d row %d: fewer than %d numbers", layer, head, t, T);
            q = num_end;
        }
        p = end + 1;
    }
}

// read_head: head "head" of the card model's output.
static void read_head(const char *out, int head, int T, double *weights, char *labels) {
    read_layer_head(out, 0, head, T, weights, labels);
}

static RunResult *run_attention(const char *prompt) {
    char args[2048];
    snprintf(args, sizeof args, "attention --model %s --prompt '%s' --out %s", model_path, prompt, dir);
    return run_tinygpt(dir, args);
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

// Loop test: _i = 0 on the card model, _i = 1 on the gpt, every layer.
START_TEST(the_printed_weights_are_those_of_model_forward) {
    const char *prompt = "lazy fox";
    const int T = (int)strlen(prompt);
    const char *model_file = _i == 0 ? model_path : gpt_path;
    const char *arch = _i == 0 ? "card" : "gpt";
    const int layers = _i == 0 ? 1 : GPT_LAYERS;
    char args[2048];
    snprintf(args, sizeof args, "attention --model %s --prompt '%s' --out %s", model_file, prompt, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s: attention failed: %s", arch, r->err);
    Model m;
    Tokenizer tok;
    Error err;
    ck_assert_msg(checkpoint_load(model_file, &m, &tok, 1, false, NULL, &err), "%s: %s", arch, err.msg);
    ck_assert_msg(m.n_layer == layers, "%s: %d layers, expected %d", arch, m.n_layer, layers);
    int *ids;
    size_t n;
    ck_assert_msg(tokenizer_encode(&tok, prompt, (size_t)T, &ids, &n, "prompt", &err), "%s: %s", arch, err.msg);
    model_forward(&m, ids, NULL, 1, T, false, 0);
    for (int l = 0; l < layers; l++)
        for (int h = 0; h < HEADS; h++) {
            double printed[BLOCK * BLOCK];
            char labels[BLOCK];
            read_layer_head(r->out, _i == 0 ? 0 : l + 1, h + 1, T, printed, labels);  // card's titles name no layer
            const float *expected = m.acts.blocks[l].attn_weights + (size_t)h * T * T;  // [B=1,NH,T,T]
            for (int i = 0; i < T * T; i++)
                ck_assert_msg(fabs(printed[i] - expected[i]) <= PRINTED_TOL,
                              "%s: layer %d head %d [%d,%d]: printed %.3f, model %.5f", arch, l + 1, h + 1, i / T,
                              i % T, printed[i], (double)expected[i]);
        }
    free(ids);
    tokenizer_free(&tok);
    model_free(&m);
}
END_TEST

// assert_png: "path" is a PNG of width x height.
static void assert_png(const char *path, int width, int height) {
    char why[600];
    int w = 0, h = 0;
    ck_assert_msg(png_size(path, &w, &h, why, sizeof why), "%s", why);
    ck_assert_int_eq(w, width);
    ck_assert_int_eq(h, height);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

START_TEST(one_png_of_all_heads_is_written_with_the_stated_size) {
    RunResult *r = run_attention("over");
    ck_assert_msg(r->status == 0, "attention failed: %s", r->err);
    int width, height;
    attention_grid_size(4, 1, HEADS, &width, &height);
    assert_png(path_in(dir, "attention.png"), width, height);
    ck_assert_msg(!exists(path_in(dir, "attention_head1.png")), "a picture per head without --each-head");
    char wrote[700];
    snprintf(wrote, sizeof wrote, "wrote %s/attention.png (%d x %d)\n", dir, width, height);
    ck_assert_msg(strcmp(r->err, wrote) == 0, "%s", r->err);
}
END_TEST

START_TEST(each_head_writes_one_png_per_head_with_the_stated_size) {
    char args[2048];
    snprintf(args, sizeof args, "attention --model %s --prompt 'over' --out %s --each-head", model_path, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "attention failed: %s", r->err);
    ck_assert_msg(!exists(path_in(dir, "attention.png")), "the grid with --each-head");
    int width, height;
    attention_map_size(4, 1, &width, &height);
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
    int width, height;
    attention_grid_size(BLOCK, 1, HEADS, &width, &height);
    assert_png(path_in(dir, "attention.png"), width, height);
}
END_TEST

START_TEST(the_pictures_go_next_to_the_checkpoint_by_default) {
    char args[1024], path[600], why[600];
    snprintf(args, sizeof args, "attention --model %s --prompt 'dog'", model_path);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "attention failed: %s", r->err);
    snprintf(path, sizeof path, "%s/attention.png", dir);
    int w, h;
    ck_assert_msg(png_size(path, &w, &h, why, sizeof why), "%s", why);
}
END_TEST

START_TEST(out_is_created_with_its_parents_as_train_creates_its_out) {
    char args[2048], path[700], why[600];
    snprintf(args, sizeof args, "attention --model %s --prompt dog --out %s/no/such/dir", model_path, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "attention into a missing --out failed: %s", r->err);
    snprintf(path, sizeof path, "%s/no/such/dir/attention.png", dir);
    int w, h;
    ck_assert_msg(png_size(path, &w, &h, why, sizeof why), "%s", why);
}
END_TEST

START_TEST(bad_input_is_a_one_line_error_naming_the_flag_or_file) {
    RunResult *r = run_attention("Zebra");  // 'Z' is not in the vocabulary
    expect_failure(r, "attention --prompt 'Zebra'", 2, "--prompt");
    char args[1024];
    snprintf(args, sizeof args, "attention --model %s", model_path);
    r = run_tinygpt(dir, args);
    expect_failure(r, args, 2, "--prompt");
    r = run_tinygpt(dir, "attention --prompt dog");
    expect_failure(r, "attention --prompt dog", 2, "--model");
    snprintf(args, sizeof args, "attention --model %s/absent.safetensors --prompt dog", dir);
    r = run_tinygpt(dir, args);
    expect_failure(r, args, 1, "absent.safetensors");
    // --out is a file: one line, before anything is printed.
    char file[300];
    snprintf(file, sizeof file, "%s/a_file.txt", dir);
    write_text_file(file, "not a directory\n");
    snprintf(args, sizeof args, "attention --model %s --prompt dog --out %s", model_path, file);
    r = run_tinygpt(dir, args);
    expect_failure(r, args, 1, "--out");
    ck_assert_msg(r->out[0] == '\0', "printed before failing: %s", r->out);
    // An empty --out: make_dir has no parent to make (it used to look past the NUL for one).
    snprintf(args, sizeof args, "attention --model %s --prompt dog --out ''", model_path);
    expect_run_fails(dir, args, 1, "cannot create output directory ''");
}
END_TEST

// ---- gpt: one heatmap per layer and head ----------------------------------------

// expect_pngs: in "out_dir", attention_layer{l}.png exists exactly for the
// layers "want[l - 1]" says (of attention_grid_size), and no per-head
// picture.
static void expect_pngs(const char *out_dir, const bool want[GPT_LAYERS + 1], int T) {
    int width, height;
    attention_grid_size(T, 1, HEADS, &width, &height);
    for (int l = 1; l <= GPT_LAYERS + 1; l++) {
        char name[64];
        snprintf(name, sizeof name, "attention_layer%d.png", l);
        if (want[l - 1]) assert_png(path_in(out_dir, name), width, height);
        else ck_assert_msg(!exists(path_in(out_dir, name)), "a PNG for layer %d", l);
        snprintf(name, sizeof name, "attention_layer%d_head1.png", l);
        ck_assert_msg(!exists(path_in(out_dir, name)), "a PNG for layer %d's first head", l);
    }
}

// expect_head_pngs: with --each-head, attention_layer{l}_head{h}.png exists
// exactly for the layers "want[l - 1]" says, for every head, and no other
// layer's, and no picture of a whole layer.
static void expect_head_pngs(const char *out_dir, const bool want[GPT_LAYERS + 1], int T) {
    int width, height;
    attention_map_size(T, 1, &width, &height);
    for (int l = 1; l <= GPT_LAYERS + 1; l++) {
        char name[64];
        snprintf(name, sizeof name, "attention_layer%d.png", l);
        ck_assert_msg(!exists(path_in(out_dir, name)), "--each-head wrote %s", name);
        for (int h = 1; h <= HEADS + 1; h++) {
            char path[600], why[600];
            snprintf(path, sizeof path, "%s/attention_layer%d_head%d.png", out_dir, l, h);
            int w = 0, ht = 0;
            bool ok = png_size(path, &w, &ht, why, sizeof why);
            if (!want[l - 1] || h > HEADS) {
                ck_assert_msg(!ok, "a PNG for layer %d head %d", l, h);
                continue;
            }
            ck_assert_msg(ok, "%s", why);
            ck_assert_int_eq(w, width);
            ck_assert_int_eq(ht, height);
        }
    }
}

START_TEST(a_gpt_gets_one_png_per_layer_or_only_the_chosen_layers_or_one_per_head) {
    char args[2048], every[600], second[600];
    snprintf(every, sizeof every, "%s/every", dir);
    snprintf(second, sizeof second, "%s/second", dir);
    ck_assert_int_eq(mkdir(every, 0700), 0);
    ck_assert_int_eq(mkdir(second, 0700), 0);
    snprintf(args, sizeof args, "attention --model %s --prompt 'over' --out %s", gpt_path, every);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "attention failed: %s", r->err);
    expect_pngs(every, (const bool[]){true, true, false}, 4);
    char path[700], why[600];
    int w, h;
    snprintf(path, sizeof path, "%s/attention_head1.png", every);
    ck_assert_msg(!png_size(path, &w, &h, why, sizeof why), "a gpt wrote card's file name %s", path);

    snprintf(args, sizeof args, "attention --model %s --prompt 'over' --out %s --layer 2", gpt_path, second);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "attention --layer 2 failed: %s", r->err);
    expect_pngs(second, (const bool[]){false, true, false}, 4);
    ck_assert_msg(strstr(r->out, "layer 1 of") == NULL && strstr(r->out, "layer 2 of 2, head 2 of 2:") != NULL,
                  "--layer 2 printed other layers: %s", r->out);

    // --each-head: one picture per head, of every layer or of the one asked for.
    char heads[600], heads2[600];
    snprintf(heads, sizeof heads, "%s/heads", dir);
    snprintf(heads2, sizeof heads2, "%s/heads2", dir);
    snprintf(args, sizeof args, "attention --model %s --prompt 'over' --out %s --each-head", gpt_path, heads);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "attention --each-head failed: %s", r->err);
    expect_head_pngs(heads, (const bool[]){true, true, false}, 4);
    snprintf(args, sizeof args, "attention --model %s --prompt 'over' --out %s --each-head --layer 1", gpt_path, heads2);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "attention --each-head --layer 1 failed: %s", r->err);
    expect_head_pngs(heads2, (const bool[]){true, false, false}, 4);
}
END_TEST

START_TEST(a_layer_out_of_range_is_a_one_line_usage_error) {
    char args[2048];
    snprintf(args, sizeof args, "attention --model %s --prompt 'dog' --layer 3", gpt_path);
    RunResult *r = run_tinygpt(dir, args);
    expect_failure(r, args, 2, "--layer 3");
    ck_assert_msg(r->out[0] == '\0', "printed before failing: %s", r->out);
    snprintf(args, sizeof args, "attention --model %s --prompt 'dog' --layer 2", model_path);  // card: one block
    r = run_tinygpt(dir, args);
    expect_failure(r, args, 2, "--layer 2");
    snprintf(args, sizeof args, "attention --model %s --prompt 'dog' --layer -1", gpt_path);
    r = run_tinygpt(dir, args);
    expect_failure(r, args, 2, "--layer");
    // card's only layer, asked for by number, is the default picture.
    snprintf(args, sizeof args, "attention --model %s --prompt 'dog' --layer 1", model_path);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "card --layer 1 failed: %s", r->err);
    char path[600], why[600];
    int w, h;
    snprintf(path, sizeof path, "%s/attention.png", dir);
    ck_assert_msg(png_size(path, &w, &h, why, sizeof why), "%s", why);
}
END_TEST

START_TEST(heatmaps_of_any_length_fit_their_canvas) {
    // Drawing writes only inside the canvas (canvas_fill_rect clips, but the
    // layout should not need it): the right and bottom margins stay white,
    // with the bitmap font and with the TrueType one.
    Error err;
    Font *font = font_load(FONT_DEFAULT_PATH, &err);
    ck_assert_msg(font != NULL, "%s (scripts/setup.sh installs fonts-dejavu-core)", err.msg);
    for (int T = 1; T <= 70; T += 23) {
        int width, height;
        attention_map_size(T, 1, &width, &height);
        ck_assert_int_ge(width, T * HEATMAP_CELL_MIN);
        ck_assert_int_ge(height, T * HEATMAP_CELL_MIN);
        float *weights = xcalloc((size_t)T * T, sizeof(float));
        const char *labels[70];
        for (int t = 0; t < T; t++) {
            weights[t * T + t] = 1.0f;
            labels[t] = (const char *[]){"a", "␣", "↵", "\xc3\xa9"}[t % 4];
        }
        for (int with_font = 0; with_font < 2; with_font++) {
            Canvas c;
            canvas_init(&c, width, height);
            attention_map_draw(&c, with_font ? font : NULL, weights, T, labels, "layer 12 of 12, head 16 of 16");
            for (int x = 0; x < width; x++) {
                const unsigned char *p = c.pixels + ((size_t)(height - 1) * width + x) * 3;
                ck_assert_msg(p[0] == 255 && p[1] == 255 && p[2] == 255, "T=%d font %d: bottom row not white at x=%d", T,
                              with_font, x);
            }
            canvas_free(&c);
        }
        free(weights);
    }
    font_free(font);
}
END_TEST

// Without the font file the pictures still come, with the bitmap font, and
// one note says so; with it, no note.
START_TEST(a_missing_font_falls_back_to_the_bitmap_font_with_one_note) {
    char binary[1024], args[2048], path[600], why[600];
    snprintf(binary, sizeof binary, "TINYGPT_FONT=%s/no-such-font.ttf %s", dir, tinygpt_binary());
    snprintf(args, sizeof args, "attention --model %s --prompt 'the dog' --out %s", model_path, dir);
    RunResult *r = run_binary(binary, dir, args);
    ck_assert_msg(r->status == 0, "attention without its font failed: %s", r->err);
    const char *note = strstr(r->err, "note: no label font");
    ck_assert_msg(note && strstr(note, "no-such-font.ttf") && !strstr(note + 1, "note: no label font"),
                  "not one note naming the font: %s", r->err);
    ck_assert_msg(strchr(note, '\n') && !strstr(strchr(note, '\n'), "no-such-font"), "%s", r->err);
    int w, h;
    snprintf(path, sizeof path, "%s/attention.png", dir);
    ck_assert_msg(png_size(path, &w, &h, why, sizeof why), "%s", why);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0 && !strstr(r->err, "note: no label font"), "a note with the font installed: %s",
                  r->err);
}
END_TEST



// count_rgb: pixels of "c" exactly "color".
static long count_rgb(const Canvas *c, Rgb color) {
    long n = 0;
    for (int i = 0; i < c->width * c->height; i++)
        n += c->pixels[3 * i] == color.r && c->pixels[3 * i + 1] == color.g && c->pixels[3 * i + 2] == color.b;
    return n;
}

// The grid of all heads: inside its canvas for any length and any number
// of heads, and each head's cells drawn as in its own picture: the pixels
// of the darkest blue (a weight of 1) in the grid are those of the heads'
// own pictures, less their colour bars' top rows, plus the grid's one bar.
START_TEST(the_grid_of_heads_fits_its_canvas_and_holds_every_heads_cells) {
    const Rgb darkest = {8, 48, 107};  // weight 1
    for (int T = 1; T <= 40; T += 13)
        for (int NH = 1; NH <= 6; NH++) {
            float *weights = xcalloc((size_t)NH * T * T, sizeof(float));
            const char *labels[40];
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) weights[((size_t)h * T + t) * T + (t * (h + 1) / (NH + 1))] = 1.0f;
            for (int t = 0; t < T; t++) labels[t] = (const char *[]){"a", "␣", "↵", "b"}[t % 4];
            int width, height;
            attention_grid_size(T, 1, NH, &width, &height);
            Canvas grid;
            canvas_init(&grid, width, height);
            attention_grid_draw(&grid, NULL, weights, T, NH, labels, "layer 12 of 12, all 16 heads");
            for (int x = 0; x < width; x++) {
                const unsigned char *p = grid.pixels + ((size_t)(height - 1) * width + x) * 3;
                ck_assert_msg(p[0] == 255 && p[1] == 255 && p[2] == 255, "T=%d NH=%d: bottom row not white at x=%d", T,
                              NH, x);
            }
            for (int y = 0; y < height; y++) {
                const unsigned char *p = grid.pixels + ((size_t)y * width + width - 1) * 3;
                ck_assert_msg(p[0] == 255 && p[1] == 255 && p[2] == 255, "T=%d NH=%d: right column not white at y=%d",
                              T, NH, y);
            }
            int head_w, head_h;
            attention_map_size(T, 1, &head_w, &head_h);
            long in_heads = 0, bar = 0;
            for (int h = 0; h < NH; h++) {
                Canvas one;
                canvas_init(&one, head_w, head_h);
                attention_map_draw(&one, NULL, weights + (size_t)h * T * T, T, labels, "head");
                in_heads += count_rgb(&one, darkest);
                canvas_free(&one);
            }
            Canvas none;  // a head with no weight of 1: its darkest pixels are its bar's
            float *zeros = xcalloc((size_t)T * T, sizeof(float));
            canvas_init(&none, head_w, head_h);
            attention_map_draw(&none, NULL, zeros, T, labels, "head");
            bar = count_rgb(&none, darkest);
            ck_assert_int_gt(bar, 0);
            ck_assert_msg(count_rgb(&grid, darkest) == in_heads - (NH - 1) * bar,
                          "T=%d NH=%d: %ld darkest pixels in the grid, %ld in the heads' pictures (bar %ld)", T, NH,
                          count_rgb(&grid, darkest), in_heads, bar);
            canvas_free(&none);
            canvas_free(&grid);
            free(zeros);
            free(weights);
        }
}
END_TEST

START_TEST(a_label_shows_its_piece_with_signs_for_the_invisible_characters) {
    char out[ATTENTION_LABEL_BYTES];
    ck_assert_int_eq(attention_label(" whale", 6, out, sizeof out), 6);
    ck_assert_str_eq(out, "␣whale");
    ck_assert_int_eq(attention_label("a\n\t\x01", 4, out, sizeof out), 4);
    ck_assert_str_eq(out, "a↵→?");
    ck_assert_int_eq(attention_label("\xc3\xa9\xe2\x80", 4, out, sizeof out), 3);  // é, then half a character
    ck_assert_str_eq(out, "é??");
    ck_assert_int_eq(attention_label("abcdefghijkl", 12, out, sizeof out), ATTENTION_LABEL_MAX);
    ck_assert_str_eq(out, "abcdefgh");
}
END_TEST

Suite *attention_map_suite(void) {
    Suite *s = suite_create("attention_map");
    TCase *tc = tcase_create("attention_map");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);  // runs the binary
    tcase_add_test(tc, a_label_shows_its_piece_with_signs_for_the_invisible_characters);
    tcase_add_test(tc, each_head_prints_rows_that_sum_to_one_with_zeros_above_the_diagonal);
    tcase_add_loop_test(tc, the_printed_weights_are_those_of_model_forward, 0, 2);
    tcase_add_test(tc, one_png_of_all_heads_is_written_with_the_stated_size);
    tcase_add_test(tc, each_head_writes_one_png_per_head_with_the_stated_size);
    tcase_add_test(tc, a_prompt_longer_than_the_block_size_shows_its_last_block_size_characters);
    tcase_add_test(tc, the_pictures_go_next_to_the_checkpoint_by_default);
    tcase_add_test(tc, out_is_created_with_its_parents_as_train_creates_its_out);
    tcase_add_test(tc, bad_input_is_a_one_line_error_naming_the_flag_or_file);
    tcase_add_test(tc, a_gpt_gets_one_png_per_layer_or_only_the_chosen_layers_or_one_per_head);
    tcase_add_test(tc, a_layer_out_of_range_is_a_one_line_usage_error);
    tcase_add_test(tc, heatmaps_of_any_length_fit_their_canvas);
    tcase_add_test(tc, the_grid_of_heads_fits_its_canvas_and_holds_every_heads_cells);
    tcase_add_test(tc, a_missing_font_falls_back_to_the_bitmap_font_with_one_note);
    suite_add_tcase(s, tc);
    return s;
}
