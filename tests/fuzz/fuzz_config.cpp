// Fuzzes config.json parsing and, for accepted configs of sane size, module-tree building.
#include "tp/model/config.h"
#include "tp/model/model_spec.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    std::vector<tp::Diagnostic> diags;
    auto c = tp::parseConfig(text, "fuzz/config.json", &diags);
    if (!c.ok() || c->family == tp::Family::Unknown)
        return 0;
    // Bound the tree so that a huge (valid) layer count does not just measure allocation.
    if (c->numLayers > 64 || c->numExperts > 512)
        return 0;
    auto spec = tp::buildModelSpec(*c);
    if (spec.ok())
        (void)spec->parameterCount();
    return 0;
}
