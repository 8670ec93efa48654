// cpu_ops.h — the CPU backend's operations (fp32, OpenBLAS), as the executor runs them and as the
// GPU backend's tests check its kernels against. Activations are token-major: [tokens, width].
#pragma once

#include <cstdint>
#include <vector>

namespace tp::cpu {

// y[n, out] = x[n, in] · w[out, in]ᵀ
void gemm(const float* x, const float* w, float* y, std::int64_t n, std::int64_t in, std::int64_t out);
// RMSNorm over groups of `d` features (d = width: the whole vector; d = head_dim: per head).
void rmsNorm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d, float eps);
// Rotary embedding (rotate_half) on every head of every token; position = token index % seq.
void rope(const float* x, float* y, std::int64_t tokens, std::int64_t width, std::int64_t headDim, std::int64_t seq,
          const std::vector<double>& invFreq);
// Causal GQA attention for `batch` sequences of `seq` tokens: q [B·S, heads·hd], k/v [B·S, kvHeads·hd].
// `scratch` holds S×S scores.
void attention(const float* q, const float* k, const float* v, float* y, std::int64_t batch, std::int64_t seq,
               std::int64_t heads, std::int64_t kvHeads, std::int64_t headDim, std::vector<float>& scratch);
// y = silu(g) · u, elementwise.
void siluMul(const float* g, const float* u, float* y, std::int64_t n);
// Embedding rows [first, first + rows) of the vocabulary; ids outside are zero rows (vocab-parallel).
// Returns false when an id is outside [0, vocab).
bool embedding(const std::int32_t* ids, std::int64_t tokens, const float* w, std::int64_t rows, std::int64_t cols,
               std::int64_t first, std::int64_t vocab, float* y);

} // namespace tp::cpu
