// test_canvas.c: tests for src/canvas.c: drawing stays inside the canvas,
// text is as wide as canvas_text_width says and as tall as TEXT_HEIGHT,
// bytes outside ASCII are drawn as '?', and canvas_write_png writes a
// valid PNG of the canvas's size (or names the file it could not write).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canvas.h"
#include "helpers.h"
#include "tests.h"

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
    tcase_add_test(tc, write_png_writes_a_valid_png_of_the_canvas_size);
    tcase_add_test(tc, write_png_into_a_missing_directory_fails_naming_the_file);
    suite_add_tcase(s, tc);
    return s;
}
