// canvas.c: pixels, rectangles, anti-aliased lines, bitmap and TrueType
// text, and PNG output (see canvas.h).
//
// This is the one file that compiles stb_image_write's and stb_truetype's
// implementations. Their allocations go through our checked helpers, and
// stb_image_write's own file functions are left out (STBI_WRITE_NO_STDIO):
// we open files ourselves, so errors name them the way every other error in
// tinygpt does.
#include "canvas.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#define STBIW_MALLOC(size) xmalloc(size)
#define STBIW_REALLOC(ptr, size) xrealloc(ptr, size)
#define STBIW_FREE(ptr) free(ptr)
#include <stb_image_write.h>

// stb_easy_font.h defines every function static, so the ones we do not call
// would warn, and one initialiser lacks inner braces; both are harmless.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-braces"
#include <stb_easy_font.h>
#pragma GCC diagnostic pop

#define STB_TRUETYPE_IMPLEMENTATION
#define STBTT_malloc(size, context) ((void)(context), xmalloc(size))
#define STBTT_free(ptr, context) ((void)(context), free(ptr))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb_truetype.h>
#pragma GCC diagnostic pop

#include "utf8.h"  // utf8_decode

// One byte a row more than the pixels: canvas_write_png moves the rows in
// place, each behind its PNG filter byte.
void canvas_init(Canvas *c, int width, int height) {
    c->width = width;
    c->height = height;
    c->pixels = xmalloc((size_t)width * height * 3 + (size_t)height);
    memset(c->pixels, 255, (size_t)width * height * 3);
}

void canvas_free(Canvas *c) {
    free(c->pixels);
    c->pixels = NULL;
}

void canvas_fill_rect(Canvas *c, int x, int y, int w, int h, Rgb color) {
    int x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
    int x1 = x + w > c->width ? c->width : x + w, y1 = y + h > c->height ? c->height : y + h;
    for (int py = y0; py < y1; py++) {
        unsigned char *p = c->pixels + ((size_t)py * c->width + x0) * 3;
        for (int px = x0; px < x1; px++, p += 3) {
            p[0] = color.r;
            p[1] = color.g;
            p[2] = color.b;
        }
    }
}

// Mix "color" into pixel (x, y) with weight "alpha" in [0, 1].
static void blend(Canvas *c, int x, int y, Rgb color, float alpha) {
    if (x < 0 || y < 0 || x >= c->width || y >= c->height) return;
    unsigned char *p = c->pixels + ((size_t)y * c->width + x) * 3;
    const unsigned char rgb[3] = {color.r, color.g, color.b};
    for (int i = 0; i < 3; i++) p[i] = (unsigned char)lrintf((float)p[i] + alpha * ((float)rgb[i] - (float)p[i]));
}

// Each pixel near the segment is covered in proportion to how far its centre
// is inside the band of half-width w/2 around it: a one-pixel ramp at the
// edge is all the anti-aliasing a plot needs.
void canvas_line(Canvas *c, float x0, float y0, float x1, float y1, float width, Rgb color) {
    const float half = 0.5f * width;
    const float dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
    int left = (int)floorf(fminf(x0, x1) - half - 1), right = (int)ceilf(fmaxf(x0, x1) + half + 1);
    int top = (int)floorf(fminf(y0, y1) - half - 1), bottom = (int)ceilf(fmaxf(y0, y1) + half + 1);
    if (left < 0) left = 0;
    if (top < 0) top = 0;
    if (right > c->width) right = c->width;
    if (bottom > c->height) bottom = c->height;
    for (int py = top; py < bottom; py++) {
        for (int px = left; px < right; px++) {
            // distance from the pixel centre to the closest point of the segment
            float cx = (float)px + 0.5f, cy = (float)py + 0.5f;
            float s = len2 > 0 ? ((cx - x0) * dx + (cy - y0) * dy) / len2 : 0.0f;
            s = fminf(fmaxf(s, 0.0f), 1.0f);
            float ex = cx - (x0 + s * dx), ey = cy - (y0 + s * dy);
            float coverage = half + 0.5f - sqrtf(ex * ex + ey * ey);
            if (coverage > 0) blend(c, px, py, color, fminf(coverage, 1.0f));
        }
    }
}

// stb_easy_font reads characters 32..126 only; copy "text" with anything
// else replaced by '?', at most "cap - 1" characters. Byte by byte, as
// canvas_text promises; ascii_fallback below is the one for UTF-8 text.
static void font_safe(char *out, size_t cap, const char *text) {
    size_t n = 0;
    for (; text[n] && n + 1 < cap; n++) out[n] = (text[n] >= 32 && text[n] <= 126) ? text[n] : '?';
    out[n] = '\0';
}

enum { MAX_TEXT = 160 };  // characters drawn per call; longer text is cut

int canvas_text_width(const char *text, int scale) {
    char safe[MAX_TEXT];
    font_safe(safe, sizeof safe, text);
    // The font's advance includes one pixel of space after the last glyph.
    int w = stb_easy_font_width(safe);
    return w > 0 ? (w - 1) * scale : 0;
}

// stb_easy_font builds each glyph from axis-aligned one-pixel-thick
// segments, returned as quads (4 vertices of x, y, z floats + 4 colour
// bytes). A quad is a rectangle: fill it, scaled.
void canvas_text(Canvas *c, int x, int y, const char *text, int scale, Rgb color) {
    char safe[MAX_TEXT];
    font_safe(safe, sizeof safe, text);
    _Static_assert(sizeof(float) == 4, "stb_easy_font's vertex layout assumes 4-byte floats");
    char vertices[MAX_TEXT * 300];  // the header promises ~270 bytes per character
    int quads = stb_easy_font_print(0, 0, safe, NULL, vertices, (int)sizeof vertices);
    for (int q = 0; q < quads; q++) {
        float corner0[2], corner2[2];  // vertices 0 (top-left) and 2 (bottom-right)
        memcpy(corner0, vertices + q * 64, sizeof corner0);
        memcpy(corner2, vertices + q * 64 + 32, sizeof corner2);
        int qx = (int)lrintf(corner0[0]), qy = (int)lrintf(corner0[1]);
        int qw = (int)lrintf(corner2[0] - corner0[0]), qh = (int)lrintf(corner2[1] - corner0[1]);
        canvas_fill_rect(c, x + qx * scale, y + qy * scale, qw * scale, qh * scale, color);
    }
}

// ---------------------------------------------------------------------------
// TrueType text

struct Font {
    unsigned char *data;  // the whole font file: stb_truetype reads it in place
    stbtt_fontinfo info;
    int cap_height;       // height of 'H' in font units: what TEXT_HEIGHT matches
};

Font *font_load(const char *path, Error *err) {
    Font *font = xcalloc(1, sizeof *font);
    size_t len;
    if (!read_file(path, (char **)&font->data, &len, err)) {
        free(font);
        return NULL;
    }
    // stb_truetype trusts the file's offsets: it is meant for fonts the
    // system installed (or that the user chose), not for hostile files.
    int offset = stbtt_GetFontOffsetForIndex(font->data, 0);
    int x0, y0, x1, y1;
    if (len < 12 || offset < 0 || !stbtt_InitFont(&font->info, font->data, offset) ||
        !stbtt_GetCodepointBox(&font->info, 'H', &x0, &y0, &x1, &y1) || y1 <= y0) {
        font_free(font);
        error_set(err, "'%s' is not a TrueType font with Latin letters", path);
        return NULL;
    }
    font->cap_height = y1 - y0;
    return font;
}

void font_free(Font *font) {
    if (!font) return;
    free(font->data);
    free(font);
}

// The font's scale (pixels per font unit) that makes a capital letter
// TEXT_HEIGHT * "scale" pixels tall, as in the bitmap font.
static float font_scale(const Font *font, int scale) {
    return (float)(TEXT_HEIGHT * scale) / (float)font->cap_height;
}

// ascii_fallback: "utf8" for the bitmap font: one '?' per character outside
// printable ASCII (and per invalid byte), at most "cap - 1" characters.
// font_safe's job for text known to be UTF-8, so a character is one '?'.
static void ascii_fallback(char *out, size_t cap, const char *utf8, size_t len) {
    size_t n = 0;
    for (size_t pos = 0; pos < len && n + 1 < cap; n++) {
        uint32_t cp;
        int bytes = utf8_decode((const unsigned char *)utf8 + pos, len - pos, &cp);
        pos += bytes > 0 ? (size_t)bytes : 1;
        out[n] = bytes > 0 && cp >= 32 && cp <= 126 ? (char)cp : '?';
    }
    out[n] = '\0';
}

// Each character's glyph, or the font's "missing glyph" box (glyph 0) for
// one it lacks; an invalid byte is U+FFFD, the replacement character.
static int next_glyph(const Font *font, const char *utf8, size_t len, size_t *pos) {
    uint32_t cp;
    int bytes = utf8_decode((const unsigned char *)utf8 + *pos, len - *pos, &cp);
    if (bytes == 0) cp = 0xFFFD, bytes = 1;
    *pos += (size_t)bytes;
    return stbtt_FindGlyphIndex(&font->info, (int)cp);
}

int canvas_text_utf8_width(const Font *font, const char *utf8, size_t len, int scale) {
    if (!font) {
        char ascii[MAX_TEXT];
        ascii_fallback(ascii, sizeof ascii, utf8, len);
        return canvas_text_width(ascii, scale);
    }
    const float s = font_scale(font, scale);
    float width = 0.0f;
    for (size_t pos = 0; pos < len;) {
        int advance, lsb;
        stbtt_GetGlyphHMetrics(&font->info, next_glyph(font, utf8, len, &pos), &advance, &lsb);
        width += (float)advance * s;
    }
    return (int)lrintf(width);
}

// Each glyph is rasterised by stb_truetype into a coverage map (0..255 per
// pixel, anti-aliased) and blended onto the canvas in "color", its baseline
// at the bottom of the capitals.
void canvas_text_utf8(Canvas *c, const Font *font, int x, int y, const char *utf8, size_t len, int scale,
                      Rgb color) {
    if (!font) {
        char ascii[MAX_TEXT];
        ascii_fallback(ascii, sizeof ascii, utf8, len);
        canvas_text(c, x, y, ascii, scale, color);
        return;
    }
    const float s = font_scale(font, scale);
    const int baseline = y + TEXT_HEIGHT * scale;
    float pen = (float)x;
    for (size_t pos = 0; pos < len;) {
        int glyph = next_glyph(font, utf8, len, &pos);
        int x0, y0, x1, y1;  // the glyph's pixels relative to the pen on the baseline
        stbtt_GetGlyphBitmapBox(&font->info, glyph, s, s, &x0, &y0, &x1, &y1);
        const int w = x1 - x0, h = y1 - y0, left = (int)lrintf(pen) + x0;
        if (w > 0 && h > 0) {
            unsigned char *coverage = xmalloc((size_t)w * h);
            stbtt_MakeGlyphBitmap(&font->info, coverage, w, h, w, s, s, glyph);
            for (int py = 0; py < h; py++)
                for (int px = 0; px < w; px++)
                    if (coverage[py * w + px])
                        blend(c, left + px, baseline + y0 + py, color, coverage[py * w + px] / 255.0f);
            free(coverage);
        }
        int advance, lsb;
        stbtt_GetGlyphHMetrics(&font->info, glyph, &advance, &lsb);
        pen += (float)advance * s;
    }
}

// ---------------------------------------------------------------------------
// PNG output

// PNG without a second copy of the picture. Each row of a PNG starts with
// a filter byte, which says how the row's bytes are predicted from those
// above and to the left. stb_image_write's stbi_write_png_to_mem tries all
// five filters on every row, into a buffer as big as the picture (loss.png's
// 1.2 MB, more than a small model's training steps take besides their own
// buffers: docs/speed-and-memory.md), then compresses it. Here every row
// takes filter 0, None: its bytes as they are. On a plot's flat colours that
// compresses best of the five (a loss.png of 800 x 500: 28.8 KB, stb's
// choice per row 31.3 KB) and in half the time, the trying gone (it took
// most of a small run: train redraws loss.png at every progress line). So a
// row need only move, in the pixels themselves, behind its filter byte:
// row y to y * (3w + 1) (canvas_init leaves the room), bottom up, so that
// no row is written over before it has moved; after compression the rows
// move back, top down, and the canvas is as it was. The file is, byte for
// byte, stb's with stbi_write_force_png_filter = 0.
#define PNG_FILTER_NONE 0

// rows_behind_filter_bytes: row y of "c" moved to y * (3w + 1) + 1, behind
// its filter byte: what stbi_zlib_compress takes as a PNG's rows.
static void rows_behind_filter_bytes(Canvas *c) {
    const size_t stride = (size_t)c->width * 3;
    for (int y = c->height - 1; y >= 0; y--) {
        unsigned char *row = c->pixels + (size_t)y * (stride + 1);
        memmove(row + 1, c->pixels + (size_t)y * stride, stride);
        row[0] = PNG_FILTER_NONE;
    }
}

// rows_back_in_place: rows_behind_filter_bytes undone. Row y goes back to
// y * 3w, where only rows above it, already back, or its own bytes were.
static void rows_back_in_place(Canvas *c) {
    const size_t stride = (size_t)c->width * 3;
    for (int y = 0; y < c->height; y++)
        memmove(c->pixels + (size_t)y * stride, c->pixels + (size_t)y * (stride + 1) + 1, stride);
}

// encode_png: the PNG of "c" (stbi_write_png_to_mem's bytes), "*len" long;
// NULL if stb could not compress it.
static unsigned char *encode_png(Canvas *c, int *len) {
    const int w = c->width, h = c->height;
    rows_behind_filter_bytes(c);
    int zlen;
    unsigned char *zlib = stbi_zlib_compress(c->pixels, h * (w * 3 + 1), &zlen, stbi_write_png_compression_level);
    rows_back_in_place(c);
    if (!zlib) return NULL;
    // Signature, IHDR (13 bytes), IDAT (the compressed rows), IEND; each
    // chunk is its length, its tag, its bytes, and the CRC of tag and bytes.
    static const unsigned char signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    *len = 8 + 12 + 13 + 12 + zlen + 12;
    unsigned char *png = xmalloc((size_t)*len), *o = png;
    memcpy(o, signature, 8);
    o += 8;
    stbiw__wp32(o, 13);
    stbiw__wptag(o, "IHDR");
    stbiw__wp32(o, w);
    stbiw__wp32(o, h);
    *o++ = 8;  // bits per channel
    *o++ = 2;  // RGB
    *o++ = 0;  // deflate
    *o++ = 0;  // filter method 0: the five filters (of which every row here takes None)
    *o++ = 0;  // not interlaced
    stbiw__wpcrc(&o, 13);
    stbiw__wp32(o, zlen);
    stbiw__wptag(o, "IDAT");
    memcpy(o, zlib, (size_t)zlen);
    o += zlen;
    free(zlib);
    stbiw__wpcrc(&o, zlen);
    stbiw__wp32(o, 0);
    stbiw__wptag(o, "IEND");
    stbiw__wpcrc(&o, 0);
    assert(o == png + *len);
    return png;
}

// Through the one atomic writer (common.h): a viewer never sees half a
// picture. Not synced to the disk: train redraws loss.png at every progress
// line, and an fsync of the file and its directory each time cost 8% of a
// tiny run with --log-interval 1 (0.39 s of 4.5 s), to keep a picture that
// `tinygpt plot` can draw again from log.csv.
bool canvas_write_png(Canvas *c, const char *path, Error *err) {
    AtomicFile af;
    if (!atomic_open(&af, path, err)) return false;
    af.sync = false;
    int len;
    unsigned char *png = encode_png(c, &len);
    bool ok = png ? write_exact(png, (size_t)len, af.f, af.tmp, err)
                  : error_set(err, "could not encode '%s' as PNG (%d x %d)", path, c->width, c->height);
    free(png);
    return atomic_commit(&af, ok, err);
}
