// Fuzzes plan files: parsing (wrapped and bare forms, custom styles), the G3 merge, key matching,
// layout propagation over a real module tree (tiny MoE and dense models), and the export round trip
// (whatever parses must export and parse back to the same plan).
#include "tp/model/config.h"
#include "tp/model/model_spec.h"
#include "tp/plan/plan_io.h"
#include "tp/shard/sharded_graph.h"

#include <cstdint>
#include <string>

namespace {
const tp::ModelSpec& model(std::size_t which)
{
    static const tp::ModelSpec specs[2] = {
        *tp::buildModelSpec(*tp::parseConfig(
            R"({"model_type": "llama", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 96})", "llama", nullptr)),
        *tp::buildModelSpec(*tp::parseConfig(
            R"({"model_type": "qwen3_moe", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 96, "num_experts": 4,
                "num_experts_per_tok": 2, "moe_intermediate_size": 16, "head_dim": 8})", "qwen3_moe", nullptr)),
    };
    return specs[which % 2];
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto plan = tp::parsePlanJson(text, "fuzz/plan.json", size % 3 == 0 ? tp::VersionProfile::G2 : tp::VersionProfile::G3);
    if (!plan.ok())
        return 0;
    const tp::ModelSpec& spec = model(size);
    tp::Plan p = tp::resolveOverrides(spec, *plan);
    p.tpSize = 1 + static_cast<int>(size % 8);
    const tp::ShardedGraph g = tp::shardModel(spec, p, {.batch = 1, .seq = 4});
    (void)g.valid();
    // Export → import must give back the same entries and custom styles.
    const std::string again = tp::planToJson(p);
    auto back = tp::parsePlanJson(again, "fuzz/export.json", p.profile);
    if (!back.ok() || back->customStyles.size() != p.customStyles.size())
        __builtin_trap();
    return 0;
}
