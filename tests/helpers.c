// helpers.c: shared test helpers (see helpers.h).
#include "helpers.h"

#include <xxhash.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "tests.h"

void scratch_dir_create(char *dir, size_t cap) {
    snprintf(dir, cap, "/tmp/tinygpt_test_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

void scratch_dir_remove(const char *dir) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

const char *path_in(const char *dir, const char *name) {
    static char buf[8][1024];
    static int which;
    which = (which + 1) % 8;
    snprintf(buf[which], sizeof buf[which], "%s/%s", dir, name);
    return buf[which];
}

void read_text_file(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

RunResult *run_binary(const char *binary, const char *dir, const char *args) {
    static RunResult r;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s >%s/stdout.txt 2>%s/stderr.txt </dev/null", binary, args, dir, dir);
    int raw = system(cmd);
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    char path[1024];
    snprintf(path, sizeof path, "%s/stdout.txt", dir);
    read_text_file(path, r.out, sizeof r.out);
    snprintf(path, sizeof path, "%s/stderr.txt", dir);
    read_text_file(path, r.err, sizeof r.err);
    return &r;
}

const char *tinygpt_binary(void) {
    const char *bin = getenv("TINYGPT_BIN");
    return bin ? bin : "./tinygpt";
}

RunResult *run_tinygpt(const char *dir, const char *args) { return run_binary(tinygpt_binary(), dir, args); }

bool stderr_is_one_line(const RunResult *r) {
    size_t n = strlen(r->err);
    return n > 0 && strchr(r->err, '\n') == r->err + n - 1;
}

void expect_failure(const RunResult *r, const char *args, int status, const char *needle) {
    ck_assert_msg(r->status == status, "'%s' exited %d, expected %d (stderr: %s)", args, r->status, status, r->err);
    ck_assert_msg(strstr(r->err, needle) != NULL, "'%s' error does not mention '%s': %s", args, needle, r->err);
    ck_assert_msg(stderr_is_one_line(r), "'%s' error is not one line: %s", args, r->err);
}

void expect_run_fails(const char *dir, const char *args, int status, const char *needle) {
    expect_failure(run_tinygpt(dir, args), args, status, needle);
}

void log_cell(const char *log, int row, int column, char *out, size_t cap) {
    const char *p = strchr(log, '\n');  // past the header
    for (int r = 0; p && r < row; r++) p = strchr(p + 1, '\n');
    ck_assert_msg(p && p[1], "the log has no row %d", row);
    p++;
    for (int c = 0; c < column; c++) {
        p = strpbrk(p, ",\n");
        ck_assert_msg(p && *p == ',', "row %d of the log has no column %d", row, column);
        p++;
    }
    size_t n = strcspn(p, ",\n");
    ck_assert_msg(n < cap, "row %d column %d of the log is longer than %zu bytes", row, column, cap - 1);
    memcpy(out, p, n);
    out[n] = '\0';
}

double log_field(const char *log, int row, int column) {
    char cell[64];
    log_cell(log, row, column, cell, sizeof cell);
    return cell[0] ? atof(cell) : NAN;
}

char *log_numbers(const char *dir) {
    char *text = slurp_or_empty(path_in(dir, "log.csv"), NULL), *o = text;
    int column = 0;
    for (const char *p = text; *p; p++) {
        if (*p == '\n') column = 0;
        else if (*p == ',') column++;
        if (column != 4 && column != 5 && column != 9) *o++ = *p;
    }
    *o = '\0';
    return text;
}

static unsigned be32(const unsigned char *p) {
    return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3];
}

// A PNG opens with the signature 89 'P' 'N' 'G' \r \n 1A \n, then the IHDR
// chunk: length 13 (4 bytes, big-endian), "IHDR", width, height (4 bytes
// each, big-endian), ...
bool png_size(const char *path, int *width, int *height, char *why, size_t why_cap) {
    static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    unsigned char head[24];
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(why, why_cap, "cannot open %s", path), false;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (n < sizeof head) return snprintf(why, why_cap, "%s has only %zu bytes", path, n), false;
    if (memcmp(head, signature, 8) != 0) return snprintf(why, why_cap, "%s lacks the PNG signature", path), false;
    if (be32(head + 8) != 13 || memcmp(head + 12, "IHDR", 4) != 0)
        return snprintf(why, why_cap, "%s does not start with an IHDR chunk", path), false;
    *width = (int)be32(head + 16);
    *height = (int)be32(head + 20);
    return true;
}

void write_corpus(const char *path, int repeats) {
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    const char *lines[] = {"the cat sat on the mat.\n", "a whale \xE2\x80\x94 a white whale!\n", "call me ishmael.\n",
                           "the sea is wide and deep.\n"};
    for (int i = 0; i < repeats; i++) fputs(lines[(i * 7 + i / 3) % 4], f);
    ck_assert_msg(fclose(f) == 0, "cannot write %s", path);
}

bool reseal(char *bytes, size_t len) {
    static const char prefix[] = "{\"__metadata__\":{\"checksum\":\"";
    const size_t at = 8 + sizeof prefix - 1, digits = 16;
    if (len < at + digits || memcmp(bytes + 8, prefix, sizeof prefix - 1) != 0) return false;
    memset(bytes + at, '0', digits);
    char text[17];
    snprintf(text, sizeof text, "%016llx", (unsigned long long)XXH3_64bits(bytes, len));
    memcpy(bytes + at, text, digits);
    return true;
}

void write_bytes(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_msg(fwrite(bytes, 1, len, f) == len, "cannot write %s", path);
    ck_assert_msg(fclose(f) == 0, "cannot write %s", path);
}

void write_text_file(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

char *slurp(const char *path, size_t *len) {
    char *bytes;
    size_t n;
    Error err = {{0}};
    ck_assert_msg(read_file(path, &bytes, &n, &err), "%s", err.msg);
    if (len) *len = n;
    return bytes;
}

char *slurp_or_empty(const char *path, size_t *len) {
    if (access(path, F_OK) == 0) return slurp(path, len);
    if (len) *len = 0;
    return xcalloc(1, 1);
}

// tree_list: the entries under "dir" ("rel" its path below the snapshot's
// root) appended to "*out" ("*len" bytes, "*cap" allocated), name order.
static void tree_list(const char *dir, const char *rel, char **out, size_t *len, size_t *cap) {
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
            char path[4096], sub[4096], line[4500] = "";
            snprintf(path, sizeof path, "%s/%s", dir, name);
            snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", name);
            struct stat st;
            ck_assert_int_eq(lstat(path, &st), 0);
            if (S_ISDIR(st.st_mode)) {
                snprintf(line, sizeof line, "%s/\n", sub);
            } else if (S_ISREG(st.st_mode)) {
                size_t bytes;
                char *text = slurp(path, &bytes);
                XXH128_hash_t h = XXH3_128bits(text, bytes);
                free(text);
                snprintf(line, sizeof line, "%s %zu bytes %016llx%016llx\n", sub, bytes, (unsigned long long)h.high64,
                         (unsigned long long)h.low64);
            } else {
                snprintf(line, sizeof line, "%s (mode %o)\n", sub, (unsigned)st.st_mode);
            }
            size_t add = strlen(line);
            while (*len + add + 1 > *cap) *out = xrealloc(*out, *cap = 2 * *cap + 4096);
            memcpy(*out + *len, line, add + 1);
            *len += add;
            if (S_ISDIR(st.st_mode)) tree_list(path, sub, out, len, cap);
        }
        free(names[i]);
    }
    if (n >= 0) free(names);
}

char *tree_snapshot(const char *dir) {
    char *out = xcalloc(1, 1);
    size_t len = 0, cap = 1;
    tree_list(dir, "", &out, &len, &cap);
    return out;
}

void expect_tree_unchanged(const char *dir, char *before, const char *why) {
    char *after = tree_snapshot(dir);
    ck_assert_msg(strcmp(before, after) == 0, "%s changed '%s':\nbefore:\n%s\nafter:\n%s", why, dir, before, after);
    free(after);
    free(before);
}

void set_threads(int n) { omp_set_num_threads(n); }

int get_threads(void) { return omp_get_max_threads(); }

void fill_uniform(float *x, size_t n, Rng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * rng_uniform(rng) - 1.0f;
}

const InvalidUtf8 INVALID_UTF8[] = {
    {"stray continuation byte 0x80", "\x80"},
    {"stray continuation byte 0xBF", "\xBF"},
    {"overlong 2-byte '/' (C0 AF)", "\xC0\xAF"},
    {"overlong 2-byte U+007F (C1 BF)", "\xC1\xBF"},
    {"overlong 3-byte '/' (E0 80 AF)", "\xE0\x80\xAF"},
    {"overlong 3-byte U+07FF (E0 9F BF)", "\xE0\x9F\xBF"},
    {"overlong 4-byte U+FFFF (F0 8F BF BF)", "\xF0\x8F\xBF\xBF"},
    {"first surrogate U+D800 (ED A0 80)", "\xED\xA0\x80"},
    {"last surrogate U+DFFF (ED BF BF)", "\xED\xBF\xBF"},
    {"U+110000 (F4 90 80 80)", "\xF4\x90\x80\x80"},
    {"lead byte F5", "\xF5\x80\x80\x80"},
    {"byte FF", "\xFF"},
    {"3-byte sequence cut by the end", "\xE2\x80"},
    {"4-byte sequence cut by the end", "\xF0\x9F\x98"},
    {"2-byte sequence cut by an ASCII byte", "\xC3" "A"},
    {"3-byte sequence cut by a new lead byte", "\xE2\x80\xC3\xA9"},
};
_Static_assert(sizeof INVALID_UTF8 / sizeof INVALID_UTF8[0] == N_INVALID_UTF8, "N_INVALID_UTF8 counts the table");

void assert_all_close(const char *what, const float *got, const float *want, size_t n, double rtol) {
    for (size_t i = 0; i < n; i++) {
        double scale = fmax(1.0, fabs(want[i]));
        if (!(fabs((double)got[i] - want[i]) <= rtol * scale))
            ck_abort_msg("%s[%zu] = %.9g, want %.9g", what, i, (double)got[i], (double)want[i]);
    }
}

void assert_gradcheck_passes(const char *what, GradCheckResult r, size_t n) {
    ck_assert_msg(r.failures == 0, "%s: %zu of %zu elements off; worst [%zu] analytic %.6g numeric %.6g", what,
                  r.failures, n, r.worst_index, r.worst_analytic, r.worst_numeric);
}

void expect_backward_adds(NormBackward backward, void *ctx, size_t n_inp, size_t n_weight, uint64_t seed,
                          double rtol) {
    const size_t n[2] = {n_inp, n_weight};
    float *from_zero[2], *start[2], *got[2], *want[2];
    for (int b = 0; b < 2; b++) {
        from_zero[b] = xcalloc(n[b], sizeof(float));
        start[b] = xmalloc(n[b] * sizeof(float));
        got[b] = xmalloc(n[b] * sizeof(float));
        want[b] = xmalloc(n[b] * sizeof(float));
    }
    backward(ctx, from_zero[0], from_zero[1]);
    Rng rng;
    rng_init(&rng, seed);
    for (int b = 0; b < 2; b++) {
        fill_uniform(start[b], n[b], &rng);
        memcpy(got[b], start[b], n[b] * sizeof(float));
        for (size_t i = 0; i < n[b]; i++) want[b][i] = start[b][i] + from_zero[b][i];
    }
    backward(ctx, got[0], got[1]);
    assert_all_close("dinp", got[0], want[0], n[0], rtol);
    assert_all_close("dweight", got[1], want[1], n[1], rtol);
    for (int b = 0; b < 2; b++) {
        free(from_zero[b]);
        free(start[b]);
        free(got[b]);
        free(want[b]);
    }
}

void chunks_joined(const char *text, size_t len, ChunkRules rules, char *out) {
    size_t n = 0;
    for (size_t pos = 0; pos < len;) {
        size_t k = chunk_len(text + pos, len - pos, rules);
        ck_assert_uint_ge(k, 1);
        ck_assert_uint_le(k, len - pos);
        if (pos > 0) out[n++] = '|';
        memcpy(out + n, text + pos, k);
        n += k;
        pos += k;
    }
    out[n] = '\0';
}
