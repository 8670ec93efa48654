// dtype.h — tensor element types as safetensors and Transformers name them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tp {

enum class DType : std::uint8_t {
    Bool,
    U8, I8, U16, I16, U32, I32, U64, I64,
    F4,        // packed fp4 (e2m1), two per byte
    F6E2M3, F6E3M2,
    F8E4M3, F8E5M2, F8E8M0,
    F16, BF16, F32, F64,
};

// Bits per element (fp4 = 4, fp6 = 6).
int dtypeBits(DType t);
// safetensors spelling: "BF16", "F8_E4M3", …
std::string_view dtypeName(DType t);
std::optional<DType> dtypeFromSafetensors(std::string_view name);
// Transformers/torch spelling in config.json: "bfloat16", "float16", "float32", "float8_e4m3fn" …
std::optional<DType> dtypeFromTorch(std::string_view name);
// Storage bytes of `elements` elements (sub-byte types round up).
std::int64_t dtypeBytes(DType t, std::int64_t elements);

} // namespace tp
