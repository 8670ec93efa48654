// tensor.cpp — fp32 ⇄ f16 conversions (bf16 is inline in the header).
#include "tp/runtime/tensor.h"

#include <cmath>
#include <limits>

namespace tp {

float halfToFloat(std::uint16_t h)
{
    const std::uint32_t sign = std::uint32_t(h & 0x8000) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        const float f = std::ldexp(static_cast<float>(man), -24); // zero or subnormal
        return sign ? -f : f;
    }
    if (exp == 31)
        return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

// Round to nearest even (F. Giesen's float_to_half_fast3_rtne): subnormals through a float add
// that does the rounding, normals by adding half an ulp minus one plus the odd bit.
std::uint16_t floatToHalf(float value)
{
    const std::uint32_t infinity = 255u << 23, halfMax = (127u + 16u) << 23;
    const std::uint32_t denormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    const std::uint32_t sign = f & 0x80000000u;
    f ^= sign;
    std::uint16_t out;
    if (f >= halfMax) {
        out = f > infinity ? 0x7e00 : 0x7c00;
    } else if (f < (113u << 23)) {
        const float shifted = std::bit_cast<float>(f) + std::bit_cast<float>(denormMagic);
        out = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(shifted) - denormMagic);
    } else {
        const std::uint32_t odd = (f >> 13) & 1u;
        f += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu;
        f += odd;
        out = static_cast<std::uint16_t>(f >> 13);
    }
    return static_cast<std::uint16_t>(out | (sign >> 16));
}

ValueCheck checkValues(const float* v, std::int64_t n, DType dtype)
{
    // The largest finite value of each storage dtype; rounding to nearest maps anything above the
    // halfway point to the next binade to infinity.
    const float limit = dtype == DType::F16 ? 65520.0f : dtype == DType::BF16 ? 3.3961776e38f : std::numeric_limits<float>::max();
    ValueCheck c;
    for (std::int64_t i = 0; i < n; ++i) {
        const bool bad = !std::isfinite(v[i]);
        const bool big = !bad && std::fabs(v[i]) >= limit && dtype != DType::F32;
        if ((bad || big) && c.nonFinite + c.outOfRange == 0)
            c.first = v[i];
        c.nonFinite += bad;
        c.outOfRange += big;
    }
    return c;
}

void toFloat(const void* src, DType from, float* dst, std::int64_t n)
{
    if (n <= 0) // empty tensors may have null buffers (memcpy must not see them)
        return;
    switch (from) {
    case DType::F32: std::memcpy(dst, src, static_cast<std::size_t>(n) * 4); return;
    case DType::BF16:
        for (std::int64_t i = 0; i < n; ++i)
            dst[i] = bf16ToFloat(static_cast<const std::uint16_t*>(src)[i]);
        return;
    case DType::F16:
        for (std::int64_t i = 0; i < n; ++i)
            dst[i] = halfToFloat(static_cast<const std::uint16_t*>(src)[i]);
        return;
    default: return;
    }
}

void fromFloat(const float* src, DType to, void* dst, std::int64_t n)
{
    if (n <= 0)
        return;
    switch (to) {
    case DType::F32: std::memcpy(dst, src, static_cast<std::size_t>(n) * 4); return;
    case DType::BF16:
        for (std::int64_t i = 0; i < n; ++i)
            static_cast<std::uint16_t*>(dst)[i] = floatToBf16(src[i]);
        return;
    case DType::F16:
        for (std::int64_t i = 0; i < n; ++i)
            static_cast<std::uint16_t*>(dst)[i] = floatToHalf(src[i]);
        return;
    default: return;
    }
}

float roundedTo(DType dtype, float v)
{
    switch (dtype) {
    case DType::BF16: return bf16ToFloat(floatToBf16(v));
    case DType::F16: return halfToFloat(floatToHalf(v));
    default: return v;
    }
}

} // namespace tp
