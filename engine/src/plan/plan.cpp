#include "tp/plan/plan.h"

#include "tp/core/units.h"
#include "tp/model/dtype.h"
#include "tp/model/loader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace tp {

Plan defaultPlan(const ModelSpec& spec, int tpSize, VersionProfile profile)
{
    Plan p;
    p.tpSize = tpSize;
    p.profile = profile;
    p.entries = spec.defaultTpPlan;
    return p;
}

std::string wildcardName(const std::string& name, VersionProfile profile)
{
    if (profile != VersionProfile::G1)
        return genericName(name);
    // G1: re.sub(r"\d+", "*", name)
    std::string out;
    out.reserve(name.size());
    for (std::size_t i = 0; i < name.size();) {
        if (name[i] >= '0' && name[i] <= '9') {
            out += '*';
            while (i < name.size() && name[i] >= '0' && name[i] <= '9')
                ++i;
        } else {
            out += name[i++];
        }
    }
    return out;
}

namespace {

bool isIndexedKey(const std::string& key)
{
    return genericName(key) != key; // has a numeric segment
}

bool isLinearStyle(const Style& s)
{
    return s.weight2d.shards() || s.embedding.shards();
}

// Appends the lookup form of `name` to `out`, so that wildcardName(a + "." + b) is
// wildcardName(a) + "." + this of b (atStart false): G3/G2 turn numeric segments other than the
// first into '*', G1 every digit run. No string is made per lookup.
void appendWildcard(std::string& out, std::string_view name, VersionProfile profile, bool atStart)
{
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    if (profile == VersionProfile::G1) {
        for (std::size_t i = 0; i < name.size();) {
            if (digit(name[i])) {
                out += '*';
                while (i < name.size() && digit(name[i]))
                    ++i;
            } else {
                out += name[i++];
            }
        }
        return;
    }
    appendGenericName(out, name, atStart);
}

struct StringHash
{
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

} // namespace

// Complexity: O(K·L + (M + P)·L) for K keys, M modules, P parameters and names of length ≤ L.
// Keys go in a hash map by their text; every module and parameter then costs at most two hash
// lookups (G3: its exact name, then its wildcarded one), whatever K is. Per-key work (styles,
// indexed/unmatched diagnostics) is a hash lookup too. No key is compared against every module.
PlanMatch matchPlan(const ModelSpec& spec, const Plan& plan)
{
    PlanMatch out;
    const StyleRegistry& reg = StyleRegistry::builtin();
    const VersionProfile prof = plan.profile;

    // Resolve styles first: custom styles shadow nothing (their names must be new).
    std::unordered_map<std::string_view, const Style*> customByName; // first of a name wins, as find_if did
    for (const auto& c : plan.customStyles)
        customByName.emplace(c.name, &c);
    std::vector<const Style*> styles(plan.entries.size(), nullptr);
    bool anyUnknown = false;
    for (std::size_t i = 0; i < plan.entries.size(); ++i) {
        const auto& e = plan.entries[i];
        auto custom = customByName.find(e.style);
        styles[i] = custom != customByName.end() ? custom->second : reg.find(e.style, prof);
        anyUnknown = anyUnknown || !styles[i];
    }
    std::string styleNames; // listed once, not rebuilt per unknown style
    if (anyUnknown) {
        auto names = reg.names(prof);
        for (const auto& c : plan.customStyles)
            names.push_back(c.name);
        styleNames = fmt::format("styles under profile {}: {}", profileName(prof), fmt::join(names, ", "));
    }
    for (std::size_t i = 0; i < plan.entries.size(); ++i)
        if (!styles[i]) {
            out.diagnostics.push_back(
                {Severity::Error, plan.entries[i].key,
                 fmt::format("Unsupported tensor parallel style '{}' for layer '{}'", plan.entries[i].style,
                             plan.entries[i].key),
                 styleNames});
        }

    out.entryStyles = styles;
    std::unordered_map<std::string, int, StringHash, std::equal_to<>> keys; // first occurrence wins, as in a dict
    keys.reserve(plan.entries.size());
    for (std::size_t i = 0; i < plan.entries.size(); ++i)
        keys.emplace(plan.entries[i].key, static_cast<int>(i));
    out.entryMatches.assign(plan.entries.size(), 0);
    out.moduleEntry.assign(spec.modules.size(), -1);
    std::size_t paramCount = 0;
    for (const auto& m : spec.modules)
        paramCount += m.params.size();
    out.params.reserve(paramCount);

    const bool exactFirst = prof == VersionProfile::G3;
    // `exact`: the name; `generic`: wildcardName(name, prof).
    auto lookup = [&](std::string_view exact, std::string_view generic) -> int {
        if (exactFirst) {
            ++out.keyLookups;
            if (auto it = keys.find(exact); it != keys.end())
                return it->second;
        }
        ++out.keyLookups;
        auto it = keys.find(generic);
        return it == keys.end() ? -1 : it->second;
    };

    std::string moduleGeneric, paramExact, paramGeneric; // reused: no string per lookup
    for (std::size_t mi = 0; mi < spec.modules.size(); ++mi) {
        const ModuleSpec& m = spec.modules[mi];
        moduleGeneric.clear();
        appendWildcard(moduleGeneric, m.path, prof, true);
        const int me = m.path.empty() ? -1 : lookup(m.path, moduleGeneric);
        out.moduleEntry[mi] = me;
        if (me >= 0) {
            ++out.entryMatches[static_cast<std::size_t>(me)];
            const Style* s = styles[static_cast<std::size_t>(me)];
            const bool linearModule = m.kind == ModuleKind::Linear || m.kind == ModuleKind::Embedding
                || m.kind == ModuleKind::Experts || m.kind == ModuleKind::Router;
            if (s && isLinearStyle(*s) && !linearModule)
                out.diagnostics.push_back(
                    {Severity::Error, m.path,
                     fmt::format("style '{}' shards Linear/Embedding weights, but '{}' is a {} ({})", s->name, m.path,
                                 moduleKindName(m.kind), m.className),
                     "only Linear, Embedding and expert modules can take linear styles"});
        }
        for (std::size_t pi = 0; pi < m.params.size(); ++pi) {
            const ParamSpec& p = m.params[pi];
            ParamAssignment a;
            a.module = static_cast<int>(mi);
            a.param = static_cast<int>(pi);
            paramExact.assign(m.path);
            paramGeneric.assign(moduleGeneric);
            if (!m.path.empty()) {
                paramExact += '.';
                paramGeneric += '.';
            }
            paramExact += p.name;
            appendWildcard(paramGeneric, p.name, prof, m.path.empty());
            a.entry = lookup(paramExact, paramGeneric);
            if (a.entry < 0 && me >= 0) {
                a.entry = me;
                a.viaModuleKey = true;
            }
            if (a.entry >= 0) {
                if (!a.viaModuleKey)
                    ++out.entryMatches[static_cast<std::size_t>(a.entry)];
                a.style = styles[static_cast<std::size_t>(a.entry)];
                if (a.style)
                    a.placement = a.style->placementFor(static_cast<int>(p.shape.size()), m.kind == ModuleKind::Embedding);
            }
            out.params.push_back(a);
        }
    }

    // Keys that match nothing, and indexed keys (honoured only with exact-first lookup).
    std::unordered_set<std::string_view> ownKeys;
    for (const auto& d : spec.defaultTpPlan)
        ownKeys.insert(d.key);
    for (std::size_t i = 0; i < plan.entries.size(); ++i) {
        const auto& key = plan.entries[i].key;
        if (isIndexedKey(key))
            out.diagnostics.push_back({Severity::Warning, key,
                                       exactFirst ? "indexed key: honoured only by Transformers versions with "
                                                    "exact-first lookup (newest main); older ones ignore it"
                                                  : fmt::format("indexed key: ignored under profile {} (lookups "
                                                                "use wildcarded names only)",
                                                                profileName(prof)),
                                       "use '*' for the layer index to apply it to every layer"});
        // Transformers ≥ 5.2x refuses override keys that name nothing, unless the class's own plan has them.
        const bool ownKey = ownKeys.contains(key);
        if (out.entryMatches[i] == 0) {
            const bool refused = prof == VersionProfile::G3 && !ownKey;
            std::string why = fmt::format("Layer pattern '{}' does not match any module or parameter of {}", key, spec.className);
            if (ownKey)
                why += fmt::format("; it comes from {}'s own default plan, which Transformers accepts as it is (a key "
                                   "for modules this configuration does not build), so it does nothing",
                                   spec.className);
            else if (refused)
                why += fmt::format("; Transformers under profile {} refuses a plan key that names nothing unless the "
                                   "class's own default plan has it",
                                   profileName(prof));
            out.diagnostics.push_back({refused ? Severity::Error : Severity::Warning, key, std::move(why),
                                       ownKey ? "harmless; remove the key to silence this warning"
                                              : "keys are full paths from the loaded class ('model.layers.*…'); '*' stands "
                                                "for one numeric index"});
        }
    }

    // Divisibility (hf-tp-semantics §2.2, §4.1): local heads come from the shard size, so sharded
    // q/k/v must hold whole heads; gathered outputs need equal shards.
    const int T = plan.tpSize;
    if (T > 1) {
        const ModelConfig& c = spec.config;
        bool qSharded = false, kvSharded = false, kvFused = false;
        std::string gatherErrors;
        for (const auto& a : out.params) {
            const ModuleSpec& m = spec.modules[static_cast<std::size_t>(a.module)];
            const ParamSpec& p = m.params[static_cast<std::size_t>(a.param)];
            if (!a.style || !a.placement.shards())
                continue;
            // A gathered output (Phi-3 qkv) is whole again: its heads need not split.
            if (m.kind == ModuleKind::Linear && p.name == "weight" && a.style->forward != CollectiveKind::AllGather) {
                if (m.name == "q_proj" || m.name == "q_b_proj" || m.name == "qkv_proj" || m.name == "kv_b_proj")
                    qSharded = true;
                if (m.name == "k_proj" || m.name == "v_proj" || m.name == "qkv_proj")
                    kvSharded = true;
                kvFused = kvFused || m.name == "qkv_proj";
            }
            if (a.style->forward == CollectiveKind::AllGather && p.name == "weight" && p.shape.size() == 2
                && p.shape[0] % T != 0 && gatherErrors.empty()) {
                gatherErrors = m.path;
                out.diagnostics.push_back(
                    {Severity::Error, genericName(m.path),
                     fmt::format("'{}' gathers its output but its {} output features are not divisible by tp_size {} "
                                 "(Transformers raises ValueError at load)",
                                 a.style->name, p.shape[0], T),
                     "pick a tp size that divides it, or shard it with 'colwise' and keep the output sharded"});
            }
        }
        auto validList = [&] {
            return fmt::format("{}", fmt::join(tpSizesDividingHeads(c, 64), ", "));
        };
        if (qSharded && c.numHeads % T != 0)
            out.diagnostics.push_back({Severity::Error, "num_attention_heads",
                                       fmt::format("{} attention heads are not divisible by tp_size {}", c.numHeads, T),
                                       fmt::format("valid tp sizes: {}", validList())});
        const std::int64_t KV = c.numKvHeads;
        // Replication as vLLM does it: T a multiple of the KV heads, the query heads split T ways, separate k_proj and
        // v_proj (a fused qkv_proj is not re-cut).
        const bool replicable = KV > 0 && T % KV == 0 && c.numHeads % T == 0 && !kvFused;
        auto replicatingSizes = [&] {
            std::vector<int> out;
            for (int t = 1; t <= 64 && KV > 0; ++t)
                if (t > KV && t % KV == 0 && c.numHeads % t == 0)
                    out.push_back(t);
            return fmt::format("{}", fmt::join(out, ", "));
        };
        if (kvSharded && KV > 0 && KV % T != 0) {
            // What one KV head a rank costs against an even split of the heads (each rank KV / T of them): its rows of
            // every k_proj and v_proj, and its k and v in the cache.
            std::int64_t weights = 0, wholeWeights = 0, cache = 0, wholeCache = 0;
            for (const ModuleSpec& m : spec.modules)
                if (m.kind == ModuleKind::Linear && (m.name == "k_proj" || m.name == "v_proj"))
                    for (const ParamSpec& p : m.params)
                        if (p.name == "weight" && p.shape.size() == 2) {
                            const std::int64_t bytes = dtypeBytes(p.dtype, p.shape[0] * p.shape[1]);
                            wholeWeights += bytes;
                            weights += bytes / KV;
                            cache += p.shape[0] / KV * dtypeBytes(c.dtype, 1);
                            wholeCache += p.shape[0] * dtypeBytes(c.dtype, 1);
                        }
            auto bytesText = [](std::int64_t b) { return humanBytes(static_cast<double>(b)); };
            // Transformers' colwise split of k_proj and v_proj: a rank's rows are a fraction of one head.
            const std::string transformers = fmt::format(
                "Transformers does not replicate KV heads and fails in the first forward: its colwise split of k_proj "
                "and v_proj gives a rank {} of their {} rows, not whole heads of {} (view(…, -1, head_dim))",
                (c.headDim * KV + T - 1) / T, c.headDim * KV, c.headDim);
            if (plan.replicateKvHeads && replicable && weights > 0) {
                out.diagnostics.push_back(
                    {Severity::Warning, "num_key_value_heads",
                     fmt::format("{} key/value heads on tp_size {}: replicated (replicate_kv_heads), each key/value head "
                                 "on {} ranks, one whole head a rank, as vLLM and SGLang do (transformers PR 47811 "
                                 "proposes it); the pinned Transformers 5.24 cannot load this plan — {}. Replication costs: "
                                 "a rank holds {} of k_proj and v_proj weights ({} with an even split; {} over the {} "
                                 "ranks, {}× the model's {}) and {} of KV cache a token in {} ({} with an even split)",
                                 KV, T, T / KV, transformers, bytesText(weights), bytesText(wholeWeights / T),
                                 bytesText(weights * T), T, T / KV, bytesText(wholeWeights), bytesText(cache),
                                 dtypeName(c.dtype), bytesText(wholeCache / T)),
                     fmt::format("serve it with vLLM or SGLang, which replicate KV heads so (TP Studio's engine does "
                                 "not run it); for Transformers pick a tp size that divides the heads: {}",
                                 validList())});
            } else if (!(plan.replicateKvHeads && !kvFused && T % KV == 0 && c.numHeads % T != 0)) {
                // (Replicable but for the query heads: their error above is the one to fix.)
                std::string message = fmt::format("{} key/value heads are not divisible by tp_size {}", KV, T);
                std::string hint = fmt::format("valid tp sizes: {}", validList());
                if (plan.replicateKvHeads && kvFused)
                    message += fmt::format(", and replicate_kv_heads re-cuts separate k_proj and v_proj only, not a fused "
                                           "qkv_proj; {}", transformers);
                else if (plan.replicateKvHeads && T % KV != 0)
                    message += fmt::format(", and replicate_kv_heads cannot replicate them: tp_size must be a multiple of "
                                           "{} (each head on T / {} ranks, as vLLM requires); {}",
                                           KV, KV, transformers);
                else
                    message += fmt::format("; Transformers does not replicate KV heads and fails in the first forward"
                                           "{}",
                                           T % KV == 0 && weights > 0
                                               ? fmt::format(
                                                     ". Replicated as vLLM does (each key/value head on {} ranks; "
                                                     "transformers PR 47811 proposes it) a rank would hold 1 key/value "
                                                     "head: {} of k_proj and v_proj weights (of {} whole) and {} of KV "
                                                     "cache a token in {}",
                                                     T / KV, bytesText(weights), bytesText(wholeWeights), bytesText(cache),
                                                     dtypeName(c.dtype))
                                               : std::string());
                if (plan.replicateKvHeads && T % KV != 0)
                    hint = fmt::format("tp sizes that replicate them: {}; that split them evenly: {}", replicatingSizes(),
                                       validList());
                else if (!plan.replicateKvHeads && replicable)
                    hint += " — or replicate them as vLLM does (\"replicate_kv_heads\": true, --replicate-kv-heads), "
                            "a plan for the planner and for vLLM/SGLang that the pinned Transformers cannot load";
                out.diagnostics.push_back({Severity::Error, "num_key_value_heads", std::move(message), std::move(hint)});
            }
        } else if (plan.replicateKvHeads) {
            out.diagnostics.push_back(
                {Severity::Info, "replicate_kv_heads",
                 kvSharded ? fmt::format("no effect at tp_size {}: the {} key/value heads split evenly ({} a rank), as "
                                         "Transformers splits them",
                                         T, KV, KV > 0 ? KV / T : 0)
                           : "no effect: the plan does not split k_proj and v_proj by heads",
                 ""});
        }
    }

    // Linear/Embedding modules whose weight no key shards, grouped by generic name.
    std::unordered_map<std::string, int> unsharded;
    std::vector<std::string> order;
    for (const auto& a : out.params) {
        const ModuleSpec& m = spec.modules[static_cast<std::size_t>(a.module)];
        if ((m.kind != ModuleKind::Linear && m.kind != ModuleKind::Embedding) || m.params[static_cast<std::size_t>(a.param)].name != "weight")
            continue;
        if (a.style && a.placement.shards())
            continue;
        auto g = genericName(m.path);
        if (unsharded[g]++ == 0)
            order.push_back(g);
    }
    for (const auto& g : order)
        out.diagnostics.push_back({Severity::Info, g,
                                   fmt::format("{} module(s) not sharded by the plan (replicated on every rank)",
                                               unsharded[g]),
                                   ""});
    return out;
}

} // namespace tp
