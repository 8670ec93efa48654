// tensor.h — a view of a 2-D block of one device's memory, and host conversions between fp32 and
// the 16-bit storage types.
//
// A Tensor never owns memory: buffers belong to a Backend (allocated once per run), tensors are
// windows into them. Activations are token-major, [tokens, features]; a weight [out, in] is a
// tensor of `out` rows; a 3-D expert weight [E, R, C] is E·R rows of C. A column view of a wider
// tensor keeps its parent's row stride, so splitting the features of a tensor copies nothing.
//
//   Tensor x = Tensor::contiguous(ptr, DType::BF16, tokens, 4096, DeviceKind::Cuda);
//   Tensor q = x.columns(0, 1024);     // rows × 1024, stride 4096
#pragma once

#include "tp/model/dtype.h"

#include <bit>
#include <cstdint>
#include <cstring>

namespace tp {

enum class DeviceKind { Cpu, Cuda };
const char* deviceKindName(DeviceKind d);

struct Tensor
{
    void* data = nullptr;
    DType dtype = DType::F32;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t stride = 0;        // elements from one row to the next (>= cols)
    DeviceKind device = DeviceKind::Cpu;

    static Tensor contiguous(void* data, DType dtype, std::int64_t rows, std::int64_t cols, DeviceKind device)
    {
        return {data, dtype, rows, cols, cols, device};
    }

    std::int64_t numel() const { return rows * cols; }
    std::int64_t elementBytes() const { return dtypeBytes(dtype, 1); }
    // Bytes of rows × cols elements (a view's own elements, not its parent's).
    std::int64_t bytes() const { return numel() * elementBytes(); }
    bool isContiguous() const { return stride == cols || rows <= 1; }
    bool empty() const { return rows == 0 || cols == 0; }

    // Columns [first, first + n) of every row.
    Tensor columns(std::int64_t first, std::int64_t n) const
    {
        Tensor t = *this;
        t.data = static_cast<char*>(data) + first * elementBytes();
        t.cols = n;
        return t;
    }
    // Rows [first, first + n).
    Tensor rowRange(std::int64_t first, std::int64_t n) const
    {
        Tensor t = *this;
        t.data = static_cast<char*>(data) + first * stride * elementBytes();
        t.rows = n;
        return t;
    }
    // The same contiguous elements seen as another shape (rows·cols must be equal).
    Tensor reshaped(std::int64_t r, std::int64_t c) const { return contiguous(data, dtype, r, c, device); }

    template<typename T> T* as() const { return static_cast<T*>(data); }
};

// Whether `dtype` is one the engine stores activations and weights in.
inline bool isStorageDtype(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

// --- host conversions (round to nearest even; NaN stays NaN) -------------------------------------

inline float bf16ToFloat(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t(b) << 16); }

inline std::uint16_t floatToBf16(float f)
{
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return static_cast<std::uint16_t>((u >> 16) | 0x40); // quiet NaN
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float halfToFloat(std::uint16_t h);
std::uint16_t floatToHalf(float f);
// v as `dtype` (a storage dtype) holds it: rounded to bf16 or f16, unchanged in f32.
float roundedTo(DType dtype, float v);

// How many of n values are NaN or infinite, and how many finite ones lie beyond what `dtype` can hold
// (f16: |v| > 65504), with the first such value.
struct ValueCheck
{
    std::int64_t nonFinite = 0;
    std::int64_t outOfRange = 0;
    float first = 0;
};
ValueCheck checkValues(const float* v, std::int64_t n, DType dtype);

// n elements of `src` (dtype `from`, a storage dtype) as fp32, and back.
void toFloat(const void* src, DType from, float* dst, std::int64_t n);
void fromFloat(const float* src, DType to, void* dst, std::int64_t n);

} // namespace tp
