// test_canvas.c: tests for src/show/canvas.c: drawing stays inside the canvas,
// text is as wide as canvas_text_width says and as tall as TEXT_HEIGHT,
// bytes outside ASCII are drawn as '?' by the bitmap font and as
// themselves by the TrueType font (DejaVu Sans Mono, fonts-dejavu-core), and
// canvas_write_png writes a valid PNG of the canvas's size (or names the
// file it could not write), the very bytes of stb_image_write's encoder
// with every row's filter None, though it encodes in the canvas's own
// pixels, which it leaves as drawn.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canvas.h"
#include "helpers.h"
#include "tests.h"

// stb_image_write's own PNG encoder, compiled into canvas.c (its header
// declares it only with the implementation), and its switch that gives
// every row one filter (-1, its default: each row the best of the five).
unsigned char *stbi_write_png_to_mem(const unsigned char *pixels, int stride_bytes, int x, int y, int n, int *out_len);
extern int stbi_write_force_png_filter;

static char dir[256];

static void setup(void) { scratch_dir_create(dir, sizeof dir); }
static void teardown(void) { scratch_dir_remove(dir); }

static const Rgb BLACK = {0, 0, 0};

// The smallest rectangle holding every pixel that is not white.
static void ink_box(const Canvas *c, int *x0, int *y0, int *x1, int *y1) {
    *x0 = *y0 = 1 << 30;
    *x1 = *y1 = -1;
    for (int y = 0; y < c->height; y++)
        for (int x = 0; x < c->width; x++) {
            const unsigned char *p = c->pixels + ((size_t)y * c->width + x) * 3;
            if (p[0] == 255 && p[1] == 255 && p[2] == 255) continue;
            if (x < *x0) *x0 = x;
            if (y < *y0) *y0 = y;
            if (x > *x1) *x1 = x;
            if (y > *y1) *y1 = y;
        }
}

START_TEST(a_new_canvas_is_white_and_fill_rect_is_clipped_to_it) {
    Canvas c;
    canvas_init(&c, 10, 6);
    for (int i = 0; i < 10 * 6 * 3; i++) ck_assert_int_eq(c.pixels[i], 255);
    canvas_fill_rect(&c, -5, 4, 100, 100, BLACK);  // covers rows 4..5, every column
    int x0, y0, x1, y1;
    ink_box(&c, &x0, &y0, &x1, &y1);
    ck_assert_int_eq(x0, 0);
    ck_assert_int_eq(x1, 9);
    ck_assert_int_eq(y0, 4);
    ck_assert_int_eq(y1, 5);
    canvas_free(&c);
}
END_TEST

START_TEST(lines_stay_inside_the_canvas_and_pass_through_their_end_points) {
    Canvas c;
    canvas_init(&c, 20, 20);
    canvas_line(&c, -30, 10.5f, 50, 10.5f, 2, BLACK);  // mostly outside: must not write out of bounds
    const unsigned char *mid = c.pixels + ((size_t)10 * 20 + 10) * 3;
    ck_assert_int_eq(mid[0], 0);
    const unsigned char *far = c.pixels + ((size_t)2 * 20 + 10) * 3;
    ck_assert_int_eq(far[0], 255);
    canvas_free(&c);
}
END_TEST

START_TEST(text_fills_its_text_width_and_capitals_are_text_height_tall) {
    for (int scale = 1; scale <= 3; scale++) {
        Canvas c;
        canvas_init(&c, 300, 60);
        const char *text = "HELLO 42";
        canvas_text(&c, 10, 10, text, scale, BLACK);
        int x0, y0, x1, y1;
        ink_box(&c, &x0, &y0, &x1, &y1);
        ck_assert_int_eq(x0, 10);
        ck_assert_int_eq(y0, 10);
        // The width is the font's advance; a narrow last glyph ("2") leaves
        // at most one font pixel of it blank.
        int ink = x1 - x0 + 1, width = canvas_text_width(text, scale);
        ck_assert_msg(ink <= width && ink >= width - scale, "scale %d: ink %d wide, text width %d", scale, ink, width);
        ck_assert_int_eq(y1 - y0 + 1, TEXT_HEIGHT * scale);
        canvas_free(&c);
    }
}
END_TEST

START_TEST(bytes_outside_printable_ascii_are_drawn_as_question_marks) {
    Canvas a, b;
    canvas_init(&a, 60, 20);
    canvas_init(&b, 60, 20);
    canvas_text(&a, 2, 2, "a\xe2\x80\x94z\t", 1, BLACK);  // "a—z\t": an em dash is 3 bytes
    canvas_text(&b, 2, 2, "a???z?", 1, BLACK);
    ck_assert(memcmp(a.pixels, b.pixels, 60 * 20 * 3) == 0);
    ck_assert_int_eq(canvas_text_width("a\xe2\x80\x94z\t", 1), canvas_text_width("a???z?", 1));
    canvas_free(&b);
    canvas_free(&a);
}
END_TEST

// ---- TrueType text ------------------------------------------------------------

static Font *load_font(void) {
    Error err;
    Font *font = font_load(FONT_DEFAULT_PATH, &err);
    ck_assert_msg(font != NULL, "%s (scripts/setup.sh installs fonts-dejavu-core)", err.msg);
    return font;
}

// text_picture: "utf8" drawn at (4, 4) on a fresh 40 x 30 canvas, with
// "font" (NULL: the bitmap font).
static void text_picture(Canvas *c, const Font *font, const char *utf8) {
    canvas_init(c, 40, 30);
    canvas_text_utf8(c, font, 4, 4, utf8, strlen(utf8), 2, BLACK);
}

START_TEST(a_character_outside_ascii_is_drawn_by_the_font_not_as_a_question_mark) {
    Font *font = load_font();
    const char *non_ascii[] = {"\xc3\xa9", "\xe2\x80\x94", "\xce\xbb"};  // é, —, λ
    Canvas question_bitmap, question_font;
    canvas_init(&question_bitmap, 40, 30);
    canvas_text(&question_bitmap, 4, 4, "?", 2, BLACK);
    text_picture(&question_font, font, "?");
    for (int i = 0; i < 3; i++) {
        Canvas c;
        text_picture(&c, font, non_ascii[i]);
        int x0, y0, x1, y1;
        ink_box(&c, &x0, &y0, &x1, &y1);
        ck_assert_msg(x1 >= x0 && y1 >= y0, "'%s' left the canvas blank", non_ascii[i]);
        ck_assert_msg(memcmp(c.pixels, question_bitmap.pixels, 40 * 30 * 3) != 0, "'%s' is the bitmap '?'", non_ascii[i]);
        ck_assert_msg(memcmp(c.pixels, question_font.pixels, 40 * 30 * 3) != 0, "'%s' is the font's '?'", non_ascii[i]);
        canvas_free(&c);
    }
    canvas_free(&question_font);
    canvas_free(&question_bitmap);
    font_free(font);
}
END_TEST

START_TEST(font_capitals_are_text_height_tall_and_the_width_is_the_advance) {
    Font *font = load_font();
    Canvas c;
    canvas_init(&c, 200, 40);
    canvas_text_utf8(&c, font, 10, 10, "HE", 2, 2, BLACK);
    int x0, y0, x1, y1;
    ink_box(&c, &x0, &y0, &x1, &y1);
    // Anti-aliased edges may add a faint pixel row on either side.
    ck_assert_msg(abs((y1 - y0 + 1) - TEXT_HEIGHT * 2) <= 1, "capitals %d pixels tall, want %d", y1 - y0 + 1,
                  TEXT_HEIGHT * 2);
    ck_assert_msg(abs(y0 - 10) <= 1, "capitals start at y %d, want 10", y0);
    // A monospaced font: two characters advance twice as far as one, any two.
    int one = canvas_text_utf8_width(font, "H", 1, 2);
    ck_assert_int_gt(one, 0);
    ck_assert_int_le(abs(canvas_text_utf8_width(font, "H\xc3\xa9", 3, 2) - 2 * one), 1);
    ck_assert_msg(x1 < 10 + canvas_text_utf8_width(font, "HE", 2, 2) + 2, "ink ends at %d", x1);
    canvas_free(&c);
    font_free(font);
}
END_TEST

START_TEST(without_a_font_utf8_text_is_the_bitmap_font_with_one_question_mark_per_character) {
    Canvas a, b;
    text_picture(&a, NULL, "a\xe2\x80\x94z\xff");  // an em dash (3 bytes) and an invalid byte
    canvas_init(&b, 40, 30);
    canvas_text(&b, 4, 4, "a?z?", 2, BLACK);
    ck_assert(memcmp(a.pixels, b.pixels, 40 * 30 * 3) == 0);
    ck_assert_int_eq(canvas_text_utf8_width(NULL, "a\xe2\x80\x94z\xff", 6, 2), canvas_text_width("a?z?", 2));
    canvas_free(&b);
    canvas_free(&a);
}
END_TEST

START_TEST(font_load_names_a_missing_file_and_one_that_is_not_a_font) {
    char path[512];
    Error err = {{0}};
    snprintf(path, sizeof path, "%s/absent.ttf", dir);
    ck_assert_ptr_null(font_load(path, &err));
    ck_assert_msg(strstr(err.msg, "absent.ttf") != NULL, "%s", err.msg);
    snprintf(path, sizeof path, "%s/text.ttf", dir);
    write_text_file(path, "this is not a font, only some text that is long enough\n");
    ck_assert_ptr_null(font_load(path, &err));
    ck_assert_msg(strstr(err.msg, "text.ttf") != NULL && strstr(err.msg, "font") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(write_png_writes_a_valid_png_of_the_canvas_size) {
    Canvas c;
    canvas_init(&c, 123, 45);
    canvas_fill_rect(&c, 3, 3, 50, 20, (Rgb){10, 200, 30});
    char path[512], why[256];
    snprintf(path, sizeof path, "%s/picture.png", dir);
    Error err;
    ck_assert_msg(canvas_write_png(&c, path, &err), "%s", err.msg);
    int w = 0, h = 0;
    ck_assert_msg(png_size(path, &w, &h, why, sizeof why), "%s", why);
    ck_assert_int_eq(w, 123);
    ck_assert_int_eq(h, 45);
    // The temporary file was renamed away.
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_ptr_null(fopen(tmp, "rb"));
    canvas_free(&c);
}
END_TEST

// canvas_write_png moves the rows in the pixels themselves, each behind its
// filter byte (None), rather than into a copy of the picture (canvas.c):
// the file must still be what stb's own encoder makes of the picture with
// that filter, and the picture must be as drawn afterwards. A picture of
// flat colour, lines and text (edges), and rows of noise, in sizes whose
// rows are not a multiple of anything.
START_TEST(write_png_writes_stbs_bytes_and_leaves_the_pixels_as_drawn) {
    const int sizes[][2] = {{1, 1}, {2, 3}, {123, 45}, {800, 500}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        Canvas c;
        const int w = sizes[k][0], h = sizes[k][1];
        canvas_init(&c, w, h);
        canvas_fill_rect(&c, w / 4, h / 4, w / 2 + 1, h / 3 + 1, (Rgb){10, 200, 30});
        canvas_line(&c, 0.5f, 0.5f, (float)w - 1.0f, (float)h - 1.0f, 2.0f, (Rgb){200, 20, 90});
        canvas_text(&c, 2, 2, "loss 1.23", 2, BLACK);
        unsigned state = 12345;
        for (int y = h / 2; y < h && y < h / 2 + 20; y++)
            for (int i = 0; i < w * 3; i++) c.pixels[(size_t)y * w * 3 + i] = (unsigned char)((state = state * 1103515245u + 12345u) >> 16);
        const size_t bytes = (size_t)w * h * 3;
        unsigned char *drawn = malloc(bytes);
        memcpy(drawn, c.pixels, bytes);
        int stb_len = 0;
        stbi_write_force_png_filter = 0;
        unsigned char *stb = stbi_write_png_to_mem(c.pixels, w * 3, w, h, 3, &stb_len);
        stbi_write_force_png_filter = -1;
        ck_assert_ptr_nonnull(stb);
        char path[512];
        snprintf(path, sizeof path, "%s/picture.png", dir);
        Error err;
        ck_assert_msg(canvas_write_png(&c, path, &err), "%s", err.msg);
        size_t len;
        char *ours = slurp(path, &len);
        ck_assert_msg(len == (size_t)stb_len && memcmp(ours, stb, len) == 0, "%d x %d: %zu bytes, stb's %d, differ", w,
                      h, len, stb_len);
        ck_assert_msg(memcmp(c.pixels, drawn, bytes) == 0, "%d x %d: the pixels changed", w, h);
        free(ours);
        free(stb);
        free(drawn);
        canvas_free(&c);
    }
}
END_TEST

START_TEST(write_png_into_a_missing_directory_fails_naming_the_file) {
    Canvas c;
    canvas_init(&c, 4, 4);
    char path[512];
    snprintf(path, sizeof path, "%s/no/such/dir/picture.png", dir);
    Error err = {{0}};
    ck_assert(!canvas_write_png(&c, path, &err));
    ck_assert_msg(strstr(err.msg, "picture.png") != NULL, "message does not name the file: %s", err.msg);
    canvas_free(&c);
}
END_TEST

Suite *canvas_suite(void) {
    Suite *s = suite_create("canvas");
    TCase *tc = tcase_create("canvas");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_new_canvas_is_white_and_fill_rect_is_clipped_to_it);
    tcase_add_test(tc, lines_stay_inside_the_canvas_and_pass_through_their_end_points);
    tcase_add_test(tc, text_fills_its_text_width_and_capitals_are_text_height_tall);
    tcase_add_test(tc, bytes_outside_printable_ascii_are_drawn_as_question_marks);
    tcase_add_test(tc, a_character_outside_ascii_is_drawn_by_the_font_not_as_a_question_mark);
    tcase_add_test(tc, font_capitals_are_text_height_tall_and_the_width_is_the_advance);
    tcase_add_test(tc, without_a_font_utf8_text_is_the_bitmap_font_with_one_question_mark_per_character);
    tcase_add_test(tc, font_load_names_a_missing_file_and_one_that_is_not_a_font);
    tcase_add_test(tc, write_png_writes_a_valid_png_of_the_canvas_size);
    tcase_add_test(tc, write_png_writes_stbs_bytes_and_leaves_the_pixels_as_drawn);
    tcase_add_test(tc, write_png_into_a_missing_directory_fails_naming_the_file);
    suite_add_tcase(s, tc);
    return s;
}
