// helpers.c: shared test helpers (see helpers.h).
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <sys/wait.h>

#include "tests.h"

void scratch_dir_create(char *dir, size_t cap) {
    snprintf(dir, cap, "/tmp/tinygpt_test_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

void scratch_dir_remove(const char *dir) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
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

bool stderr_is_one_line(const RunResult *r) {
    size_t n = strlen(r->err);
    return n > 0 && strchr(r->err, '\n') == r->err + n - 1;
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

void write_text_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    fputs(text, f);
    fclose(f);
}

void set_threads(int n) { omp_set_num_threads(n); }

int get_threads(void) { return omp_get_max_threads(); }

void fill_uniform(float *x, size_t n, Rng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * rng_uniform(rng) - 1.0f;
}
