#include "tp/model/dtype.h"

#include <array>
#include <utility>

namespace tp {
namespace {

struct DTypeInfo
{
    DType type;
    std::string_view safetensors;
    int bits;
};

constexpr std::array kDTypes = {
    DTypeInfo{DType::Bool, "BOOL", 8},    DTypeInfo{DType::U8, "U8", 8},
    DTypeInfo{DType::I8, "I8", 8},        DTypeInfo{DType::U16, "U16", 16},
    DTypeInfo{DType::I16, "I16", 16},     DTypeInfo{DType::U32, "U32", 32},
    DTypeInfo{DType::I32, "I32", 32},     DTypeInfo{DType::U64, "U64", 64},
    DTypeInfo{DType::I64, "I64", 64},     DTypeInfo{DType::F4, "F4", 4},
    DTypeInfo{DType::F6E2M3, "F6_E2M3", 6}, DTypeInfo{DType::F6E3M2, "F6_E3M2", 6},
    DTypeInfo{DType::F8E4M3, "F8_E4M3", 8}, DTypeInfo{DType::F8E5M2, "F8_E5M2", 8},
    DTypeInfo{DType::F8E8M0, "F8_E8M0", 8}, DTypeInfo{DType::F16, "F16", 16},
    DTypeInfo{DType::BF16, "BF16", 16},   DTypeInfo{DType::F32, "F32", 32},
    DTypeInfo{DType::F64, "F64", 64},
};

const DTypeInfo& info(DType t)
{
    return kDTypes[static_cast<std::size_t>(t)];
}

} // namespace

int dtypeBits(DType t) { return info(t).bits; }
std::string_view dtypeName(DType t) { return info(t).safetensors; }

std::optional<DType> dtypeFromSafetensors(std::string_view name)
{
    for (const auto& d : kDTypes)
        if (d.safetensors == name)
            return d.type;
    return std::nullopt;
}

std::optional<DType> dtypeFromTorch(std::string_view name)
{
    if (name.starts_with("torch."))
        name.remove_prefix(6);
    static constexpr std::pair<std::string_view, DType> kTorch[] = {
        {"bfloat16", DType::BF16},      {"float16", DType::F16},          {"half", DType::F16},
        {"float32", DType::F32},        {"float", DType::F32},            {"float64", DType::F64},
        {"double", DType::F64},         {"float8_e4m3fn", DType::F8E4M3}, {"float8_e5m2", DType::F8E5M2},
        {"int8", DType::I8},            {"uint8", DType::U8},             {"int32", DType::I32},
        {"int64", DType::I64},          {"bool", DType::Bool},
    };
    for (const auto& [n, t] : kTorch)
        if (n == name)
            return t;
    return std::nullopt;
}

std::int64_t dtypeBytes(DType t, std::int64_t elements)
{
    return (elements * dtypeBits(t) + 7) / 8;
}

} // namespace tp
