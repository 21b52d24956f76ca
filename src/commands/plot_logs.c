// plot_logs.c: `tinygpt plot`: its flags, and the logs read and drawn with
// plot.h (see plot_logs.h).
#include "plot_logs.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "canvas.h"
#include "common.h"
#include "plot.h"

// run_name: a log's default label, the name of the directory it is in
// ("runs/ladder/l3/log.csv" -> "l3"), into "name" [cap]. A log given as
// "log.csv", "./log.csv" or "../log.csv" asks the file system for the name.
static void run_name(const char *log_path, char *name, size_t cap) {
    char dir[4096];
    path_dir(log_path, dir, sizeof dir);  // a longer path cannot be read: the name does not matter
    const char *last = path_base(dir);
    char resolved[PATH_MAX];
    if ((strcmp(last, ".") == 0 || strcmp(last, "..") == 0 || *last == '\0') && realpath(dir, resolved)) {
        last = path_base(resolved);
        if (*last == '\0') last = "/";
    }
    snprintf(name, cap, "%s", last);
}

// cmd_plot: 1. the flags checked against the logs, and the defaults that
// depend on how many there are; 2. every log read; 3. the unit settled;
// 4. one picture drawn.
int cmd_plot(int argc, char **argv) {
    const char *out_path = NULL;     // default: loss.png next to one log, compare.png here for several
    PlotX x = PLOT_X_STEP;           // what x is: step or time
    PlotUnit unit = PLOT_NATS;       // what y is; not given: nats for one log, bpb for several (when they have it)
    const char *labels_text = NULL;  // one name per log, "a,b,c"; default: each log's directory
    const char *title = NULL;        // default: "loss: LOG.csv" for one log, "validation loss" for several
    Flag flags[] = {
        {"--out", FLAG_STRING, &out_path, "PNG", "where to write the picture (default: loss.png next to LOG.csv; compare.png here for several logs)", 0, 0, false, NULL, NULL},
        {"--x", FLAG_CHOICE, &x, "step|time", "x axis: the step, or the training seconds so far (the running sum of the log's ms column)", 0, 0, false, NULL, PLOT_X_NAMES},
        {"--unit", FLAG_CHOICE, &unit, "nats|bpb", "y axis: loss in nats per token, or validation bits per byte (the log's val_bpb), which compares runs of any tokenizer", 0, 0, false, "bpb for several logs; nats for one, with bits per byte on a second axis", PLOT_UNIT_NAMES},
        {"--labels", FLAG_STRING, &labels_text, "A,B,...", "the logs' names in the legend (the title for one log), comma-separated, one per log", 0, 0, false, "each log's directory", NULL},
        {"--title", FLAG_STRING, &title, "TEXT", "the picture's title", 0, 0, false, "'loss: LOG.csv', or 'validation loss' for several", NULL},
    };
    Command cmd = {"plot", "LOG.csv...",
                   "Draw the train and validation loss curves of a log.csv written by 'tinygpt train' as a PNG "
                   "(the loss.png that train itself refreshes at every evaluation); given several logs (up to 8), "
                   "draw one validation curve per log on one picture to compare the runs, in bits per byte.",
                   "tinygpt plot runs/a/log.csv runs/b/log.csv --x time --labels \"small,large\"", flags,
                   (int)(sizeof flags / sizeof flags[0])};
    const char *logs[PLOT_MAX_LOGS];
    int n = parse_flags_list(&cmd, argc, argv, logs, PLOT_MAX_LOGS);

    // 1. Check the flags against the logs.
    char names[PLOT_MAX_LOGS][256];  // the default labels
    const char *labels[PLOT_MAX_LOGS];
    char *labels_copy = NULL;
    if (labels_text) {
        int count = 1;
        for (const char *p = labels_text; *p; p++) count += *p == ',';
        if (count != n) usage_error(&cmd, "--labels has %d name%s for %d log%s", count, count == 1 ? "" : "s", n, n == 1 ? "" : "s");
        labels_copy = xmalloc(strlen(labels_text) + 1);
        strcpy(labels_copy, labels_text);
        char *p = labels_copy;
        for (int i = 0; i < n; i++) {
            labels[i] = p;
            p += strcspn(p, ",");
            *p++ = '\0';
        }
    } else {
        for (int i = 0; i < n; i++) {
            run_name(logs[i], names[i], sizeof names[i]);
            labels[i] = names[i];
        }
    }
    char default_out[4096];
    if (!out_path && n == 1) {
        // The log's name replaced: "runs/a/log.csv" -> "runs/a/loss.png", "log.csv" -> "loss.png".
        snprintf(default_out, sizeof default_out, "%.*sloss.png", (int)(path_base(logs[0]) - logs[0]), logs[0]);
        out_path = default_out;
    } else if (!out_path) {
        out_path = "compare.png";
    }

    // 2. Read every log.
    LossHistory runs[PLOT_MAX_LOGS];
    Error err;
    for (int i = 0; i < n; i++) {
        loss_history_init(&runs[i]);
        runs[i].x = x;
        if (!loss_history_read_csv(&runs[i], logs[i], &err)) die(EXIT_RUNTIME, "%s", err.msg);
    }

    // 3. The unit. Bits per byte needs the val_bpb column, which logs from
    // before it existed lack: asked for, that is an error; as the default
    // of a comparison, every run is compared in nats per token instead (one
    // unit for all, said on stderr).
    const bool unit_given = command_flag(&cmd, "--unit")->seen;
    if (!unit_given) unit = n > 1 ? PLOT_BPB : PLOT_NATS;
    for (int i = 0; i < n && unit == PLOT_BPB; i++) {
        if (runs[i].has_bpb) continue;
        if (unit_given)
            die(EXIT_RUNTIME, "'%s' has no val_bpb column (a log from before tinygpt logged bits per byte), so it "
                              "cannot be drawn in bits per byte; use --unit nats", logs[i]);
        fprintf(stderr, "note: '%s' has no val_bpb column (a log from before tinygpt logged bits per byte); "
                        "comparing validation loss in nats per token instead, which compares only runs of the same "
                        "tokenizer\n", logs[i]);
        unit = PLOT_NATS;
    }

    // 4. Draw: one log as train draws it, several as their validation curves.
    Canvas canvas;
    canvas_init(&canvas, PLOT_WIDTH, PLOT_HEIGHT);
    if (n == 1) {
        char one_title[4200];
        snprintf(one_title, sizeof one_title, "loss: %s", labels_text ? labels[0] : logs[0]);
        plot_history(&canvas, &runs[0], unit, title ? title : one_title);
    } else {
        plot_compare(&canvas, runs, labels, n, unit, title ? title : "validation loss");
    }
    if (!canvas_write_png(&canvas, out_path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    if (n == 1 && unit == PLOT_NATS) {
        fprintf(stderr, "wrote %s (%d x %d): %zu train and %zu validation points, in nats per token%s\n", out_path,
                PLOT_WIDTH, PLOT_HEIGHT, runs[0].train.n, runs[0].val.n,
                runs[0].bpb_per_nat > 0 ? " (and bits per byte on the right)" : "");
    } else if (n == 1) {
        fprintf(stderr, "wrote %s (%d x %d): %zu validation points, in bits per byte\n", out_path, PLOT_WIDTH,
                PLOT_HEIGHT, runs[0].val_bpb.n);
    } else {
        fprintf(stderr, "wrote %s (%d x %d): %d validation curves of", out_path, PLOT_WIDTH, PLOT_HEIGHT, n);
        for (int i = 0; i < n; i++)
            fprintf(stderr, "%s %zu", i == 0 ? "" : ",", unit == PLOT_BPB ? runs[i].val_bpb.n : runs[i].val.n);
        fprintf(stderr, " points, in %s\n", unit == PLOT_BPB ? "bits per byte" : "nats per token");
    }
    canvas_free(&canvas);
    for (int i = n - 1; i >= 0; i--) loss_history_free(&runs[i]);
    free(labels_copy);
    return 0;
}
