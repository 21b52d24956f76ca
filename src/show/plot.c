// plot.c: the loss history, the loss plot, and `tinygpt plot` (see plot.h).
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

_Static_assert(SERIES_CAPACITY % 2 == 0, "merging in pairs needs an even capacity");

// ---------------------------------------------------------------------------
// The history

static void series_init(Series *s) {
    s->points = xmalloc(SERIES_CAPACITY * sizeof *s->points);
    s->n = 0;
    s->per_point = 1;
}

// Add the sample (x, y) to the last point if it still has room, or else to a
// new point; when every point is taken, first merge neighbours in pairs.
// Every full point holds per_point samples, so merging two gives a full
// point of twice that.
static void series_add(Series *s, double x, double y) {
    if (s->n > 0 && s->points[s->n - 1].count < s->per_point) {
        SeriesPoint *last = &s->points[s->n - 1];
        last->x_sum += x;
        last->y_sum += y;
        last->count++;
        return;
    }
    if (s->n == SERIES_CAPACITY) {
        for (size_t i = 0; i < s->n / 2; i++) {
            const SeriesPoint a = s->points[2 * i], b = s->points[2 * i + 1];
            s->points[i] = (SeriesPoint){a.x_sum + b.x_sum, a.y_sum + b.y_sum, a.count + b.count};
        }
        s->n /= 2;
        s->per_point *= 2;
    }
    s->points[s->n++] = (SeriesPoint){x, y, 1};
}

static double point_x(const SeriesPoint *p) { return p->x_sum / (double)p->count; }
static double point_y(const SeriesPoint *p) { return p->y_sum / (double)p->count; }

void loss_history_init(LossHistory *h) {
    series_init(&h->train);
    series_init(&h->val);
}

void loss_history_free(LossHistory *h) {
    free(h->val.points);
    free(h->train.points);
    h->train.points = h->val.points = NULL;
}

// A loss that is not finite (a run that diverged) cannot be drawn; it is
// left out rather than poisoning the mean of its point.
void loss_history_add(LossHistory *h, long step, float train_loss, float val_loss) {
    if (isfinite(train_loss)) series_add(&h->train, (double)step, train_loss);
    if (isfinite(val_loss)) series_add(&h->val, (double)step, val_loss);
}

// ---------------------------------------------------------------------------
// Reading a log.csv

// One data row: "step,train_loss,val_loss[,anything]" with val_loss empty
// when the step was not evaluated. False if the row does not look like that.
static bool parse_row(const char *line, long *step, double *train, double *val) {
    char *end;
    errno = 0;
    *step = strtol(line, &end, 10);
    if (end == line || *end != ',' || errno == ERANGE) return false;
    const char *p = end + 1;
    *train = strtod(p, &end);
    if (end == p || *end != ',') return false;
    p = end + 1;
    *val = NAN;
    if (*p == ',' || *p == '\0') return true;
    *val = strtod(p, &end);
    return end != p && (*end == ',' || *end == '\0');
}

bool loss_history_read_csv(LossHistory *h, const char *path, Error *err) {
    static const char header[] = "step,train_loss,val_loss";
    char *text;
    size_t len;
    if (!read_file(path, &text, &len, err)) return false;
    bool ok = true;
    if (strncmp(text, header, strlen(header)) != 0)
        ok = error_set(err, "'%s' is not a tinygpt log: its first line should start with '%s'; give the log.csv "
                            "that 'tinygpt train' wrote", path, header);
    size_t line_no = 1, rows = 0;
    char *line = strchr(text, '\n');
    while (ok && line && line[1] != '\0') {
        line++;
        line_no++;
        char *next = strchr(line, '\n');
        if (next) *next = '\0';
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\r') line[n - 1] = '\0';  // a log saved with Windows line ends
        long step;
        double train, val;
        if (!parse_row(line, &step, &train, &val))
            ok = error_set(err, "'%s' line %zu is not 'step,train_loss,val_loss,...': '%.40s'; give the log.csv that "
                                "'tinygpt train' wrote", path, line_no, line);
        else loss_history_add(h, step, (float)train, (float)val);
        rows++;
        line = next;
    }
    if (ok && rows == 0)
        ok = error_set(err, "'%s' has no rows after its header; train for at least one step first", path);
    free(text);
    return ok;
}

// ---------------------------------------------------------------------------
// Drawing

// The plot area inside the picture, in pixels: room on the left for the y
// tick labels, below for the x tick labels and "step", above for the title.
enum { MARGIN_LEFT = 80, MARGIN_RIGHT = 24, MARGIN_TOP = 56, MARGIN_BOTTOM = 56 };
enum { FONT = 2 };  // text scale: 14-pixel capitals

static const Rgb INK = {40, 40, 40}, GRID = {225, 225, 225}, TRAIN_COLOR = {31, 119, 180},
                 VAL_COLOR = {230, 110, 10};

typedef struct {
    double x0, x1, y0, y1;  // data range shown
    int left, right, top, bottom;  // its pixels
} Axes;

static float to_px(const Axes *a, double x) { return (float)(a->left + (x - a->x0) / (a->x1 - a->x0) * (a->right - a->left)); }
static float to_py(const Axes *a, double y) { return (float)(a->bottom - (y - a->y0) / (a->y1 - a->y0) * (a->bottom - a->top)); }

// Tick spacing for about "target" ticks over "range": 1, 2 or 5 times a
// power of ten, the spacings people read at a glance.
static double nice_step(double range, int target) {
    double raw = range / target, magnitude = pow(10.0, floor(log10(raw))), f = raw / magnitude;
    return (f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0) * magnitude;
}

// Extend [*lo, *hi] to cover every finite point of "s".
static void series_range(const Series *s, bool use_x, double *lo, double *hi) {
    for (size_t i = 0; i < s->n; i++) {
        double v = use_x ? point_x(&s->points[i]) : point_y(&s->points[i]);
        if (v < *lo) *lo = v;
        if (v > *hi) *hi = v;
    }
}

static Axes choose_axes(const LossHistory *h, int width, int height) {
    Axes a = {INFINITY, -INFINITY, INFINITY, -INFINITY, MARGIN_LEFT, width - MARGIN_RIGHT, MARGIN_TOP,
              height - MARGIN_BOTTOM};
    series_range(&h->train, true, &a.x0, &a.x1);
    series_range(&h->val, true, &a.x0, &a.x1);
    series_range(&h->train, false, &a.y0, &a.y1);
    series_range(&h->val, false, &a.y0, &a.y1);
    if (!(a.x0 <= a.x1)) a.x0 = 0, a.x1 = 1;  // nothing to draw yet
    if (!(a.y0 <= a.y1)) a.y0 = 0, a.y1 = 1;
    if (a.x1 - a.x0 < 1) a.x0 -= 0.5, a.x1 += 0.5;  // a single step
    double pad = a.y1 - a.y0 > 0 ? 0.05 * (a.y1 - a.y0) : 0.5;  // keep the curves off the frame
    a.y0 -= pad;
    a.y1 += pad;
    return a;
}

// Grid lines and tick labels for one axis.
static void draw_ticks(Canvas *c, const Axes *a, bool x_axis) {
    double lo = x_axis ? a->x0 : a->y0, hi = x_axis ? a->x1 : a->y1;
    double step = nice_step(hi - lo, x_axis ? 6 : 5);
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    for (double v = ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) {
        char label[32];
        snprintf(label, sizeof label, "%.*f", decimals, fabs(v) < 1e-12 * step ? 0.0 : v);
        int w = canvas_text_width(label, FONT);
        if (x_axis) {
            int px = (int)lrintf(to_px(a, v));
            canvas_fill_rect(c, px, a->top, 1, a->bottom - a->top, GRID);
            canvas_fill_rect(c, px, a->bottom, 1, 5, INK);
            canvas_text(c, px - w / 2, a->bottom + 9, label, FONT, INK);
        } else {
            int py = (int)lrintf(to_py(a, v));
            canvas_fill_rect(c, a->left, py, a->right - a->left, 1, GRID);
            canvas_fill_rect(c, a->left - 5, py, 5, 1, INK);
            canvas_text(c, a->left - 10 - w, py - TEXT_HEIGHT * FONT / 2, label, FONT, INK);
        }
    }
}

// A curve: straight segments between consecutive points; "dots" marks each
// point with a disc (a zero-length line is a disc of the line's width).
static void draw_series(Canvas *c, const Axes *a, const Series *s, Rgb color, float width, bool dots) {
    for (size_t i = 0; i < s->n; i++) {
        float px = to_px(a, point_x(&s->points[i])), py = to_py(a, point_y(&s->points[i]));
        if (i > 0)
            canvas_line(c, to_px(a, point_x(&s->points[i - 1])), to_py(a, point_y(&s->points[i - 1])), px, py,
                        width, color);
        if (dots) canvas_line(c, px, py, px, py, 3 * width, color);
    }
}

static void draw_legend(Canvas *c, const Axes *a, const LossHistory *h) {
    char train_label[64];
    if (h->train.per_point == 1) snprintf(train_label, sizeof train_label, "train loss (each step)");
    else snprintf(train_label, sizeof train_label, "train loss (mean of %ld steps)", h->train.per_point);
    const char *val_label = h->val.n > 0 ? "validation loss" : "validation loss (none in this log)";
    int text_w = canvas_text_width(train_label, FONT);
    if (canvas_text_width(val_label, FONT) > text_w) text_w = canvas_text_width(val_label, FONT);
    const int row = 24, sample = 28, pad = 10;
    int box_w = pad + sample + 8 + text_w + pad, box_h = 2 * row + pad;
    int x = a->right - box_w - 10, y = a->top + 10;
    canvas_fill_rect(c, x, y, box_w, box_h, (Rgb){255, 255, 255});
    canvas_fill_rect(c, x, y, box_w, 1, INK);
    canvas_fill_rect(c, x, y + box_h - 1, box_w, 1, INK);
    canvas_fill_rect(c, x, y, 1, box_h, INK);
    canvas_fill_rect(c, x + box_w - 1, y, 1, box_h, INK);
    const char *labels[2] = {train_label, val_label};
    const Rgb colors[2] = {TRAIN_COLOR, VAL_COLOR};
    for (int i = 0; i < 2; i++) {
        float mid = (float)(y + pad + i * row + TEXT_HEIGHT * FONT / 2) + 0.5f;
        canvas_line(c, (float)(x + pad), mid, (float)(x + pad + sample), mid, i == 0 ? 2.0f : 2.5f, colors[i]);
        if (i == 1) canvas_line(c, x + pad + sample / 2.0f, mid, x + pad + sample / 2.0f, mid, 7.5f, colors[i]);
        canvas_text(c, x + pad + sample + 8, y + pad + i * row, labels[i], FONT, INK);
    }
}

void plot_losses(Canvas *c, const LossHistory *h, const char *source) {
    canvas_fill_rect(c, 0, 0, c->width, c->height, (Rgb){255, 255, 255});
    Axes a = choose_axes(h, c->width, c->height);
    draw_ticks(c, &a, true);
    draw_ticks(c, &a, false);
    // the frame
    canvas_fill_rect(c, a.left, a.top, a.right - a.left + 1, 1, INK);
    canvas_fill_rect(c, a.left, a.bottom, a.right - a.left + 1, 1, INK);
    canvas_fill_rect(c, a.left, a.top, 1, a.bottom - a.top, INK);
    canvas_fill_rect(c, a.right, a.top, 1, a.bottom - a.top, INK);
    draw_series(c, &a, &h->train, TRAIN_COLOR, 1.5f, false);
    draw_series(c, &a, &h->val, VAL_COLOR, 2.5f, true);
    draw_legend(c, &a, h);

    char title[160];
    snprintf(title, sizeof title, "loss: %s", source);
    canvas_text(c, (c->width - canvas_text_width(title, FONT)) / 2, 10, title, FONT, INK);
    canvas_text(c, 8, a.top - 12 - TEXT_HEIGHT * FONT, "loss (nats per character)", FONT, INK);
    canvas_text(c, (a.left + a.right - canvas_text_width("step", FONT)) / 2, a.bottom + 32, "step", FONT, INK);
}

// ---------------------------------------------------------------------------
// The command

int cmd_plot(int argc, char **argv) {
    const char *out_path = NULL;  // default: loss.png in the log's directory
    Flag flags[] = {
        {"--out", FLAG_STRING, &out_path, "PNG", "where to write the picture (default: loss.png next to LOG.csv)", 0, 0, false, NULL},
    };
    Command cmd = {"plot", "LOG.csv",
                   "Draw the train and validation loss curves of a log.csv written by 'tinygpt train' as a PNG "
                   "(the loss.png that train itself refreshes at every evaluation).",
                   "tinygpt plot runs/default/log.csv --out loss.png", flags, (int)(sizeof flags / sizeof flags[0])};
    const char *log_path = parse_flags(&cmd, argc, argv);
    char default_out[4096];
    if (!out_path) {
        const char *slash = strrchr(log_path, '/');
        int dir_len = slash ? (int)(slash - log_path) + 1 : 0;
        snprintf(default_out, sizeof default_out, "%.*sloss.png", dir_len, log_path);
        out_path = default_out;
    }

    LossHistory h;
    loss_history_init(&h);
    Error err;
    if (!loss_history_read_csv(&h, log_path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    Canvas canvas;
    canvas_init(&canvas, PLOT_WIDTH, PLOT_HEIGHT);
    plot_losses(&canvas, &h, log_path);
    if (!canvas_write_png(&canvas, out_path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    fprintf(stderr, "wrote %s (%d x %d): %zu train and %zu validation points\n", out_path, PLOT_WIDTH, PLOT_HEIGHT,
            h.train.n, h.val.n);
    canvas_free(&canvas);
    loss_history_free(&h);
    return 0;
}
