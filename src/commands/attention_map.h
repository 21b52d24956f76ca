// attention_map.h: `tinygpt attention`: which earlier tokens each
// position of a prompt reads, layer by layer and head by head, as numbers
// and as heatmaps.
//
// Reading order: file 40 (glue code), after canvas.h (file 30), which draws
// its heatmaps. It runs model_forward on the prompt with dropout off and shows each block's attention weights,
// m->acts.blocks[l].attn_weights, [B,NH,T,T] with B = 1: for head h, row t
// is the softmax that position t spreads over positions 0..t (it sums to 1;
// the entries above the diagonal are the masked future, 0).
//
// Layers and heads are numbered from 1 here, as a reader counts them (the
// tensor names count blocks from 0: layer 1 is "blocks.0"). Each layer is
// one picture of all its heads side by side, in a grid of about as many
// rows as columns (attention_grid_draw): attention_layer{l}.png for a gpt,
// attention.png for card, with its single block. With --each-head, each
// head is a picture of its own instead (attention_map_draw):
// attention_layer{l}_head{h}.png, and for card the names it always had,
// attention_head{h}.png.
//
// The heatmap of head h: one square cell per weight, white for 0 to dark
// blue for 1, hatched grey above the diagonal (the masked future), each row
// labelled with the token at that position (the one reading) and each
// column with the token read; a colour bar on the right. When cells are
// large enough, each holds its weight to two decimals. A label is the
// token's piece (a character, or a bpe piece such as " whale"), smaller or
// cut short where it does not fit. Labels are drawn with a TrueType font
// (DejaVu Sans Mono, or the file $TINYGPT_FONT names), so any character it
// has is itself, and a space, a newline and a tab are the grey signs the
// printed matrices use (␣ ↵ →). Without the font file, labels fall back to
// the ASCII bitmap font of the titles, with a '?' for anything outside
// printable ASCII, the signs included (a note on stderr says so once).
#ifndef TINYGPT_ATTENTION_MAP_H
#define TINYGPT_ATTENTION_MAP_H

#include <stdint.h>

#include "canvas.h"

// attention_map_size: the heatmap's size in pixels for a T-token prompt whose
// longest label has "label_chars" characters (cells of
// HEATMAP_CELL_MIN..HEATMAP_CELL_MAX pixels: big for short prompts).
enum { HEATMAP_CELL_MIN = 16, HEATMAP_CELL_MAX = 40 };
void attention_map_size(int T, int label_chars, int *width, int *height);

// attention_label: how a token's piece ("len" bytes) is shown, on the
// terminal and in the pictures: itself, each invisible character as a sign
// (␣ ↵ →, '?' for other control characters and for a byte that is only part
// of a character, as a bpe piece can hold), at most ATTENTION_LABEL_MAX
// characters. Into "out" ("cap" bytes, NUL-terminated); returns the
// characters shown. (Signs a reader can take in at a glance, where tokenize
// escapes every byte exactly and show() quotes a message's text.)
enum { ATTENTION_LABEL_MAX = 8, ATTENTION_LABEL_BYTES = 4 * ATTENTION_LABEL_MAX + 1 };
int attention_label(const char *piece, size_t len, char *out, size_t cap);

// attention_map_draw: draw one head's weights[T,T] (its slice of
// attn_weights) onto "c" (of attention_map_size(T)) under the title "title"
// ("head 1 of 4", or "layer 2 of 4, head 1 of 4"); labels[T] are the
// prompt's tokens as attention_label shows them, drawn with "font" (NULL:
// the bitmap font). The canvas is attention_map_size(T, the longest label).
void attention_map_draw(Canvas *c, const Font *font, const float *weights, int T, const char *const *labels,
                        const char *title);

// attention_grid_size: the size of the picture of "n_head" heads of a
// T-token prompt (labels as for attention_map_size): ceil(sqrt(n_head))
// columns of heatmaps, each at the single heatmap's cell size, as many rows
// as they need, one colour bar.
void attention_grid_size(int T, int label_chars, int n_head, int *width, int *height);

// attention_grid_draw: every head of a layer, weights[n_head,T,T] (its
// attn_weights with B = 1), onto "c" (of attention_grid_size) under
// "title" ("layer 2 of 4, all 4 heads"), each heatmap titled "head h" and
// drawn as attention_map_draw draws one, without its own colour bar.
void attention_grid_draw(Canvas *c, const Font *font, const float *weights, int T, int n_head,
                         const char *const *labels, const char *title);

// cmd_attention: the `tinygpt attention` command.
int cmd_attention(int argc, char **argv);

#endif
