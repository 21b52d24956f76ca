// settings.c: the loops over the table of a training run's settings
// (settings_table.c; see settings.h).
//
// Reading order: file 33, after settings_table.c. What train does with the
// table, in the order it does it: make the flags and parse them; on
// --resume refuse the flags a run keeps; take settings from a checkpoint
// (--init, --resume) or run.json; apply the defaults and check what each
// needs; write them into a checkpoint's metadata.
#include "settings.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// field: where setting "st" of "s" is.
static void *field(const Setting *st, const TrainSettings *s) { return (char *)s + st->offset; }

// is_flag: "st" is given as a flag, not as the positional FILE.
static bool is_flag(const Setting *st) { return strncmp(st->flag, "--", 2) == 0; }

// typed_flag: the flag of "st" that the command line gave, for messages:
// the switch's off flag when that was one of them (--tied-head).
static const char *typed_flag(const Command *cmd, const Setting *st) {
    return st->off_flag && command_flag(cmd, st->off_flag)->seen ? st->off_flag : st->flag;
}

// ===========================================================================
// A setting's value, as text and back. The defaults in the table and the
// values a checkpoint keeps are read by the same strict parser.

// value_size: the bytes of a setting's value in TrainSettings.
static size_t value_size(SettingType type) {
    switch (type) {
    case SETTING_INT:
    case SETTING_CHOICE: return sizeof(int);
    case SETTING_LONG: return sizeof(long);
    case SETTING_DOUBLE: return sizeof(double);
    case SETTING_SWITCH: return sizeof(bool);
    case SETTING_PATH: return sizeof(const char *);
    }
    return 0;
}

// parse_value: "text" ("len" bytes) as the value of "st", strictly: what
// settings_value_text writes and nothing else (digits only for a whole
// number, a digit first for a double, a choice's exact name, "0" or "1"
// for a switch), within the flag's range. False if it is not.
static bool parse_value(const Setting *st, const char *text, size_t len, TrainSettings *s) {
    if (strlen(text) != len || len == 0) return false;
    switch (st->type) {
    case SETTING_INT:
    case SETTING_LONG: {
        uint64_t x;
        if (!parse_u64(text, len, &x) || (double)x < st->min || (st->max > 0 && (double)x > st->max)) return false;
        if (st->type == SETTING_INT) *(int *)field(st, s) = (int)x;
        else *(long *)field(st, s) = (long)x;
        return true;
    }
    case SETTING_DOUBLE: {
        double x;
        if (!parse_double(text, len, &x) || x < st->min || (st->max > 0 && x > st->max)) return false;
        *(double *)field(st, s) = x;
        return true;
    }
    case SETTING_CHOICE: {
        int index = name_index(st->choices, text);
        if (index < 0) return false;
        *(int *)field(st, s) = index;
        return true;
    }
    case SETTING_SWITCH:
        if (strcmp(text, "0") != 0 && strcmp(text, "1") != 0) return false;
        *(bool *)field(st, s) = text[0] == '1';
        return true;
    case SETTING_PATH: *(const char **)field(st, s) = text; return true;
    }
    return false;
}

void settings_value_text(const Setting *st, const TrainSettings *s, char *out, size_t cap) {
    const void *value = field(st, s);
    switch (st->type) {
    case SETTING_INT: snprintf(out, cap, "%d", *(const int *)value); break;
    case SETTING_LONG: snprintf(out, cap, "%ld", *(const long *)value); break;
    case SETTING_DOUBLE: {
        // The shortest of 15, 16 or 17 significant digits that reads back
        // as the same double: "0.001", not "0.0010000000000000000208".
        const double x = *(const double *)value;
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(out, cap, "%.*g", digits, x);
            if (strtod(out, NULL) == x) break;
        }
        break;
    }
    case SETTING_CHOICE: snprintf(out, cap, "%s", st->choices[*(const int *)value]); break;
    case SETTING_SWITCH: snprintf(out, cap, "%s", *(const bool *)value ? "1" : "0"); break;
    case SETTING_PATH: snprintf(out, cap, "%s", *(const char *const *)value ? *(const char *const *)value : ""); break;
    }
}

bool setting_needs_met(const Setting *st, const TrainSettings *s) {
    if (!st->needs) return true;
    const Setting *other = setting_named(st->needs);
    const char *has = other->choices[*(const int *)field(other, s)];
    return strcmp(has, st->needs_value) == 0 || (st->needs_value_or && strcmp(has, st->needs_value_or) == 0);
}

// ===========================================================================
// Parsing the command line: the flags are made from the table, and args.c
// parses them as it parses every command's.

static FlagType flag_type(SettingType type) {
    switch (type) {
    case SETTING_INT: return FLAG_INT;
    case SETTING_LONG: return FLAG_LONG;
    case SETTING_DOUBLE: return FLAG_DOUBLE;
    case SETTING_CHOICE: return FLAG_CHOICE;
    case SETTING_SWITCH: return FLAG_SWITCH;
    case SETTING_PATH: return FLAG_STRING;
    }
    return FLAG_STRING;
}

// default_text: what --help shows as the default of "st": "64", "gpt 12,
// card 32", "lr/10"; "" for none. "out" holds the text.
static const char *default_text(const Setting *st, char *out, size_t cap) {
    if (st->type == SETTING_SWITCH) {
        // A switch on by default says so; off is what a switch means unsaid.
        const bool on = st->gpt_default && strcmp(st->gpt_default, "1") == 0;
        snprintf(out, cap, "%s", on ? "on" : "");
        return out;
    }
    // A gpt-only setting's card default only keeps the card's fields as
    // they were; card never reads it, and --help does not show it.
    const bool gpt_only = st->needs && strcmp(st->needs, "arch") == 0;
    if (st->derived) snprintf(out, cap, "%s", st->derived);
    else if (!st->gpt_default) snprintf(out, cap, "%s", "");
    else if (st->gpt2_default) snprintf(out, cap, "%s; gpt2 %s", st->gpt_default, st->gpt2_default);
    else if (!st->card_default || gpt_only || strcmp(st->gpt_default, st->card_default) == 0)
        snprintf(out, cap, "%s", st->gpt_default);
    else snprintf(out, cap, "gpt %s, card %s", st->gpt_default, st->card_default);
    return out;
}

// Each flag's --help default, one buffer per setting.
static char default_texts[NUM_TRAIN_SETTINGS_MAX][64];

bool setting_shapes_model(const Setting *st) {
    return st->kept == KEPT_IN_MODEL && strcmp(st->name, "tokenizer") != 0 &&
           !(st->needs && strcmp(st->needs, "tokenizer") == 0);
}

// is_flag_of: "st" is a flag of train (every row but the positional FILE),
// or, "model_only", of gradcheck (setting_shapes_model).
static bool is_flag_of(const Setting *st, bool model_only) {
    return is_flag(st) && (!model_only || setting_shapes_model(st));
}

// The flags: the rows is_flag_of takes, in table order, a switch's off
// flag after it. "flags" has room for NUM_TRAIN_SETTINGS_MAX.
static void make_flags(Command *cmd, Flag *flags, TrainSettings *s, bool model_only) {
    int n = 0;
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (!is_flag_of(st, model_only)) continue;
        const char *dflt = default_text(st, default_texts[i], sizeof default_texts[i]);
        assert(n + 2 <= NUM_TRAIN_SETTINGS_MAX && "room for the flags: raise NUM_TRAIN_SETTINGS_MAX");
        if (st->off_flag)
            flags[n + 1] = (Flag){.name = st->off_flag, .type = FLAG_SWITCH_OFF, .value = field(st, s),
                                  .help = st->off_help};
        flags[n++] = (Flag){.name = st->flag,
                            .type = flag_type(st->type),
                            .value = field(st, s),
                            .metavar = st->metavar,
                            .help = st->help,
                            .min = st->min,
                            .max = st->max,
                            .default_text = dflt[0] ? dflt : NULL,
                            .choices = st->choices};
        if (st->off_flag) n++;
    }
    cmd->flags = flags;
    cmd->n_flags = n;
}
void settings_command(Command *cmd, Flag *flags, TrainSettings *s) { make_flags(cmd, flags, s, false); }
void settings_model_command(Command *cmd, Flag *flags, TrainSettings *s) { make_flags(cmd, flags, s, true); }

// apply_default: setting "st" of "s" from its default text for "arch".
// gpt2 takes gpt's defaults, but for the parts of a gpt (the settings that
// need an architecture), where card's column holds the plain gpt's parts,
// which are GPT-2's: LayerNorm, learned positions, a tied head; and GELU,
// in the tanh form GPT-2 was trained with (its own column).
static void apply_default(const Setting *st, TrainSettings *s, Arch arch) {
    const bool model_part = st->needs && strcmp(st->needs, "arch") == 0;
    const bool card_column = arch == ARCH_CARD || (arch == ARCH_GPT2 && model_part);
    const char *text = card_column && st->card_default ? st->card_default : st->gpt_default;
    if (arch == ARCH_GPT2 && st->gpt2_default) text = st->gpt2_default;
    if (!text) return;  // none (--init), or not a card setting
    bool parsed = parse_value(st, text, strlen(text), s);
    assert(parsed && "a default in TRAIN_SETTINGS reads as its flag would");
    (void)parsed;
}

// gpt's defaults and the derived ones go in at once, so that the settings
// that do not depend on the architecture (--out) hold theirs before a
// checkpoint is read; settings_finish sets them all again once the
// architecture is settled. A row that is not the command's flag
// (make_flags) is not given.
static void parse_rows(Command *cmd, int argc, char **argv, TrainSettings *s, Given *given, bool model_only) {
    memset(given, 0, sizeof *given);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) apply_default(&TRAIN_SETTINGS[i], s, ARCH_GPT);
    s->data_path = parse_flags(cmd, argc, argv);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (is_flag(st) && !is_flag_of(st, model_only)) continue;
        // A switch and its off flag both given: the later one holds, as for
        // any flag given twice (the parser set the value in their order).
        const bool off = st->off_flag && command_flag(cmd, st->off_flag)->seen;
        given->given[i] = is_flag(st) ? command_flag(cmd, st->flag)->seen || off : s->data_path != NULL;
    }
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
        if (TRAIN_SETTINGS[i].derive && !given->given[i]) TRAIN_SETTINGS[i].derive(s);
}
void settings_parse(Command *cmd, int argc, char **argv, TrainSettings *s, Given *given) {
    parse_rows(cmd, argc, argv, s, given, false);
}
void settings_model_parse(Command *cmd, int argc, char **argv, TrainSettings *s, Given *given) {
    parse_rows(cmd, argc, argv, s, given, true);
}

// ===========================================================================
// Resuming: the flags a run keeps cannot be given again.

void settings_refuse_on_resume(const Command *cmd, const Given *given) {
    // "--steps, --threads, --save-every and --log-interval": the flags a
    // resumed run may be given, as the table lists them.
    const char *names[NUM_TRAIN_SETTINGS_MAX];
    int n = 0;
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (st->resume == RESUME_MAY_CHANGE && st->help && is_flag(st) &&
            st != setting_named("resume_dir"))
            names[n++] = st->flag;
    }
    char may[256] = "";
    for (int i = 0; i < n; i++) {
        size_t len = strlen(may);
        snprintf(may + len, sizeof may - len, "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", names[i]);
    }
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
        if (given->given[i] && TRAIN_SETTINGS[i].resume == RESUME_KEEPS)
            usage_error(cmd, "%s cannot be changed when resuming: the run's flags come from its checkpoint; drop it (only %s may be given)",
                        typed_flag(cmd, &TRAIN_SETTINGS[i]), may);
}

// ===========================================================================
// Settings from a checkpoint or run.json.

bool settings_read_kept(TrainSettings *saved, const Metadata *md, Kept kept, const char *path, Error *err) {
    const bool exact = metadata_get(md, "settings_format") != NULL;  // see Setting.was_float
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (st->kept != kept || !setting_needs_met(st, saved)) continue;
        const MetadataItem *item = metadata_get(md, st->key);
        if (!item && st->type == SETTING_PATH) continue;  // a path is left out when it is not UTF-8
        const char *text = item ? item->value : st->if_absent ? st->if_absent : st->type == SETTING_SWITCH ? "0" : NULL;
        if (!text)
            return error_set(err, "'%s' has no \"%s\" (%s) in its metadata, which a run needs to continue; the file is damaged: start a new run from its weights with --init",
                             path, st->key, st->flag);
        size_t len = item ? item->len : strlen(text);
        if (!parse_value(st, text, len, saved))
            return error_set(err, "'%s' holds \"%s\" as its \"%s\" (%s), which is not a value %s takes; the file is damaged: start a new run from its weights with --init",
                             path, show(text, len).text, st->key, st->flag, st->flag);
        if (st->was_float && !exact) {
            double *x = field(st, saved);
            *x = (float)*x;
        }
    }
    return true;
}

void settings_take_kept(const Command *cmd, TrainSettings *s, const Given *given, const TrainSettings *saved, Kept kept,
                        bool check_given, Given *from_file) {
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (st->kept != kept || !setting_needs_met(st, saved)) continue;
        char mine[64], theirs[64];
        settings_value_text(st, s, mine, sizeof mine);
        settings_value_text(st, saved, theirs, sizeof theirs);
        if (!given->given[i]) {
            memcpy(field(st, s), field(st, saved), value_size(st->type));
            from_file->given[i] = true;
        } else if (check_given && !st->init_may_change && strcmp(mine, theirs) != 0) {
            usage_error(cmd, "%s %s conflicts with the --init checkpoint, which was trained with %s %s; drop the flag",
                        st->flag, mine, st->flag, theirs);
        }
    }
}

// ===========================================================================
// Defaults, derived values and what each setting needs.

void settings_finish(const Command *cmd, TrainSettings *s, const Given *given, const Given *from_file) {
    const Setting *arch = setting_named("arch");
    const int arch_index = (int)(arch - TRAIN_SETTINGS);
    if (!given->given[arch_index] && !(from_file && from_file->given[arch_index])) apply_default(arch, s, ARCH_GPT);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
        if (!given->given[i] && !(from_file && from_file->given[i])) apply_default(&TRAIN_SETTINGS[i], s, s->arch);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
        if (TRAIN_SETTINGS[i].derive && !given->given[i] && !(from_file && from_file->given[i]))
            TRAIN_SETTINGS[i].derive(s);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (!given->given[i] || setting_needs_met(st, s)) continue;
        const Setting *other = setting_named(st->needs);
        const int other_index = (int)(other - TRAIN_SETTINGS);
        const char *has = other->choices[*(const int *)field(other, s)];
        char why[96] = "", wanted[64];
        if (st->needs_why) snprintf(why, sizeof why, " (%s)", st->needs_why);
        snprintf(wanted, sizeof wanted, "%s%s%s", st->needs_value, st->needs_value_or ? " or " : "",
                 st->needs_value_or ? st->needs_value_or : "");
        if (from_file && from_file->given[other_index])
            usage_error(cmd, "%s is for %s %s%s, and the checkpoint it starts from has %s %s; drop %s",
                        typed_flag(cmd, st), other->flag, wanted, why, other->flag, has, typed_flag(cmd, st));
        usage_error(cmd, "%s is for %s %s%s; drop it, or add %s %s", typed_flag(cmd, st), other->flag, wanted, why,
                    other->flag, st->needs_value);
    }
}

// ===========================================================================
// Settings into a checkpoint's metadata (and run.json).

void settings_to_metadata(const TrainSettings *s, Kept kept, Metadata *md) {
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (st->kept != kept) continue;
        if (st->type == SETTING_PATH) {
            const char *path = *(const char *const *)field(st, s);
            if (path && path[0]) metadata_set_bytes(md, st->key, path, strlen(path));
            continue;
        }
        char text[64];
        settings_value_text(st, s, text, sizeof text);
        metadata_set(md, st->key, "%s", text);
    }
    if (kept == KEPT_IN_RUN) metadata_set(md, "settings_format", "2");
}
