// Fuzzes safetensors header parsing: the input is the whole file (length prefix, header, data).
#include "tp/model/safetensors.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 8)
        return 0;
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
        n = (n << 8) | data[i];
    if (n > size - 8)
        n = size - 8; // keep the header inside the input; parse checks the rest
    const std::string header(reinterpret_cast<const char*>(data) + 8, n);
    auto h = tp::parseSafetensorsHeader(header, size, "fuzz.safetensors");
    if (h.ok())
        for (const auto& t : h->tensors)
            if (t.end < t.begin || h->dataOffset + t.end > size)
                __builtin_trap(); // an accepted header must describe bytes inside the file
    auto idx = tp::parseSafetensorsIndex(header, "fuzz.index.json");
    (void)idx;
    return 0;
}
