// attention_map.c: the attention weights of a prompt, printed and drawn
// (see attention_map.h).
#include "attention_map.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "hf_gpt2.h"
#include "model.h"
#include "tokenizer.h"
#include "utf8.h"

static const Rgb INK = {40, 40, 40}, SOFT_INK = {150, 150, 150};
static const char SUBTITLE_1[] = "row: the token reading; column: the token it reads";
static const char SUBTITLE_2[] = "each row sums to 1; hatched: the future, masked";
static const char WIDE_TITLE[] = "layer 99 of 99, head 99 of 99";  // the picture is at least this wide

// Where everything goes, in pixels, for a T-token prompt whose longest
// label is "label_chars" characters.
typedef struct {
    int cell;           // side of one weight's square
    int label_w;        // the row labels' column
    int left, top;      // the grid's top-left corner
    int bar_x, bar_h;   // the colour bar: left edge and height
    int width, height;  // the picture
} Layout;

static Layout layout_for(int T, int label_chars) {
    Layout l;
    l.cell = 640 / T;
    if (l.cell < HEATMAP_CELL_MIN) l.cell = HEATMAP_CELL_MIN;
    if (l.cell > HEATMAP_CELL_MAX) l.cell = HEATMAP_CELL_MAX;
    const int grid = T * l.cell;
    l.label_w = 2 * 6 * label_chars;  // characters are 6 pixels apart at scale 1, in both fonts
    l.left = 12 + l.label_w + 10;     // margin, the row labels, gap
    // title (scale 2), two subtitle lines (scale 1), column labels (scale 2)
    l.top = 10 + 2 * TEXT_HEIGHT + 8 + 2 * (TEXT_HEIGHT + 5) + 10 + 2 * TEXT_HEIGHT + 8;
    l.bar_x = l.left + grid + 20;
    l.bar_h = grid > 80 ? grid : 80;
    l.width = l.bar_x + 16 + 8 + canvas_text_width("0.5", 2) + 12;
    int text_w = 12 + canvas_text_width(SUBTITLE_1, 1) + 12;
    if (l.width < text_w) l.width = text_w;
    int title_w = 12 + canvas_text_width(WIDE_TITLE, 2) + 12;
    if (l.width < title_w) l.width = title_w;
    l.height = l.top + l.bar_h + 16;
    return l;
}

void attention_map_size(int T, int label_chars, int *width, int *height) {
    Layout l = layout_for(T, label_chars);
    *width = l.width;
    *height = l.height;
}

// White (0) to dark blue (1), through ColorBrewer's "Blues": equal steps in
// weight look like roughly equal steps in darkness.
static Rgb weight_color(float w) {
    static const Rgb stops[] = {{255, 255, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}};
    const int n = (int)(sizeof stops / sizeof stops[0]) - 1;
    float x = fminf(fmaxf(w, 0.0f), 1.0f) * (float)n;
    int i = x >= (float)n ? n - 1 : (int)x;
    float f = x - (float)i;
    return (Rgb){(unsigned char)lrintf(stops[i].r + f * (stops[i + 1].r - stops[i].r)),
                 (unsigned char)lrintf(stops[i].g + f * (stops[i + 1].g - stops[i].g)),
                 (unsigned char)lrintf(stops[i].b + f * (stops[i + 1].b - stops[i].b))};
}

// The masked future: light grey with diagonal hatching.
static void hatch(Canvas *c, int x, int y, int size) {
    for (int py = y; py < y + size; py++)
        for (int px = x; px < x + size; px++) {
            unsigned char v = (px + py) % 6 == 0 ? 200 : 242;
            canvas_fill_rect(c, px, py, 1, 1, (Rgb){v, v, v});
        }
}

// The signs that stand for the invisible characters, on the terminal and in
// the pictures.
static const char *invisible_sign(uint32_t cp) {
    if (cp == ' ') return "␣";
    if (cp == '\n') return "↵";
    if (cp == '\t') return "→";
    if (cp < ' ' || cp == 127) return "?";
    return NULL;
}

int attention_label(const char *piece, size_t len, char *out, size_t cap) {
    size_t n = 0;
    int chars = 0;
    out[0] = '\0';
    for (size_t i = 0; i < len && chars < ATTENTION_LABEL_MAX; chars++) {
        uint32_t cp;
        int k = utf8_decode((const unsigned char *)piece + i, len - i, &cp);
        char utf8[4];
        const char *shown = k == 0 ? "?" : invisible_sign(cp);  // a byte of half a character: "?"
        if (!shown) {
            memcpy(utf8, piece + i, (size_t)k);
            shown = utf8;
        }
        size_t shown_len = shown == utf8 ? (size_t)k : strlen(shown);
        if (n + shown_len + 1 > cap) break;
        memcpy(out + n, shown, shown_len);
        out[n += shown_len] = '\0';
        i += k == 0 ? 1 : (size_t)k;
    }
    return chars;
}

// utf8_chars: the characters of a label.
static int utf8_chars(const char *label) { return (int)utf8_count(label, strlen(label)); }

// widest_label: the most characters in labels[T], at least 1.
static int widest_label(const char *const *labels, int T) {
    int widest = 1;
    for (int t = 0; t < T; t++) {
        int n = utf8_chars(labels[t]);
        if (n > widest) widest = n;
    }
    return widest;
}

// draw_label: a label centred on cx, its top at "top": at text scale 2 if it
// fits in "max_w" pixels, else at scale 1, cut to the characters that fit.
// A label that is only a sign (␣ ↵ →) is grey. Without the font, the bitmap
// font shows ASCII and a '?' for anything else.
static void draw_label(Canvas *c, const Font *font, int cx, int top, const char *label, int max_w) {
    int chars = utf8_chars(label), scale = 2;
    if (2 * 6 * chars > max_w) scale = 1;
    size_t len = strlen(label);
    while (canvas_text_utf8_width(font, label, len, scale) > max_w && chars > 1)
        len = utf8_prefix(label, len, (size_t)--chars);  // drop the last character, all its bytes
    bool sign = strcmp(label, "␣") == 0 || strcmp(label, "↵") == 0 || strcmp(label, "→") == 0;
    int y = top + (2 - scale) * TEXT_HEIGHT / 2;  // a smaller label on the same middle line
    canvas_text_utf8(c, font, cx - canvas_text_utf8_width(font, label, len, scale) / 2, y, label, len, scale,
                     sign ? SOFT_INK : INK);
}

// draw_cells: one head's weights[T,T] as cells of "cell" pixels, the grid's
// top-left corner at (left, top), with its column labels above it and its
// row labels in the "label_w" pixels that end 10 pixels left of it.
static void draw_cells(Canvas *c, const Font *font, int left, int top, int cell, int label_w, const float *weights,
                       int T, const char *const *labels) {
    for (int t = 0; t < T; t++) {
        // labels: column t above the grid, row t to its left
        draw_label(c, font, left + t * cell + cell / 2, top - 8 - 2 * TEXT_HEIGHT, labels[t], cell - 2);
        draw_label(c, font, left - 10 - label_w / 2, top + t * cell + (cell - 2 * TEXT_HEIGHT) / 2, labels[t],
                   label_w);
        for (int j = 0; j < T; j++) {
            // each cell one pixel smaller than its pitch: white lines between cells
            int x = left + j * cell, y = top + t * cell, size = cell - 1;
            if (j > t) {
                hatch(c, x, y, size);
                continue;
            }
            float w = weights[(size_t)t * T + j];
            canvas_fill_rect(c, x, y, size, size, weight_color(w));
            if (cell >= 32) {  // room for the number: ".42", or "1.0"
                char num[8];
                if (w >= 0.995f) snprintf(num, sizeof num, "1.0");
                else snprintf(num, sizeof num, ".%02d", (int)lrintf(w * 100.0f));
                Rgb ink = w > 0.45f ? (Rgb){255, 255, 255} : INK;
                canvas_text(c, x + (size - canvas_text_width(num, 1)) / 2, y + (size - TEXT_HEIGHT) / 2, num, 1, ink);
            }
        }
    }
}

// draw_colour_bar: white (0) to dark blue (1), 1 at the top, "height"
// pixels from (x, top), its ticks labelled on its right.
static void draw_colour_bar(Canvas *c, int x, int top, int height) {
    for (int y = 0; y < height; y++)
        canvas_fill_rect(c, x, top + y, 16, 1, weight_color(1.0f - (float)y / (float)(height - 1)));
    const char *ticks[3] = {"1", "0.5", "0"};
    for (int i = 0; i < 3; i++) {
        int y = top + i * (height - 1) / 2;  // each label centred on its value's height
        canvas_text(c, x + 16 + 8, y - TEXT_HEIGHT, ticks[i], 2, INK);
    }
}

// draw_header: the picture's title and the two lines that say how to read it.
static void draw_header(Canvas *c, const char *title) {
    canvas_fill_rect(c, 0, 0, c->width, c->height, (Rgb){255, 255, 255});
    canvas_text(c, 12, 10, title, 2, INK);
    canvas_text(c, 12, 10 + 2 * TEXT_HEIGHT + 8, SUBTITLE_1, 1, INK);
    canvas_text(c, 12, 10 + 2 * TEXT_HEIGHT + 8 + TEXT_HEIGHT + 5, SUBTITLE_2, 1, INK);
}

void attention_map_draw(Canvas *c, const Font *font, const float *weights, int T, const char *const *labels,
                        const char *title) {
    Layout l = layout_for(T, widest_label(labels, T));
    draw_header(c, title);
    draw_cells(c, font, l.left, l.top, l.cell, l.label_w, weights, T, labels);
    draw_colour_bar(c, l.bar_x, l.top, l.bar_h);
}

// ---------------------------------------------------------------------------
// Every head of a block in one picture

// Where everything of the grid goes: the header (title and subtitles) on
// top, then the heads in "rows" rows of "cols" panels, left to right, each
// panel a head's title ("head 2"), its column labels, its row labels and
// its cells, at the single heatmap's cell size; one colour bar on the right
// of the first row.
typedef struct {
    Layout head;        // the single heatmap's layout: cell size and label width
    int cols, rows;
    int panel_w, panel_h;
    int header_h;       // from the top to the first row of panels
    int grid_left, grid_top;  // in a panel, where its cells start
    int bar_x;
    int width, height;
} GridLayout;

static GridLayout grid_layout_for(int T, int label_chars, int n_head) {
    GridLayout g;
    g.head = layout_for(T, label_chars);
    g.cols = (int)ceil(sqrt((double)n_head));
    g.rows = (n_head + g.cols - 1) / g.cols;
    const int grid = T * g.head.cell;
    g.grid_left = g.head.label_w + 10;
    g.grid_top = 2 * TEXT_HEIGHT + 8 + 2 * TEXT_HEIGHT + 8;  // the head's title, then its column labels
    g.panel_w = g.grid_left + grid + 24;
    g.panel_h = g.grid_top + grid + 20;
    g.header_h = 10 + 2 * TEXT_HEIGHT + 8 + 2 * (TEXT_HEIGHT + 5) + 14;
    g.bar_x = 12 + g.cols * g.panel_w;
    g.width = g.bar_x + 16 + 8 + canvas_text_width("0.5", 2) + 12;
    int text_w = 12 + canvas_text_width(SUBTITLE_1, 1) + 12;
    if (g.width < text_w) g.width = text_w;
    int title_w = 12 + canvas_text_width(WIDE_TITLE, 2) + 12;
    if (g.width < title_w) g.width = title_w;
    g.height = g.header_h + g.rows * g.panel_h;
    int bar_bottom = g.header_h + g.grid_top + g.head.bar_h + 16;
    if (g.height < bar_bottom) g.height = bar_bottom;
    return g;
}

void attention_grid_size(int T, int label_chars, int n_head, int *width, int *height) {
    GridLayout g = grid_layout_for(T, label_chars, n_head);
    *width = g.width;
    *height = g.height;
}

void attention_grid_draw(Canvas *c, const Font *font, const float *weights, int T, int n_head,
                         const char *const *labels, const char *title) {
    GridLayout g = grid_layout_for(T, widest_label(labels, T), n_head);
    draw_header(c, title);
    for (int h = 0; h < n_head; h++) {
        int x = 12 + (h % g.cols) * g.panel_w, y = g.header_h + (h / g.cols) * g.panel_h;
        char head_title[32];
        snprintf(head_title, sizeof head_title, "head %d", h + 1);
        canvas_text(c, x, y, head_title, 2, INK);
        draw_cells(c, font, x + g.grid_left, y + g.grid_top, g.head.cell, g.head.label_w, weights + (size_t)h * T * T,
                   T, labels);
    }
    draw_colour_bar(c, g.bar_x, g.header_h + g.grid_top, g.head.bar_h);
}

// ---------------------------------------------------------------------------
// The command

// One head's weights under "title": a header of the tokens read, then one
// row per token reading. A column is 7 characters wide, so a column label
// shows at most 6; row labels are padded to the widest.
static void print_head(const float *weights, int T, const char *const *labels, const char *title) {
    int row_w = widest_label(labels, T);
    printf("%s: row = the token reading, column = the token it reads; rows sum to 1\n%*s", title, row_w, "");
    for (int j = 0; j < T; j++) {
        int n = utf8_chars(labels[j]), shown = n < 6 ? n : 6;
        size_t bytes = utf8_prefix(labels[j], strlen(labels[j]), (size_t)shown);
        printf("%*s%.*s", 7 - shown, "", (int)bytes, labels[j]);
    }
    printf("\n");
    for (int t = 0; t < T; t++) {
        printf("%s%*s", labels[t], row_w - utf8_chars(labels[t]), "");
        for (int j = 0; j < T; j++) printf(" %6.3f", (double)weights[(size_t)t * T + j]);
        printf("\n");
    }
    printf("\n");
}

// One head of one layer (both 0-based): its title, and the file of its
// heatmap in "out_dir" (see attention_map.h for the names).
static void head_names(const Model *m, int layer, int head, const char *out_dir, char *title, size_t title_cap,
                       char *path, size_t path_cap) {
    const int NH = m->config.n_head;
    if (m->config.arch == ARCH_CARD) {
        snprintf(title, title_cap, "head %d of %d", head + 1, NH);
        snprintf(path, path_cap, "%s/attention_head%d.png", out_dir, head + 1);
    } else {
        snprintf(title, title_cap, "layer %d of %d, head %d of %d", layer + 1, m->n_layer, head + 1, NH);
        snprintf(path, path_cap, "%s/attention_layer%d_head%d.png", out_dir, layer + 1, head + 1);
    }
}

// The same for the picture of every head of a layer.
static void layer_names(const Model *m, int layer, const char *out_dir, char *title, size_t title_cap, char *path,
                        size_t path_cap) {
    const int NH = m->config.n_head;
    if (m->config.arch == ARCH_CARD) {
        snprintf(title, title_cap, "all %d heads", NH);
        snprintf(path, path_cap, "%s/attention.png", out_dir);
    } else {
        snprintf(title, title_cap, "layer %d of %d, all %d heads", layer + 1, m->n_layer, NH);
        snprintf(path, path_cap, "%s/attention_layer%d.png", out_dir, layer + 1);
    }
}

// write_png: "c" to "path", and a line on stderr saying so; a failed write
// is an error naming the file (exit 1).
static void write_png(Canvas *c, const char *path) {
    Error err;
    if (!canvas_write_png(c, path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    fprintf(stderr, "wrote %s (%d x %d)\n", path, c->width, c->height);
}


int cmd_attention(int argc, char **argv) {
    const char *model_path = NULL;  // checkpoint (required)
    const char *prompt = NULL;      // text whose attention to show (required)
    const char *out_dir = NULL;     // default: the checkpoint's directory
    int layer = 0;                  // 1-based; 0 = every layer
    bool each_head = false;         // one picture per head, instead of one per layer
    int threads = 0;                // 0 = OpenMP's default
    Flag flags[] = {
        model_flag(&model_path, NULL),
        {"--prompt", FLAG_STRING, &prompt, "TEXT", "text to look at (required); if longer than the model's block size, its last block-size tokens", 0, 0, false, NULL, NULL},
        {"--layer", FLAG_INT, &layer, "L", "show only layer L (1 = the first block); 0 = every layer", 0, 1 << 16, false, NULL, NULL},
        {"--out", FLAG_STRING, &out_dir, "DIR", "directory for the PNGs, created if missing: attention_layer{L}.png for gpt, attention.png for card (default: the checkpoint's directory)", 0, 0, false, NULL, NULL},
        {"--each-head", FLAG_SWITCH, &each_head, NULL, "one PNG per head instead, attention_layer{L}_head{H}.png (card: attention_head{H}.png)", 0, 0, false, NULL, NULL},
        threads_flag(&threads, NULL),
    };
    Command cmd = {"attention", NULL,
                   "Print each head's attention weights for a prompt (row t: how position t spreads its attention "
                   "over positions 0..t), layer by layer, and draw each layer's heads as heatmaps in one PNG (or one "
                   "PNG per head).",
                   "tinygpt attention --model runs/default/model.safetensors --prompt \"Call me Ishmael.\"", flags,
                   (int)(sizeof flags / sizeof flags[0])};
    parse_flags(&cmd, argc, argv);
    char run_model[4200];  // a run directory's model.safetensors
    model_path = required_model_path(&cmd, model_path, run_model, sizeof run_model);
    if (!prompt || !prompt[0]) usage_error(&cmd, "missing --prompt TEXT (at least one character)");
    if (threads > 0) omp_set_num_threads(threads);
    char dir[4096];
    if (!out_dir) {
        path_dir(model_path, dir, sizeof dir);  // a longer path cannot be loaded below
        out_dir = dir;
    }
    Model model;
    Tokenizer tok;
    Error err;
    if (!model_load(model_path, &model, &tok, 1, false, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    if (layer > model.n_layer) {
        int n_layer = model.n_layer;
        tokenizer_free(&tok);
        model_free(&model);
        usage_error(&cmd, "--layer %d is out of range: '%s' has %d layer%s (give 1..%d, or 0 for all)", layer,
                    model_path, n_layer, n_layer == 1 ? "" : "s", n_layer);
    }
    int *ids;
    size_t n;
    if (!tokenizer_encode(&tok, prompt, strlen(prompt), &ids, &n, "--prompt", &err)) {
        tokenizer_free(&tok);
        model_free(&model);
        usage_error(&cmd, "%s", err.msg);
    }
    make_dir(out_dir);  // as train does; now, not after the first head has been printed
    const int block = model.config.block_size, NH = model.config.n_head;
    int T = (int)n, first = 0;
    if (n > (size_t)block) {
        first = (int)n - block;
        T = block;
        fprintf(stderr, "note: the prompt has %zu tokens, more than the model's block size %d; showing its last %d\n",
                n, block, block);
    }
    // Each position's label: its token's piece (a character, or a bpe piece).
    char (*label_text)[ATTENTION_LABEL_BYTES] = xmalloc((size_t)T * sizeof *label_text);
    const char **labels = xmalloc((size_t)T * sizeof *labels);
    for (int t = 0; t < T; t++) {
        size_t len;
        const char *piece = tokenizer_piece(&tok, ids[first + t], &len);
        attention_label(piece, len, label_text[t], sizeof label_text[t]);
        labels[t] = label_text[t];
    }

    model_forward(&model, ids + first, NULL, 1, T, false, 0);
    // One canvas for every picture: a head's, or a layer's grid of heads.
    int width, height;
    if (each_head) attention_map_size(T, widest_label(labels, T), &width, &height);
    else attention_grid_size(T, widest_label(labels, T), NH, &width, &height);
    Canvas canvas;
    canvas_init(&canvas, width, height);
    // The labels' font: $TINYGPT_FONT, or DejaVu Sans Mono. Without it the
    // pictures still come, with the bitmap font, and a note says what is lost.
    const char *font_path = getenv("TINYGPT_FONT");
    if (!font_path || !font_path[0]) font_path = FONT_DEFAULT_PATH;
    Font *font = font_load(font_path, &err);
    if (!font)
        fprintf(stderr, "note: no label font (%s); labels outside ASCII are drawn as '?' (install fonts-dejavu-core)\n",
                err.msg);
    const int first_layer = layer > 0 ? layer - 1 : 0, end_layer = layer > 0 ? layer : model.n_layer;
    for (int l = first_layer; l < end_layer; l++) {
        const float *layer_weights = model.acts.blocks[l].attn_weights;  // [B=1,NH,T,T]
        char title[64], path[4200];
        for (int h = 0; h < NH; h++) {
            const float *weights = layer_weights + (size_t)h * T * T;  // head h's [T,T]
            head_names(&model, l, h, out_dir, title, sizeof title, path, sizeof path);
            print_head(weights, T, labels, title);
            stdout_flush_or_die("the attention weights");
            if (each_head) {
                attention_map_draw(&canvas, font, weights, T, labels, title);
                write_png(&canvas, path);
            }
        }
        if (!each_head) {
            layer_names(&model, l, out_dir, title, sizeof title, path, sizeof path);
            attention_grid_draw(&canvas, font, layer_weights, T, NH, labels, title);
            write_png(&canvas, path);
        }
    }

    font_free(font);
    canvas_free(&canvas);
    free(labels);
    free(label_text);
    free(ids);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}
