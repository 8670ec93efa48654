#include "tp/plan/plan_io.h"
#include "tp/core/json.h"

#include "tp/core/file.h"

#include "tp/model/catalog.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string_view>
#include <unordered_map>

namespace tp {

namespace {

Status parseCustomStyles(const nlohmann::ordered_json& j, const std::string& source, Plan& plan)
{
    if (!j.is_object())
        return invalidArgument(fmt::format("{}: key 'custom_styles' must be an object of name → definition", source));
    for (auto it = j.begin(); it != j.end(); ++it) {
        const auto& d = it.value();
        if (const std::string why = badName(it.key()); !why.empty())
            return invalidArgument(fmt::format("{}: a name in custom_styles: {}", source, why));
        const std::string where = fmt::format("{}: custom_styles.{}", source, it.key());
        if (!d.is_object())
            return invalidArgument(fmt::format("{}: must be an object with base, input, output", where));
        CustomStyleSpec spec;
        spec.name = it.key();
        for (const char* k : {"base", "input", "output"})
            if (!d.contains(k) || !d[k].is_string())
                return invalidArgument(fmt::format("{}: key '{}' must be a string", where, k));
        spec.base = d["base"].get<std::string>();
        const auto in = layoutFromName(d["input"].get<std::string>());
        const auto out = layoutFromName(d["output"].get<std::string>());
        if (!in || !out)
            return invalidArgument(fmt::format("{}: layouts are \"Replicate\" or \"Shard(-1)\"", where));
        spec.input = *in;
        spec.output = *out;
        auto style = makeCustomStyle(spec);
        if (!style)
            return invalidArgument(fmt::format("{}: {}", source, style.status().message()));
        plan.customStyles.push_back(std::move(*style));
    }
    return Status();
}

const char* torchLayout(Layout l) { return l == Layout::ShardLast ? "Shard(-1)" : "Replicate()"; }

// ordered_json::parse stores an object's keys in a vector and searches it for every new key, so
// an object of K keys took O(K²) (100,000 plan keys: most of a minute). This SAX builder makes the
// same value (keys in file order; a repeated key keeps its first place and takes the last value,
// as parse and Python's json.load do) with a hash index per open object: O(size of the text).
class OrderedJsonBuilder
{
public:
    using J = nlohmann::ordered_json;
    explicit OrderedJsonBuilder(J& root) : m_root(root) {}

    bool null() { return put(nullptr) != nullptr; }
    bool boolean(bool v) { return put(v) != nullptr; }
    bool number_integer(J::number_integer_t v) { return put(v) != nullptr; }
    bool number_unsigned(J::number_unsigned_t v) { return put(v) != nullptr; }
    bool number_float(J::number_float_t v, const J::string_t&) { return put(v) != nullptr; }
    bool string(J::string_t& v) { return put(std::move(v)) != nullptr; }
    bool binary(J::binary_t& v) { return put(J::binary(std::move(v))) != nullptr; }
    bool start_object(std::size_t)
    {
        m_stack.push_back({put(J::object()), {}});
        return true;
    }
    bool key(J::string_t& k)
    {
        Frame& f = m_stack.back();
        auto& items = static_cast<J::object_t::Container&>(*f.value->get_ptr<J::object_t*>());
        auto [it, fresh] = f.index.try_emplace(k, items.size());
        if (fresh)
            items.emplace_back(std::move(k), nullptr);
        m_slot = &items[it->second].second;
        return true;
    }
    bool end_object()
    {
        m_stack.pop_back();
        return true;
    }
    bool start_array(std::size_t)
    {
        m_stack.push_back({put(J::array()), {}});
        return true;
    }
    bool end_array()
    {
        m_stack.pop_back();
        return true;
    }
    template <class Exception>
    bool parse_error(std::size_t, const std::string&, const Exception& ex)
    {
        throw ex;
    }

private:
    struct Frame
    {
        J* value;
        std::unordered_map<std::string, std::size_t> index; // objects: key → position
    };

    // Places a value where the parse is (the root, the next array element, or the slot of the
    // last key) and returns it. Pointers stay valid: a container grows only while it is innermost.
    template <class V>
    J* put(V&& v)
    {
        if (m_stack.empty()) {
            m_root = J(std::forward<V>(v));
            return &m_root;
        }
        J* top = m_stack.back().value;
        if (top->is_array()) {
            top->push_back(J(std::forward<V>(v)));
            return &top->back();
        }
        *m_slot = J(std::forward<V>(v));
        return m_slot;
    }

    J& m_root;
    std::vector<Frame> m_stack;
    J* m_slot = nullptr;
};

} // namespace

Result<Plan> parsePlanJson(std::string_view text, const std::string& source, VersionProfile profile)
{
    TP_RETURN_IF_ERROR(checkJsonNesting(text, source, "the plan"));
    nlohmann::ordered_json j;
    try {
        OrderedJsonBuilder builder(j);
        nlohmann::ordered_json::sax_parse(text, &builder);
    } catch (const nlohmann::json::exception& e) {
        return invalidArgument(fmt::format("{}: plan is not valid JSON: {}", source, e.what()));
    }
    if (!j.is_object())
        return invalidArgument(fmt::format("{}: a plan must be a JSON object", source));
    Plan plan;
    plan.profile = profile;
    const nlohmann::ordered_json* map = &j;
    if (j.contains("tp_plan")) {
        map = &j["tp_plan"];
        if (j.contains("tp_size") && !j["tp_size"].is_null()) {
            if (!j["tp_size"].is_number_unsigned() || j["tp_size"].get<std::uint64_t>() < 1 || j["tp_size"].get<std::uint64_t>() > 4096)
                return invalidArgument(fmt::format("{}: key 'tp_size' must be a positive integer, found {}", source, jsonExcerpt(j["tp_size"])));
            plan.tpSize = static_cast<int>(j["tp_size"].get<std::uint64_t>());
        }
        if (map->is_string())
            return invalidArgument(fmt::format("{}: key 'tp_plan' is \"{}\"; TP Studio needs the explicit plan (use the "
                                               "model's default plan instead of \"auto\")",
                                               source, map->get<std::string>()));
        if (!map->is_object())
            return invalidArgument(fmt::format("{}: key 'tp_plan' must be an object of key → style", source));
        if (j.contains("custom_styles"))
            TP_RETURN_IF_ERROR(parseCustomStyles(j["custom_styles"], source, plan));
    }
    // Each key → style of a plan section; an ep_plan key replaces the tp_plan's (Transformers applies
    // the EP plan over the TP plan, whose experts keys say "replicate").
    std::unordered_map<std::string, std::size_t> at; // key → its entry: one hash lookup per key, not a scan
    auto read = [&](const nlohmann::ordered_json& m, const char* section) -> Status {
        for (auto it = m.begin(); it != m.end(); ++it) {
            if (const std::string why = badName(it.key()); !why.empty())
                return invalidArgument(fmt::format("{}: a key of {}: {}", source, section, why));
            if (it.value().is_string())
                if (const std::string why = badName(it.value().get<std::string>()); !why.empty())
                    return invalidArgument(fmt::format("{}: the style of {} key '{}': {}", source, section, it.key(), why));
            if (!it.value().is_string())
                return invalidArgument(fmt::format("{}: key '{}.{}' must name a style, found {}", source, section, it.key(),
                                                   jsonExcerpt(it.value())));
            if (it.key().empty())
                return invalidArgument(fmt::format("{}: an empty key in {}", source, section));
            if (const auto [pos, fresh] = at.try_emplace(it.key(), plan.entries.size()); fresh)
                plan.entries.push_back({it.key(), it.value().get<std::string>()});
            else
                plan.entries[pos->second].style = it.value().get<std::string>();
        }
        return {};
    };
    TP_RETURN_IF_ERROR(read(*map, "tp_plan"));
    if (map != &j && j.contains("ep_plan") && !j["ep_plan"].is_null()) {
        // Expert parallelism as Transformers 5.24 runs it at inference: on the tensor-parallel ranks
        // themselves (ep_size = tp_size: AllReduceEP), the only mesh the engine and the planner have.
        if (!j["ep_plan"].is_object())
            return invalidArgument(fmt::format("{}: key 'ep_plan' must be an object of key → style", source));
        if (j.contains("ep_size") && !j["ep_size"].is_null()
            && !(j["ep_size"].is_number_unsigned() && j["ep_size"].get<std::uint64_t>() == static_cast<std::uint64_t>(plan.tpSize)))
            return invalidArgument(fmt::format("{}: key 'ep_size' is {} but tp_size is {}: TP Studio runs expert "
                                               "parallelism on the tensor-parallel ranks (ep_size = tp_size)",
                                               source, jsonExcerpt(j["ep_size"]), plan.tpSize));
        TP_RETURN_IF_ERROR(read(j["ep_plan"], "ep_plan"));
    }
    if (map != &j && j.contains("ep_implementation") && !j["ep_implementation"].is_null()) {
        const auto& v = j["ep_implementation"];
        const std::string name = v.is_string() ? v.get<std::string>() : std::string();
        if (name == "deepgemm_megamoe")
            return invalidArgument(fmt::format("{}: key 'ep_implementation' is \"deepgemm_megamoe\", which needs DeepGEMM's "
                                               "Mega MoE CUDA kernel (dispatch, experts and combine in one kernel); the "
                                               "engine runs \"all_to_all\" or \"all_reduce\"",
                                               source));
        if (name == "auto")
            plan.epImplementation = EpImplementation::Auto;
        else if (name == "all_reduce")
            plan.epImplementation = EpImplementation::AllReduce;
        else if (name == "all_to_all")
            plan.epImplementation = EpImplementation::AllToAll;
        else
            return invalidArgument(fmt::format("{}: key 'ep_implementation' must be \"auto\", \"all_reduce\" or "
                                               "\"all_to_all\", found {}",
                                               source, jsonExcerpt(v)));
    }
    // DistributedConfig's pp_size (plan search writes it for a pipeline).
    if (map != &j && j.contains("pp_size") && !j["pp_size"].is_null()) {
        if (!j["pp_size"].is_number_unsigned() || j["pp_size"].get<std::uint64_t>() < 1 || j["pp_size"].get<std::uint64_t>() > 4096)
            return invalidArgument(fmt::format("{}: key 'pp_size' must be a positive integer up to 4096, found {}", source, jsonExcerpt(j["pp_size"])));
        plan.ppSize = static_cast<int>(j["pp_size"].get<std::uint64_t>());
    }
    // TP Studio's own key: KV heads replicated as vLLM does (Plan::replicateKvHeads), which Transformers cannot load.
    if (map != &j && j.contains("replicate_kv_heads") && !j["replicate_kv_heads"].is_null()) {
        if (!j["replicate_kv_heads"].is_boolean())
            return invalidArgument(fmt::format("{}: key 'replicate_kv_heads' must be true or false, found {}", source,
                                               jsonExcerpt(j["replicate_kv_heads"])));
        plan.replicateKvHeads = j["replicate_kv_heads"].get<bool>();
    }
    return plan;
}

Result<Plan> loadPlanFile(const std::string& path, VersionProfile profile)
{
    TP_ASSIGN_OR_RETURN(const std::string text, readInputFile(path, std::int64_t(16) << 20, "a plan"));
    return parsePlanJson(text, path, profile);
}

Plan resolveOverrides(const ModelSpec& spec, const Plan& overrides)
{
    if (overrides.profile != VersionProfile::G3)
        return overrides;
    Plan out = overrides;
    out.entries = spec.defaultTpPlan;
    // key → its first entry: O(D + K) instead of a scan of the merged list per override.
    std::unordered_map<std::string, std::size_t> first;
    first.reserve(out.entries.size() + overrides.entries.size());
    for (std::size_t i = 0; i < out.entries.size(); ++i)
        first.emplace(out.entries[i].key, i);
    for (const auto& e : overrides.entries) {
        auto [it, fresh] = first.try_emplace(e.key, out.entries.size());
        if (fresh)
            out.entries.push_back(e);
        else
            out.entries[it->second].style = e.style;
    }
    return out;
}

std::vector<PlanEntry> exportOrder(const std::vector<PlanEntry>& entries)
{
    // A module key must follow every key below it ("…experts.gate_up_proj" before "…experts").
    // below[i]: the entries whose key is below entries[i].key ("a.b.c" is below "a" and "a.b"), in
    // entry order; found through each key's dotted prefixes, so O(K·L) rather than K² compares.
    std::vector<PlanEntry> out;
    out.reserve(entries.size());
    std::vector<bool> placed(entries.size(), false);
    std::unordered_map<std::string_view, std::vector<std::size_t>> byKey;
    for (std::size_t i = 0; i < entries.size(); ++i)
        byKey[entries[i].key].push_back(i);
    std::vector<std::vector<std::size_t>> below(entries.size());
    for (std::size_t k = 0; k < entries.size(); ++k) {
        const std::string_view key = entries[k].key;
        for (std::size_t dot = key.find('.'); dot != std::string_view::npos && dot + 1 < key.size();
             dot = key.find('.', dot + 1))
            if (auto it = byKey.find(key.substr(0, dot)); it != byKey.end())
                for (std::size_t i : it->second)
                    below[i].push_back(k);
    }
    std::function<void(std::size_t)> place = [&](std::size_t i) {
        if (placed[i])
            return;
        placed[i] = true;
        for (std::size_t k : below[i])
            if (!placed[k])
                place(k);
        out.push_back(entries[i]);
    };
    for (std::size_t i = 0; i < entries.size(); ++i)
        place(i);
    return out;
}

const char* epImplementationName(EpImplementation e)
{
    switch (e) {
    case EpImplementation::AllReduce: return "all_reduce";
    case EpImplementation::AllToAll: return "all_to_all";
    case EpImplementation::Auto: break;
    }
    return "auto";
}

namespace {

// The entries as written: export order, duplicates dropped, dropped default keys as "replicate".
// Styles that Transformers applies through DistributedConfig.ep_plan (expert_parallel.py), once the
// plan dispatches to experts with ep_dispatch_experts: in a tp_plan it fails to install.
bool epPlanStyle(const std::string& style) { return style == "grouped_gemm" || style == "ep_dispatch_experts"; }

bool usesEpPlan(const Plan& plan)
{
    return std::any_of(plan.entries.begin(), plan.entries.end(), [](const PlanEntry& e) { return e.style == "ep_dispatch_experts"; });
}

} // namespace

bool exportedToEpPlan(const Plan& plan, const PlanEntry& e) { return usesEpPlan(plan) && epPlanStyle(e.style); }

namespace {

// The plan's keys as Transformers takes them: {tp_plan, ep_plan}. With ep_dispatch_experts the
// expert keys move to ep_plan and the tp_plan says "replicate" for them.
std::pair<nlohmann::ordered_json, nlohmann::ordered_json> planMaps(const Plan& plan, const ModelSpec* spec);

nlohmann::ordered_json planMap(const Plan& plan, const ModelSpec* spec)
{
    std::vector<PlanEntry> entries = plan.entries;
    if (spec && plan.profile == VersionProfile::G3) {
        // The class's keys first, in its order (what Transformers' merge produces), then the new ones.
        entries.clear();
        auto find = [&](const std::string& key) {
            return std::find_if(plan.entries.begin(), plan.entries.end(), [&](const PlanEntry& e) { return e.key == key; });
        };
        for (const auto& d : spec->defaultTpPlan) {
            auto it = find(d.key);
            entries.push_back({d.key, it == plan.entries.end() ? std::string("replicate") : it->style});
        }
        for (const auto& e : plan.entries)
            if (std::none_of(spec->defaultTpPlan.begin(), spec->defaultTpPlan.end(),
                             [&](const PlanEntry& d) { return d.key == e.key; }))
                entries.push_back(e);
    }
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    for (const auto& e : exportOrder(entries))
        if (!map.contains(e.key))
            map[e.key] = e.style;
    return map;
}

std::pair<nlohmann::ordered_json, nlohmann::ordered_json> planMaps(const Plan& plan, const ModelSpec* spec)
{
    nlohmann::ordered_json tp = planMap(plan, spec), ep = nlohmann::ordered_json::object();
    if (!usesEpPlan(plan))
        return {tp, ep};
    for (auto it = tp.begin(); it != tp.end(); ++it)
        if (epPlanStyle(it.value().get<std::string>())) {
            ep[it.key()] = it.value();
            it.value() = "replicate";
        }
    return {tp, ep};
}

nlohmann::ordered_json customStylesJson(const Plan& plan)
{
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& s : plan.customStyles) {
        const CustomStyleSpec c = customStyleSpec(s);
        j[s.name] = {{"base", c.base},
                     {"input", c.input == Layout::ShardLast ? "Shard(-1)" : "Replicate"},
                     {"output", c.output == Layout::ShardLast ? "Shard(-1)" : "Replicate"}};
    }
    return j;
}

// Text from a model folder or a path, for the generated script's docstring: only characters that
// cannot end the string, escape or start code pass; the rest become '?'.
std::string docstringText(const std::string& s)
{
    std::string out;
    for (char ch : s.substr(0, 200)) {
        const auto u = static_cast<unsigned char>(ch);
        out += u < 0x80 && (std::isalnum(u) || std::strchr(" _-./:+@,=()", ch)) ? ch : '?';
    }
    return out;
}

// A Python string literal: JSON's escapes are Python's, and ASCII-only output leaves nothing raw.
std::string pyString(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', true, kReplaceInvalidUtf8); }

} // namespace

std::string planToJson(const Plan& plan, const ModelSpec* spec)
{
    nlohmann::ordered_json j;
    j["tp_size"] = plan.tpSize;
    if (plan.ppSize > 1)
        j["pp_size"] = plan.ppSize;
    const auto [tpMap, epMap] = planMaps(plan, spec);
    j["tp_plan"] = tpMap;
    if (!epMap.empty()) {
        j["ep_size"] = plan.tpSize;
        j["ep_plan"] = epMap;
        if (plan.epImplementation != EpImplementation::Auto)
            j["ep_implementation"] = epImplementationName(plan.epImplementation);
    }
    if (!plan.customStyles.empty())
        j["custom_styles"] = customStylesJson(plan);
    if (plan.replicateKvHeads)
        j["replicate_kv_heads"] = true;
    return j.dump(2, ' ', false, kReplaceInvalidUtf8) + "\n";
}

std::string planToPython(const Plan& plan, const ModelSpec& spec, std::string_view scriptPath, std::string_view writer)
{
    std::string_view script = scriptPath.substr(scriptPath.find_last_of('/') == std::string_view::npos ? 0 : scriptPath.find_last_of('/') + 1);
    if (script.empty() || script.size() > 128 || !std::all_of(script.begin(), script.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '+' || c == '-';
        }))
        script = "plan.py";
    const auto [map, epMap] = planMaps(plan, &spec);
    auto lines = [](const nlohmann::ordered_json& m) {
        std::string out;
        for (auto it = m.begin(); it != m.end(); ++it)
            out += fmt::format("    {}: {},\n", pyString(it.key()), pyString(it.value().get<std::string>()));
        return out;
    };
    const std::string planLines = lines(map), epLines = lines(epMap);
    std::string registrations;
    for (const auto& s : plan.customStyles) {
        const CustomStyleSpec c = customStyleSpec(s);
        registrations += fmt::format("    ALL_PARALLEL_STYLES.register(\n        {}, {}(input_layouts={}, "
                                     "output_layouts={})\n    )  # forward: {}\n",
                                     pyString(s.name),
                                     c.base == "colwise" ? "ColwiseParallel" : "RowwiseParallel",
                                     torchLayout(c.input), torchLayout(c.output), collectiveName(s.forward));
    }
    if (registrations.empty())
        registrations = "    pass  # the plan uses built-in styles only\n";
    std::string repo = spec.source.empty() ? spec.className : spec.source;
    if (repo.starts_with("catalog:"))
        if (const CatalogEntry* e = findCatalogEntry(repo.substr(8)))
            repo = e->repoId;
    return fmt::format(
        R"py(#!/usr/bin/env python3
"""Load {cls} with tensor parallelism over {tp} ranks, as planned in TP Studio.

    torchrun --nproc-per-node {tp} {script} [MODEL]    # load and run one forward
    python3 {script} --check                           # verify the plan, load nothing

MODEL defaults to {repo_doc}. Written by {writer}.
"""
import sys

TP_SIZE = {tp}
TP_PLAN = {{
{plan}}}
# Expert parallelism on the same ranks (ep_size = tp_size), empty when the plan has none, and how
# the tokens reach the experts ("auto": all_reduce at inference).
EP_PLAN = {{
{ep_plan}}}
EP_IMPLEMENTATION = {ep_impl}


def register_custom_styles():
    from torch.distributed.tensor import Replicate, Shard  # noqa: F401
    from transformers.distributed.tensor_parallel import (  # noqa: F401
        ALL_PARALLEL_STYLES,
        ColwiseParallel,
        RowwiseParallel,
    )

{registrations}

def distributed_config():
    from transformers.distributed import DistributedConfig

    register_custom_styles()
    if EP_PLAN:
        return DistributedConfig(
            tp_size=TP_SIZE, tp_plan=dict(TP_PLAN), ep_size=TP_SIZE, ep_plan=dict(EP_PLAN), ep_implementation=EP_IMPLEMENTATION
        )
    return DistributedConfig(tp_size=TP_SIZE, tp_plan=dict(TP_PLAN))


def check():
    import transformers.distributed.expert_parallel  # noqa: F401  (registers the EP styles)
    from transformers.distributed.tensor_parallel import ALL_PARALLEL_STYLES

    config = distributed_config()
    styles = list(config.tp_plan.values()) + list((config.ep_plan or {{}}).values())
    missing = sorted({{s for s in styles if s not in ALL_PARALLEL_STYLES}})
    if missing:
        sys.exit(f"styles not registered in Transformers: {{missing}}")
    print(f"ok: tp_size={{config.tp_size}}, {{len(config.tp_plan)}} rules, every style registered")


def main():
    if "--check" in sys.argv[1:]:
        return check()
    import torch
    from transformers import AutoModelForCausalLM

    model_id = next((a for a in sys.argv[1:] if not a.startswith("-")), {repo})
    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=torch.bfloat16, distributed_config=distributed_config())
    ids = torch.arange(16, device=model.device).unsqueeze(0)
    with torch.no_grad():
        logits = model(ids).logits
    if torch.distributed.get_rank() == 0:
        print("logits", tuple(logits.shape))
    # Tear the process group down before exit: a live gloo/NCCL group at interpreter shutdown can abort.
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
)py",
        fmt::arg("cls", docstringText(spec.className)), fmt::arg("script", script), fmt::arg("tp", plan.tpSize), fmt::arg("repo_doc", docstringText(repo)), fmt::arg("writer", writer),
        fmt::arg("repo", pyString(repo)),
        fmt::arg("plan", planLines), fmt::arg("ep_plan", epLines),
        fmt::arg("ep_impl", pyString(epImplementationName(plan.epImplementation))), fmt::arg("registrations", registrations));
}

} // namespace tp
