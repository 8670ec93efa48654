// cpu_kernels.cpp — one instruction set's vector kernels (see cpu_kernels.h). Compiled once per
// instruction set with its -march flag, TP_KERNEL_NS (the namespace) and TP_VEC_BYTES (the vector
// width). It includes no header with inline functions: a function compiled here for AVX-512 must
// never be the one the linker keeps for the rest of the program, so everything but the table has
// internal linkage.
#include "cpu_kernels.h"

namespace tp::cpu::TP_KERNEL_NS {
namespace {

typedef float vf __attribute__((vector_size(TP_VEC_BYTES)));
typedef std::int32_t vi __attribute__((vector_size(TP_VEC_BYTES)));
constexpr std::int64_t L = TP_VEC_BYTES / 4;

inline vf load(const float* p)
{
    vf v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
inline void store(float* p, vf v) { __builtin_memcpy(p, &v, sizeof v); }
// The last n < L elements, the rest of the lanes `fill`.
inline vf loadTail(const float* p, std::int64_t n, float fill)
{
    float b[L];
    for (std::int64_t i = 0; i < L; ++i)
        b[i] = i < n ? p[i] : fill;
    return load(b);
}
inline void storeTail(float* p, vf v, std::int64_t n)
{
    float b[L];
    store(b, v);
    for (std::int64_t i = 0; i < n; ++i)
        p[i] = b[i];
}
inline vf splat(float a) { return vf{} + a; }
inline float hsum(vf v)
{
    float s = 0;
    for (std::int64_t i = 0; i < L; ++i)
        s += v[i];
    return s;
}

// exp(x): x = n·ln2 + r, |r| ≤ ln2/2, exp(r) by Cephes' degree-6 polynomial, 2^n through the
// exponent bits. Inputs are clamped to [−87.3, 88.3] (exp of the bounds is finite and normal); a NaN
// stays NaN.
inline vf expv(vf x)
{
    const vf lo = splat(-87.3f), hi = splat(88.3f);
    x = x < lo ? lo : x;
    x = x > hi ? hi : x;
    const vf n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; // round to nearest
    vf r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    vf p = splat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
    vf two;
    __builtin_memcpy(&two, &bits, sizeof two);
    return p * two;
}

float expShiftSum(float* x, std::int64_t n, float shift)
{
    vf acc{};
    std::int64_t i = 0;
    for (; i + L <= n; i += L) {
        const vf e = expv(load(x + i) - shift);
        store(x + i, e);
        acc += e;
    }
    if (i < n) {
        const vf e = expv(loadTail(x + i, n - i, shift) - shift);
        storeTail(x + i, e, n - i);
        for (std::int64_t j = 0; j < n - i; ++j)
            acc[j] += e[j];
    }
    return hsum(acc);
}

float maxOf(const float* x, std::int64_t n)
{
    vf m = splat(x[0]);
    std::int64_t i = 0;
    for (; i + L <= n; i += L) {
        const vf v = load(x + i);
        m = v > m ? v : m;
    }
    if (i < n) {
        const vf v = loadTail(x + i, n - i, x[0]);
        m = v > m ? v : m;
    }
    float r = m[0];
    for (std::int64_t j = 1; j < L; ++j)
        r = m[j] > r ? m[j] : r;
    return r;
}

void scale(float* x, std::int64_t n, float a)
{
    std::int64_t i = 0;
    for (; i + L <= n; i += L)
        store(x + i, load(x + i) * a);
    for (; i < n; ++i)
        x[i] *= a;
}

// SiLU: g·sigmoid(g). GELU (tanh form): 0.5·g·(1 + tanh(z)) = g·sigmoid(2z), z = √(2/π)(g + 0.044715 g³).
inline vf gated(vf g, vf u, int act)
{
    vf t = g;
    if (act == 1)
        t = (g + g * g * g * 0.044715f) * (2.0f * 0.7978845608028654f);
    return g / (1.0f + expv(-t)) * u;
}

void gatedAct(const float* g, const float* u, float* y, std::int64_t n, int act)
{
    std::int64_t i = 0;
    for (; i + L <= n; i += L)
        store(y + i, gated(load(g + i), load(u + i), act));
    if (i < n)
        storeTail(y + i, gated(loadTail(g + i, n - i, 0), loadTail(u + i, n - i, 0), act), n - i);
}

void rmsNorm(const float* x, const float* w, float* y, std::int64_t n, float eps)
{
    vf acc{};
    std::int64_t i = 0;
    for (; i + L <= n; i += L) {
        const vf v = load(x + i);
        acc += v * v;
    }
    float ss = hsum(acc);
    for (std::int64_t j = i; j < n; ++j)
        ss += x[j] * x[j];
    const float inv = 1.0f / __builtin_sqrtf(ss / static_cast<float>(n) + eps);
    for (i = 0; i + L <= n; i += L)
        store(y + i, load(w + i) * (load(x + i) * inv));
    for (; i < n; ++i)
        y[i] = w[i] * (x[i] * inv);
}

void add(const float* a, const float* b, float* y, std::int64_t n)
{
    std::int64_t i = 0;
    for (; i + L <= n; i += L)
        store(y + i, load(a + i) + load(b + i));
    for (; i < n; ++i)
        y[i] = a[i] + b[i];
}

} // namespace

extern const Kernels table;
const Kernels table = {TP_KERNEL_ISA, expShiftSum, maxOf, scale, gatedAct, rmsNorm, add};

} // namespace tp::cpu::TP_KERNEL_NS
