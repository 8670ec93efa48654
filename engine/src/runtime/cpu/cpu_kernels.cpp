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
inline vf splat(float a) { return a - vf{}; } // a − 0 is a exactly: one broadcast, no add
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

void rmsNorm(const float* x, const float* w, float* y, std::int64_t n, float eps, float offset)
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
    const vf o = splat(offset);
    for (i = 0; i + L <= n; i += L)
        store(y + i, (o + load(w + i)) * (load(x + i) * inv));
    for (; i < n; ++i)
        y[i] = (offset + w[i]) * (x[i] * inv);
}

void add(const float* a, const float* b, float* y, std::int64_t n)
{
    std::int64_t i = 0;
    for (; i + L <= n; i += L)
        store(y + i, load(a + i) + load(b + i));
    for (; i < n; ++i)
        y[i] = a[i] + b[i];
}

// --- prefill attention tiles ------------------------------------------------------------------
// Register blocks of R rows × C vectors: out[r][c] = Σ_i x[r·ldx + i] · y[i·ldy + c] over the
// inner dimension, the accumulators in registers throughout (6 × 2 vectors: 12 accumulators, two
// loads and a broadcast in 16 registers), each product one FMA; then stored times `scale`, or (Add)
// added to out. Columns past the last whole vector are summed by a plain loop.
template<int R, int C, bool Add>
inline void block(const float* __restrict x, std::int64_t ldx, const float* __restrict y, std::int64_t ldy, std::int64_t inner,
                  float scale, float* __restrict out, std::int64_t ldo)
{
    vf acc[R][C];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c)
            acc[r][c] = vf{};
    for (std::int64_t i = 0; i < inner; ++i) {
        vf b[C];
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c)
            b[c] = load(y + i * ldy + c * L);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const vf a = splat(x[r * ldx + i]);
#pragma GCC unroll 4
            for (int c = 0; c < C; ++c)
                acc[r][c] += a * b[c];
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c)
            store(out + r * ldo + c * L, Add ? load(out + r * ldo + c * L) + acc[r][c] : acc[r][c] * scale);
}

// Keys packed for scoreTile: panels of kPanel keys, each [hd × kPanel] (key j's element d at
// (j / kPanel)·hd·kPanel + d·kPanel + j % kPanel), the last panel padded with zeros, so that the
// score block reads one contiguous stream.
constexpr std::int64_t kPanel = 2 * L;

void packKeys(const float* k, std::int64_t ldk, std::int64_t n, std::int64_t hd, float* out)
{
    for (std::int64_t j0 = 0; j0 < n; j0 += kPanel) {
        float* panel = out + j0 * hd;
        const std::int64_t m = n - j0 < kPanel ? n - j0 : kPanel;
        for (std::int64_t d = 0; d < hd; ++d) {
            for (std::int64_t j = 0; j < m; ++j)
                panel[d * kPanel + j] = k[(j0 + j) * ldk + d];
            for (std::int64_t j = m; j < kPanel; ++j)
                panel[d * kPanel + j] = 0.0f;
        }
    }
}

template<int R>
void scoreRows(const float* q, std::int64_t ldq, const float* kp, std::int64_t cols, std::int64_t hd, float scale,
               float* s, std::int64_t lds)
{
    for (std::int64_t j = 0; j < cols; j += kPanel)
        block<R, 2, false>(q, ldq, kp + j * hd, kPanel, hd, scale, s + j, lds);
}

template<int R>
void weightedRows(const float* p, std::int64_t ldp, const float* v, std::int64_t ldv, std::int64_t keys, std::int64_t vd,
                  float* acc, std::int64_t ldacc)
{
    std::int64_t c = 0;
    for (; c + 2 * L <= vd; c += 2 * L)
        block<R, 2, true>(p, ldp, v + c, ldv, keys, 1.0f, acc + c, ldacc);
    for (; c + L <= vd; c += L)
        block<R, 1, true>(p, ldp, v + c, ldv, keys, 1.0f, acc + c, ldacc);
    for (; c < vd; ++c)
        for (int r = 0; r < R; ++r) {
            float t = 0;
            for (std::int64_t j = 0; j < keys; ++j)
                t += p[r * ldp + j] * v[j * ldv + c];
            acc[r * ldacc + c] += t;
        }
}

// Rows in blocks of 6, the last 1–5 by a block of their own height.
template<template<int> class Rows, typename... A> void byRowBlocks(std::int64_t rows, std::int64_t ld, const float* in, std::int64_t ldOut, float* out, A... a)
{
    std::int64_t r = 0;
    for (; r + 6 <= rows; r += 6)
        Rows<6>::run(in + r * ld, ld, out + r * ldOut, ldOut, a...);
    switch (rows - r) {
    case 5: Rows<5>::run(in + r * ld, ld, out + r * ldOut, ldOut, a...); break;
    case 4: Rows<4>::run(in + r * ld, ld, out + r * ldOut, ldOut, a...); break;
    case 3: Rows<3>::run(in + r * ld, ld, out + r * ldOut, ldOut, a...); break;
    case 2: Rows<2>::run(in + r * ld, ld, out + r * ldOut, ldOut, a...); break;
    case 1: Rows<1>::run(in + r * ld, ld, out + r * ldOut, ldOut, a...); break;
    default: break;
    }
}
template<int R> struct ScoreRows
{
    static void run(const float* q, std::int64_t ldq, float* s, std::int64_t lds, const float* kp, std::int64_t cols,
                    std::int64_t hd, float scale)
    {
        scoreRows<R>(q, ldq, kp, cols, hd, scale, s, lds);
    }
};
template<int R> struct WeightedRows
{
    static void run(const float* p, std::int64_t ldp, float* acc, std::int64_t ldacc, const float* v, std::int64_t ldv,
                    std::int64_t keys, std::int64_t vd)
    {
        weightedRows<R>(p, ldp, v, ldv, keys, vd, acc, ldacc);
    }
};

void scoreTile(const float* q, std::int64_t ldq, const float* kp, std::int64_t rows, std::int64_t cols, std::int64_t hd,
               float scale, float* s, std::int64_t lds)
{
    byRowBlocks<ScoreRows>(rows, ldq, q, lds, s, kp, cols, hd, scale);
}

void weightedSum(const float* p, std::int64_t ldp, const float* v, std::int64_t ldv, std::int64_t rows, std::int64_t keys,
                 std::int64_t vd, float* acc, std::int64_t ldacc)
{
    byRowBlocks<WeightedRows>(rows, ldp, p, ldacc, acc, v, ldv, keys, vd);
}

// --- the local communicator's reduction -------------------------------------------------------

inline std::uint32_t bitsOf(float f)
{
    std::uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    return u;
}
inline float floatOf(std::uint32_t u)
{
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
inline std::uint32_t maskIf(bool c) { return 0u - static_cast<std::uint32_t>(c); }

// Branch-free forms of tp::halfToFloat / tp::floatToHalf / tp::floatToBf16 (the cases picked by
// masks, so that the loops vectorize), bit-identical to them (tst_engine checks every 16-bit value).
inline float halfToFloat(std::uint16_t h)
{
    const std::uint32_t shiftedExp = 0x7c00u << 13;
    const std::uint32_t o = ((std::uint32_t(h) & 0x7fffu) << 13) + ((127u - 15u) << 23);
    const std::uint32_t exp = (std::uint32_t(h) << 13) & shiftedExp;
    const std::uint32_t infNan = o + ((128u - 16u) << 23); // exponent 31: to 255
    const std::uint32_t denorm = bitsOf(floatOf(o + (1u << 23)) - floatOf(113u << 23));
    const std::uint32_t isInfNan = maskIf(exp == shiftedExp), isDenorm = maskIf(exp == 0);
    const std::uint32_t bits = (infNan & isInfNan) | (denorm & isDenorm) | (o & ~(isInfNan | isDenorm));
    return floatOf(bits | (std::uint32_t(h) & 0x8000u) << 16);
}
inline float bf16ToFloat(std::uint16_t h) { return floatOf(std::uint32_t(h) << 16); }

inline std::uint16_t floatToHalf(float value)
{
    const std::int32_t infinity = 255 << 23, halfMax = (127 + 16) << 23;
    const std::uint32_t denormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    const std::uint32_t u = bitsOf(value);
    const std::uint32_t sign = u & 0x80000000u, f = u ^ sign;
    const auto fi = static_cast<std::int32_t>(f); // f < 2^31
    const std::uint32_t big = 0x7c00u | (0x0200u & maskIf(fi > infinity));
    const std::uint32_t den = bitsOf(floatOf(f) + floatOf(denormMagic)) - denormMagic;
    const std::uint32_t norm = (f + (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu + ((f >> 13) & 1u)) >> 13;
    const std::uint32_t isBig = maskIf(fi >= halfMax), isDen = maskIf(fi < (113 << 23));
    const std::uint32_t out = (big & isBig) | (den & isDen & ~isBig) | (norm & ~(isBig | isDen));
    return static_cast<std::uint16_t>(out | (sign >> 16));
}
inline std::uint16_t floatToBf16(float f)
{
    const std::uint32_t u = bitsOf(f);
    const std::uint32_t nan = (u >> 16) | 0x40u, rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return static_cast<std::uint16_t>(static_cast<std::int32_t>(u & 0x7fffffffu) > 0x7f800000 ? nan : rounded);
}

struct LoadF32
{
    using T = float;
    static float load(float x) { return x; }
};
struct LoadBf16
{
    using T = std::uint16_t;
    static float load(std::uint16_t x) { return bf16ToFloat(x); }
};
struct LoadF16
{
    using T = std::uint16_t;
    static float load(std::uint16_t x) { return halfToFloat(x); }
};

template<typename Ld> void sumChunkOf(const void* const* src, int t, std::int64_t from, std::int64_t n, float* __restrict acc)
{
    using S = typename Ld::T;
    const S* __restrict a = static_cast<const S*>(src[0]) + from;
    if (t == 1) {
        for (std::int64_t i = 0; i < n; ++i)
            acc[i] = Ld::load(a[i]);
        return;
    }
    const S* __restrict b = static_cast<const S*>(src[1]) + from;
    for (std::int64_t i = 0; i < n; ++i)
        acc[i] = Ld::load(a[i]) + Ld::load(b[i]);
    for (int p = 2; p < t; ++p) {
        const S* __restrict c = static_cast<const S*>(src[p]) + from;
        for (std::int64_t i = 0; i < n; ++i)
            acc[i] += Ld::load(c[i]);
    }
}

void sumChunk(Storage storage, const void* const* src, int t, std::int64_t from, std::int64_t n, float* acc)
{
    if (storage == Storage::F32)
        sumChunkOf<LoadF32>(src, t, from, n, acc);
    else if (storage == Storage::BF16)
        sumChunkOf<LoadBf16>(src, t, from, n, acc);
    else
        sumChunkOf<LoadF16>(src, t, from, n, acc);
}

void round16(Storage storage, const float* __restrict acc, std::int64_t n, std::uint16_t* __restrict out)
{
    if (storage == Storage::BF16)
        for (std::int64_t i = 0; i < n; ++i)
            out[i] = floatToBf16(acc[i]);
    else
        for (std::int64_t i = 0; i < n; ++i)
            out[i] = floatToHalf(acc[i]);
}

} // namespace

extern const Kernels table;
const Kernels table = {TP_KERNEL_ISA, expShiftSum, maxOf, scale, gatedAct, rmsNorm, add, kPanel, packKeys, scoreTile, weightedSum, sumChunk, round16};

} // namespace tp::cpu::TP_KERNEL_NS
