// args.h: table-driven command-line flags for the subcommands.
//
// Reading order: file 28 (glue code; skip it on a first read). Each command
// declares its flags once, in a table holding the variable that receives
// the value (and holds the default beforehand), a one-line help, and the
// allowed range. A default that depends on another flag (train's --batch
// depends on --arch) is set by the command after parsing, for the flags not
// given (Flag.seen), and shown by --help from the flag's default_text. The same table parses argv and prints --help, so the help
// text cannot drift from what is accepted.
#ifndef TINYGPT_ARGS_H
#define TINYGPT_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "common.h"

// A number with a fraction is a double, as it is in Python (AdamW's betas:
// 0.9 rounded to a float would change 1 - beta1 in its eighth digit); code
// that computes in float rounds it there. FLAG_CHOICE: one of the names in
// "choices", stored as its index (the enum it names). FLAG_SWITCH sets its
// bool; FLAG_SWITCH_OFF clears it: the way back from a switch that is on by
// default (--tied-head undoes the default --untied-head).
// FLAG_DOUBLE_ABOVE_MIN: a number in (min, max], min itself refused (a
// --top-p of 0 would keep no token).
typedef enum {
    FLAG_INT,
    FLAG_LONG,
    FLAG_DOUBLE,
    FLAG_DOUBLE_ABOVE_MIN,
    FLAG_CHOICE,
    FLAG_STRING,
    FLAG_SWITCH,
    FLAG_SWITCH_OFF
} FlagType;

typedef struct {
    const char *name;     // "--steps"
    FlagType type;
    void *value;          // int*, long*, double*, int* (FLAG_CHOICE), const char**, or bool* (FLAG_SWITCH, FLAG_SWITCH_OFF)
    const char *metavar;  // "N", "DIR", ...; unused for the switches
    const char *help;     // one line; NULL keeps the flag out of --help (a hook for tests)
    double min, max;      // inclusive range for numbers (ignored when min == max == 0)
    bool seen;            // set when the flag appears on the command line
    const char *default_text;  // what --help shows as the default, for one that the variable
                               // cannot hold yet (it depends on another flag: "gpt 12, card 32");
                               // NULL shows the variable's value
    const char *const *choices;  // FLAG_CHOICE: the names, NULL-terminated, in enum order
} Flag;

typedef struct {
    const char *name;         // "train"
    const char *positional;   // "FILE"; "[FILE]" when it may be left out (the command checks); "FILE..."
                              // for one or more (parse with parse_flags_list); NULL for none
    const char *summary;      // one line: what the command does
    const char *example;      // one example command line
    Flag *flags;
    int n_flags;
} Command;

// parse_flags_report: the parser itself, which reports instead of exiting:
// fills the table's variables from argv (argv[0] is the command name) and
// "*positional" (NULL if none), and returns PARSE_OK; PARSE_HELP when argv
// asks for --help; PARSE_VERSION for --version (every command has both); PARSE_ERROR with "err" (one line naming the flag, without
// the "tinygpt CMD: " prefix) for anything wrong. The fuzz target
// (tests/fuzz/fuzz_flags.c) calls this; commands call parse_flags.
typedef enum { PARSE_OK, PARSE_HELP, PARSE_VERSION, PARSE_ERROR } ParseResult;
ParseResult parse_flags_report(Command *cmd, int argc, char **argv, const char **positional, Error *err);

// parse_flags_list_report: the same parser for a positional that ends in
// "..." ("LOG.csv...": one or more; "[LOG.csv...]": any number): stores
// them in order in "positionals" [max] and their count in "*n"; more than
// "max" is a PARSE_ERROR. parse_flags_report is this with max 1.
ParseResult parse_flags_list_report(Command *cmd, int argc, char **argv, const char **positionals, int max, int *n,
                                    Error *err);

// parse_flags: fill the table's variables from argv (argv[0] is the command
// name). Accepts "--flag value" and "--flag=value". "--help" prints the help
// and exits 0; so does "--version", with the version. Any problem (unknown flag, missing value, not a number, out of
// range, wrong number of positional arguments) prints one line naming the
// flag and exits 2. Returns the positional argument, or NULL if none.
const char *parse_flags(Command *cmd, int argc, char **argv);

// parse_flags_list: parse_flags for a "FILE..." positional: stores the
// positional arguments in "positionals" [max] and returns how many; more
// than "max" is a usage error like any other.
int parse_flags_list(Command *cmd, int argc, char **argv, const char **positionals, int max);

// The flags several commands share, declared once: each call gives the table
// row, so the name, the metavar, the range and the usual help read the same
// in every command that takes the flag (train's settings table, settings_table.c,
// takes the same ranges). "help" NULL gives the usual help; a command whose
// flag means something narrower passes its own.
#define THREADS_MAX 1024           // --threads: 0 = OpenMP's default
#define SEED_MAX 9.2e18            // --seed: below 2^63
#define MAX_BYTES_MAX 1e15         // --max-bytes: a bound, not a size to allocate
Flag model_flag(const char **path, const char *help);    // --model PATH (required)
Flag threads_flag(int *threads, const char *help);       // --threads N
Flag seed_flag(long *seed, const char *help);            // --seed S
Flag max_bytes_flag(long *max_bytes, const char *help);  // --max-bytes N: standard input's text, at most

// command_flag: the entry of "cmd" named "name" (which must exist).
const Flag *command_flag(const Command *cmd, const char *name);

// print_command_help: the usage line, the summary, one line per flag with its
// default (its default_text, or else its variable's value), and the example.
void print_command_help(const Command *cmd, FILE *out);

// print_version: "tinygpt <version>" and a newline: the Makefile's VERSION,
// and the git commit when built from a checkout.
void print_version(FILE *out);

// usage_error: "tinygpt CMD: <message>; see 'tinygpt CMD --help'", exit 2.
_Noreturn void usage_error(const Command *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// required_model_path: --model as the commands that read a model take it:
// a usage error when it was not given, and a run directory standing for
// the model.safetensors in it (run_model_path, hf_gpt2.h), written into
// "buf" [cap].
const char *required_model_path(const Command *cmd, const char *model_path, char *buf, size_t cap);

#endif
