// flops.c: FLOPs per token of a model (see flops.h).
#include "flops.h"

double model_forward_flops_per_token(const ModelConfig *cfg) {
    const double C = cfg->n_embd, T = cfg->block_size, V = cfg->vocab_size;
    const ModelParts parts = model_parts(cfg);
    // 1. Each block's products: q, k, v (3C^2 multiply-adds) and attn.proj
    //    (C^2), then the MLP's two (4C^2 each) when it has one (SwiGLU's
    //    three, HC each: mlp.h).
    double block = 2 * (3 * C * C + C * C);
    if (parts.mlp) block += 2 * C * (mlp_fc_width(cfg->n_embd, parts.activation) + mlp_hidden(cfg->n_embd, parts.activation));
    // 2. Attention's two products over the (T + 1) / 2 positions a token
    //    sees on average: C multiply-adds each, for the score and for the
    //    weighted sum.
    block += 2 * 2 * C * (T + 1) / 2;
    // 3. The blocks, then the head (tied to tok_emb or not, the same size).
    return model_layers(cfg) * block + 2 * C * V;
}

double model_train_flops_per_token(const ModelConfig *cfg) { return 3 * model_forward_flops_per_token(cfg); }
