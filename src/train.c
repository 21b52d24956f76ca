// train.c: the training loop and the `train` command (see train.h).
#include "train.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "checkpoint.h"
#include "data.h"
#include "model.h"
#include "watch.h"

typedef struct {
    const char *data_path;
    const char *out_dir;
    const char *init_path;
    const char *order;
    long steps;
    int batch, context, embd, heads;
    float dropout, lr, val_fraction;
    int eval_interval, eval_batches, threads;
    long seed;
} TrainOptions;

// Everything one training run holds, built before the first step so the
// steps themselves allocate nothing.
typedef struct {
    Dataset data;
    Tokenizer tok;
    Model model;
    int *inputs, *targets;  // [B,T] the current batch
    FILE *log;              // <out>/log.csv
    char checkpoint_path[4096];
} TrainRun;

// The mean loss over "n_batches" fixed windows of the validation split,
// dropout off. The windows are the same at every evaluation, so successive
// values are comparable.
static float validation_loss(TrainRun *run, int B, int T, int n_batches) {
    TokenSpan val_tokens = dataset_val(&run->data);
    double total = 0.0;
    for (int k = 0; k < n_batches; k++) {
        batch_sequential(val_tokens, k, B, T, run->inputs, run->targets);
        total += model_forward(&run->model, run->inputs, run->targets, B, T, false, 0);
    }
    return (float)(total / n_batches);
}

// make_dir: create --out and any missing parents, like `mkdir -p`.
static void make_dir(const char *path) {
    char partial[4096];
    if (strlen(path) >= sizeof partial) die(EXIT_USAGE, "--out '%.40s...' is too long; use a shorter path", path);
    strcpy(partial, path);
    for (char *slash = strchr(partial + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';  // each parent in turn
        if (mkdir(partial, 0777) != 0 && errno != EEXIST)
            die(EXIT_RUNTIME, "cannot create directory '%s' for --out: %s; pick another --out", partial,
                strerror(errno));
        *slash = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        die(EXIT_RUNTIME, "cannot create output directory '%s': %s; pick another --out", path, strerror(errno));
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        die(EXIT_RUNTIME, "--out '%s' exists and is not a directory; pick another --out", path);
}

// With --init, the sizes come from the checkpoint: a size flag given too
// must agree with it.
static void check_init_conflicts(const Command *cmd, const ModelConfig *cfg) {
    struct {
        const char *flag;
        int saved;
    } sizes[] = {{"--context", cfg->block_size}, {"--embd", cfg->n_embd}, {"--heads", cfg->n_head}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const Flag *f = command_flag(cmd, sizes[i].flag);
        int given = *(const int *)f->value;
        if (f->seen && given != sizes[i].saved)
            usage_error(cmd, "%s %d conflicts with the --init checkpoint, which has %d; drop the flag", f->name, given,
                        sizes[i].saved);
    }
}

// Build the model, tokenizer and data: from a checkpoint (--init) or fresh.
static void setup_run(TrainRun *run, TrainOptions *opt, const Command *cmd) {
    Error err;
    if (opt->init_path) {
        long saved_step;
        if (!checkpoint_load(opt->init_path, &run->model, &run->tok, opt->batch, true, &saved_step, &err))
            die(EXIT_RUNTIME, "%s", err.msg);
        check_init_conflicts(cmd, &run->model.config);
        // Dropout is not a size: the flag, when given, overrides the file's.
        if (command_flag(cmd, "--dropout")->seen) run->model.config.dropout = opt->dropout;
        opt->context = run->model.config.block_size;
        if (!dataset_load(&run->data, &run->tok, false, opt->data_path, opt->val_fraction, opt->context, &err))
            die(EXIT_RUNTIME, "%s", err.msg);
    } else {
        if (!dataset_load(&run->data, &run->tok, true, opt->data_path, opt->val_fraction, opt->context, &err))
            die(EXIT_RUNTIME, "%s", err.msg);
        ModelConfig cfg = {run->tok.vocab_size, opt->context, opt->embd, opt->heads, opt->dropout};
        if (!model_check_config(&cfg, &err)) usage_error(cmd, "%s", err.msg);
        if (!model_check_memory(&cfg, opt->batch, true, &err)) usage_error(cmd, "%s", err.msg);
        model_init(&run->model, &cfg, opt->batch, true);
        Rng init_rng;
        rng_init(&init_rng, (uint64_t)opt->seed);
        model_init_weights(&run->model, &init_rng);
    }
    size_t positions = (size_t)opt->batch * opt->context;
    run->inputs = xmalloc(positions * sizeof(int));
    run->targets = xmalloc(positions * sizeof(int));

    make_dir(opt->out_dir);
    char log_path[4096];
    snprintf(log_path, sizeof log_path, "%s/log.csv", opt->out_dir);
    snprintf(run->checkpoint_path, sizeof run->checkpoint_path, "%s/model.safetensors", opt->out_dir);
    run->log = fopen_checked(log_path, "w", &err);
    if (!run->log) die(EXIT_RUNTIME, "%s", err.msg);
    fprintf(run->log, "step,train_loss,val_loss,lr,ms,tokens_per_s\n");
}

static void free_run(TrainRun *run) {
    if (run->log) fclose(run->log);
    free(run->targets);
    free(run->inputs);
    model_free(&run->model);
    dataset_free(&run->data);
    tokenizer_free(&run->tok);
}

static void train_loop(TrainRun *run, const TrainOptions *opt) {
    const ModelConfig *cfg = &run->model.config;
    const int B = opt->batch, T = cfg->block_size;
    const bool sequential = strcmp(opt->order, "sequential") == 0;
    const bool has_val = run->data.n_tokens > run->data.n_train;
    Rng batch_rng;
    rng_init(&batch_rng, (uint64_t)opt->seed ^ 0x5851F42D4C957F2Dull);  // a stream apart from init's

    fprintf(stderr, "model: V=%d T=%d C=%d heads=%d dropout=%g, %zu parameters; data: %zu train + %zu val tokens\n",
            cfg->vocab_size, T, cfg->n_embd, cfg->n_head, (double)cfg->dropout, run->model.num_params,
            run->data.n_train, run->data.n_tokens - run->data.n_train);
    const Model *m = &run->model;
    double mb = sizeof(float) / 1e6;
    double grad_acts = (double)m->act_specs[ACT_PROBS].offset;  // the gradient buffer is this prefix
    double scratch = (double)(m->weight_scratch_size + 2 * (size_t)m->max_batch * T);
    fprintf(stderr, "memory: parameters %.1f MB + gradients %.1f MB + activations %.1f MB + activation gradients %.1f MB + scratch %.1f MB = %.1f MB\n",
            m->num_params * mb, m->num_params * mb, m->num_acts * mb, grad_acts * mb, scratch * mb,
            (2.0 * m->num_params + m->num_acts + grad_acts + scratch) * mb);
    double interval_loss = 0.0, interval_seconds = 0.0;
    int interval_steps = 0;
    Watch watch;  // the live status line on a terminal, and loss.png (watch.h)
    watch_init(&watch, opt->steps, (double)B * T, opt->out_dir);
    for (long step = 0; step < opt->steps; step++) {
        bool evaluate = has_val && (step % opt->eval_interval == 0 || step == opt->steps - 1);
        float val_loss = evaluate ? validation_loss(run, B, T, opt->eval_batches) : NAN;

        if (sequential) batch_sequential(dataset_train(&run->data), step, B, T, run->inputs, run->targets);
        else batch_random(dataset_train(&run->data), B, T, &batch_rng, run->inputs, run->targets);

        double start = now_seconds();
        uint64_t dropout_key = mix64(mix64((uint64_t)opt->seed) + (uint64_t)step);
        float loss = model_forward(&run->model, run->inputs, run->targets, B, T, true, dropout_key);
        model_zero_grad(&run->model);
        model_backward(&run->model);
        model_sgd_step(&run->model, opt->lr);
        double seconds = now_seconds() - start;

        double tokens_per_s = (double)B * T / seconds;
        fprintf(run->log, "%ld,%.6f,", step, (double)loss);
        if (evaluate) fprintf(run->log, "%.6f", (double)val_loss);
        fprintf(run->log, ",%g,%.3f,%.0f\n", (double)opt->lr, 1e3 * seconds, tokens_per_s);
        watch_step(&watch, step, loss, val_loss, seconds);

        interval_loss += loss;
        interval_seconds += seconds;
        interval_steps++;
        if (evaluate || step == opt->steps - 1) {
            watch_clear_line(&watch);
            printf("step %6ld/%ld | train loss %.4f", step, opt->steps, interval_loss / interval_steps);
            if (evaluate) printf(" | val loss %.4f", (double)val_loss);
            printf(" | %.2f ms/step | %.0f tokens/s\n", 1e3 * interval_seconds / interval_steps,
                   (double)B * T * interval_steps / interval_seconds);
            fflush(stdout);
            fflush(run->log);
            watch_plot(&watch);
            interval_loss = interval_seconds = 0.0;
            interval_steps = 0;
        }
    }
    watch_free(&watch);
}

int cmd_train(int argc, char **argv) {
    TrainOptions opt = {
        .out_dir = "out",        // where model.safetensors and log.csv go
        .init_path = NULL,       // start from these weights instead of random ones
        .order = "random",       // batch order: random windows, or sequential (replayable)
        .steps = 7000,           // SGD steps: about two minutes on 2 cores with the sizes below
        .batch = 32,             // B: windows per step
        .context = 64,           // T: characters per window
        .embd = 128,             // C: channels
        .heads = 4,              // NH: attention heads
        .dropout = 0.1f,         // attention-weight dropout while training
        .lr = 0.5f,              // SGD learning rate
        .val_fraction = 0.1f,    // last 10% of the text is validation
        .eval_interval = 500,    // steps between validation losses
        .eval_batches = 20,      // validation batches per evaluation
        .threads = 0,            // 0 = OpenMP's default
        .seed = 1337,
    };
    Flag flags[] = {
        {"--out", FLAG_STRING, &opt.out_dir, "DIR", "output directory for model.safetensors and log.csv", 0, 0, false},
        {"--steps", FLAG_LONG, &opt.steps, "N", "number of SGD steps (0 saves the initial model)", 0, 1e12, false},
        {"--batch", FLAG_INT, &opt.batch, "B", "windows per step", 1, 1 << 20, false},
        {"--context", FLAG_INT, &opt.context, "T", "characters per window (the model's block size)", 1, 1 << 16, false},
        {"--embd", FLAG_INT, &opt.embd, "C", "embedding channels", 1, 1 << 16, false},
        {"--heads", FLAG_INT, &opt.heads, "NH", "attention heads; must divide --embd", 1, 1 << 16, false},
        {"--dropout", FLAG_FLOAT, &opt.dropout, "P", "dropout on attention weights, in [0, 1)", 0, 0.999f, false},
        {"--lr", FLAG_FLOAT, &opt.lr, "LR", "SGD learning rate", 0, 1e6, false},
        {"--val-fraction", FLAG_FLOAT, &opt.val_fraction, "F", "fraction of the text, at the end, for validation", 0, 0.9f, false},
        {"--eval-interval", FLAG_INT, &opt.eval_interval, "N", "steps between validation losses", 1, 1e9, false},
        {"--eval-batches", FLAG_INT, &opt.eval_batches, "N", "batches per validation loss", 1, 1e6, false},
        {"--init", FLAG_STRING, &opt.init_path, "MODEL", "start from this .safetensors (sizes and vocabulary from it)", 0, 0, false},
        {"--order", FLAG_STRING, &opt.order, "ORDER", "random, or sequential: batch s row b starts at ((s*B+b)*T) mod (n_train-T)", 0, 0, false},
        {"--seed", FLAG_LONG, &opt.seed, "S", "random seed (weights, batches, dropout)", 0, 9.2e18, false},
        {"--threads", FLAG_INT, &opt.threads, "N", "OpenMP threads, 0 = default", 0, 1024, false},
    };
    Command cmd = {"train", "FILE", "Train the attention model on a UTF-8 text file; writes DIR/model.safetensors, DIR/log.csv and DIR/loss.png.",
                   "tinygpt train data/moby-dick.txt --out runs/moby --steps 2000",
                   flags, (int)(sizeof flags / sizeof flags[0])};
    opt.data_path = parse_flags(&cmd, argc, argv);
    if (strcmp(opt.order, "random") != 0 && strcmp(opt.order, "sequential") != 0)
        usage_error(&cmd, "--order '%s' is not one of: random, sequential", opt.order);
    if (opt.threads > 0) omp_set_num_threads(opt.threads);

    TrainRun run;
    memset(&run, 0, sizeof run);
    setup_run(&run, &opt, &cmd);
    train_loop(&run, &opt);

    Error err;
    if (!checkpoint_save(&run.model, &run.tok, opt.steps, run.checkpoint_path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    fprintf(stderr, "saved %s\n", run.checkpoint_path);
    free_run(&run);
    return 0;
}
