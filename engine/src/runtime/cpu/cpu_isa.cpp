// cpu_isa.cpp — picks the kernel table (cpu_kernels.h) for the CPU at hand, once.
#include "cpu_kernels.h"

#include <cstdlib>
#include <string>

namespace tp::cpu {
#if TP_KERNELS_X86
namespace avx512 { extern const Kernels table; }
namespace avx2 { extern const Kernels table; }
#endif
namespace sse2 { extern const Kernels table; }

namespace {

bool hasAvx512()
{
#if TP_KERNELS_X86
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")
        && __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}
bool hasAvx2()
{
#if TP_KERNELS_X86
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
#else
    return false;
#endif
}

bool isIsaName(const std::string& c) { return c == "avx512" || c == "avx2" || c == "sse2"; }

const Kernels& pick()
{
    // An unknown value caps nothing (as when it is not set); cpuMathWarning() says so.
    const char* cap = std::getenv("TPSTUDIO_CPU_ISA");
    std::string c = cap ? cap : "";
    if (!isIsaName(c))
        c.clear();
#if TP_KERNELS_X86
    if (hasAvx512() && (c.empty() || c == "avx512"))
        return avx512::table;
    if (hasAvx2() && c != "sse2")
        return avx2::table;
#endif
    return sse2::table;
}

} // namespace

const Kernels& kernels()
{
    static const Kernels& k = pick();
    return k;
}

std::string unknownIsaCap()
{
    const char* cap = std::getenv("TPSTUDIO_CPU_ISA");
    return cap && *cap && !isIsaName(cap) ? std::string(cap) : std::string();
}

const char* cpuIsaList()
{
    static const std::string s = std::string(hasAvx512() ? "avx512 " : "") + (hasAvx2() ? "avx2 " : "") + "sse2";
    return s.c_str();
}

} // namespace tp::cpu
