// args.c: parse and document flags from one table (see args.h).
#include "args.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "hf_gpt2.h"  // run_model_path
#include "version.h"  // TINYGPT_VERSION, written by the Makefile from its VERSION

void usage_error(const Command *cmd, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "tinygpt %s: ", cmd->name);
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "; see 'tinygpt %s --help'\n", cmd->name);
    va_end(args);
    exit(EXIT_USAGE);
}

static void print_default(const Flag *f, FILE *out) {
    if (f->default_text) {
        fprintf(out, " (default %s)", f->default_text);
        return;
    }
    switch (f->type) {
    case FLAG_INT: fprintf(out, " (default %d)", *(int *)f->value); break;
    case FLAG_LONG: fprintf(out, " (default %ld)", *(long *)f->value); break;
    case FLAG_DOUBLE:
    case FLAG_DOUBLE_ABOVE_MIN: fprintf(out, " (default %g)", *(double *)f->value); break;
    case FLAG_CHOICE: fprintf(out, " (default %s)", f->choices[*(int *)f->value]); break;
    case FLAG_STRING: {
        const char *s = *(const char **)f->value;
        if (s) fprintf(out, " (default %s)", s);
        break;
    }
    case FLAG_SWITCH:
    case FLAG_SWITCH_OFF: break;
    }
}

void print_command_help(const Command *cmd, FILE *out) {
    fprintf(out, "usage: tinygpt %s%s%s [flags]\n\n%s\n\nflags:\n", cmd->name, cmd->positional ? " " : "",
            cmd->positional ? cmd->positional : "", cmd->summary);
    for (int i = 0; i < cmd->n_flags; i++) {
        const Flag *f = &cmd->flags[i];
        if (!f->help) continue;  // a flag for tests, not for users
        char left[64];
        const bool is_switch = f->type == FLAG_SWITCH || f->type == FLAG_SWITCH_OFF;
        snprintf(left, sizeof left, "%s%s%s", f->name, is_switch ? "" : " ", is_switch ? "" : f->metavar);
        fprintf(out, "  %-24s %s", left, f->help);
        print_default(f, out);
        fputc('\n', out);
    }
    fprintf(out, "  %-24s %s\n", "--help", "print this help and exit");
    fprintf(out, "  %-24s %s\n\nexample:\n  %s\n", "--version", "print the version and exit", cmd->example);
}

void print_version(FILE *out) { fprintf(out, "tinygpt %s\n", TINYGPT_VERSION); }

// positional_name: the positional argument's name without the brackets
// that mark it optional or the dots that mark it repeated ("[FILE]" and
// "FILE..." -> "FILE"), as "%.*s" arguments.
static int positional_name(const Command *cmd, const char **name) {
    bool optional = cmd->positional[0] == '[';
    *name = cmd->positional + optional;
    int len = (int)strlen(*name) - optional;
    if (len >= 3 && strncmp(*name + len - 3, "...", 3) == 0) len -= 3;
    return len;
}

// repeated: the positional ends in "..." ("FILE...", "[FILE...]"): the
// command takes several, collected by parse_flags_list.
static bool repeated(const Command *cmd) {
    const char *name;
    int len = positional_name(cmd, &name);
    return strncmp(name + len, "...", 3) == 0;
}

// check_range: false (naming the flag) when "x" is outside the flag's range.
static bool check_range(const Flag *f, double x, const char *text, Error *err) {
    if (f->min == 0 && f->max == 0) return true;
    const bool open = f->type == FLAG_DOUBLE_ABOVE_MIN;
    if ((open ? x > f->min : x >= f->min) && x <= f->max) return true;
    Shown shown = show(text, strlen(text));
    if (f->type != FLAG_INT && f->type != FLAG_LONG)
        return error_set(err, "%s %s is out of range %c%g, %g]", f->name, shown.text, open ? '(' : '[', f->min, f->max);
    // Whole-number ranges in full: "[1, 1048576]", not %g's "[1, 1.04858e+06]".
    return error_set(err, "%s %s is out of range [%.0f, %.0f]", f->name, shown.text, f->min, f->max);
}

// set_value: convert "text" into the flag's variable, or report why not.
static bool set_value(Flag *f, const char *text, Error *err) {
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case FLAG_INT:
    case FLAG_LONG: {
        long long x = strtoll(text, &end, 10);
        if (end == text || *end != '\0' || errno == ERANGE)
            return error_set(err, "%s expects a whole number, got '%s'", f->name, show(text, strlen(text)).text);
        if (!check_range(f, (double)x, text, err)) return false;
        if (f->type == FLAG_INT) *(int *)f->value = (int)x;
        else *(long *)f->value = (long)x;
        break;
    }
    case FLAG_DOUBLE:
    case FLAG_DOUBLE_ABOVE_MIN: {
        double x = strtod(text, &end);
        if (end == text || *end != '\0' || errno == ERANGE || !isfinite(x))
            return error_set(err, "%s expects a finite number, got '%s'", f->name, show(text, strlen(text)).text);
        if (!check_range(f, x, text, err)) return false;
        *(double *)f->value = x;
        break;
    }
    case FLAG_CHOICE: {
        int index = name_index(f->choices, text);
        if (index < 0) {
            char names[128] = "";
            for (int i = 0; f->choices[i]; i++) {
                size_t len = strlen(names);
                snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", f->choices[i]);
            }
            return error_set(err, "%s '%s' is not one of: %s", f->name, show(text, strlen(text)).text, names);
        }
        *(int *)f->value = index;
        break;
    }
    case FLAG_STRING: *(const char **)f->value = text; break;
    case FLAG_SWITCH: *(bool *)f->value = true; break;
    case FLAG_SWITCH_OFF: *(bool *)f->value = false; break;
    }
    f->seen = true;
    return true;
}

static Flag *find_flag(const Command *cmd, const char *name, size_t len) {
    for (int i = 0; i < cmd->n_flags; i++)
        if (strlen(cmd->flags[i].name) == len && strncmp(cmd->flags[i].name, name, len) == 0) return &cmd->flags[i];
    return NULL;
}

Flag model_flag(const char **path, const char *help) {
    return (Flag){"--model", FLAG_STRING, path, "PATH",
                  help ? help : "checkpoint written by 'tinygpt train' (or its run directory), or a Hugging Face GPT-2 directory (required)",
                  0, 0, false, NULL, NULL};
}

Flag threads_flag(int *threads, const char *help) {
    return (Flag){"--threads", FLAG_INT, threads, "N", help ? help : "OpenMP threads, 0 = default", 0, THREADS_MAX,
                  false, NULL, NULL};
}

Flag seed_flag(long *seed, const char *help) {
    return (Flag){"--seed", FLAG_LONG, seed, "S", help ? help : "random seed", 0, SEED_MAX, false, NULL, NULL};
}

Flag max_bytes_flag(long *max_bytes, const char *help) {
    return (Flag){"--max-bytes", FLAG_LONG, max_bytes, "N",
                  help ? help : "the most text read from standard input; more is an error", 1, MAX_BYTES_MAX, false,
                  NULL, NULL};
}

const Flag *command_flag(const Command *cmd, const char *name) {
    Flag *f = find_flag(cmd, name, strlen(name));
    assert(f && "command_flag: no such flag in the table");
    return f;
}

// parse_error: fill "err" and return PARSE_ERROR, so each check is one statement.
static ParseResult parse_error(Error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ParseResult parse_error(Error *err, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    error_setv(err, "", fmt, args);
    va_end(args);
    return PARSE_ERROR;
}

ParseResult parse_flags_list_report(Command *cmd, int argc, char **argv, const char **positionals, int max, int *n,
                                    Error *err) {
    assert(max >= 1);
    bool many = cmd->positional && repeated(cmd);
    *n = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) return PARSE_HELP;
        if (strcmp(arg, "--version") == 0) return PARSE_VERSION;
        if (arg[0] != '-' || arg[1] == '\0') {  // a positional argument ("-" alone counts as one)
            const char *name;
            int name_len = cmd->positional ? positional_name(cmd, &name) : 0;
            if (!cmd->positional) return parse_error(err, "unexpected argument '%s'", show(arg, strlen(arg)).text);
            if (*n > 0 && !many)
                return parse_error(err, "expected one %.*s, got '%s' and '%s'", name_len, name,
                                   show(positionals[0], strlen(positionals[0])).text, show(arg, strlen(arg)).text);
            if (*n == max)
                return parse_error(err, "at most %d %.*s, got more: '%s'", max, name_len, name,
                                   show(arg, strlen(arg)).text);
            positionals[(*n)++] = arg;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        Flag *f = find_flag(cmd, arg, name_len);
        if (!f) return parse_error(err, "unknown flag '%s'", show(arg, name_len).text);
        bool ok;
        if (f->type == FLAG_SWITCH || f->type == FLAG_SWITCH_OFF) {
            if (eq) return parse_error(err, "%s takes no value", f->name);
            ok = set_value(f, "", err);
        } else if (eq) {
            ok = set_value(f, eq + 1, err);
        } else {
            if (i + 1 >= argc) return parse_error(err, "%s needs a value (%s)", f->name, f->metavar);
            ok = set_value(f, argv[++i], err);
        }
        if (!ok) return PARSE_ERROR;
    }
    if (cmd->positional && cmd->positional[0] != '[' && *n == 0) {
        const char *name;
        int name_len = positional_name(cmd, &name);
        return parse_error(err, "missing %.*s", name_len, name);
    }
    return PARSE_OK;
}

ParseResult parse_flags_report(Command *cmd, int argc, char **argv, const char **positional, Error *err) {
    int n;
    *positional = NULL;
    return parse_flags_list_report(cmd, argc, argv, positional, 1, &n, err);
}

int parse_flags_list(Command *cmd, int argc, char **argv, const char **positionals, int max) {
    int n = 0;
    Error err;
    switch (parse_flags_list_report(cmd, argc, argv, positionals, max, &n, &err)) {
    case PARSE_HELP:
        print_command_help(cmd, stdout);
        exit(0);
    case PARSE_VERSION:
        print_version(stdout);
        exit(0);
    case PARSE_ERROR: usage_error(cmd, "%s", err.msg);
    case PARSE_OK: break;
    }
    return n;
}

const char *parse_flags(Command *cmd, int argc, char **argv) {
    const char *positional = NULL;
    parse_flags_list(cmd, argc, argv, &positional, 1);
    return positional;
}

const char *required_model_path(const Command *cmd, const char *model_path, char *buf, size_t cap) {
    if (!model_path) usage_error(cmd, "missing --model FILE");
    return run_model_path(model_path, buf, cap);
}
