// train_setup.c: a training run set up from its settings (see train_setup.h).
//
// Reading order: file 34. The file from the bottom up: train_setup settles
// the settings (load_start for --init, resume_settings for --resume), then
// setup_run builds the run from them.
#include "train_setup.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpt2_tokenizer.h"
#include "hf_gpt2.h"

// ===========================================================================
// The run, built from its settings.

ModelConfig train_model_config(const TrainSettings *s, int vocab_size) {
    return (ModelConfig){.vocab_size = vocab_size,
                         .block_size = s->context,
                         .n_embd = s->embd,
                         .n_head = s->heads,
                         .dropout = (float)s->dropout,
                         .arch = s->arch,
                         .n_layer = s->arch != ARCH_CARD ? s->layers : 1,
                         .no_layernorm = s->no_layernorm,
                         .no_mlp = s->no_mlp,
                         .no_residual = s->no_residual,
                         .norm = s->norm,
                         .mlp = s->mlp,
                         .untied_head = s->untied_head,
                         .pos = s->pos,
                         .qk_norm = s->qk_norm};
}

// optimizer_config: the settings as the optimizer takes them. The cosine
// decays over the whole run (--steps, also after a resume), as nanoGPT's
// lr_decay_iters = max_iters.
static OptimizerConfig optimizer_config(const TrainSettings *s) {
    return (OptimizerConfig){.kind = s->optimizer,
                             .lr = s->lr,
                             .min_lr = s->min_lr,
                             .beta1 = s->beta1,
                             .beta2 = s->beta2,
                             .weight_decay = s->weight_decay,
                             .muon_lr = s->muon_lr,
                             .grad_clip = s->grad_clip,
                             .schedule = s->lr_schedule,
                             .warmup_steps = s->warmup,
                             .decay_steps = s->steps};
}

// build_model: run->model for "cfg", with gradients, for batches of this
// rank's rows (--batch, or its share under mpirun), and its first weights:
// the start checkpoint's, or drawn from --seed (the same on every rank); a
// usage error if the sizes are invalid or do not fit in memory.
static void build_model(TrainRun *run, const Command *cmd, const ModelConfig *cfg) {
    Error err;
    if (!model_check_config(cfg, &err)) usage_error(cmd, "%s", err.msg);
    if (!model_check_memory(cfg, run->rows, true, &err))
        usage_error(cmd, "%s; use a smaller --batch, --context, --embd or --layers", err.msg);
    model_init(&run->model, cfg, run->rows, true);
    if (run->s.init_path) {
        memcpy(run->model.params_memory, run->start.params_memory, run->start.param_table.total * sizeof(float));
        model_free(&run->start);
    } else {
        Rng init_rng;
        rng_init(&init_rng, (uint64_t)run->s.seed);
        model_init_weights(&run->model, &init_rng);
    }
}

// build_slices: one team of threads through each step (model.h, "Slices"):
// with N threads split by rows (--thread-split's default), when N divides
// this rank's rows and N - 1 more copies of the gradients would cost at most
// a quarter of the activations and their gradients (a small model on many
// rows: GPT-2's size on 4 rows would need 0.5 GB more a thread; both tables,
// since the loss's probs and dlogits are written over the logits, one
// [B,T,V] buffer where the activations alone had counted two), thread k runs
// the whole step on rows k*R/N.. of the batch. Else one slice, the model
// itself, whose every layer shares its rows among the threads. The slices
// hand their gradients on block by block (with --grad-accum, whose
// micro-batches add to them in turn, they keep them all to the end), so they
// cost much less than those copies; but the test is still theirs, so that the
// models sliced, and so the last bits of their runs, are what they were.
static void build_slices(TrainRun *run) {
    Model *m = &run->model;
    // A team of exactly N threads, one per slice (a slice nobody ran would
    // leave its rows out, and the slices after it waiting): no more than
    // OMP_THREAD_LIMIT allows, and not fewer at the runtime's whim
    // (OMP_DYNAMIC).
    const int threads = omp_get_max_threads() < omp_get_thread_limit() ? omp_get_max_threads() : omp_get_thread_limit();
    omp_set_dynamic(0);
    const bool hand_on = run->s.grad_accum == 1;
    const size_t extra = (size_t)(threads - 1) * model_slice_bytes(m, false);
    const size_t acts = (m->act_table.total + m->grad_act_table.total) * sizeof(float);
    run->n_slices = 1;
    if (run->s.thread_split == SPLIT_LAYERS || threads < 2 || run->rows % threads != 0 || extra > acts / 4) return;
    run->n_slices = threads;
    run->slice_bytes = model_slice_bytes(m, hand_on);
    const int rows = run->rows / threads;
    run->slices = xcalloc((size_t)threads - 1, sizeof(Model));
    for (int k = 1; k < threads; k++) {
        const Model *after = !hand_on ? NULL : k == 1 ? m : &run->slices[k - 2];
        model_slice_init(&run->slices[k - 1], m, k * rows, rows, after);
    }
    omp_set_max_active_levels(1);  // inside a slice's thread, every layer's loop runs on that thread
}

// die_resuming: stop with "msg", the reason the checkpoint --resume took
// cannot be read, saying how to go back to the checkpoint before it, if
// the run directory has one (--keep 2 or more keeps them).
static _Noreturn void die_resuming(const TrainRun *run, const char *msg) {
    char older[4200], dir[4200];
    long step, before;
    // A run saved before checkpoints were directories has its one in DIR itself.
    if (!run_dir_named_checkpoint(run->resume_files.checkpoint, dir, sizeof dir, &before)) before = LONG_MAX;
    if (run->writer && run_dir_checkpoint_before(run->s.out_dir, before, older, sizeof older, &step))
        die(EXIT_RUNTIME, "%s; to continue from the checkpoint before it (step %ld): tinygpt train --resume %s", msg,
            step, older);
    die(EXIT_RUNTIME, "%s", msg);
}

// continue_from_state: --resume, once the data is loaded: it must be the
// text the run was trained on; then the batch stream, AdamW's moments and
// the log continue where the checkpoint left them.
static void continue_from_state(TrainRun *run) {
    const Metadata *md = &run->resumed.metadata;
    const char *path = run->s.init_path;
    uint64_t tokens, hash, batch_rng;
    if (!metadata_u64(md, "data_tokens", &tokens) || !metadata_u64(md, "data_hash", &hash) ||
        !metadata_u64(md, "batch_rng", &batch_rng) || batch_rng == 0)
        die(EXIT_RUNTIME, "'%s' is not a valid tinygpt checkpoint: its __metadata__ \"data_tokens\", \"data_hash\" and \"batch_rng\" must be whole numbers below 2^64 (batch_rng not 0); the file is damaged: start a new run from its weights with --init",
            path);
    if (run->data.n_tokens != tokens || run->data_hash != hash)
        die(EXIT_RUNTIME, "'%s' is not the text this run was trained on (%zu tokens; the checkpoint's had %llu, with another fingerprint); give the original file, or start a new run from these weights with --init",
            text_source_name(run->s.data_path), run->data.n_tokens, (unsigned long long)tokens);
    run->batch_rng.state = batch_rng;
    run->last_saved_step = run->start_step;
    // The best validation so far (a checkpoint from before best.safetensors
    // has none: the run starts looking again).
    const MetadataItem *best = metadata_get(md, "best_val_loss");
    uint64_t best_step;
    double best_val;
    if (best && parse_double(best->value, best->len, &best_val) && metadata_u64(md, "best_step", &best_step)) {
        run->best_val = (float)best_val;
        run->best_step = (long)best_step;
    }
    Error err;
    long saved_step;
    if (run->optimizer.cfg.kind != OPT_SGD) {
        const char *state = run->resume_files.optimizer;
        if (!optimizer_state_load_stream(&run->optimizer, &run->model, dist_fopen(&run->dist, state, &err), state,
                                         &saved_step, &err))
            die_resuming(run, err.msg);
        if (saved_step != run->start_step)
            die(EXIT_RUNTIME, "'%s' holds the optimizer's state after step %ld but '%s' holds the weights after step %ld; they must come from the same save, so this run cannot continue exactly: start a new run from the weights with --init",
                state, saved_step, run->resume_files.model, run->start_step);
    }
}

// share_data: under mpirun, the text as rank 0 read and encoded it, and
// the tokenizer it learned from it ("learned"; else every rank has the
// checkpoint's), sent to the other ranks, so only rank 0 needs the file.
static void share_data(TrainRun *run, bool learned) {
    const Dist *d = &run->dist;
    Dataset *ds = &run->data;
    if (d->size == 1) return;
    // The tokenizer as a checkpoint keeps it: char's vocabulary, bpe's merges.
    char *tok_text = NULL;
    size_t tok_len = 0;
    const bool bpe = run->s.tokenizer == TOKENIZER_BPE;
    if (learned && run->writer) {
        tok_text = bpe ? bpe_merges_text(&run->tok.bpe) : tokenizer_vocab_utf8(&run->tok, &tok_len);
        if (bpe) tok_len = strlen(tok_text);
    }
    uint64_t sizes[5] = {(uint64_t)ds->width, ds->n_tokens, ds->n_train, ds->val_bytes, tok_len};
    dist_broadcast(d, sizes, sizeof sizes);
    if (!run->writer) {
        *ds = (Dataset){.width = (int)sizes[0], .n_tokens = sizes[1], .n_train = sizes[2], .val_bytes = sizes[3]};
        ds->ids = xmalloc(ds->n_tokens * (size_t)ds->width);
        tok_len = sizes[4];
        if (learned) tok_text = xmalloc(tok_len + 1);
    }
    dist_broadcast(d, ds->ids, ds->n_tokens * (size_t)ds->width);
    if (learned) {
        dist_broadcast(d, tok_text, tok_len);
        Error err;
        bool ok = run->writer || (bpe ? tokenizer_from_bpe_merges(&run->tok, tok_text, tok_len, &err)
                                      : tokenizer_from_vocab(&run->tok, tok_text, tok_len, &err));
        if (!ok) die(EXIT_RUNTIME, "rank %d could not rebuild rank 0's tokenizer: %s", d->rank, err.msg);
    }
    free(tok_text);
}

// setup_run: the tokenizer and the data (a checkpoint's tokenizer, or one
// built from the text; under mpirun, rank 0's), the model, the optimizer
// and the batch buffers; then the run directory is claimed and the log
// opened (rank 0's alone).
static void setup_run(TrainRun *run, const Command *cmd) {
    TrainSettings *s = &run->s;
    Error err;
    TokenizerSpec learn = {s->tokenizer, s->vocab_size, s->vocab_size_at_most};
    // GPT-2's tokenizer is read, not learned: every process reads it from
    // its directory, as from a checkpoint.
    const bool read_gpt2 = !s->init_path && s->tokenizer == TOKENIZER_GPT2;
    if (read_gpt2 && !tokenizer_load_gpt2(&run->tok, s->tokenizer_dir, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    // Rank 0 reads the text (share_data sends it); if it cannot, every rank stops.
    bool loaded = !run->writer || dataset_load(&run->data, &run->tok, s->init_path || read_gpt2 ? NULL : &learn,
                                               s->data_path, (size_t)s->max_bytes, s->val_fraction, s->context,
                                               &err);
    if (dist_rank0_result(&run->dist, loaded ? 0 : EXIT_RUNTIME, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    share_data(run, !s->init_path && !read_gpt2);
    ModelConfig cfg = s->init_path ? run->start.config : train_model_config(s, run->tok.vocab_size);
    cfg.dropout = (float)s->dropout;  // with --init, the flag overrides the file's: dropout is not a size
    build_model(run, cmd, &cfg);
    build_slices(run);
    OptimizerConfig ocfg = optimizer_config(s);
    optimizer_init(&run->optimizer, &ocfg, &run->model);
    size_t positions = (size_t)run->rows * s->context;
    run->inputs = xmalloc(positions * sizeof(int));
    run->targets = xmalloc(positions * sizeof(int));
    run->data_hash = dataset_hash(&run->data);
    rng_init(&run->batch_rng, (uint64_t)s->seed ^ 0x5851F42D4C957F2Dull);  // a stream apart from init's
    if (s->order == ORDER_SHUFFLED)
        run->shuffled = shuffled_order(dataset_train(&run->data), run->model.config.block_size, (uint64_t)s->seed);
    run->last_saved_step = -1;
    run->best_val = INFINITY;
    run->best_step = -1;
    generator_init(&run->preview, &run->model, SAMPLE_LINE_TOKENS + 1, false);
    run->preview_scratch = xmalloc(2 * (size_t)run->tok.vocab_size * sizeof(float));
    // Standard input stays "-": a resumed run reads it again (pipe the same text in).
    if (strcmp(s->data_path, "-") == 0) snprintf(run->data_absolute, sizeof run->data_absolute, "-");
    else absolute_utf8_path(s->data_path, run->data_absolute, sizeof run->data_absolute);

    snprintf(run->checkpoint_path, sizeof run->checkpoint_path, "%s/model.safetensors", s->out_dir);
    char log_path[4200];
    snprintf(log_path, sizeof log_path, "%s/log.csv", s->out_dir);
    if (s->resume_dir) continue_from_state(run);
    // A resumed run's log, checked against the checkpoint's mark of it
    // (nothing written yet); --restart-log starts a new one, unchecked.
    LogMark mark = {0};
    if (s->resume_dir && run->writer &&
        ((!s->restart_log && !run_dir_read_log_mark(run->resume_files.checkpoint, &mark, &err)) ||
         !csv_log_prepare(&run->log, log_path, LOG_HEADER, run->start_step, s->restart_log, &mark, &err)))
        die(EXIT_RUNTIME, "%s", err.msg);

    // Everything has loaded and been checked: the first write into DIR.
    int status = run->writer ? run_dir_claim(&run->dir, s->out_dir, !s->resume_dir, s->force, &err) : 0;
    status = dist_rank0_result(&run->dist, status, &err);
    if (status == EXIT_USAGE) usage_error(cmd, "%s", err.msg);
    if (status) die(status, "%s", err.msg);
    if (!run->writer) return;
    bool opened = s->resume_dir ? csv_log_continue(&run->log, &err) : csv_log_create(&run->log, log_path, LOG_HEADER, &err);
    if (!opened) die(EXIT_RUNTIME, "%s", err.msg);
}

void train_free(TrainRun *run) {
    csv_log_close(&run->log);
    optimizer_free(&run->optimizer);
    free(run->preview_scratch);
    generator_free(&run->preview);
    free(run->targets);
    free(run->inputs);
    for (int k = 0; k < run->n_slices - 1; k++) model_slice_free(&run->slices[k]);
    free(run->slices);
    model_free(&run->model);
    dataset_free(&run->data);
    tokenizer_free(&run->tok);
    metadata_free(&run->resumed.metadata);
    metadata_free(&run->run_info);
    dist_finish(&run->dist);
}

// ===========================================================================
// The settings: from the command line, and --init's or --resume's checkpoint.

// crop_positions: a GPT-2 directory's model has 1024 positions; fine-tuned
// on a shorter --context it keeps the first "context" rows of pos_emb (as
// nanoGPT's crop_block_size does), and every other weight as it was read.
static void crop_positions(Model *start, int context) {
    ModelConfig cfg = start->config;
    cfg.block_size = context;
    Model cropped;
    model_init(&cropped, &cfg, 1, false);
    // The same tensors in the same order, each as big as before but pos_emb
    // [T, C], whose first rows are the first floats.
    for (int i = 0; i < cropped.param_table.count; i++)
        memcpy(cropped.params_memory + cropped.param_table.specs[i].offset,
               start->params_memory + start->param_table.specs[i].offset,
               cropped.param_table.specs[i].size * sizeof(float));
    model_free(start);
    *start = cropped;
}

// load_start: the checkpoint a run starts from (--init, or --resume's), or
// the Hugging Face GPT-2 directory (--init DIR), for
// one row (build_model copies its weights into the model built for
// --batch), and the settings that shape its model: "cmd"'s flags for them
// must agree with it (--init; --resume refused them already).
static void load_start(TrainRun *run, const Command *cmd, const Given *given, Given *from_file) {
    Error err;
    const char *path = run->s.init_path;
    // A Hugging Face GPT-2 directory (fine-tuning GPT-2): its model and
    // GPT-2's tokenizer, read by every process (under mpirun each machine
    // needs the directory; a checkpoint only rank 0's).
    bool loaded = path_is_directory(path)
                      ? hf_gpt2_load(path, &run->start, &run->tok, 1, false, &err)
                      : checkpoint_load_stream(dist_fopen(&run->dist, path, &err), path, &run->start, &run->tok, 1,
                                               false, NULL, &err);
    if (!loaded && run->s.resume_dir) die_resuming(run, err.msg);
    if (!loaded) die(EXIT_RUNTIME, "%s", err.msg);
    const int context_row = (int)(setting_named("context") - TRAIN_SETTINGS);
    if (path_is_directory(path) && given->given[context_row] && run->s.context < run->start.config.block_size)
        crop_positions(&run->start, run->s.context);
    Metadata md = {0};
    checkpoint_model_metadata(&md, &run->start.config, run->tok.kind);
    TrainSettings saved = run->s;
    if (!settings_read_kept(&saved, &md, KEPT_IN_MODEL, run->s.init_path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    settings_take_kept(cmd, &run->s, given, &saved, KEPT_IN_MODEL, true, from_file);
    metadata_free(&md);
}

// find_resume_files: rank 0's part of --resume DIR, which only it need
// have: DIR must be a directory, which it locks if it can without writing
// (run_dir_open; run_dir_claim writes, once the run has loaded), and
// run->resume_files are found in it: the checkpoint of --resume
// DIR/checkpoint-<step>, else the newest. 0, or the exit status, "err"
// saying why.
static int find_resume_files(TrainRun *run, Error *err) {
    const char *dir = run->s.resume_dir;
    // --out is DIR itself (settings_table.c, derive_out_dir; resume_settings).
    int status = run_dir_open(&run->dir, run->s.out_dir, err);
    if (status) return status;
    char *checkpoint = run->resume_files.checkpoint;
    status = run_dir_resume_checkpoint(dir, run->resume_step, checkpoint, sizeof run->resume_files.checkpoint, err);
    if (status) return status;
    snprintf(run->resume_files.model, sizeof run->resume_files.model, "%s/model.safetensors", checkpoint);
    snprintf(run->resume_files.optimizer, sizeof run->resume_files.optimizer, "%s/optimizer.safetensors", checkpoint);
    run_info_find(dir, run->resume_files.run_info, sizeof run->resume_files.run_info);
    return 0;
}

// resume_settings: with --resume DIR: lock DIR and find its files (rank 0,
// which sends their paths; every rank reads them through it: dist_fopen),
// read the checkpoint's header and take the run's settings from it, and the
// training file's path from run.json (or, in a run saved before it
// existed, the checkpoint), as if they had been typed again. The flags
// that may change (--steps to train further, ...) do not change the numbers.
static void resume_settings(TrainRun *run, const Command *cmd, const Given *given, Given *from_file) {
    TrainSettings *s = &run->s;
    settings_refuse_on_resume(cmd, given);
    // --resume DIR/checkpoint-<step>: the run in DIR, from that step.
    run->resume_step = -1;
    if (run_dir_named_checkpoint(s->resume_dir, run->resume_dir, sizeof run->resume_dir, &run->resume_step))
        s->resume_dir = s->out_dir = run->resume_dir;
    Error err;
    int status = run->writer ? find_resume_files(run, &err) : 0;
    status = dist_rank0_result(&run->dist, status, &err);
    if (status) die(status, "%s", err.msg);
    dist_broadcast(&run->dist, &run->resume_files, sizeof run->resume_files);
    const char *checkpoint = run->resume_files.model;
    if (!checkpoint_read_header_stream(dist_fopen(&run->dist, checkpoint, &err), checkpoint, &run->resumed, &err))
        die_resuming(run, err.msg);
    run->start_step = run->resumed.step;
    // The training time so far, which a --time budget counts on from (a
    // checkpoint from before --time has none: it counts from here).
    const MetadataItem *seconds = metadata_get(&run->resumed.metadata, "train_seconds");
    if (seconds && (!parse_double(seconds->value, seconds->len, &run->seconds_before) || run->seconds_before < 0))
        die(EXIT_RUNTIME, "'%s' is not a valid tinygpt checkpoint: its __metadata__ \"train_seconds\" must be a number of seconds; the file is damaged: start a new run from its weights with --init",
            checkpoint);
    // A damaged run.json is an error, unless FILE is given: then it is
    // not needed, and the next save writes it anew.
    const char *info = run->resume_files.run_info;
    if (info[0] && run_info_read(dist_fopen(&run->dist, info, &err), info, s->resume_dir, &run->run_info, &err) &&
        !s->data_path)
        die(EXIT_RUNTIME, "%s", err.msg);
    TrainSettings saved = *s;
    if (!settings_read_kept(&saved, &run->resumed.metadata, KEPT_IN_RUN, checkpoint, &err) ||
        !settings_read_kept(&saved, &run->run_info, KEPT_IN_RUN_JSON, checkpoint, &err))
        die(EXIT_RUNTIME, "%s", err.msg);
    settings_take_kept(cmd, s, given, &saved, KEPT_IN_RUN, false, from_file);
    settings_take_kept(cmd, s, given, &saved, KEPT_IN_RUN_JSON, false, from_file);
    // A run saved before run.json existed has the path in its checkpoint.
    const MetadataItem *old_path = metadata_get(&run->resumed.metadata, "data");
    if (!s->data_path && old_path && old_path->value[0] && strlen(old_path->value) == old_path->len)
        s->data_path = old_path->value;
    if (!s->data_path)
        usage_error(cmd, "the run in '%s' does not record its training file; give it: tinygpt train FILE --resume %s",
                    s->resume_dir, s->resume_dir);
    s->init_path = checkpoint;  // the weights, vocabulary, architecture and sizes load as with --init
}

void train_setup(TrainRun *run, int argc, char **argv) {
    memset(run, 0, sizeof *run);
    // Under mpirun, rank 0 speaks for the run: the other ranks would print
    // the same lines N times (an error in the flags, say), so their output
    // goes nowhere. A rank that fails alone still ends the job: mpirun
    // reports its exit status.
    dist_init(&run->dist);
    run->writer = run->dist.rank == 0;
    if (!run->writer && (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)))
        dist_abort(&run->dist, EXIT_RUNTIME);
    TrainSettings *s = &run->s;
    Command *cmd = &run->cmd;
    *cmd = (Command){"train", "[FILE]", "Train a GPT (--arch gpt) or the one-block attention model (--arch card) on a UTF-8 text file (- reads standard input); writes DIR/model.safetensors, DIR/log.csv, DIR/loss.png and DIR/run.json (and DIR/optimizer.safetensors with AdamW).",
                     "tinygpt train data/moby-dick.txt --out runs/moby --layers 2 --steps 1000", NULL, 0};
    settings_command(cmd, run->flags, s);
    Given given, from_file;
    memset(&from_file, 0, sizeof from_file);
    settings_parse(cmd, argc, argv, s, &given);

    if (s->force && s->resume_dir)
        usage_error(cmd, "--force starts a new run over the one in --out, and --resume continues one; drop one of them");
    if (s->restart_log && !s->resume_dir) usage_error(cmd, "--restart-log goes with --resume; drop it");
    if (s->resume_dir) {
        resume_settings(run, cmd, &given, &from_file);
    } else {
        if (!s->data_path) usage_error(cmd, "missing FILE");
        Error err;
        int status = run->writer ? run_dir_check(&run->dir, s->out_dir, s->force, &err) : 0;
        status = dist_rank0_result(&run->dist, status, &err);
        if (status == EXIT_USAGE) usage_error(cmd, "%s", err.msg);
        if (status) die(status, "%s", err.msg);
    }
    if (s->init_path && !s->resume_dir)
        s->init_path = run_model_path(s->init_path, run->init_file, sizeof run->init_file);
    if (s->init_path) load_start(run, cmd, &given, &from_file);
    settings_finish(cmd, s, &given, &from_file);
    if (s->tokenizer == TOKENIZER_GPT2 && !s->init_path && !s->tokenizer_dir)
        usage_error(cmd, "--tokenizer gpt2 reads GPT-2's tokenizer from a directory: give --tokenizer-dir DIR (a Hugging Face GPT-2 directory's vocab.json and merges.txt)");
    if (s->tokenizer_dir && s->init_path && !s->resume_dir)
        usage_error(cmd, "--tokenizer-dir is for a new model: with --init the tokenizer is the checkpoint's; drop it");
    if (s->resume_dir && run->start_step >= s->steps)
        usage_error(cmd, "the run in '%s' is already at step %ld of --steps %ld; give a larger --steps to train further",
                    s->resume_dir, run->start_step, s->steps);
    if (s->resume_dir && s->time > 0 && run->seconds_before >= s->time)
        usage_error(cmd, "the run in '%s' has already trained for %.1f s of --time %g; give a larger --time to train further",
                    s->resume_dir, run->seconds_before, s->time);
    if (s->batch % run->dist.size != 0)
        usage_error(cmd, "--batch %d does not split evenly over %d processes (mpirun -np %d); give a --batch that %d divides, or another -np",
                    s->batch, run->dist.size, run->dist.size, run->dist.size);
    run->rows = s->batch / run->dist.size;
    if (s->threads > 0) omp_set_num_threads(s->threads);
    setup_run(run, cmd);
}
