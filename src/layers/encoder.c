// encoder.c: token + position embedding, forward and backward (see encoder.h).
#include "encoder.h"

#include <stddef.h>

void encoder_forward(float *encoded, const int *inputs, const float *tok_emb, const float *pos_emb, int B,
                     int T, int C) {
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * T * C >= (1 << 18))
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *out_bt = encoded + ((size_t)b * T + t) * C;
            const float *tok_row = tok_emb + (size_t)inputs[b * T + t] * C;
            if (!pos_emb) {  // --pos rope: the token alone
                for (int c = 0; c < C; c++) out_bt[c] = tok_row[c];
                continue;
            }
            const float *pos_row = pos_emb + (size_t)t * C;
            for (int c = 0; c < C; c++) out_bt[c] = tok_row[c] + pos_row[c];
        }
    }
}

// Backward, derived. The forward only copies and adds:
//   encoded[b,t,c] = tok_emb[inputs[b,t], c] + pos_emb[t, c]
// so each output number depends on one number of each table, with slope 1:
//   d encoded[b,t,c] / d tok_emb[v,c] = [v == inputs[b,t]]
//   d encoded[b,t,c] / d pos_emb[t,c] = 1
// The chain rule sums over every output a weight reaches:
//   (1) dtok_emb[v,c] = sum over (b,t) with inputs[b,t] == v of dencoded[b,t,c]
//   (2) dpos_emb[t,c] = sum over b of dencoded[b,t,c]
// The loop visits each (b,t) once and adds its row to one row of each
// table: after the last, (1) and (2) are complete. Both are added to, not
// written: gpt's tied head has already put its part of tok_emb's gradient
// there (model_backward).
//
// Serial on purpose: two positions holding the same token write the same
// dtok_emb row, so splitting positions across threads would race, and the
// whole pass is only B*T*C additions.
void encoder_backward(float *dtok_emb, float *dpos_emb, const float *dencoded, const int *inputs, int B, int T,
                      int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float *dout_bt = dencoded + ((size_t)b * T + t) * C;
            float *dtok_row = dtok_emb + (size_t)inputs[b * T + t] * C;
            for (int c = 0; c < C; c++) dtok_row[c] += dout_bt[c];  // (1)
            if (!dpos_emb) continue;                                  // --pos rope: no table
            float *dpos_row = dpos_emb + (size_t)t * C;
            for (int c = 0; c < C; c++) dpos_row[c] += dout_bt[c];  // (2)
        }
    }
}
