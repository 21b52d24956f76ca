// canvas.h: an RGB picture in memory that can draw rectangles, lines and
// text, and save itself as a PNG.
//
// Reading order: file 30 with plot.h and watch.h, before train.c, which
// draws through them (docs/reading-order.md); glue code, skip it on
// a first read. The
// loss plot (plot.h) and the attention heatmaps (attention_map.h) draw on it.
//
// It leaves out: everything a real graphics library has. Pixels are bytes,
// [height, width, 3] row-major, top row first; x grows right, y grows down.
// Text uses stb_easy_font (Debian's libstb-dev), a tiny built-in bitmap
// font of ASCII 32..126, scaled up by whole pixels; any other byte is drawn
// as '?'. Text that may hold any Unicode character (the heatmaps' labels)
// goes through a TrueType font instead, read from a file (DejaVu Sans Mono,
// Debian's fonts-dejavu-core) and rasterised by stb_truetype; without the
// file it falls back to the bitmap font. PNG encoding is stb_image_write's.
#ifndef TINYGPT_CANVAS_H
#define TINYGPT_CANVAS_H

#include <stdbool.h>

#include "common.h"

typedef struct {
    unsigned char r, g, b;
} Rgb;

typedef struct {
    int width, height;
    unsigned char *pixels;  // [height, width, 3]
} Canvas;

// canvas_init: a width x height canvas (white); canvas_free releases it.
void canvas_init(Canvas *c, int width, int height);
void canvas_free(Canvas *c);

// canvas_fill_rect: fill [x, x+w) x [y, y+h), clipped to the canvas.
void canvas_fill_rect(Canvas *c, int x, int y, int w, int h, Rgb color);

// canvas_line: an anti-aliased line "width" pixels thick from (x0,y0) to
// (x1,y1) (pixel centres are at +0.5), blended onto what is there.
void canvas_line(Canvas *c, float x0, float y0, float x1, float y1, float width, Rgb color);

// canvas_text: draw "text" (one line) with its top-left corner at (x, y),
// each font pixel a "scale" x "scale" square. canvas_text_width is the
// width it advances (the ink can end one font pixel short of it, after a
// narrow last glyph); TEXT_HEIGHT * scale is the height of a capital letter.
enum { TEXT_HEIGHT = 7 };
void canvas_text(Canvas *c, int x, int y, const char *text, int scale, Rgb color);
int canvas_text_width(const char *text, int scale);

// A TrueType font, loaded once from its file and passed to each call that
// draws with it (NULL everywhere means the bitmap font).
typedef struct Font Font;
#define FONT_DEFAULT_PATH "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"

// font_load: the font in the TrueType file "path", or NULL with "err" naming
// the file when it cannot be read or is not a font. font_free releases it
// (NULL is fine).
Font *font_load(const char *path, Error *err);
void font_free(Font *font);

// canvas_text_utf8: draw "len" bytes of UTF-8 text "utf8" (one line; it
// need not end in '\0') with "font", anti-aliased, its capitals
// TEXT_HEIGHT * "scale" pixels tall with their top at "y", as canvas_text's.
// A character the font lacks is its missing-glyph box; an invalid byte is
// U+FFFD. With "font" NULL: canvas_text, each character outside printable
// ASCII drawn as one '?'. canvas_text_utf8_width: the width it advances.
void canvas_text_utf8(Canvas *c, const Font *font, int x, int y, const char *utf8, size_t len, int scale,
                      Rgb color);
int canvas_text_utf8_width(const Font *font, const char *utf8, size_t len, int scale);

// canvas_write_png: save as an 8-bit RGB PNG at "path". Writes "path".tmp
// and renames it over "path" (common.h's atomic writer, without fsync), so
// a viewer that reloads the picture while training redraws it never sees
// half a file. False (with "err" naming the file) on an I/O error. It
// encodes the picture in its own pixels (no copy of it: the bytes a PNG
// compresses are its rows, each behind a filter byte) and leaves them as
// they were.
bool canvas_write_png(Canvas *c, const char *path, Error *err);

#endif
