// test_args.c: tests for src/commands/args.c (the flag tables): parsing
// (flags with a space or '=', a positional argument, an optional one, or a
// list of them), --help with each default, and --version.
//
// parse_flags exits on a bad flag, so these call its core,
// parse_flags_report, which returns the same message instead. The binary's
// exit statuses for the same mistakes are checked in test_cli.c.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "tests.h"

// One flag of every type, with the ranges train uses.
static int batch;
static long steps;
static double lr;
static const char *out;
static bool verbose;
static int arch;
static const char *const ARCHES[] = {"card", "gpt", NULL};
static Flag flags[6];
static Command cmd;

// reset: the defaults, and a fresh table (parse marks flags as seen).
static void reset(const char *positional) {
    batch = 32, steps = 3000, lr = 0.5, out = "out", verbose = false, arch = 1;
    const Flag table[] = {
        {"--batch", FLAG_INT, &batch, "B", "windows per step", 1, 1 << 20, false, NULL, NULL},
        {"--steps", FLAG_LONG, &steps, "N", "steps", 0, 1e12, false, NULL, NULL},
        {"--lr", FLAG_DOUBLE, &lr, "LR", "learning rate", 0, 1e6, false, NULL, NULL},
        {"--out", FLAG_STRING, &out, "DIR", "output directory", 0, 0, false, NULL, NULL},
        {"--verbose", FLAG_SWITCH, &verbose, NULL, "say more", 0, 0, false, NULL, NULL},
        {"--arch", FLAG_CHOICE, &arch, "ARCH", "the model", 0, 0, false, NULL, ARCHES},
    };
    memcpy(flags, table, sizeof table);
    cmd = (Command){"train", positional, "Train.", "tinygpt train x.txt", flags, 6};
}

// parse: parse_flags_report on a NULL-terminated list of arguments after the command name.
static ParseResult parse(const char **positional, Error *err, const char *const *args) {
    char *argv[16] = {"train"};
    int argc = 1;
    for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    return parse_flags_report(&cmd, argc, argv, positional, err);
}
#define PARSE(positional, err, ...) parse((positional), (err), (const char *const[]){__VA_ARGS__, NULL})

// expect_error: parsing must fail with a message containing "needle".
#define EXPECT_ERROR(needle, ...)                                                              \
    do {                                                                                       \
        const char *pos_;                                                                      \
        Error err_ = {{0}};                                                                    \
        reset("FILE");                                                                         \
        ck_assert_int_eq(PARSE(&pos_, &err_, __VA_ARGS__), PARSE_ERROR);                       \
        ck_assert_msg(strstr(err_.msg, needle) != NULL, "wanted '%s' in: %s", needle, err_.msg); \
        ck_assert_msg(strchr(err_.msg, '\n') == NULL, "not one line: %s", err_.msg);          \
    } while (0)

START_TEST(parse_reads_every_type_with_a_space_or_an_equals_sign) {
    reset("FILE");
    const char *positional;
    Error err = {{0}};
    ck_assert_int_eq(PARSE(&positional, &err, "--batch", "8", "data.txt", "--steps=12345678901", "--lr", "1e-3",
                           "--out=runs/x", "--verbose", "--arch", "card"),
                     PARSE_OK);
    ck_assert_str_eq(positional, "data.txt");
    ck_assert_int_eq(batch, 8);
    ck_assert_int_eq(steps, 12345678901L);
    ck_assert(lr == 1e-3);  // the double 1e-3, as Python has it, not a float's 1.00000005e-3
    ck_assert_str_eq(out, "runs/x");
    ck_assert(verbose);
    ck_assert_int_eq(arch, 0);
    for (int i = 0; i < 6; i++) ck_assert_msg(flags[i].seen, "%s not marked seen", flags[i].name);
}
END_TEST

START_TEST(parse_keeps_defaults_and_marks_nothing_seen_when_no_flag_is_given) {
    reset("FILE");
    const char *positional;
    ck_assert_int_eq(PARSE(&positional, NULL, "data.txt"), PARSE_OK);
    ck_assert_int_eq(batch, 32);
    ck_assert(lr == 0.5);
    ck_assert_int_eq(arch, 1);
    for (int i = 0; i < 6; i++) ck_assert(!flags[i].seen);
}
END_TEST

START_TEST(parse_reports_help_instead_of_exiting) {
    reset("FILE");
    const char *positional;
    ck_assert_int_eq(PARSE(&positional, NULL, "--batch", "8", "--help"), PARSE_HELP);
    ck_assert_int_eq(PARSE(&positional, NULL, "-h"), PARSE_HELP);
}
END_TEST

START_TEST(parse_names_an_unknown_flag) {
    EXPECT_ERROR("unknown flag '--bogus'", "x.txt", "--bogus", "3");
    EXPECT_ERROR("unknown flag '--bogus'", "x.txt", "--bogus=3");
    EXPECT_ERROR("unknown flag '-b'", "x.txt", "-b", "3");
}
END_TEST

START_TEST(parse_names_the_choices_of_a_choice_flag_given_another_value) {
    EXPECT_ERROR("--arch 'GPT' is not one of: card, gpt", "x.txt", "--arch", "GPT");
    EXPECT_ERROR("--arch '' is not one of: card, gpt", "x.txt", "--arch=");
    EXPECT_ERROR("--arch 'gpt2' is not one of: card, gpt", "x.txt", "--arch=gpt2");
}
END_TEST

START_TEST(parse_names_a_flag_whose_value_is_missing) {
    EXPECT_ERROR("--steps needs a value (N)", "x.txt", "--steps");
    EXPECT_ERROR("--verbose takes no value", "x.txt", "--verbose=yes");
}
END_TEST

START_TEST(parse_rejects_values_that_are_not_numbers) {
    EXPECT_ERROR("--steps expects a whole number, got 'ten'", "x.txt", "--steps", "ten");
    EXPECT_ERROR("--steps expects a whole number, got '12abc'", "x.txt", "--steps", "12abc");
    EXPECT_ERROR("--steps expects a whole number, got ''", "x.txt", "--steps=");
    EXPECT_ERROR("--batch expects a whole number, got '1.5'", "x.txt", "--batch", "1.5");
    EXPECT_ERROR("--batch expects a whole number, got '99999999999999999999'", "x.txt", "--batch",
                 "99999999999999999999");
    EXPECT_ERROR("--lr expects a finite number, got 'fast'", "x.txt", "--lr", "fast");
}
END_TEST

START_TEST(parse_rejects_a_learning_rate_that_is_not_finite) {
    EXPECT_ERROR("--lr expects a finite number, got 'nan'", "x.txt", "--lr", "nan");
    EXPECT_ERROR("--lr expects a finite number, got 'inf'", "x.txt", "--lr", "inf");
    EXPECT_ERROR("--lr expects a finite number, got '-Infinity'", "x.txt", "--lr", "-Infinity");
    EXPECT_ERROR("--lr expects a finite number, got '1e999'", "x.txt", "--lr", "1e999");
}
END_TEST

START_TEST(parse_rejects_zero_negative_and_too_large_sizes) {
    EXPECT_ERROR("--batch 0 is out of range [1, 1048576]", "x.txt", "--batch", "0");
    EXPECT_ERROR("--batch -4 is out of range", "x.txt", "--batch", "-4");
    EXPECT_ERROR("--batch 4294967297 is out of range", "x.txt", "--batch", "4294967297");  // would wrap to 1 as an int
    EXPECT_ERROR("--steps -1 is out of range", "x.txt", "--steps", "-1");
    EXPECT_ERROR("--lr -0.5 is out of range", "x.txt", "--lr", "-0.5");
}
END_TEST

// A range open at the bottom, (0, 1]: 0 is refused, and the message says
// the range as it is, both below it and above.
START_TEST(parse_refuses_the_open_end_of_a_range_and_says_it_is_open) {
    double top_p = 1.0;
    Flag table[] = {{"--top-p", FLAG_DOUBLE_ABOVE_MIN, &top_p, "P", "probability kept", 0, 1, false, NULL, NULL}};
    Command open_cmd = {"sample", NULL, "Sample.", "tinygpt sample", table, 1};
    const char *positional;
    Error err = {{0}};
    char *zero[] = {"sample", "--top-p", "0"}, *two[] = {"sample", "--top-p", "2"}, *one[] = {"sample", "--top-p", "1"};
    ck_assert_int_eq(parse_flags_report(&open_cmd, 3, zero, &positional, &err), PARSE_ERROR);
    ck_assert_str_eq(err.msg, "--top-p 0 is out of range (0, 1]");
    ck_assert_int_eq(parse_flags_report(&open_cmd, 3, two, &positional, &err), PARSE_ERROR);
    ck_assert_str_eq(err.msg, "--top-p 2 is out of range (0, 1]");
    ck_assert_int_eq(parse_flags_report(&open_cmd, 3, one, &positional, &err), PARSE_OK);
    ck_assert(top_p == 1.0);
}
END_TEST

START_TEST(parse_checks_the_positional_argument) {
    EXPECT_ERROR("missing FILE", "--batch", "8");
    EXPECT_ERROR("expected one FILE, got 'a.txt' and 'b.txt'", "a.txt", "b.txt");
    reset(NULL);
    Error err = {{0}};
    const char *positional;
    ck_assert_int_eq(PARSE(&positional, &err, "a.txt"), PARSE_ERROR);
    ck_assert_str_eq(err.msg, "unexpected argument 'a.txt'");
}
END_TEST

START_TEST(parse_lets_an_optional_positional_argument_be_left_out) {
    reset("[FILE]");
    const char *positional = "unset";
    Error err = {{0}};
    ck_assert_int_eq(PARSE(&positional, &err, "--batch", "8"), PARSE_OK);
    ck_assert_ptr_null(positional);
    ck_assert_int_eq(PARSE(&positional, &err, "a.txt", "b.txt"), PARSE_ERROR);
    ck_assert_str_eq(err.msg, "expected one FILE, got 'a.txt' and 'b.txt'");
}
END_TEST

// parse_list: parse_flags_list_report, room for 3, on a NULL-terminated list.
static ParseResult parse_list(const char **positionals, int *n, Error *err, const char *const *args) {
    char *argv[16] = {"train"};
    int argc = 1;
    for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    return parse_flags_list_report(&cmd, argc, argv, positionals, 3, n, err);
}
#define PARSE_LIST(positionals, n, err, ...) \
    parse_list((positionals), (n), (err), (const char *const[]){__VA_ARGS__, NULL})

START_TEST(parse_collects_one_or_more_positionals_when_the_name_ends_in_dots) {
    reset("FILE...");
    const char *files[3];
    int n = -1;
    Error err = {{0}};
    ck_assert_int_eq(PARSE_LIST(files, &n, &err, "a.txt", "--batch", "8", "b.txt", "--verbose", "c.txt"), PARSE_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(files[0], "a.txt");
    ck_assert_str_eq(files[1], "b.txt");
    ck_assert_str_eq(files[2], "c.txt");
    ck_assert_int_eq(batch, 8);
    ck_assert(verbose);
    ck_assert_int_eq(PARSE_LIST(files, &n, &err, "a.txt"), PARSE_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(PARSE_LIST(files, &n, &err, "--batch", "8"), PARSE_ERROR);
    ck_assert_str_eq(err.msg, "missing FILE");
    ck_assert_int_eq(PARSE_LIST(files, &n, &err, "a", "b", "c", "d\n"), PARSE_ERROR);
    ck_assert_str_eq(err.msg, "at most 3 FILE, got more: 'd?'");
    // Brackets and dots together: any number, none included.
    reset("[FILE...]");
    ck_assert_int_eq(PARSE_LIST(files, &n, &err, "--batch", "8"), PARSE_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(PARSE_LIST(files, &n, &err, "a.txt", "b.txt"), PARSE_OK);
    ck_assert_int_eq(n, 2);
    // Without dots, the list parser still takes one.
    reset("FILE");
    ck_assert_int_eq(PARSE_LIST(files, &n, &err, "a.txt", "b.txt"), PARSE_ERROR);
    ck_assert_str_eq(err.msg, "expected one FILE, got 'a.txt' and 'b.txt'");
}
END_TEST

// Found by tests/fuzz/fuzz_flags.c: an argument holding a newline was
// quoted as it was, splitting the one-line message in two.
START_TEST(parse_quotes_arguments_on_one_line_whatever_they_hold) {
    EXPECT_ERROR("unknown flag '--bo?gus'", "x.txt", "--bo\ngus");
    EXPECT_ERROR("--steps expects a whole number, got '1?2'", "x.txt", "--steps", "1\r2");
    EXPECT_ERROR("--lr expects a finite number, got 'fast?'", "x.txt", "--lr", "fast\x7f");
    EXPECT_ERROR("--steps ?-5 is out of range", "x.txt", "--steps", "\t-5");  // strtoll skips the tab; the message shows it
    EXPECT_ERROR("expected one FILE, got 'a?' and 'b'", "a\n", "b");
    // A long argument is cut: 60 bytes and "...".
    char long_flag[200];
    memset(long_flag, 'x', sizeof long_flag - 1);
    long_flag[0] = long_flag[1] = '-';
    long_flag[sizeof long_flag - 1] = '\0';
    char want[80];
    snprintf(want, sizeof want, "unknown flag '%.60s...'", long_flag);
    EXPECT_ERROR(want, "x.txt", long_flag);
}
END_TEST

// help_text: print_command_help of the table, in a buffer the caller frees.
static char *help_text(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    print_command_help(&cmd, f);
    fclose(f);
    return text;
}

START_TEST(help_shows_each_default_or_the_text_that_stands_for_it) {
    reset("FILE");
    char *text = help_text();
    ck_assert_msg(strstr(text, "windows per step (default 32)\n") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "output directory (default out)\n") != NULL, "%s", text);
    free(text);
    // A default that depends on another flag is set after parsing; its text stands in for it.
    flags[0].default_text = "gpt 12, card 32";
    text = help_text();
    ck_assert_msg(strstr(text, "windows per step (default gpt 12, card 32)\n") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "learning rate (default 0.5)\n") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "the model (default gpt)\n") != NULL, "a choice shows its name: %s", text);
    free(text);
}
END_TEST

START_TEST(parse_reports_version_instead_of_exiting_whatever_comes_before_it) {
    reset("FILE");
    const char *positional;
    ck_assert_int_eq(PARSE(&positional, NULL, "--version"), PARSE_VERSION);
    ck_assert_int_eq(PARSE(&positional, NULL, "x.txt", "--batch", "8", "--version"), PARSE_VERSION);
}
END_TEST

START_TEST(help_lists_version_and_print_version_names_tinygpt) {
    reset("FILE");
    char *text = help_text();
    ck_assert_msg(strstr(text, "--version") != NULL && strstr(text, "print the version and exit") != NULL, "%s", text);
    free(text);
    char *version = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&version, &len);
    ck_assert_ptr_nonnull(f);
    print_version(f);
    fclose(f);
    ck_assert_msg(strncmp(version, "tinygpt ", 8) == 0 && len > 9 && version[len - 1] == '\n', "'%s'", version);
    free(version);
}
END_TEST

Suite *args_suite(void) {
    Suite *s = suite_create("args");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, parse_reads_every_type_with_a_space_or_an_equals_sign);
    tcase_add_test(tc, parse_keeps_defaults_and_marks_nothing_seen_when_no_flag_is_given);
    tcase_add_test(tc, parse_reports_help_instead_of_exiting);
    tcase_add_test(tc, parse_names_an_unknown_flag);
    tcase_add_test(tc, parse_refuses_the_open_end_of_a_range_and_says_it_is_open);
    tcase_add_test(tc, parse_names_the_choices_of_a_choice_flag_given_another_value);
    tcase_add_test(tc, parse_names_a_flag_whose_value_is_missing);
    tcase_add_test(tc, parse_rejects_values_that_are_not_numbers);
    tcase_add_test(tc, parse_rejects_a_learning_rate_that_is_not_finite);
    tcase_add_test(tc, parse_rejects_zero_negative_and_too_large_sizes);
    tcase_add_test(tc, parse_checks_the_positional_argument);
    tcase_add_test(tc, parse_lets_an_optional_positional_argument_be_left_out);
    tcase_add_test(tc, parse_collects_one_or_more_positionals_when_the_name_ends_in_dots);
    tcase_add_test(tc, parse_quotes_arguments_on_one_line_whatever_they_hold);
    tcase_add_test(tc, help_shows_each_default_or_the_text_that_stands_for_it);
    tcase_add_test(tc, parse_reports_version_instead_of_exiting_whatever_comes_before_it);
    tcase_add_test(tc, help_lists_version_and_print_version_names_tinygpt);
    suite_add_tcase(s, tc);
    return s;
}
