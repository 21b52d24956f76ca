// pictures.h: what the tests of the pictures share: a PNG read back into a
// canvas (stb_image, from Debian's libstb-dev, as the pictures are written
// with stb_image_write), and a line of the titles' bitmap font found in it,
// so a test can say which words a picture shows (its axes' units, say).
#ifndef TINYGPT_TEST_PICTURES_H
#define TINYGPT_TEST_PICTURES_H

#include <stdbool.h>

#include "canvas.h"

// png_read: the picture in "path" into "c" (canvas_init'ed here; canvas_free
// it); false if it cannot be read as an RGB PNG.
bool png_read(const char *path, Canvas *c);

// canvas_shows_text: whether "text", drawn by canvas_text at "scale" in
// any dark colour on a light background, is somewhere on "c": every pixel
// of its box is dark where the text's ink is and light elsewhere.
bool canvas_shows_text(const Canvas *c, const char *text, int scale);

#endif
