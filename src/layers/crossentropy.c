// crossentropy.c: softmax + cross-entropy: the forward as the definition,
// and the backward derived (see crossentropy.h). The fast forward, on
// softmax.h's vectorised rows, is in crossentropy_fast.c (file 20); the
// backward has one version, already a plain loop.
#include "crossentropy.h"

#include <math.h>
#include <stddef.h>

// The definition, row by row. Subtracting the row's max before exp keeps
// every exp at most 1, so nothing overflows, and changes nothing:
//   exp(z[v] - max) / sum over u of exp(z[u] - max) = exp(z[v]) / sum over u of exp(z[u])
//   logsumexp(z) = max + log(sum over u of exp(z[u] - max))
float crossentropy_forward_reference(float *losses, float *probs, const float *logits, const int *targets, int N,
                                     int V) {
    for (int n = 0; n < N; n++) {
        const float *logits_n = logits + (size_t)n * V;
        float *probs_n = probs + (size_t)n * V;
        const float target_logit = logits_n[targets[n]];  // before probs_n, which may be logits_n, is written
        float max = logits_n[0];
        for (int v = 1; v < V; v++) max = logits_n[v] > max ? logits_n[v] : max;
        float sum = 0.0f;
        for (int v = 0; v < V; v++) {
            probs_n[v] = expf(logits_n[v] - max);
            sum += probs_n[v];
        }
        for (int v = 0; v < V; v++) probs_n[v] /= sum;
        losses[n] = max + logf(sum) - target_logit;
    }
    // The mean in double and in a fixed order, as the fast version takes it.
    double total = 0.0;
    for (int n = 0; n < N; n++) total += losses[n];
    return (float)(total / N);
}

// Backward, derived, for one position n with logits z = logits[n,:],
// target y, and p = softmax(z) = probs[n,:]:
//   (1) losses[n] = logsumexp(z) - z[y],  logsumexp(z) = log sum over u of exp(z[u])
//   (2) d logsumexp(z) / d z[v] = exp(z[v]) / sum over u of exp(z[u]) = p[v]
//   (3) d z[y] / d z[v]         = [v == y]                      the one-hot of y
//   (4) d losses[n] / d z[v]    = p[v] - [v == y]               (2) minus (3)
//   (5) loss = (1/N) sum over n of losses[n], so each gets 1/N:
//       dlogits[n,v] = (p[v] - [v == y]) / N
// The long way gives the same: d(-log p[y]) / d p = -onehot / p[y], and
// softmax's Jacobian diag(p) - p p^T (attention.c) turns that into
// -onehot + p. Both steps collapse into one subtraction, which is why the
// two layers are computed together.
void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int N, int V, size_t count) {
    const float inv_n = 1.0f / (float)count;  // (5) d(mean)/d(losses[n]), the mean over "count" positions
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *probs_n = probs + (size_t)n * V;
        float *dlogits_n = dlogits + (size_t)n * V;
        for (int v = 0; v < V; v++) {
            float indicator = v == targets[n] ? 1.0f : 0.0f;  // (3)
            dlogits_n[v] = (probs_n[v] - indicator) * inv_n;  // (4) and (5)
        }
    }
}
