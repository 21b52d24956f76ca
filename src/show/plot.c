// plot.c: the loss history, the loss plot and the comparison of several
// runs (see plot.h).
#include "plot.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const PLOT_X_NAMES[] = {"step", "time", NULL};
const char *const PLOT_UNIT_NAMES[] = {"nats", "bpb", NULL};

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
    series_init(&h->val_bpb);
    h->x = PLOT_X_STEP;
    h->has_bpb = false;
    h->bpb_per_nat = 0.0;
}

void loss_history_free(LossHistory *h) {
    free(h->val_bpb.points);
    free(h->val.points);
    free(h->train.points);
    h->train.points = h->val.points = h->val_bpb.points = NULL;
}

// A loss that is not finite (a run that diverged) cannot be drawn; it is
// left out rather than poisoning the mean of its point.
static void history_add(LossHistory *h, double x, float train_loss, float val_loss) {
    if (isfinite(train_loss)) series_add(&h->train, x, train_loss);
    if (isfinite(val_loss)) series_add(&h->val, x, val_loss);
}

void loss_history_add(LossHistory *h, long step, float train_loss, float val_loss) {
    assert(h->x == PLOT_X_STEP && "loss_history_add records steps");
    history_add(h, (double)step, train_loss, val_loss);
}

// ---------------------------------------------------------------------------
// Reading a log.csv
//
// Columns are found by the names in the header, not by position, so a log
// that gains a column (a grad_norm, say) still reads. Only these five are
// looked at; ms only when x is the training time, val_bpb when the log has
// one (logs written before it existed do not).

enum { COL_STEP, COL_TRAIN, COL_VAL, COL_MS, COL_BPB, N_COLUMNS };
static const char *const COLUMN_NAMES[N_COLUMNS] = {"step", "train_loss", "val_loss", "ms", "val_bpb"};

// Where one field of a comma-separated line is: its start and length.
typedef struct {
    const char *start;  // NULL: the line has no such field
    size_t len;
} Field;

// next_line: the line at "*rest", NUL-terminated in place without its line
// end ("\n", or "\r\n" in a log saved on Windows); "*rest" moves on to the
// line after it. NULL once the text is used up.
static char *next_line(char **rest) {
    char *line = *rest;
    if (!line || *line == '\0') return NULL;
    char *newline = strchr(line, '\n');
    if (newline) *newline = '\0';
    *rest = newline ? newline + 1 : NULL;
    size_t n = strlen(line);
    if (n > 0 && line[n - 1] == '\r') line[n - 1] = '\0';
    return line;
}

// next_field: the field at "*p" of a comma-separated line; "*p" moves past
// its comma, or to NULL after the line's last field.
static Field next_field(const char **p) {
    const char *comma = strchr(*p, ',');
    Field f = {*p, comma ? (size_t)(comma - *p) : strlen(*p)};
    *p = comma ? comma + 1 : NULL;
    return f;
}

// find_columns: each column's position in the "header" line (the first
// field of that name), -1 when it has none.
static void find_columns(const char *header, int column[N_COLUMNS]) {
    for (int k = 0; k < N_COLUMNS; k++) column[k] = -1;
    for (int i = 0; header; i++) {
        Field f = next_field(&header);
        for (int k = 0; k < N_COLUMNS; k++)
            if (column[k] < 0 && strlen(COLUMN_NAMES[k]) == f.len && strncmp(f.start, COLUMN_NAMES[k], f.len) == 0)
                column[k] = i;
    }
}

// split_fields: for each column k, the field of "line" at position
// column[k] (none when column[k] is -1 or the line is shorter).
static void split_fields(const char *line, const int column[N_COLUMNS], Field field[N_COLUMNS]) {
    for (int k = 0; k < N_COLUMNS; k++) field[k] = (Field){NULL, 0};
    for (int i = 0; line; i++) {
        Field f = next_field(&line);
        for (int k = 0; k < N_COLUMNS; k++)
            if (column[k] == i) field[k] = f;
    }
}

// read_number: field "f" as a number in "*x": true if it is exactly one
// number; an empty field is NAN when "may_be_empty" (a step that was not
// evaluated has no val_loss).
static bool read_number(Field f, bool may_be_empty, double *x) {
    if (!f.start) return false;
    if (f.len == 0) {
        *x = NAN;
        return may_be_empty;
    }
    char *end;
    errno = 0;
    *x = strtod(f.start, &end);
    return end == f.start + f.len && errno != ERANGE;
}

// read_row: one data row into "step", "train", "val" (NAN when not
// evaluated), "ms" (when "want_ms") and "bpb" (NAN when not evaluated or
// the log has no val_bpb column). NULL if it is a good row, or else the name
// of the first column that does not hold what it should.
static const char *read_row(const char *line, const int column[N_COLUMNS], bool want_ms, long *step, double *train,
                            double *val, double *ms, double *bpb) {
    Field f[N_COLUMNS];
    split_fields(line, column, f);
    char *end;
    errno = 0;
    if (!f[COL_STEP].start) return "step";
    *step = strtol(f[COL_STEP].start, &end, 10);
    if (f[COL_STEP].len == 0 || end != f[COL_STEP].start + f[COL_STEP].len || errno == ERANGE) return "step";
    if (!read_number(f[COL_TRAIN], false, train)) return "train_loss";
    if (!read_number(f[COL_VAL], true, val)) return "val_loss";
    if (want_ms && (!read_number(f[COL_MS], false, ms) || !isfinite(*ms) || *ms < 0)) return "ms";
    *bpb = NAN;
    if (column[COL_BPB] >= 0 && !read_number(f[COL_BPB], true, bpb)) return "val_bpb";
    return NULL;
}

bool loss_history_read_csv(LossHistory *h, const char *path, Error *err) {
    char *text;
    size_t len;
    if (!read_file(path, &text, &len, err)) return false;
    bool ok = true, want_ms = h->x == PLOT_X_TIME;

    // 1. The header: where each column is.
    char *rest = text, *header = next_line(&rest);
    int column[N_COLUMNS];
    find_columns(header ? header : "", column);
    if (column[COL_STEP] < 0 || column[COL_TRAIN] < 0 || column[COL_VAL] < 0)
        ok = error_set(err, "'%s' is not a tinygpt log: its first line should name the columns step, train_loss "
                            "and val_loss; give the log.csv that 'tinygpt train' wrote", path);
    else if (want_ms && column[COL_MS] < 0)
        ok = error_set(err, "'%s' has no ms column, so its training time is unknown; plot it against the step "
                            "(--x step)", path);

    // 2. The rows, each a point at x = its step, or at the training time
    // so far: the ms of every row up to and including this one. The rows
    // with both validation numbers give the run's bits per byte per nat
    // (one constant: train computes val_bpb as val_loss times it).
    h->has_bpb = column[COL_BPB] >= 0;
    size_t line_no = 1, rows = 0;
    double ms_so_far = 0.0, bpb_sum = 0.0, val_sum = 0.0;
    for (char *line; ok && (line = next_line(&rest)); rows++) {
        line_no++;
        long step;
        double train, val, ms = 0.0, bpb;
        const char *bad = read_row(line, column, want_ms, &step, &train, &val, &ms, &bpb);
        if (bad) {
            ok = error_set(err, "'%s' line %zu has no valid %s: '%.40s'; give the log.csv that 'tinygpt train' "
                                "wrote", path, line_no, bad, line);
            break;
        }
        ms_so_far += ms;
        double x = want_ms ? ms_so_far / 1e3 : (double)step;
        history_add(h, x, (float)train, (float)val);
        if (isfinite(bpb)) series_add(&h->val_bpb, x, bpb);
        if (isfinite(bpb) && isfinite(val) && val > 0) bpb_sum += bpb, val_sum += val;
    }
    if (val_sum > 0) h->bpb_per_nat = bpb_sum / val_sum;
    if (ok && rows == 0)
        ok = error_set(err, "'%s' has no rows after its header; train for at least one step first", path);
    free(text);
    return ok;
}

// ---------------------------------------------------------------------------
// Drawing

// The plot area inside the picture, in pixels: room on the left for the y
// tick labels, below for the x tick labels and the x axis's name, above for
// the title and the y axes' names; on the right, for a second y axis's
// tick labels when there is one.
enum { MARGIN_LEFT = 80, MARGIN_RIGHT = 24, MARGIN_RIGHT_AXIS = 72, MARGIN_TOP = 56, MARGIN_BOTTOM = 56 };
enum { FONT = 2 };  // text scale: 14-pixel capitals

static const Rgb INK = {40, 40, 40}, GRID = {225, 225, 225}, TRAIN_COLOR = {31, 119, 180},
                 VAL_COLOR = {230, 110, 10};

// The names of the y axes, the unit of each picture.
static const char NATS_NAME[] = "loss (nats per token)", VAL_NATS_NAME[] = "validation loss (nats per token)",
                  BPB_NAME[] = "validation bits per byte";

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

// One curve of a picture: a series and how it looks.
typedef struct {
    const Series *series;
    Rgb color;
    float width;        // of its line, in pixels
    bool dots;          // a disc 3 times as wide at every point
    const char *label;  // its legend entry
} Curve;

// What one picture shows: its curves (later ones on top), what x is, the
// name (and unit) of the y axis, and a second y axis on the right when
// "right_scale" > 0: the same heights times right_scale, named "right_name".
typedef struct {
    const Curve *curves;
    int n;
    PlotX x;
    const char *y_name;
    double right_scale;
    const char *right_name;
    const char *title;
} Picture;

// choose_axes: the data range that shows every point of the curves; time
// starts from 0, where training did.
static Axes choose_axes(const Picture *p, int width, int height) {
    Axes a = {p->x == PLOT_X_TIME ? 0.0 : INFINITY, -INFINITY, INFINITY, -INFINITY, MARGIN_LEFT,
              width - (p->right_scale > 0 ? MARGIN_RIGHT_AXIS : MARGIN_RIGHT), MARGIN_TOP, height - MARGIN_BOTTOM};
    for (int i = 0; i < p->n; i++) series_range(p->curves[i].series, true, &a.x0, &a.x1);
    for (int i = 0; i < p->n; i++) series_range(p->curves[i].series, false, &a.y0, &a.y1);
    if (!(a.x0 <= a.x1)) a.x0 = 0, a.x1 = 1;  // nothing to draw yet
    if (!(a.y0 <= a.y1)) a.y0 = 0, a.y1 = 1;
    if (a.x1 - a.x0 < 1) a.x0 -= 0.5, a.x1 += 0.5;  // a single step
    double pad = a.y1 - a.y0 > 0 ? 0.05 * (a.y1 - a.y0) : 0.5;  // keep the curves off the frame
    a.y0 -= pad;
    a.y1 += pad;
    return a;
}

// Which axis draw_ticks draws: x below, y on the left (with grid lines
// across), or the second y axis on the right (ticks only).
typedef enum { AXIS_X, AXIS_LEFT, AXIS_RIGHT } AxisSide;

// Grid lines and tick labels for one axis; "scale" turns the data's y into
// the right axis's value (1 for the others).
static void draw_ticks(Canvas *c, const Axes *a, AxisSide side, double scale) {
    double lo = side == AXIS_X ? a->x0 : a->y0 * scale, hi = side == AXIS_X ? a->x1 : a->y1 * scale;
    double step = nice_step(hi - lo, side == AXIS_X ? 6 : 5);
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    for (double v = ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) {
        char label[32];
        snprintf(label, sizeof label, "%.*f", decimals, fabs(v) < 1e-12 * step ? 0.0 : v);
        int w = canvas_text_width(label, FONT);
        if (side == AXIS_X) {
            int px = (int)lrintf(to_px(a, v));
            canvas_fill_rect(c, px, a->top, 1, a->bottom - a->top, GRID);
            canvas_fill_rect(c, px, a->bottom, 1, 5, INK);
            canvas_text(c, px - w / 2, a->bottom + 9, label, FONT, INK);
        } else if (side == AXIS_LEFT) {
            int py = (int)lrintf(to_py(a, v));
            canvas_fill_rect(c, a->left, py, a->right - a->left, 1, GRID);
            canvas_fill_rect(c, a->left - 5, py, 5, 1, INK);
            canvas_text(c, a->left - 10 - w, py - TEXT_HEIGHT * FONT / 2, label, FONT, INK);
        } else {
            int py = (int)lrintf(to_py(a, v / scale));
            canvas_fill_rect(c, a->right + 1, py, 5, 1, INK);
            canvas_text(c, a->right + 10, py - TEXT_HEIGHT * FONT / 2, label, FONT, INK);
        }
    }
}

// A curve: straight segments between consecutive points; "dots" marks each
// point with a disc (a zero-length line is a disc of the line's width). A
// curve of one point has no segment, so it always gets its disc.
static void draw_series(Canvas *c, const Axes *a, const Series *s, Rgb color, float width, bool dots) {
    dots = dots || s->n == 1;
    for (size_t i = 0; i < s->n; i++) {
        float px = to_px(a, point_x(&s->points[i])), py = to_py(a, point_y(&s->points[i]));
        if (i > 0)
            canvas_line(c, to_px(a, point_x(&s->points[i - 1])), to_py(a, point_y(&s->points[i - 1])), px, py,
                        width, color);
        if (dots) canvas_line(c, px, py, px, py, 3 * width, color);
    }
}

// The legend: a boxed row per curve in the top right corner, where falling
// loss curves leave room. Its sample line is at least 2 pixels thick, so a
// thin curve's colour still reads.
static void draw_legend(Canvas *c, const Axes *a, const Curve *curves, int n) {
    int text_w = 0;
    for (int i = 0; i < n; i++)
        if (canvas_text_width(curves[i].label, FONT) > text_w) text_w = canvas_text_width(curves[i].label, FONT);
    const int row = 24, sample = 28, pad = 10;
    int box_w = pad + sample + 8 + text_w + pad, box_h = n * row + pad;
    int x = a->right - box_w - 10, y = a->top + 10;
    canvas_fill_rect(c, x, y, box_w, box_h, (Rgb){255, 255, 255});
    canvas_fill_rect(c, x, y, box_w, 1, INK);
    canvas_fill_rect(c, x, y + box_h - 1, box_w, 1, INK);
    canvas_fill_rect(c, x, y, 1, box_h, INK);
    canvas_fill_rect(c, x + box_w - 1, y, 1, box_h, INK);
    for (int i = 0; i < n; i++) {
        const Curve *cv = &curves[i];
        float mid = (float)(y + pad + i * row + TEXT_HEIGHT * FONT / 2) + 0.5f;
        canvas_line(c, (float)(x + pad), mid, (float)(x + pad + sample), mid, fmaxf(cv->width, 2.0f), cv->color);
        if (cv->dots)
            canvas_line(c, x + pad + sample / 2.0f, mid, x + pad + sample / 2.0f, mid, 3 * cv->width, cv->color);
        canvas_text(c, x + pad + sample + 8, y + pad + i * row, cv->label, FONT, INK);
    }
}

// plot_picture: the whole picture: ticks and grid, the frame, the curves
// in order (later ones on top), the legend, the title and the axes' names:
// the y axis's top left, the right axis's top right.
static void plot_picture(Canvas *c, const Picture *p) {
    canvas_fill_rect(c, 0, 0, c->width, c->height, (Rgb){255, 255, 255});
    Axes a = choose_axes(p, c->width, c->height);
    draw_ticks(c, &a, AXIS_X, 1.0);
    draw_ticks(c, &a, AXIS_LEFT, 1.0);
    if (p->right_scale > 0) draw_ticks(c, &a, AXIS_RIGHT, p->right_scale);
    // the frame
    canvas_fill_rect(c, a.left, a.top, a.right - a.left + 1, 1, INK);
    canvas_fill_rect(c, a.left, a.bottom, a.right - a.left + 1, 1, INK);
    canvas_fill_rect(c, a.left, a.top, 1, a.bottom - a.top, INK);
    canvas_fill_rect(c, a.right, a.top, 1, a.bottom - a.top, INK);
    for (int i = 0; i < p->n; i++)
        draw_series(c, &a, p->curves[i].series, p->curves[i].color, p->curves[i].width, p->curves[i].dots);
    draw_legend(c, &a, p->curves, p->n);

    const char *x_name = p->x == PLOT_X_TIME ? "training time (s)" : "step";
    const int names_y = a.top - 12 - TEXT_HEIGHT * FONT;
    canvas_text(c, (c->width - canvas_text_width(p->title, FONT)) / 2, 10, p->title, FONT, INK);
    canvas_text(c, 8, names_y, p->y_name, FONT, INK);
    if (p->right_scale > 0)
        canvas_text(c, c->width - 8 - canvas_text_width(p->right_name, FONT), names_y, p->right_name, FONT, INK);
    canvas_text(c, (a.left + a.right - canvas_text_width(x_name, FONT)) / 2, a.bottom + 32, x_name, FONT, INK);
}

// plot_history: in nats per token, the training loss thin and without
// dots, the validation loss thicker with a dot at each evaluation, and bits
// per byte on the right when the run's ratio is known; in bits per byte,
// the validation curve alone.
void plot_history(Canvas *c, const LossHistory *h, PlotUnit unit, const char *title) {
    if (unit == PLOT_BPB) {
        const Curve curve = {&h->val_bpb, VAL_COLOR, 2.5f, true,
                             h->val_bpb.n > 0 ? "validation bits per byte" : "validation (none in this log)"};
        plot_picture(c, &(Picture){&curve, 1, h->x, BPB_NAME, 0.0, NULL, title});
        return;
    }
    char train_label[64];
    if (h->train.n == 0) snprintf(train_label, sizeof train_label, "train loss (no steps yet)");
    else if (h->train.per_point == 1) snprintf(train_label, sizeof train_label, "train loss (each step)");
    else snprintf(train_label, sizeof train_label, "train loss (mean of %ld steps)", h->train.per_point);
    const Curve curves[2] = {
        {&h->train, TRAIN_COLOR, 1.5f, false, train_label},
        {&h->val, VAL_COLOR, 2.5f, true, h->val.n > 0 ? "validation loss" : "validation loss (none in this log)"},
    };
    plot_picture(c, &(Picture){curves, 2, h->x, NATS_NAME, h->bpb_per_nat, BPB_NAME, title});
}

void plot_losses(Canvas *c, const LossHistory *h, const char *source) {
    char title[160];
    snprintf(title, sizeof title, "loss: %s", source);
    plot_history(c, h, PLOT_NATS, title);
}

// Tableau's ten colours (matplotlib's default cycle) without grey and
// olive: eight hues told apart at a glance.
const Rgb plot_run_colors[PLOT_MAX_LOGS] = {
    {31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40},
    {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {23, 190, 207},
};

void plot_compare(Canvas *c, const LossHistory *runs, const char *const *labels, int n, PlotUnit unit,
                  const char *title) {
    assert(n >= 1 && n <= PLOT_MAX_LOGS);
    Curve curves[PLOT_MAX_LOGS];
    char label[PLOT_MAX_LOGS][64];
    for (int i = 0; i < n; i++) {
        assert(runs[i].x == runs[0].x && "one x axis for every run");
        assert((unit == PLOT_NATS || runs[i].has_bpb) && "bits per byte from a log that has them");
        const Series *s = unit == PLOT_BPB ? &runs[i].val_bpb : &runs[i].val;
        // A long label is cut, so the legend stays inside the picture.
        snprintf(label[i], sizeof label[i], "%.40s%s%s", labels[i], strlen(labels[i]) > 40 ? "..." : "",
                 s->n > 0 ? "" : " (no validation)");
        curves[i] = (Curve){s, plot_run_colors[i], 2.0f, true, label[i]};
    }
    plot_picture(c, &(Picture){curves, n, runs[0].x, unit == PLOT_BPB ? BPB_NAME : VAL_NATS_NAME, 0.0, NULL, title});
}
