// test_settings.c: tests for src/commands/settings.c and settings_table.c, the table of a
// training run's settings: every setting round-trips through a checkpoint
// (the run's keys and the model's) and run.json bit for bit; --help lists
// every flag with its default; every default reads as its flag would;
// values read back from a file are held to the flag's rules (strict
// digits, ranges, choices), an older file's missing keys and float-rounded
// settings read as that file meant them; the derived defaults; a flag given
// where its setting means nothing, or against an --init checkpoint, is a
// usage error.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "helpers.h"
#include "run_dir.h"
#include "settings.h"
#include "tests.h"

static char dir[256];

static void setup(void) { scratch_dir_create(dir, sizeof dir); }
static void teardown(void) { scratch_dir_remove(dir); }

// at: where setting "st" is in "s".
static void *at(const Setting *st, TrainSettings *s) { return (char *)s + st->offset; }

// value_text: setting "st" of "s" as settings_value_text writes it.
static const char *value_text(const Setting *st, const TrainSettings *s, char *out, size_t cap) {
    settings_value_text(st, s, out, cap);
    return out;
}

// fresh: the settings as train has them after parsing "args" (no flag
// given: the gpt defaults), with the Command whose flags the table made.
static Command cmd;
static Flag flags[NUM_TRAIN_SETTINGS_MAX];
static void fresh(TrainSettings *s, Given *given, const char *const *args) {
    memset(s, 0, sizeof *s);
    cmd = (Command){"train", "[FILE]", "Train.", "tinygpt train x.txt", NULL, 0};
    settings_command(&cmd, flags, s);
    char *argv[32] = {"train"};
    int argc = 1;
    for (; args && args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    settings_parse(&cmd, argc, argv, s, given);
}

// unusual: every setting of "s" given a value its default is not, and that
// is hard to keep: the largest whole numbers the flag takes, a double that
// needs 17 digits (1/3 of the range's top), the last choice, a switch on,
// a path JSON must escape. The model's sizes are kept small and
// consistent, since a model is built from them.
static void unusual(TrainSettings *s) {
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        void *v = at(st, s);
        switch (st->type) {
        case SETTING_INT: *(int *)v = (int)st->max; break;
        case SETTING_LONG: *(long *)v = (long)st->max; break;
        case SETTING_DOUBLE: *(double *)v = st->max / 3.0; break;
        case SETTING_CHOICE: {
            int n = 0;
            while (st->choices[n + 1]) n++;
            *(int *)v = n;
            break;
        }
        case SETTING_SWITCH: *(bool *)v = true; break;
        case SETTING_PATH: *(const char **)v = "/tmp/a \"quoted\" dir\\caf\xC3\xA9/moby.txt"; break;
        }
    }
    s->arch = ARCH_GPT;
    s->tokenizer = TOKENIZER_CHAR;
    s->layers = 3, s->context = 8, s->embd = 16, s->heads = 2;
    s->dropout = (float)(1.0 / 3.0);  // the model keeps a float
}

// same_value: setting "st" holds the same bits in "a" and "b". Dropout is
// the model's, a float: the same float is the same dropout.
static bool same_value(const Setting *st, const TrainSettings *a, const TrainSettings *b) {
    char x[4200], y[4200];
    if (st == setting_named("dropout")) return (float)a->dropout == (float)b->dropout;
    if (st->type == SETTING_DOUBLE) return memcmp(at(st, (TrainSettings *)a), at(st, (TrainSettings *)b), sizeof(double)) == 0;
    return strcmp(value_text(st, a, x, sizeof x), value_text(st, b, y, sizeof y)) == 0;
}

// model_of: the model a run of "s" builds (train_setup.c's model_config).
static ModelConfig model_of(const TrainSettings *s, int vocab_size) {
    return (ModelConfig){.vocab_size = vocab_size, .block_size = s->context, .n_embd = s->embd, .n_head = s->heads,
                         .dropout = (float)s->dropout, .arch = s->arch, .n_layer = s->layers,
                         .no_layernorm = s->no_layernorm, .no_mlp = s->no_mlp, .no_residual = s->no_residual,
                         .norm = s->norm, .mlp = s->mlp, .untied_head = s->untied_head,
                         .pos = s->pos, .qk_norm = s->qk_norm};
}

START_TEST(every_kept_setting_round_trips_through_a_checkpoint_and_run_json_bit_for_bit) {
    TrainSettings want;
    memset(&want, 0, sizeof want);
    unusual(&want);

    // The run's keys and the model's, in one checkpoint, as train saves it.
    Tokenizer tok;
    Error err = {{0}};
    ck_assert_msg(tokenizer_build(&tok, "abcdefgh", 8, "test", &err), "%s", err.msg);
    Model m;
    ModelConfig cfg = model_of(&want, tok.vocab_size);
    model_init(&m, &cfg, 1, false);
    Metadata run = {0};
    settings_to_metadata(&want, KEPT_IN_RUN, &run);
    metadata_set(&run, "batch_rng", "1");  // the run's state beside its settings (train.c)
    const char *ckpt = path_in(dir, "model.safetensors");
    ck_assert_msg(checkpoint_save_run(&m, &tok, 7, &run, ckpt, &err), "%s", err.msg);
    model_free(&m);
    tokenizer_free(&tok);
    metadata_free(&run);
    Metadata json = {0};
    settings_to_metadata(&want, KEPT_IN_RUN_JSON, &json);
    ck_assert_msg(run_info_save(dir, &json, &err), "%s", err.msg);
    metadata_free(&json);

    // Read back as --resume reads them: the model's settings from the
    // loaded model, the run's from the checkpoint's metadata, the path from
    // run.json.
    TrainSettings got;
    memset(&got, 0, sizeof got);
    CheckpointHeader h;
    ck_assert_msg(checkpoint_read_header(ckpt, &h, &err), "%s", err.msg);
    ck_assert_msg(checkpoint_load(ckpt, &m, &tok, 1, false, NULL, &err), "%s", err.msg);
    Metadata model_keys = {0};
    checkpoint_model_metadata(&model_keys, &m.config, tok.kind);
    Metadata info;
    char info_path[4200];
    ck_assert(run_info_find(dir, info_path, sizeof info_path));
    ck_assert_int_eq(run_info_read(fopen_checked(info_path, "rb", &err), info_path, dir, &info, &err), 0);
    ck_assert_msg(settings_read_kept(&got, &model_keys, KEPT_IN_MODEL, ckpt, &err), "%s", err.msg);
    ck_assert_msg(settings_read_kept(&got, &h.metadata, KEPT_IN_RUN, ckpt, &err), "%s", err.msg);
    ck_assert_msg(settings_read_kept(&got, &info, KEPT_IN_RUN_JSON, ckpt, &err), "%s", err.msg);

    int compared = 0;
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (st->kept == KEPT_NOWHERE) continue;
        if (st == setting_named("vocab_size")) continue;  // a char model's vocabulary is its text's: see below
        char x[4200], y[4200];
        ck_assert_msg(same_value(st, &want, &got), "%s (key \"%s\"): saved %s, read back %s", st->name, st->key,
                      value_text(st, &want, x, sizeof x), value_text(st, &got, y, sizeof y));
        if (st->kept == KEPT_IN_RUN) ck_assert_msg(metadata_get(&h.metadata, st->key), "no \"%s\" in the file", st->key);
        compared++;
    }
    ck_assert_int_gt(compared, 25);
    ck_assert_int_eq(got.layers, 3);  // the model's sizes come from the model itself
    model_free(&m);
    tokenizer_free(&tok);
    metadata_free(&model_keys);
    metadata_free(&h.metadata);
    metadata_free(&info);
}
END_TEST

// A bpe model keeps --vocab-size as its vocabulary's size.
START_TEST(a_bpe_model_keeps_its_vocab_size) {
    TrainSettings s;
    memset(&s, 0, sizeof s);
    ModelConfig cfg = {.vocab_size = 300, .block_size = 4, .n_embd = 8, .n_head = 2, .arch = ARCH_GPT, .n_layer = 1};
    Metadata md = {0};
    checkpoint_model_metadata(&md, &cfg, TOKENIZER_BPE);
    Error err = {{0}};
    ck_assert_msg(settings_read_kept(&s, &md, KEPT_IN_MODEL, "x", &err), "%s", err.msg);
    ck_assert_int_eq(s.tokenizer, TOKENIZER_BPE);
    ck_assert_int_eq(s.vocab_size, 300);
    metadata_free(&md);
    // A char model's does not mean --vocab-size (65 is out of its range).
    memset(&s, 0, sizeof s);
    cfg.vocab_size = 65;
    checkpoint_model_metadata(&md, &cfg, TOKENIZER_CHAR);
    ck_assert_msg(settings_read_kept(&s, &md, KEPT_IN_MODEL, "x", &err), "%s", err.msg);
    ck_assert_int_eq(s.vocab_size, 0);
    metadata_free(&md);
}
END_TEST

START_TEST(help_lists_every_flag_of_the_table_with_its_default) {
    TrainSettings s;
    Given given;
    fresh(&s, &given, NULL);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    print_command_help(&cmd, f);
    fclose(f);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (strncmp(st->flag, "--", 2) != 0) continue;  // FILE: the usage line's
        char line[64];
        snprintf(line, sizeof line, "\n  %s ", st->flag);  // the space: --lr is not --lr-schedule
        const char *row = strstr(text, line);
        if (!st->help) {
            ck_assert_msg(row == NULL, "%s is a hook for tests, yet --help lists it", st->flag);
            continue;
        }
        ck_assert_msg(row != NULL, "--help does not list %s:\n%s", st->flag, text);
        const char *end = strchr(row + 1, '\n');
        ck_assert_msg(strstr(row, st->help) && strstr(row, st->help) < end, "%s's row lacks its help", st->flag);
        char want[96] = "";
        const bool gpt_only = st->needs && strcmp(st->needs, "arch") == 0;  // card's default unshown
        if (st->type == SETTING_SWITCH) {
            if (st->gpt_default && strcmp(st->gpt_default, "1") == 0) snprintf(want, sizeof want, "(default on)");
        } else if (st->derived) snprintf(want, sizeof want, "(default %s)", st->derived);
        else if (st->gpt2_default) snprintf(want, sizeof want, "(default %s; gpt2 %s)", st->gpt_default, st->gpt2_default);
        else if (st->gpt_default && st->card_default && !gpt_only && strcmp(st->gpt_default, st->card_default) != 0)
            snprintf(want, sizeof want, "(default gpt %s, card %s)", st->gpt_default, st->card_default);
        else if (st->gpt_default) snprintf(want, sizeof want, "(default %s)", st->gpt_default);
        if (want[0])
            ck_assert_msg(strstr(row, want) && strstr(row, want) < end, "%s's row does not say %s", st->flag, want);
    }
    ck_assert_ptr_nonnull(strstr(text, "usage: tinygpt train [FILE]"));
    free(text);
}
END_TEST

// Each default, typed as a flag, gives the value train takes when the flag
// is not given: the defaults are values the flags accept, in range.
START_TEST(every_default_reads_as_its_flag_would) {
    for (int arch = 0; arch < 2; arch++) {
        TrainSettings defaults, typed;
        Given given;
        fresh(&defaults, &given, (const char *const[]){"--arch", ARCH_NAMES[arch], NULL});
        settings_finish(&cmd, &defaults, &given, NULL);
        for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
            const Setting *st = &TRAIN_SETTINGS[i];
            const char *text = arch == ARCH_CARD && st->card_default ? st->card_default : st->gpt_default;
            if (!text || strncmp(st->flag, "--", 2) != 0 || st->type == SETTING_SWITCH || st == setting_named("arch"))
                continue;
            if (arch == ARCH_CARD && !st->card_default && st->needs) continue;  // not a card setting
            fresh(&typed, &given, (const char *const[]){"--arch", ARCH_NAMES[arch], st->flag, text, NULL});
            ck_assert_msg(same_value(st, &defaults, &typed), "%s, %s: the default %s is not what the flag reads",
                          ARCH_NAMES[arch], st->flag, text);
        }
    }
}
END_TEST

START_TEST(card_and_gpt_take_their_own_defaults_and_the_derived_ones_follow) {
    TrainSettings s;
    Given given;
    fresh(&s, &given, (const char *const[]){"--arch", "card", NULL});
    settings_finish(&cmd, &s, &given, NULL);
    ck_assert_int_eq(s.steps, 7000);
    ck_assert_int_eq(s.optimizer, OPT_SGD);
    ck_assert(s.lr == 0.5);
    ck_assert_int_eq(s.log_interval, 500);  // --eval-interval's
    fresh(&s, &given, (const char *const[]){"--lr", "3e-4", "--eval-interval", "7", NULL});
    settings_finish(&cmd, &s, &given, NULL);
    ck_assert_int_eq(s.steps, 2000);
    ck_assert_int_eq(s.optimizer, OPT_ADAMW);
    ck_assert(s.lr == 3e-4);
    ck_assert(s.min_lr == 3e-4 / 10.0);  // lr/10, in double, as nanoGPT's min_lr
    ck_assert_int_eq(s.log_interval, 7);
    ck_assert_str_eq(s.out_dir, "out");
    fresh(&s, &given, (const char *const[]){"--resume", "runs/a", NULL});
    ck_assert_str_eq(s.out_dir, "runs/a");  // a resumed run writes where it was
}
END_TEST

// gpt2 from scratch is GPT-2's model: the gpt's plain parts (card's column)
// but for GELU's form, which is GPT-2's own tanh form unless --mlp says.
START_TEST(gpt2_takes_gpt2s_parts_and_its_tanh_gelu) {
    TrainSettings s;
    Given given;
    fresh(&s, &given, (const char *const[]){"--arch", "gpt2", NULL});
    settings_finish(&cmd, &s, &given, NULL);
    ck_assert_int_eq(s.mlp, MLP_GELU_TANH);
    ck_assert_int_eq(s.norm, NORM_LAYERNORM);
    ck_assert_int_eq(s.pos, POS_LEARNED);
    ck_assert(!s.untied_head);
    ck_assert_int_eq(s.optimizer, OPT_ADAMW);  // and gpt's training defaults
    fresh(&s, &given, (const char *const[]){"--arch", "gpt2", "--mlp", "gelu", NULL});
    settings_finish(&cmd, &s, &given, NULL);
    ck_assert_int_eq(s.mlp, MLP_GELU);
    fresh(&s, &given, (const char *const[]){"--arch", "gpt", NULL});
    settings_finish(&cmd, &s, &given, NULL);
    ck_assert_int_eq(s.mlp, MLP_RELU2);
}
END_TEST

// expect_read_rejected: settings_read_kept of "md" fails, naming the file,
// the key and the flag.
static void expect_read_rejected(const Metadata *md, Kept kept, const char *key, const char *flag) {
    TrainSettings s;
    memset(&s, 0, sizeof s);
    Error err = {{0}};
    ck_assert_msg(!settings_read_kept(&s, md, kept, "runs/x/model.safetensors", &err), "\"%s\" was read", key);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    ck_assert_msg(strstr(err.msg, "runs/x/model.safetensors") && strstr(err.msg, quoted) && strstr(err.msg, flag) &&
                      !strchr(err.msg, '\n'),
                  "wanted the file, %s and %s in one line: %s", quoted, flag, err.msg);
}

// A damaged file cannot make train divide by a zero --eval-interval, draw
// from a batch of a million rows, or read "12abc" as 12: a value read back
// is held to everything the flag holds it to, and more strictly spelled.
START_TEST(values_read_back_must_be_what_the_flag_would_take_spelled_as_tinygpt_writes_them) {
    TrainSettings ok;
    memset(&ok, 0, sizeof ok);
    unusual(&ok);
    ok.optimizer = OPT_ADAMW;
    const struct {
        const char *key, *value;
        size_t len;
        const char *flag;
    } cases[] = {
#define VALUE(literal) literal, sizeof literal - 1
        {"batch", VALUE("0"), "--batch"},
        {"batch", VALUE("1048577"), "--batch"},
        {"batch", VALUE(" 12"), "--batch"},
        {"batch", VALUE("+12"), "--batch"},
        {"batch", VALUE("12abc"), "--batch"},
        {"seed", VALUE("-1"), "--seed"},
        {"steps", VALUE("0x10"), "--steps"},
        {"eval_interval", VALUE("0"), "--eval-interval"},
        {"eval_batches", VALUE("99999999999999999999"), "--eval-batches"},
        {"lr", VALUE("nan"), "--lr"},
        {"lr", VALUE("-0.1"), "--lr"},
        {"lr", VALUE("2e6"), "--lr"},
        {"lr", VALUE(".5"), "--lr"},
        {"val_fraction", VALUE("1"), "--val-fraction"},
        {"beta1", VALUE("1"), "--beta1"},
        {"order", VALUE("reversed"), "--order"},
        {"order", VALUE("random\0"), "--order"},
        {"optimizer", VALUE("Adam"), "--optimizer"},
#undef VALUE
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Metadata md = {0};
        settings_to_metadata(&ok, KEPT_IN_RUN, &md);
        metadata_set_bytes(&md, cases[i].key, cases[i].value, cases[i].len);
        expect_read_rejected(&md, KEPT_IN_RUN, cases[i].key, cases[i].flag);
        metadata_free(&md);
    }
    Metadata md = {0};
    settings_to_metadata(&ok, KEPT_IN_RUN, &md);
    TrainSettings got;
    memset(&got, 0, sizeof got);
    Error err = {{0}};
    ck_assert_msg(settings_read_kept(&got, &md, KEPT_IN_RUN, "x", &err), "the unchanged values: %s", err.msg);
    metadata_free(&md);
}
END_TEST

// A run saved before AdamW existed has no optimizer keys: it trained with
// plain SGD at a constant rate and no clipping. One saved before
// settings_format wrote --lr and --val-fraction as floats, to 9 digits:
// they read back as those floats, so the run resumes bit for bit. A key a
// run cannot do without is an error.
START_TEST(an_older_file_reads_as_it_was_meant) {
    Metadata md = {0};
    metadata_set(&md, "steps", "3000");
    metadata_set(&md, "batch", "32");
    metadata_set(&md, "lr", "0.00100000005");
    metadata_set(&md, "val_fraction", "0.100000001");
    metadata_set(&md, "eval_interval", "250");
    metadata_set(&md, "eval_batches", "20");
    metadata_set(&md, "save_every", "1000");
    metadata_set(&md, "order", "random");
    metadata_set(&md, "seed", "1337");
    TrainSettings s;
    memset(&s, 0, sizeof s);
    Error err = {{0}};
    ck_assert_msg(settings_read_kept(&s, &md, KEPT_IN_RUN, "old.safetensors", &err), "%s", err.msg);
    ck_assert_int_eq(s.optimizer, OPT_SGD);
    ck_assert_int_eq(s.lr_schedule, LR_CONSTANT);
    ck_assert_int_eq(s.warmup, 0);
    ck_assert(s.grad_clip == 0.0);
    ck_assert(s.lr == (double)1e-3f);  // the float it trained with, not 0.00100000005
    ck_assert(s.val_fraction == (double)0.1f);
    // Written by this tinygpt, the same text is the double it says.
    metadata_set(&md, "settings_format", "2");
    ck_assert_msg(settings_read_kept(&s, &md, KEPT_IN_RUN, "new.safetensors", &err), "%s", err.msg);
    ck_assert(s.lr == 0.00100000005);
    // A run's batch it cannot do without.
    Metadata without = {0};
    for (int i = 0; i < md.count; i++)
        if (strcmp(md.items[i].key, "batch") != 0) metadata_set_bytes(&without, md.items[i].key, md.items[i].value, md.items[i].len);
    expect_read_rejected(&without, KEPT_IN_RUN, "batch", "--batch");
    metadata_free(&without);
    metadata_free(&md);
}
END_TEST

// settings_value_text writes a double in the fewest digits that read back
// as the same double: "0.001", and 17 digits only where they are needed.
START_TEST(doubles_are_written_short_and_read_back_exactly) {
    const Setting *lr = setting_named("lr");
    const double values[] = {1e-3, 0.5, 3e-4, 1.0 / 3.0, (double)1e-3f, 6e-4 * 0.1, 1e6, 0.0, 5e-324};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        TrainSettings s;
        memset(&s, 0, sizeof s);
        s.lr = values[i];
        char text[64];
        settings_value_text(lr, &s, text, sizeof text);
        ck_assert_msg(strtod(text, NULL) == values[i], "%.17g written as %s", values[i], text);
    }
    TrainSettings s = {.lr = 1e-3};
    char text[64];
    ck_assert_str_eq(value_text(lr, &s, text, sizeof text), "0.001");
}
END_TEST

// The usage errors end the process (exit 2): each runs in its own fork,
// its message (checked through the binary in test_cli.c) kept off the
// test's output.
static void quiet_stderr(void) { ck_assert_ptr_nonnull(freopen("/dev/null", "w", stderr)); }

START_TEST(a_flag_for_another_architecture_is_a_usage_error) {
    quiet_stderr();
    TrainSettings s;
    Given given;
    fresh(&s, &given, (const char *const[]){"--arch", "card", "--layers", "2", NULL});
    settings_finish(&cmd, &s, &given, NULL);
}
END_TEST

START_TEST(an_adamw_flag_with_sgd_is_a_usage_error) {
    quiet_stderr();
    TrainSettings s;
    Given given;
    fresh(&s, &given, (const char *const[]){"--optimizer", "sgd", "--beta1", "0.8", NULL});
    settings_finish(&cmd, &s, &given, NULL);
}
END_TEST

START_TEST(a_kept_flag_with_resume_is_a_usage_error) {
    quiet_stderr();
    TrainSettings s;
    Given given;
    fresh(&s, &given, (const char *const[]){"--resume", "r", "--batch", "8", NULL});
    settings_refuse_on_resume(&cmd, &given);
}
END_TEST

START_TEST(a_model_flag_against_the_init_checkpoint_is_a_usage_error) {
    quiet_stderr();
    TrainSettings s, saved;
    Given given, from_file = {{0}};
    fresh(&s, &given, (const char *const[]){"--embd", "64", NULL});
    saved = s;
    saved.embd = 128;
    settings_take_kept(&cmd, &s, &given, &saved, KEPT_IN_MODEL, true, &from_file);
}
END_TEST

START_TEST(resume_may_change_what_does_not_change_the_numbers) {
    TrainSettings s;
    Given given;
    fresh(&s, &given,
          (const char *const[]){"data.txt", "--resume", "r", "--steps", "9", "--save-every", "3", "--log-interval", "2",
                                "--threads", "1", NULL});
    settings_refuse_on_resume(&cmd, &given);  // returns: nothing refused
    // dropout shapes no tensor: --init may change it (and nothing else of the model).
    TrainSettings saved = s;
    saved.dropout = 0.25;
    fresh(&s, &given, (const char *const[]){"--dropout", "0.5", NULL});
    Given from_file = {{0}};
    settings_take_kept(&cmd, &s, &given, &saved, KEPT_IN_MODEL, true, &from_file);
    ck_assert(s.dropout == 0.5);
}
END_TEST

// The flags every command shares (args.h) take train's ranges and
// metavars: `tinygpt sample --threads 2000` and `tinygpt train --threads
// 2000` are refused alike, and --help spells them alike.
START_TEST(the_shared_flags_take_trains_ranges) {
    int threads;
    long seed, max_bytes;
    const Flag shared[] = {threads_flag(&threads, NULL), seed_flag(&seed, NULL), max_bytes_flag(&max_bytes, NULL)};
    const char *names[] = {"threads", "seed", "max_bytes"};
    for (int i = 0; i < 3; i++) {
        const Setting *row = setting_named(names[i]);
        ck_assert_str_eq(row->flag, shared[i].name);
        ck_assert_str_eq(row->metavar, shared[i].metavar);
        ck_assert_msg(row->min == shared[i].min && row->max == shared[i].max,
                      "%s: train takes [%g, %g], the other commands [%g, %g]", row->flag, row->min, row->max,
                      shared[i].min, shared[i].max);
    }
}
END_TEST

// eval --split val cuts the text as train did: its default fraction and
// its range are train's --val-fraction row's, as eval's --help says.
START_TEST(eval_takes_trains_validation_fraction) {
    const Setting *row = setting_named("val_fraction");
    RunResult *r = run_tinygpt(dir, "eval --help");
    ck_assert_int_eq(r->status, 0);
    const char *line = strstr(r->out, "--val-fraction");
    ck_assert_ptr_nonnull(line);
    char want_default[64], want_max[64];
    snprintf(want_default, sizeof want_default, "else %s)", row->gpt_default);
    snprintf(want_max, sizeof want_max, "at most %g", row->max);
    const char *end = strchr(line, '\n');
    ck_assert_msg(strstr(line, want_default) && strstr(line, want_default) < end, "eval's --val-fraction row lacks '%s'",
                  want_default);
    ck_assert_msg(strstr(line, want_max) && strstr(line, want_max) < end, "eval's --val-fraction row lacks '%s'",
                  want_max);
}
END_TEST

// The settings that shape the model (KEPT_IN_MODEL) are exactly the keys a
// model file holds about its model (checkpoint.c's table, and its rules for
// "tokenizer", "arch", "n_layer" and "dropout"): a key added to one list
// and not the other would be saved and never read, or read from nowhere.
START_TEST(the_models_settings_are_the_model_files_keys) {
    ModelConfig cfg = {.vocab_size = 300, .block_size = 8, .n_embd = 8, .n_head = 2, .arch = ARCH_GPT, .n_layer = 1};
    Metadata md = {0};
    checkpoint_model_metadata(&md, &cfg, TOKENIZER_BPE);
    int model_rows = 0;
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (st->kept != KEPT_IN_MODEL) continue;
        model_rows++;
        ck_assert_msg(metadata_get(&md, st->key), "setting %s's key \"%s\" is not a model file's", st->name, st->key);
    }
    for (int k = 0; k < md.count; k++) {
        bool found = false;
        for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
            found |= TRAIN_SETTINGS[i].kept == KEPT_IN_MODEL && strcmp(TRAIN_SETTINGS[i].key, md.items[k].key) == 0;
        ck_assert_msg(found, "a model file's key \"%s\" is no setting's", md.items[k].key);
    }
    ck_assert_int_eq(model_rows, md.count);
    metadata_free(&md);
}
END_TEST

Suite *settings_suite(void) {
    Suite *s = suite_create("settings");
    TCase *tc = tcase_create("table");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, every_kept_setting_round_trips_through_a_checkpoint_and_run_json_bit_for_bit);
    tcase_add_test(tc, a_bpe_model_keeps_its_vocab_size);
    tcase_add_test(tc, help_lists_every_flag_of_the_table_with_its_default);
    tcase_add_test(tc, every_default_reads_as_its_flag_would);
    tcase_add_test(tc, card_and_gpt_take_their_own_defaults_and_the_derived_ones_follow);
    tcase_add_test(tc, gpt2_takes_gpt2s_parts_and_its_tanh_gelu);
    tcase_add_test(tc, values_read_back_must_be_what_the_flag_would_take_spelled_as_tinygpt_writes_them);
    tcase_add_test(tc, an_older_file_reads_as_it_was_meant);
    tcase_add_test(tc, doubles_are_written_short_and_read_back_exactly);
    tcase_add_test(tc, resume_may_change_what_does_not_change_the_numbers);
    tcase_add_test(tc, the_shared_flags_take_trains_ranges);
    tcase_add_test(tc, eval_takes_trains_validation_fraction);
    tcase_add_test(tc, the_models_settings_are_the_model_files_keys);
    suite_add_tcase(s, tc);
    TCase *usage = tcase_create("usage errors");  // no fixture: an exit skips the teardown
    tcase_add_exit_test(usage, a_flag_for_another_architecture_is_a_usage_error, EXIT_USAGE);
    tcase_add_exit_test(usage, an_adamw_flag_with_sgd_is_a_usage_error, EXIT_USAGE);
    tcase_add_exit_test(usage, a_kept_flag_with_resume_is_a_usage_error, EXIT_USAGE);
    tcase_add_exit_test(usage, a_model_flag_against_the_init_checkpoint_is_a_usage_error, EXIT_USAGE);
    suite_add_tcase(s, usage);
    return s;
}
