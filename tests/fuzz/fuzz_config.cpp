// Fuzzes config.json parsing and, for accepted configs of sane size, module-tree building, the
// sharded graph at T=2 and the Python export. Invariants beyond "no crash": an accepted model has at
// most 2^45 parameters and no wrapped (negative) element or byte count anywhere, and the exported
// script has exactly the two triple quotes of its docstring, whatever the config's text holds.
#include "tp/model/config.h"
#include "tp/model/model_spec.h"
#include "tp/plan/plan_io.h"
#include "tp/shard/sharded_graph.h"

#include <cstdint>
#include <string>

namespace {
std::size_t count(const std::string& s, const std::string& what)
{
    std::size_t n = 0;
    for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size()))
        ++n;
    return n;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    std::vector<tp::Diagnostic> diags;
    auto c = tp::parseConfig(text, "fuzz/config.json", &diags);
    if (!c.ok() || c->family == tp::Family::Unknown)
        return 0;
    // Bound the tree so that a huge (valid) layer count does not just measure allocation.
    if (c->numLayers > 64)
        return 0;
    auto spec = tp::buildModelSpec(*c);
    if (!spec.ok())
        return 0;
    const std::int64_t params = spec->parameterCount();
    if (params < 0 || params > (std::int64_t(1) << 45) || spec->parameterBytes() < 0)
        __builtin_trap();
    tp::Plan plan = tp::defaultPlan(*spec, 2, tp::VersionProfile::G3);
    const tp::ShardedGraph g = tp::shardModel(*spec, plan, {.batch = 1, .seq = 4});
    for (const auto& p : g.params)
        for (auto b : p.bytes)
            if (b < 0)
                __builtin_trap();
    if (count(tp::planToPython(plan, *spec), "\"\"\"") != 2)
        __builtin_trap();
    return 0;
}
