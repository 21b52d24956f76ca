// gpt2_tokenizer.c: GPT-2's vocab.json and merges.txt read into a Tokenizer
// of kind gpt2 (see gpt2_tokenizer.h).
//
// Reading order: file 25b, with gpt2_tokenizer.h.
//
// What it does: merges.txt first, one line at a time: each token is known
// by its text (the printable spelling of its bytes), in an stb_ds string
// map, text -> bpe.h's id (the bytes 0..255, merge i as 256 + i), so a line
// names its two tokens by text and its new token's text is theirs joined.
// Then vocab.json, each of its texts looked up in the same map, which gives
// the two translations between GPT-2's ids and bpe.h's. The merges become a
// Bpe with GPT-2's chunking rules: encoding is bpe.c's, unchanged.
// Writing (gpt2_tokenizer_files, at the end) spells each token the same way
// and checks that no two tokens spell the same text.
//
// Why key the map on the text and not on the bytes: the text is never NUL
// (every byte character is U+0021 or above), so stb_ds's string maps hold
// it as it is, and its string hash reads the bytes as unsigned chars (the
// UB bpe.c avoids is in its 8-byte-key hash, not used here).
#include "gpt2_tokenizer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <stb_ds.h>

#include "bpe.h"
#include "json.h"
#include "utf8.h"

// ---- The byte characters ----------------------------------------------------

// prints_as_itself: whether byte "b" is spelled by the character of the same
// number: the printable Latin-1 bytes, but not the space or the soft hyphen.
static bool prints_as_itself(int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// byte_chars: GPT-2's bytes_to_unicode: each byte's character. The bytes that
// do not print as themselves take U+0100, U+0101, ... in increasing order.
static void byte_chars(uint32_t char_of_byte[256]) {
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) char_of_byte[b] = prints_as_itself(b) ? (uint32_t)b : next++;
}

// ---- Reading ----------------------------------------------------------------

typedef struct {
    char *key;  // a token's text, UTF-8 (the map's own copy)
    int value;  // its bpe id
} TextToId;

typedef struct {
    TextToId *tokens;   // stb_ds string map (keys copied): every token's text -> its bpe id
    char **text_of;     // stb_ds array: [bpe id] its text (the map's copy)
    size_t *bytes_of;   // stb_ds array: [bpe id] its length in bytes
    int *line_of;       // stb_ds array: [bpe id] the merges.txt line that made it, 0 for a byte
    BpeMerge *merges;   // stb_ds array: merge i, in bpe ids
    char *scratch;      // stb_ds array: a NUL-terminated copy of the text being looked up
} Reader;

static void reader_free(Reader *r) {
    shfree(r->tokens);
    arrfree(r->text_of);
    arrfree(r->bytes_of);
    arrfree(r->line_of);
    arrfree(r->merges);
    arrfree(r->scratch);
}

// add_token: the next bpe id for "text", "bytes" long, made on "line".
static void add_token(Reader *r, const char *text, size_t bytes, int line) {
    int id = (int)arrlen(r->text_of);
    shput(r->tokens, text, id);
    arrput(r->text_of, r->tokens[shgeti(r->tokens, text)].key);
    arrput(r->bytes_of, bytes);
    arrput(r->line_of, line);
}

// add_bytes: the 256 one-byte tokens, bpe id = the byte.
static void add_bytes(Reader *r) {
    uint32_t char_of_byte[256];
    byte_chars(char_of_byte);
    // sh_new_strdup, not sh_new_arena: stb_ds's arena writes past the end
    // of a char[8] member (its storage), which UBSan stops on.
    sh_new_strdup(r->tokens);
    for (int b = 0; b < 256; b++) {
        char text[5];
        text[utf8_encode(char_of_byte[b], text)] = '\0';
        add_token(r, text, 1, 0);
    }
}

// scratch_text: "len" bytes of "s" as a NUL-terminated string in r->scratch.
static char *scratch_text(Reader *r, const char *s, size_t len) {
    arrsetlen(r->scratch, len + 1);
    memcpy(r->scratch, s, len);
    r->scratch[len] = '\0';
    return r->scratch;
}

// token_id: the bpe id of the token spelled "text", or -1.
static int token_id(Reader *r, const char *text) {
    ptrdiff_t slot = shgeti(r->tokens, text);
    return slot < 0 ? -1 : r->tokens[slot].value;
}

// maker: who made bpe token "id", for messages: "line N" or "a byte".
static const char *maker(const Reader *r, int id, char buf[32]) {
    if (r->line_of[id] == 0) return "it is a byte's character";
    snprintf(buf, 32, "line %d made it", r->line_of[id]);
    return buf;
}

// read_merge: the merge on "line" ("len" bytes of "s", no newline): two
// known tokens' texts separated by one space, joined into a new token.
static bool read_merge(Reader *r, const char *s, size_t len, int line, const char *name, Error *err) {
    const char *space = memchr(s, ' ', len);
    if (memchr(s, '\0', len))
        return error_set(err, "'%s' line %d holds a NUL byte; give GPT-2's merges.txt", name, line);
    if (!space || space == s || space == s + len - 1 || memchr(space + 1, ' ', len - (size_t)(space + 1 - s)))
        return error_set(err, "'%s' line %d is \"%s\", not two tokens separated by one space; give GPT-2's merges.txt",
                         name, line, show(s, len).text);
    if (arrlen(r->merges) == BPE_MAX_VOCAB - BPE_BYTES)
        return error_set(err, "'%s' has more than %d merges, the most tinygpt holds", name, BPE_MAX_VOCAB - BPE_BYTES);
    size_t left_len = (size_t)(space - s), right_len = len - left_len - 1;
    int left = token_id(r, scratch_text(r, s, left_len));
    int right = token_id(r, scratch_text(r, space + 1, right_len));
    for (int side = 0; side < 2; side++) {
        if ((side == 0 ? left : right) >= 0) continue;
        const char *text = side == 0 ? s : space + 1;
        return error_set(err, "'%s' line %d: \"%s\" is not a token yet (neither a byte's character nor made by an earlier line); give GPT-2's merges.txt",
                         name, line, show(text, side == 0 ? left_len : right_len).text);
    }
    char *joined = scratch_text(r, s, len);
    memmove(joined + left_len, joined + left_len + 1, right_len + 1);  // drop the space, keep the NUL
    int earlier = token_id(r, joined);
    char buf[32];
    if (earlier >= 0)
        return error_set(err, "'%s' line %d makes \"%s\", but %s; give GPT-2's merges.txt", name, line,
                         show(joined, len - 1).text, maker(r, earlier, buf));
    size_t bytes = r->bytes_of[left] + r->bytes_of[right];
    if (bytes > BPE_MAX_TOKEN_BYTES)
        return error_set(err, "'%s' line %d makes a token of %zu bytes, more than the %d tinygpt holds", name, line,
                         bytes, (int)BPE_MAX_TOKEN_BYTES);
    add_token(r, joined, bytes, line);
    arrput(r->merges, ((BpeMerge){left, right}));
    return true;
}

// read_merges: the "#version:" line, then one merge per line; the last line
// may end with a newline or not.
static bool read_merges(Reader *r, const char *text, size_t len, const char *name, Error *err) {
    static const char VERSION[] = "#version:";
    const char *end = memchr(text, '\n', len);
    size_t first_len = end ? (size_t)(end - text) : len;
    if (first_len < sizeof VERSION - 1 || memcmp(text, VERSION, sizeof VERSION - 1) != 0)
        return error_set(err, "'%s' line 1 is \"%s\", not \"#version: ...\"; give GPT-2's merges.txt", name,
                         show(text, first_len).text);
    int line = 1;
    for (size_t pos = end ? first_len + 1 : len; pos < len;) {
        line++;
        const char *eol = memchr(text + pos, '\n', len - pos);
        size_t line_len = eol ? (size_t)(eol - (text + pos)) : len - pos;
        if (!read_merge(r, text + pos, line_len, line, name, err)) return false;
        pos += line_len + 1;
    }
    return true;
}

// read_vocab: vocab.json has one key more than merges.txt has tokens, and
// each key is a token merges.txt knows, or "<|endoftext|>", with an id in
// 0..V-1 no other key has: then every token has an id. Fills the two
// translations and the end-of-text id into "tok".
static bool read_vocab(Reader *r, Tokenizer *tok, const char *text, size_t len, const char *name, Error *err) {
    JsonValue *root;
    Error json_err;
    if (!json_parse(text, len, &root, &json_err))
        return error_set(err, "'%s': %s; give GPT-2's vocab.json", name, json_err.msg);
    bool ok = false;
    int n_tokens = (int)arrlen(r->text_of);
    if (root->type != JSON_OBJECT) {
        error_set(err, "'%s' holds %s, not an object of token -> id; give GPT-2's vocab.json", name,
                  json_type_name(root->type));
        goto done;
    }
    size_t V = root->count;
    if (V != (size_t)n_tokens + 1) {
        error_set(err, "'%s' has %zu tokens, but merges.txt makes %d (256 bytes and %d merges) and <|endoftext|> is one more; vocab.json and merges.txt must come from the same tokenizer",
                  name, V, n_tokens, n_tokens - BPE_BYTES);
        goto done;
    }
    tok->gpt2_of_bpe = xmalloc((size_t)n_tokens * sizeof *tok->gpt2_of_bpe);
    tok->bpe_of_gpt2 = xmalloc((V > 0 ? V : 1) * sizeof *tok->bpe_of_gpt2);
    for (int t = 0; t < n_tokens; t++) tok->gpt2_of_bpe[t] = -1;
    for (size_t i = 0; i < V; i++) tok->bpe_of_gpt2[i] = -2;  // not given yet
    tok->end_of_text = -1;
    for (size_t i = 0; i < V; i++) {
        const JsonValue *member = &root->items[i];
        Shown key = show(member->key, member->key_len);  // kept whole, its text lives as long
        uint64_t id;
        if (!json_as_uint(member, &id) || id >= V) {
            char value[32];
            if (member->type == JSON_NUMBER) snprintf(value, sizeof value, "%.17g", member->number);
            else snprintf(value, sizeof value, "%s", json_type_name(member->type));
            error_set(err, "'%s': \"%s\" has %s, not an id in [0, %zu); give GPT-2's vocab.json", name, key.text,
                      value, V);
            goto done;
        }
        if (tok->bpe_of_gpt2[id] != -2) {
            error_set(err, "'%s': \"%s\" has the id %d, which an earlier key has too; give GPT-2's vocab.json", name,
                      key.text, (int)id);
            goto done;
        }
        if (member->key_len == strlen("<|endoftext|>") && strcmp(member->key, "<|endoftext|>") == 0) {
            tok->end_of_text = (int)id;
            tok->bpe_of_gpt2[id] = -1;
            continue;
        }
        int t = strlen(member->key) == member->key_len ? token_id(r, member->key) : -1;
        if (t < 0) {
            error_set(err, "'%s': \"%s\" (id %d) is neither a byte's character, a token merges.txt makes, nor <|endoftext|>; vocab.json and merges.txt must come from the same tokenizer",
                      name, key.text, (int)id);
            goto done;
        }
        tok->bpe_of_gpt2[id] = t;
        tok->gpt2_of_bpe[t] = (int)id;
    }
    // V keys, each a different token or <|endoftext|>, and as many as
    // those: each of them has its key.
    assert(tok->end_of_text >= 0);
    for (int t = 0; t < n_tokens; t++) assert(tok->gpt2_of_bpe[t] >= 0);
    tok->vocab_size = (int)V;
    ok = true;
done:
    json_free(root);
    return ok;
}

// gpt2_tokenizer_from_text: merges, then vocab, then the Bpe.
bool gpt2_tokenizer_from_text(Tokenizer *tok, const char *vocab_json, size_t vocab_len, const char *vocab_name,
                              const char *merges_txt, size_t merges_len, const char *merges_name, Error *err) {
    memset(tok, 0, sizeof *tok);
    Reader r = {0};
    add_bytes(&r);
    bool ok = read_merges(&r, merges_txt, merges_len, merges_name, err) &&
              read_vocab(&r, tok, vocab_json, vocab_len, vocab_name, err);
    if (ok) {
        int n_merges = (int)arrlen(r.merges);
        BpeMerge *merges = xmalloc((n_merges > 0 ? (size_t)n_merges : 1) * sizeof *merges);
        if (n_merges > 0) memcpy(merges, r.merges, (size_t)n_merges * sizeof *merges);  // none: r.merges is NULL
        Error bpe_err;
        ok = bpe_from_merges(&tok->bpe, merges, n_merges, CHUNK_RULES_GPT2, &bpe_err);
        if (!ok) error_set(err, "'%s': %s", merges_name, bpe_err.msg);  // read_merge checked all it checks
    }
    reader_free(&r);
    if (!ok) {
        tokenizer_free(tok);
        return false;
    }
    tok->kind = TOKENIZER_GPT2;
    return true;
}

// read_in_dir: "dir"/"file" read whole; a missing file says what a GPT-2
// directory holds.
static bool read_in_dir(const char *dir, const char *file, char *path, size_t path_size, char **text, size_t *len,
                        Error *err) {
    if ((size_t)snprintf(path, path_size, "%s/%s", dir, file) >= path_size)
        return error_set(err, "the directory name '%s' is too long", dir);
    Error read_err;
    if (read_file(path, text, len, &read_err)) return true;
    return error_set(err, "%s; a GPT-2 directory holds vocab.json and merges.txt (the Hugging Face gpt2 repository's files)",
                     read_err.msg);
}

bool tokenizer_load_gpt2(Tokenizer *tok, const char *dir, Error *err) {
    memset(tok, 0, sizeof *tok);
    char vocab_path[4096], merges_path[4096];
    char *vocab = NULL, *merges = NULL;
    size_t vocab_len, merges_len;
    bool ok = read_in_dir(dir, "vocab.json", vocab_path, sizeof vocab_path, &vocab, &vocab_len, err) &&
              read_in_dir(dir, "merges.txt", merges_path, sizeof merges_path, &merges, &merges_len, err) &&
              gpt2_tokenizer_from_text(tok, vocab, vocab_len, vocab_path, merges, merges_len, merges_path, err);
    free(vocab);
    free(merges);
    return ok;
}

// ---- Writing ----------------------------------------------------------------

// The longest text of a token: every byte character is U+0021..U+0143,
// two bytes of UTF-8 at most, and a token at most BPE_MAX_TOKEN_BYTES bytes.
enum { MAX_TOKEN_TEXT = 2 * BPE_MAX_TOKEN_BYTES + 1 };

// token_text: bpe token "id" of "tok" spelled as GPT-2 spells it, one byte
// character per byte, into "text", NUL-terminated; returns its length.
static size_t token_text(const Tokenizer *tok, const uint32_t char_of_byte[256], int id, char text[MAX_TOKEN_TEXT]) {
    size_t len, at = 0;
    const unsigned char *piece = bpe_piece(&tok->bpe, id, &len);
    for (size_t i = 0; i < len; i++) at += (size_t)utf8_encode(char_of_byte[piece[i]], text + at);
    text[at] = '\0';
    return at;
}

// gpt2_tokenizer_files: every bpe token's text, in the order of the ids the
// file gives them (GPT-2's for gpt2, bpe's own for bpe), each checked
// against a map of the texts so far; then the merges, in rank order, each
// the texts of its two tokens. Every byte character is U+0021 or above, so
// a text needs no escape in merges.txt, and json_buf_string escapes the
// two that JSON must ('"' and '\\').
bool gpt2_tokenizer_files(const Tokenizer *tok, JsonBuf *vocab_json, JsonBuf *merges_txt, Error *err) {
    if (tok->kind != TOKENIZER_BPE && tok->kind != TOKENIZER_GPT2)
        return error_set(err, "a %s tokenizer has no vocab.json and merges.txt: only byte-level bpe has them",
                         tokenizer_kind_name(tok->kind));
    uint32_t char_of_byte[256];
    byte_chars(char_of_byte);
    const bool gpt2 = tok->kind == TOKENIZER_GPT2;
    const int V = gpt2 ? tok->vocab_size : tok->bpe.vocab_size + 1;  // with <|endoftext|>
    const int end_of_text = gpt2 ? tok->end_of_text : tok->bpe.vocab_size;
    TextToId *seen = NULL;  // stb_ds string map: each text written -> its bpe id
    sh_new_strdup(seen);
    char text[MAX_TOKEN_TEXT];  // the text of the token being written
    bool ok = true;
    json_buf_append(vocab_json, "{", 1);
    for (int id = 0; ok && id < V; id++) {
        if (id > 0) json_buf_append(vocab_json, ", ", 2);
        if (id == end_of_text) {
            json_buf_string(vocab_json, "<|endoftext|>", strlen("<|endoftext|>"));
            json_buf_printf(vocab_json, ": %d", id);
            continue;
        }
        const int b = gpt2 ? tok->bpe_of_gpt2[id] : id;
        size_t len = token_text(tok, char_of_byte, b, text);
        ptrdiff_t slot = shgeti(seen, text);
        if (slot >= 0) {
            ok = error_set(err, "tokens %d and %d are the same bytes \"%s\", but vocab.json holds one id per text; this bpe tokenizer cannot be written as GPT-2's",
                           seen[slot].value, b, show(text, len).text);
            break;
        }
        shput(seen, text, b);
        json_buf_string(vocab_json, text, len);
        json_buf_printf(vocab_json, ": %d", id);
    }
    json_buf_append(vocab_json, "}\n", 2);
    json_buf_printf(merges_txt, "#version: 0.2\n");
    for (int i = 0; ok && i < tok->bpe.n_merges; i++) {
        json_buf_append(merges_txt, text, token_text(tok, char_of_byte, tok->bpe.merges[i].left, text));
        json_buf_append(merges_txt, " ", 1);
        json_buf_append(merges_txt, text, token_text(tok, char_of_byte, tok->bpe.merges[i].right, text));
        json_buf_append(merges_txt, "\n", 1);
    }
    shfree(seen);
    return ok;
}
