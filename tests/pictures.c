// pictures.c: PNGs read back and text found in them (see pictures.h).
#include "pictures.h"

#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include <stb_image.h>
#pragma GCC diagnostic pop

bool png_read(const char *path, Canvas *c) {
    int w, h, channels;
    unsigned char *pixels = stbi_load(path, &w, &h, &channels, 3);
    if (!pixels) return false;
    canvas_init(c, w, h);
    memcpy(c->pixels, pixels, (size_t)w * h * 3);
    stbi_image_free(pixels);
    return true;
}

// The brightness of pixel (x, y): the mean of its three channels.
static int brightness(const Canvas *c, int x, int y) {
    const unsigned char *p = c->pixels + ((size_t)y * c->width + x) * 3;
    return (p[0] + p[1] + p[2]) / 3;
}

bool canvas_shows_text(const Canvas *c, const char *text, int scale) {
    // The text alone, black on white, in a box one pixel larger all round.
    Canvas t;
    int tw = canvas_text_width(text, scale) + 2, th = (TEXT_HEIGHT + 3) * scale + 2;
    canvas_init(&t, tw, th);
    canvas_text(&t, 1, 1, text, scale, (Rgb){0, 0, 0});
    // Its ink first (most places fail on the first ink pixel), then the rest.
    int n = tw * th, *order = malloc((size_t)n * sizeof *order), n_ink = 0;
    bool *ink = malloc((size_t)n * sizeof *ink);
    for (int i = 0; i < n; i++) ink[i] = t.pixels[3 * i] < 128;
    for (int i = 0; i < n; i++)
        if (ink[i]) order[n_ink++] = i;
    for (int i = 0, k = n_ink; i < n; i++)
        if (!ink[i]) order[k++] = i;
    bool found = false;
    for (int y = 0; !found && y + th <= c->height; y++)
        for (int x = 0; !found && x + tw <= c->width; x++) {
            int k = 0;
            for (; k < n; k++) {
                int i = order[k], b = brightness(c, x + i % tw, y + i / tw);
                if (ink[i] ? b >= 128 : b < 200) break;
            }
            found = k == n;
        }
    free(ink);
    free(order);
    canvas_free(&t);
    return found;
}
