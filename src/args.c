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
    switch (f->type) {
    case FLAG_INT: fprintf(out, " (default %d)", *(int *)f->value); break;
    case FLAG_LONG: fprintf(out, " (default %ld)", *(long *)f->value); break;
    case FLAG_FLOAT: fprintf(out, " (default %g)", (double)*(float *)f->value); break;
    case FLAG_STRING: {
        const char *s = *(const char **)f->value;
        if (s) fprintf(out, " (default %s)", s);
        break;
    }
    case FLAG_SWITCH: break;
    }
}

void print_command_help(const Command *cmd, FILE *out) {
    fprintf(out, "usage: tinygpt %s%s%s [flags]\n\n%s\n\nflags:\n", cmd->name, cmd->positional ? " " : "",
            cmd->positional ? cmd->positional : "", cmd->summary);
    for (int i = 0; i < cmd->n_flags; i++) {
        const Flag *f = &cmd->flags[i];
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", f->name, f->type == FLAG_SWITCH ? "" : " ",
                 f->type == FLAG_SWITCH ? "" : f->metavar);
        fprintf(out, "  %-24s %s", left, f->help);
        print_default(f, out);
        fputc('\n', out);
    }
    fprintf(out, "  %-24s %s\n\nexample:\n  %s\n", "--help", "print this help and exit", cmd->example);
}

static void check_range(const Command *cmd, const Flag *f, double x, const char *text) {
    if (f->min == 0 && f->max == 0) return;
    if (x < f->min || x > f->max)
        usage_error(cmd, "%s %s is out of range [%g, %g]", f->name, text, f->min, f->max);
}

// Convert "text" into the flag's variable, or exit naming the flag.
static void set_value(const Command *cmd, Flag *f, const char *text) {
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case FLAG_INT:
    case FLAG_LONG: {
        long long x = strtoll(text, &end, 10);
        if (end == text || *end != '\0' || errno == ERANGE)
            usage_error(cmd, "%s expects a whole number, got '%s'", f->name, text);
        check_range(cmd, f, (double)x, text);
        if (f->type == FLAG_INT) *(int *)f->value = (int)x;
        else *(long *)f->value = (long)x;
        break;
    }
    case FLAG_FLOAT: {
        double x = strtod(text, &end);
        if (end == text || *end != '\0' || errno == ERANGE || !isfinite(x))
            usage_error(cmd, "%s expects a finite number, got '%s'", f->name, text);
        check_range(cmd, f, x, text);
        *(float *)f->value = (float)x;
        break;
    }
    case FLAG_STRING: *(const char **)f->value = text; break;
    case FLAG_SWITCH: *(bool *)f->value = true; break;
    }
    f->seen = true;
}

static Flag *find_flag(const Command *cmd, const char *name, size_t len) {
    for (int i = 0; i < cmd->n_flags; i++)
        if (strlen(cmd->flags[i].name) == len && strncmp(cmd->flags[i].name, name, len) == 0) return &cmd->flags[i];
    return NULL;
}

const Flag *command_flag(const Command *cmd, const char *name) {
    Flag *f = find_flag(cmd, name, strlen(name));
    assert(f && "command_flag: no such flag in the table");
    return f;
}

const char *parse_flags(Command *cmd, int argc, char **argv) {
    const char *positional = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_command_help(cmd, stdout);
            exit(0);
        }
        if (arg[0] != '-' || arg[1] == '\0') {  // a positional argument ("-" alone counts as one)
            if (!cmd->positional) usage_error(cmd, "unexpected argument '%s'", arg);
            if (positional) usage_error(cmd, "expected one %s, got '%s' and '%s'", cmd->positional, positional, arg);
            positional = arg;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        Flag *f = find_flag(cmd, arg, name_len);
        if (!f) usage_error(cmd, "unknown flag '%.*s'", (int)name_len, arg);
        if (f->type == FLAG_SWITCH) {
            if (eq) usage_error(cmd, "%s takes no value", f->name);
            set_value(cmd, f, "");
        } else if (eq) {
            set_value(cmd, f, eq + 1);
        } else {
            if (i + 1 >= argc) usage_error(cmd, "%s needs a value (%s)", f->name, f->metavar);
            set_value(cmd, f, argv[++i]);
        }
    }
    if (cmd->positional && !positional) usage_error(cmd, "missing %s", cmd->positional);
    return positional;
}
