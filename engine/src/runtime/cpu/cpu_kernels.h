// cpu_kernels.h — the CPU backend's vector kernels, one table per instruction set.
//
// cpu_kernels.cpp is compiled three times (x86-64-v4: AVX-512; x86-64-v3: AVX2 + FMA; the baseline
// x86-64: SSE2), each into its own namespace; kernels() picks the best table this CPU runs, once.
// Every entry works on contiguous fp32 and gives the same result on every rank of one machine (the
// summation order depends only on the table, never on timing).
#pragma once

#include <cstdint>
#include <string>

namespace tp::cpu {

enum class Storage : int { F32, BF16, F16 };

struct Kernels
{
    const char* isa; // "avx512", "avx2" or "sse2"
    // x[i] ← exp(x[i] − shift); returns Σ x[i] after. Relative error below 2e-7 over float's range.
    float (*expShiftSum)(float* x, std::int64_t n, float shift);
    float (*maxOf)(const float* x, std::int64_t n); // n ≥ 1
    void (*scale)(float* x, std::int64_t n, float a);
    // y = act(g) · u; act 0 = SiLU, 1 = GELU with the tanh approximation (as x·sigmoid(2·z)).
    void (*gatedAct)(const float* g, const float* u, float* y, std::int64_t n, int act);
    // y = (offset + w) · (x / sqrt(mean(x²) + eps)), as Transformers' RMSNorm (Gemma's: offset 1).
    void (*rmsNorm)(const float* x, const float* w, float* y, std::int64_t n, float eps, float offset);
    void (*add)(const float* a, const float* b, float* y, std::int64_t n);
    // Prefill attention's two tile products, register-blocked (small K and N are poor SGEMM shapes).
    // The keys are packed first: packKeys writes n keys (rows of k, hd wide) as panels of keyPanel
    // keys, [hd × keyPanel] each, the last one padded with zeros; (n rounded up to keyPanel) · hd
    // floats. scoreTile: s[r·lds + j] = scale · q_r · key_j for r < rows, j < cols, from the panel
    // holding key 0 at kp, writing whole panels (s rows hold cols rounded up to keyPanel; keyPanel
    // divides 32). weightedSum: acc[r·ldacc + c] += Σ_j p[r·ldp + j] · v[j·ldv + c] for r < rows,
    // c < vd, j < keys.
    std::int64_t keyPanel;
    void (*packKeys)(const float* k, std::int64_t ldk, std::int64_t n, std::int64_t hd, float* out);
    void (*scoreTile)(const float* q, std::int64_t ldq, const float* kp, std::int64_t rows, std::int64_t cols,
                      std::int64_t hd, float scale, float* s, std::int64_t lds);
    void (*weightedSum)(const float* p, std::int64_t ldp, const float* v, std::int64_t ldv, std::int64_t rows,
                        std::int64_t keys, std::int64_t vd, float* acc, std::int64_t ldacc);
    // The local communicator's reduction of one chunk: acc[i] = src[0][from + i] + … +
    // src[t − 1][from + i], left to right in fp32, the inputs of storage type `storage` (the same
    // IEEE adds in every table: the same bits from any of them).
    void (*sumChunk)(Storage storage, const void* const* src, int t, std::int64_t from, std::int64_t n, float* acc);
    // n fp32 values rounded to nearest even into 16-bit `out` (bf16 or f16; NaN stays NaN),
    // bit-identical to tp::floatToBf16 / tp::floatToHalf.
    void (*round16)(Storage storage, const float* acc, std::int64_t n, std::uint16_t* out);
};

// The table for this CPU: the widest instruction set it supports, capped by TPSTUDIO_CPU_ISA
// (avx512, avx2 or sse2) when set; any other value caps nothing.
const Kernels& kernels();

// TPSTUDIO_CPU_ISA's value when it is set to something else than avx512, avx2 or sse2 (and so
// ignored), else "".
std::string unknownIsaCap();

// The instruction sets the CPU itself supports, best first, e.g. "avx512 avx2 sse2".
const char* cpuIsaList();

} // namespace tp::cpu
