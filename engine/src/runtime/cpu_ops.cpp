#include "tp/runtime/cpu_ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace tp::cpu {

void gemm(const float* x, const float* w, float* y, std::int64_t n, std::int64_t in, std::int64_t out)
{
    if (n == 0 || out == 0)
        return;
    if (in == 0) {
        std::fill(y, y + n * out, 0.0f);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(n), static_cast<blasint>(out),
                static_cast<blasint>(in), 1.0f, x, static_cast<blasint>(in), w, static_cast<blasint>(in), 0.0f, y,
                static_cast<blasint>(out));
}

void rmsNorm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d, float eps)
{
    for (std::int64_t row = 0; row < rows; ++row) {
        const float* xi = x + row * d;
        double ss = 0;
        for (std::int64_t j = 0; j < d; ++j)
            ss += double(xi[j]) * xi[j];
        const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(d)) + eps);
        for (std::int64_t j = 0; j < d; ++j)
            y[row * d + j] = w[j] * (xi[j] * inv);
    }
}

void rope(const float* x, float* y, std::int64_t tokens, std::int64_t width, std::int64_t headDim, std::int64_t seq,
          const std::vector<double>& invFreq)
{
    const std::int64_t half = headDim / 2;
    for (std::int64_t t = 0; t < tokens; ++t) {
        const double pos = static_cast<double>(t % seq);
        for (std::int64_t h = 0; h < width / headDim; ++h) {
            const float* xi = x + t * width + h * headDim;
            float* yi = y + t * width + h * headDim;
            for (std::int64_t j = 0; j < half; ++j) {
                const double a = pos * invFreq[static_cast<std::size_t>(j)];
                const float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
                yi[j] = xi[j] * c - xi[j + half] * s;
                yi[j + half] = xi[j + half] * c + xi[j] * s;
            }
        }
    }
}

void attention(const float* q, const float* k, const float* v, float* y, std::int64_t batch, std::int64_t S,
               std::int64_t heads, std::int64_t kvHeads, std::int64_t hd, std::vector<float>& p)
{
    const std::int64_t qw = heads * hd, kw = kvHeads * hd, group = heads / std::max<std::int64_t>(kvHeads, 1);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    p.resize(static_cast<std::size_t>(S * S));
    for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t h = 0; h < heads; ++h) {
            const float* qh = q + b * S * qw + h * hd;
            const float* kh = k + b * S * kw + (h / group) * hd;
            const float* vh = v + b * S * kw + (h / group) * hd;
            // scores = q·kᵀ·scale over this head's rows (strided views of the token-major buffers)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(S), static_cast<blasint>(S),
                        static_cast<blasint>(hd), scale, qh, static_cast<blasint>(qw), kh, static_cast<blasint>(kw), 0.0f,
                        p.data(), static_cast<blasint>(S));
            for (std::int64_t i = 0; i < S; ++i) { // causal softmax
                float* row = p.data() + i * S;
                const float mx = *std::max_element(row, row + i + 1);
                float sum = 0;
                for (std::int64_t j = 0; j <= i; ++j)
                    sum += (row[j] = std::exp(row[j] - mx));
                const float inv = 1.0f / sum;
                for (std::int64_t j = 0; j <= i; ++j)
                    row[j] *= inv;
                std::fill(row + i + 1, row + S, 0.0f);
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(S), static_cast<blasint>(hd),
                        static_cast<blasint>(S), 1.0f, p.data(), static_cast<blasint>(S), vh, static_cast<blasint>(kw),
                        0.0f, y + b * S * qw + h * hd, static_cast<blasint>(qw));
        }
}

void siluMul(const float* g, const float* u, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i)
        y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

bool embedding(const std::int32_t* ids, std::int64_t tokens, const float* w, std::int64_t rows, std::int64_t cols,
               std::int64_t first, std::int64_t vocab, float* y)
{
    std::fill(y, y + tokens * cols, 0.0f);
    for (std::int64_t t = 0; t < tokens; ++t) {
        if (ids[t] < 0 || ids[t] >= vocab)
            return false;
        const std::int64_t local = ids[t] - first;
        if (local >= 0 && local < rows)
            std::copy_n(w + local * cols, cols, y + t * cols);
    }
    return true;
}

} // namespace tp::cpu
