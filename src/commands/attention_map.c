// attention_map.c: the attention weights of a prompt, printed and drawn
// (see attention_map.h).
#include "attention_map.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "checkpoint.h"
#include "model.h"
#include "tokenizer.h"

static const Rgb INK = {40, 40, 40}, SOFT_INK = {150, 150, 150};
static const char SUBTITLE_1[] = "row: the character reading; column: the character it reads";
static const char SUBTITLE_2[] = "each row sums to 1; hatched: the future, masked";
static const char WIDE_TITLE[] = "layer 99 of 99, head 99 of 99";  // the picture is at least this wide

// Where everything goes, in pixels, for a T-character prompt.
typedef struct {
    int cell;           // side of one weight's square
    int left, top;      // the grid's top-left corner
    int bar_x, bar_h;   // the colour bar: left edge and height
    int width, height;  // the picture
} Layout;

static Layout layout_for(int T) {
    Layout l;
    l.cell = 640 / T;
    if (l.cell < HEATMAP_CELL_MIN) l.cell = HEATMAP_CELL_MIN;
    if (l.cell > HEATMAP_CELL_MAX) l.cell = HEATMAP_CELL_MAX;
    const int grid = T * l.cell;
    l.left = 12 + 2 * 6 + 10;  // margin, one label character at scale 2, gap
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

void attention_map_size(int T, int *width, int *height) {
    Layout l = layout_for(T);
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

// A character as a label shows it, on the terminal and in the pictures:
// itself, with a visible sign for the invisible ones.
static const char *label_text(uint32_t cp, char buf[8]) {
    if (cp == ' ') return "␣";
    if (cp == '\n') return "↵";
    if (cp == '\t') return "→";
    if (cp < ' ' || cp == 127) return "?";
    buf[utf8_encode(cp, buf)] = '\0';
    return buf;
}

// One character's label, centred on cx, its top at "top", at text scale 2.
// With the font, any character is itself (label_text; the signs of the
// invisible ones in grey). Without it, the bitmap font is ASCII: a space
// and a newline get a drawn sign, and anything else outside printable
// ASCII is a grey '?'.
static void draw_label(Canvas *c, const Font *font, int cx, int top, uint32_t cp) {
    if (font) {
        char buf[8];
        const char *text = label_text(cp, buf);
        size_t len = strlen(text);
        bool sign = text != buf;  // a sign standing for the character, not the character
        canvas_text_utf8(c, font, cx - canvas_text_utf8_width(font, text, len, 2) / 2, top, text, len, 2,
                         sign ? SOFT_INK : INK);
    } else if (cp > ' ' && cp < 127) {
        char s[2] = {(char)cp, '\0'};
        canvas_text(c, cx - canvas_text_width(s, 2) / 2, top, s, 2, INK);
    } else if (cp == ' ') {  // an open box, like the "␣" sign
        canvas_fill_rect(c, cx - 5, top + 12, 10, 2, SOFT_INK);
        canvas_fill_rect(c, cx - 5, top + 8, 2, 6, SOFT_INK);
        canvas_fill_rect(c, cx + 3, top + 8, 2, 6, SOFT_INK);
    } else if (cp == '\n') {  // a return arrow, "↵"
        float x0 = (float)cx - 5, x1 = (float)cx + 4, y0 = (float)top + 1, y1 = (float)top + 10;
        canvas_line(c, x1, y0, x1, y1, 2, SOFT_INK);
        canvas_line(c, x1, y1, x0, y1, 2, SOFT_INK);
        canvas_line(c, x0, y1, x0 + 4, y1 - 4, 2, SOFT_INK);
        canvas_line(c, x0, y1, x0 + 4, y1 + 4, 2, SOFT_INK);
    } else {
        canvas_text(c, cx - canvas_text_width("?", 2) / 2, top, "?", 2, SOFT_INK);
    }
}

void attention_map_draw(Canvas *c, const Font *font, const float *weights, int T, const uint32_t *codepoints,
                        const char *title) {
    Layout l = layout_for(T);
    canvas_fill_rect(c, 0, 0, c->width, c->height, (Rgb){255, 255, 255});
    canvas_text(c, 12, 10, title, 2, INK);
    canvas_text(c, 12, 10 + 2 * TEXT_HEIGHT + 8, SUBTITLE_1, 1, INK);
    canvas_text(c, 12, 10 + 2 * TEXT_HEIGHT + 8 + TEXT_HEIGHT + 5, SUBTITLE_2, 1, INK);

    for (int t = 0; t < T; t++) {
        // labels: column t above the grid, row t to its left
        draw_label(c, font, l.left + t * l.cell + l.cell / 2, l.top - 8 - 2 * TEXT_HEIGHT, codepoints[t]);
        draw_label(c, font, 12 + 6, l.top + t * l.cell + (l.cell - 2 * TEXT_HEIGHT) / 2, codepoints[t]);
        for (int j = 0; j < T; j++) {
            // each cell one pixel smaller than its pitch: white lines between cells
            int x = l.left + j * l.cell, y = l.top + t * l.cell, size = l.cell - 1;
            if (j > t) {
                hatch(c, x, y, size);
                continue;
            }
            float w = weights[(size_t)t * T + j];
            canvas_fill_rect(c, x, y, size, size, weight_color(w));
            if (l.cell >= 32) {  // room for the number: ".42", or "1.0"
                char num[8];
                if (w >= 0.995f) snprintf(num, sizeof num, "1.0");
                else snprintf(num, sizeof num, ".%02d", (int)lrintf(w * 100.0f));
                Rgb ink = w > 0.45f ? (Rgb){255, 255, 255} : INK;
                canvas_text(c, x + (size - canvas_text_width(num, 1)) / 2, y + (size - TEXT_HEIGHT) / 2, num, 1, ink);
            }
        }
    }
    // the colour bar, 1 at the top
    for (int y = 0; y < l.bar_h; y++)
        canvas_fill_rect(c, l.bar_x, l.top + y, 16, 1, weight_color(1.0f - (float)y / (float)(l.bar_h - 1)));
    const char *ticks[3] = {"1", "0.5", "0"};
    for (int i = 0; i < 3; i++) {
        int y = l.top + i * (l.bar_h - 1) / 2;  // each label centred on its value's height
        canvas_text(c, l.bar_x + 16 + 8, y - TEXT_HEIGHT, ticks[i], 2, INK);
    }
}

// ---------------------------------------------------------------------------
// The command

// One head's weights under "title": a header of the characters read, then
// one row per character reading. Every label is one column wide on the
// terminal.
static void print_head(const float *weights, int T, const uint32_t *codepoints, const char *title) {
    char buf[8];
    printf("%s: row = the character reading, column = the character it reads; rows sum to 1\n ", title);
    for (int j = 0; j < T; j++) printf("      %s", label_text(codepoints[j], buf));
    printf("\n");
    for (int t = 0; t < T; t++) {
        printf("%s", label_text(codepoints[t], buf));
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

int cmd_attention(int argc, char **argv) {
    const char *model_path = NULL;  // checkpoint (required)
    const char *prompt = NULL;      // text whose attention to show (required)
    const char *out_dir = NULL;     // default: the checkpoint's directory
    int layer = 0;                  // 1-based; 0 = every layer
    int threads = 0;                // 0 = OpenMP's default
    Flag flags[] = {
        {"--model", FLAG_STRING, &model_path, "FILE", "checkpoint written by 'tinygpt train' (required)", 0, 0, false, NULL},
        {"--prompt", FLAG_STRING, &prompt, "TEXT", "text to look at (required); if longer than the model's block size, its last block-size characters", 0, 0, false, NULL},
        {"--layer", FLAG_INT, &layer, "L", "show only layer L (1 = the first block); 0 = every layer", 0, 1 << 16, false, NULL},
        {"--out", FLAG_STRING, &out_dir, "DIR", "directory for the PNGs, created if missing: attention_layer{L}_head{H}.png for gpt, attention_head{H}.png for card (default: the checkpoint's directory)", 0, 0, false, NULL},
        {"--threads", FLAG_INT, &threads, "N", "OpenMP threads, 0 = default", 0, 1024, false, NULL},
    };
    Command cmd = {"attention", NULL,
                   "Print each head's attention weights for a prompt (row t: how position t spreads its attention "
                   "over positions 0..t), layer by layer, and draw one heatmap PNG per layer and head.",
                   "tinygpt attention --model runs/default/model.safetensors --prompt \"Call me Ishmael.\"", flags,
                   (int)(sizeof flags / sizeof flags[0])};
    parse_flags(&cmd, argc, argv);
    if (!model_path) usage_error(&cmd, "missing --model FILE");
    if (!prompt || !prompt[0]) usage_error(&cmd, "missing --prompt TEXT (at least one character)");
    if (threads > 0) omp_set_num_threads(threads);
    char dir[4096];
    if (!out_dir) {
        const char *slash = strrchr(model_path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - model_path) : 1, slash ? model_path : ".");
        out_dir = dir;
    }
    Model model;
    Tokenizer tok;
    Error err;
    if (!checkpoint_load(model_path, &model, &tok, 1, false, NULL, &err)) die(EXIT_RUNTIME, "%s", err.msg);
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
        fprintf(stderr, "note: the prompt has %zu characters, more than the model's block size %d; showing its last %d\n",
                n, block, block);
    }
    uint32_t *codepoints = xmalloc((size_t)T * sizeof *codepoints);
    for (int t = 0; t < T; t++) codepoints[t] = tok.codepoints[ids[first + t]];

    model_forward(&model, ids + first, NULL, 1, T, false, 0);
    int width, height;
    attention_map_size(T, &width, &height);
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
    for (int l = first_layer; l < end_layer; l++)
        for (int h = 0; h < NH; h++) {
            // [B=1,NH,T,T]: head h's [T,T]
            const float *weights = model.acts.blocks[l].attn_weights + (size_t)h * T * T;
            char title[64], path[4200];
            head_names(&model, l, h, out_dir, title, sizeof title, path, sizeof path);
            print_head(weights, T, codepoints, title);
            attention_map_draw(&canvas, font, weights, T, codepoints, title);
            if (!canvas_write_png(&canvas, path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
            fprintf(stderr, "wrote %s (%d x %d)\n", path, width, height);
        }

    font_free(font);
    canvas_free(&canvas);
    free(codepoints);
    free(ids);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}
