// tests.h: one Check suite per module of src/, collected by test_main.c.
#ifndef TINYGPT_TESTS_H
#define TINYGPT_TESTS_H

#include <check.h>

Suite *common_suite(void);
Suite *rng_suite(void);
Suite *utf8_suite(void);
Suite *tokenizer_suite(void);
Suite *bpe_suite(void);
Suite *chunk_suite(void);
Suite *gpt2_tokenizer_suite(void);
Suite *hf_gpt2_suite(void);
Suite *data_suite(void);
Suite *encoder_suite(void);
Suite *tile_suite(void);
Suite *linear_suite(void);
Suite *attention_suite(void);
Suite *crossentropy_suite(void);
Suite *model_suite(void);
Suite *json_suite(void);
Suite *checkpoint_suite(void);
Suite *sampler_suite(void);
Suite *cli_suite(void);
Suite *canvas_suite(void);
Suite *plot_suite(void);
Suite *watch_suite(void);
Suite *walkthrough_suite(void);
Suite *attention_map_suite(void);
Suite *gradcheck_model_suite(void);
Suite *args_suite(void);
Suite *settings_suite(void);
Suite *train_suite(void);
Suite *steady_state_suite(void);
Suite *arch_suite(void);
Suite *paths_suite(void);
Suite *layernorm_suite(void);
Suite *rmsnorm_suite(void);
Suite *residual_suite(void);
Suite *gelu_suite(void);
Suite *relu2_suite(void);
Suite *swiglu_suite(void);
Suite *mlp_suite(void);
Suite *rope_suite(void);
Suite *optimizer_suite(void);
Suite *tokenize_suite(void);
Suite *faults_failing_write_suite(void);
Suite *faults_kill_suite(void);
Suite *faults_sigterm_suite(void);
Suite *faults_refusals_suite(void);
Suite *timed_suite(void);
Suite *fma_peak_suite(void);
Suite *flops_suite(void);
Suite *peak_suite(void);
Suite *export_suite(void);

#endif
