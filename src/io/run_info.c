// run_info.c: the run's records beside its checkpoints: DIR/run.json and
// each checkpoint's log.json, both checksummed JSON written whole or not
// at all (see run_dir.h, "The log's mark" and "run.json"); and
// absolute_utf8_path, the training file's path as run.json keeps it.
//
// Reading order: file 31, after run_dir.c, which makes the directories
// these files live in.
#include "run_dir.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "json.h"
#include "utf8.h"

#define RUN_INFO_FILE "run.json"
#define RUN_INFO_FORMAT "tinygpt-run-2"      // with a checksum
#define RUN_INFO_FORMAT_OLD "tinygpt-run-1"  // without one, still read
#define LOG_MARK_FORMAT "tinygpt-log-1"

// ---- run.json and a checkpoint's log.json: checksummed JSON ---------------------
//
// Both are one JSON object of strings that opens with its checksum:
//   {"checksum":"<16 hex digits>","format":"tinygpt-run-2","data":"/home/me/moby-dick.txt"}
// the XXH3-64 of the whole file with those 16 digits written as zeros, as a
// checkpoint's (safetensors.h). A file that does not open so has no
// checksum, and is read only if its format is the older one that had none
// (run.json's tinygpt-run-1): a changed byte in the checksum's key or the
// format name cannot pass for an older file.
#define JSON_CHECKSUM_PREFIX "{\"checksum\":\""

// json_file_save: "path" = the checksum, "format", then "md"'s keys, whole
// or not at all (write_file_atomic).
static bool json_file_save(const char *path, const char *format, const Metadata *md, Error *err) {
    JsonBuf b = {0};
    json_buf_printf(&b, JSON_CHECKSUM_PREFIX "0000000000000000\",\"format\":\"%s\"", format);
    for (int i = 0; i < md->count; i++) {
        json_buf_append(&b, ",", 1);
        json_buf_string(&b, md->items[i].key, strlen(md->items[i].key));
        json_buf_append(&b, ":", 1);
        json_buf_string(&b, md->items[i].value, md->items[i].len);
    }
    json_buf_append(&b, "}\n", 2);
    char digits[CHECKSUM_DIGITS + 1];
    format_checksum(XXH3_64bits(b.data, b.len), digits);
    memcpy(b.data + strlen(JSON_CHECKSUM_PREFIX), digits, CHECKSUM_DIGITS);
    bool ok = write_file_atomic(path, b.data, b.len, err);
    json_buf_free(&b);
    return ok;
}

// json_file_parse: the keys of "text" [len] (its digits zeroed and put back
// while the checksum is checked), a file json_file_save wrote with
// "format", or one without a checksum of "old_format" (NULL: there is no
// such older file), into "md" (except "format"). NULL, or what is wrong.
static const char *json_file_parse(char *text, size_t len, const char *format, const char *old_format, Metadata *md) {
    const size_t at = strlen(JSON_CHECKSUM_PREFIX);
    const bool has_checksum = len > at + CHECKSUM_DIGITS && memcmp(text, JSON_CHECKSUM_PREFIX, at) == 0;
    if (has_checksum) {
        char digits[CHECKSUM_DIGITS];
        uint64_t written;
        memcpy(digits, text + at, CHECKSUM_DIGITS);
        memset(text + at, '0', CHECKSUM_DIGITS);
        const uint64_t sum = XXH3_64bits(text, len);
        memcpy(text + at, digits, CHECKSUM_DIGITS);
        if (!parse_checksum(digits, &written) || sum != written)
            return "its checksum does not match its contents, so a byte of it changed after it was saved";
    }
    const char *wanted = has_checksum ? format : old_format;
    memset(md, 0, sizeof *md);
    JsonValue *root = NULL;
    Error json_err;
    bool ok = wanted && json_parse(text, len, &root, &json_err) && root->type == JSON_OBJECT;
    const JsonValue *found = ok ? json_get(root, "format") : NULL;
    ok = ok && found && json_string_is(found, wanted);
    for (size_t i = 0; ok && i < root->count; i++) {
        const JsonValue *item = &root->items[i];
        ok = item->type == JSON_STRING && strlen(item->key) == item->key_len &&
             strlen(item->string) == item->string_len;
        if (ok && strcmp(item->key, "format") != 0 && strcmp(item->key, "checksum") != 0)
            metadata_set_bytes(md, item->key, item->string, item->string_len);
    }
    json_free(root);
    if (ok) return NULL;
    metadata_free(md);
    return "it is not a file of tinygpt's of that name";
}

bool run_info_save(const char *dir, const Metadata *md, Error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" RUN_INFO_FILE, dir);
    return json_file_save(path, RUN_INFO_FORMAT, md, err);
}

bool run_info_find(const char *dir, char *path, size_t cap) {
    snprintf(path, cap, "%s/" RUN_INFO_FILE, dir);
    if (access(path, F_OK) == 0) return true;
    path[0] = '\0';
    return false;
}

int run_info_read(FILE *f, const char *path, const char *dir, Metadata *md, Error *err) {
    memset(md, 0, sizeof *md);
    char *text;
    size_t len;
    bool read = f && read_stream(f, path, SIZE_MAX, &text, &len, err);
    if (f) fclose(f);
    if (!read) return EXIT_RUNTIME;
    const char *wrong = json_file_parse(text, len, RUN_INFO_FORMAT, RUN_INFO_FORMAT_OLD, md);
    free(text);
    if (!wrong) return 0;
    error_set(err, "'%s' is damaged: %s; give the training file, which makes it unneeded: tinygpt train FILE --resume %s",
              path, wrong, dir);
    return EXIT_RUNTIME;
}

bool run_dir_save_log_mark(const char *checkpoint, const LogMark *mark, Error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOG_MARK_FILE, checkpoint);
    Metadata md = {0};
    metadata_set(&md, "log_bytes", "%llu", (unsigned long long)mark->bytes);
    char hash_digits[CHECKSUM_DIGITS + 1];
    format_checksum(mark->hash, hash_digits);
    metadata_set(&md, "log_hash", "%s", hash_digits);
    bool ok = json_file_save(path, LOG_MARK_FORMAT, &md, err);
    metadata_free(&md);
    return ok;
}

bool run_dir_read_log_mark(const char *checkpoint, LogMark *mark, Error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOG_MARK_FILE, checkpoint);
    mark->present = false;
    if (access(path, F_OK) != 0) return true;  // a checkpoint from before log.json
    char *text;
    size_t len;
    if (!read_file(path, &text, &len, err)) return false;
    Metadata md;
    const char *wrong = json_file_parse(text, len, LOG_MARK_FORMAT, NULL, &md);
    free(text);
    const bool parsed = !wrong;
    const MetadataItem *bytes = parsed ? metadata_get(&md, "log_bytes") : NULL;
    const MetadataItem *hash = parsed ? metadata_get(&md, "log_hash") : NULL;
    uint64_t log_hash = 0;
    if (parsed && (!bytes || !hash || strspn(bytes->value, "0123456789") != bytes->len || bytes->len == 0 ||
                   bytes->len > 18 || hash->len != CHECKSUM_DIGITS || !parse_checksum(hash->value, &log_hash)))
        wrong = "its log_bytes and log_hash are not a length and 16 hex digits";
    if (!wrong) {
        mark->present = true;
        mark->bytes = strtoull(bytes->value, NULL, 10);
        mark->hash = log_hash;
    }
    if (parsed) metadata_free(&md);
    if (!wrong) return true;
    return error_set(err, "'%s' is damaged: %s; resume from another checkpoint, or start a new log at this one's step with --restart-log",
                     path, wrong);
}

void absolute_utf8_path(const char *path, char *out, size_t cap) {
    char *absolute = realpath(path, NULL);
    const char *p = absolute ? absolute : path;
    bool utf8 = strlen(p) < cap;
    for (size_t at = 0, n = strlen(p); utf8 && at < n;) {
        uint32_t cp;
        int bytes = utf8_decode((const unsigned char *)p + at, n - at, &cp);
        utf8 = bytes > 0;
        at += (size_t)bytes;
    }
    snprintf(out, cap, "%s", utf8 ? p : "");
    free(absolute);
}
