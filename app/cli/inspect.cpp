// inspect.cpp — `tpstudio-cli inspect MODEL`, `tpstudio-cli catalog` and `tpstudio-cli families`.
#include "commands.h"
#include "tp/core/json.h"

#include "tp/core/units.h"
#include "tp/model/catalog.h"
#include "tp/model/loader.h"
#include "tp/model/model_json.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>

namespace tpcli {

using tp::humanBytes;
using tp::withCommas;

namespace {

void printParam(const tp::ParamSpec& p, const std::string& indent)
{
    fmt::print("{}  .{:<24} [{}] {}{}{}\n", indent, p.name, fmt::join(p.shape, ", "), tp::dtypeName(p.dtype),
               p.tiedTo.empty() ? "" : fmt::format("  (tied to {})", p.tiedTo), p.buffer ? "  (buffer)" : "");
}

void printTree(const tp::ModelSpec& s, int idx, int depth, const std::vector<int>& runStart, bool allLayers)
{
    const auto& m = s.modules[static_cast<std::size_t>(idx)];
    const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
    fmt::print("{}{:<{}} {} ({})\n", indent, m.name.empty() ? s.className : m.name, std::max(1, 32 - depth * 2),
               m.className, tp::moduleKindName(m.kind));
    for (const auto& p : m.params)
        printParam(p, indent);
    for (std::size_t k = 0; k < m.children.size(); ++k) {
        const int child = m.children[k];
        const auto& cm = s.modules[static_cast<std::size_t>(child)];
        if (!allLayers && cm.kind == tp::ModuleKind::DecoderLayer && cm.layer >= 0
            && cm.layer < static_cast<int>(runStart.size()) && runStart[static_cast<std::size_t>(cm.layer)] != cm.layer)
            continue;
        printTree(s, child, depth + 1, runStart, allLayers);
        // After the first layer of a run, say how many identical ones follow.
        if (!allLayers && cm.kind == tp::ModuleKind::DecoderLayer && cm.layer >= 0) {
            int last = cm.layer;
            while (last + 1 < static_cast<int>(runStart.size()) && runStart[static_cast<std::size_t>(last + 1)] == cm.layer)
                ++last;
            if (last > cm.layer)
                fmt::print("{}  … layers {}–{}: same structure as layer {}\n", indent, cm.layer + 1, last, cm.layer);
        }
    }
}

void printSummary(const tp::OpenedModel& om)
{
    const tp::ModelSpec& s = om.spec;
    const tp::ModelConfig& c = s.config;
    fmt::print("Model         {}\n", s.source);
    fmt::print("Architecture  {} (model_type {}{})\n", s.className, c.modelType.empty() ? "?" : c.modelType,
               c.wrapperModelType.empty() ? "" : ", text model of " + c.wrapperModelType);
    fmt::print("Parameters    {} ({})\n", withCommas(s.parameterCount()), humanBytes(double(s.parameterBytes())));
    for (const auto& [t, b] : s.bytesByDtype())
        fmt::print("  {:<11} {}\n", tp::dtypeName(t), humanBytes(double(b)));
    fmt::print("Layers        {}   hidden {}   intermediate {}   vocab {}\n", c.numLayers, c.hiddenSize,
               c.intermediateSize, c.vocabSize);
    if (c.layout.hierarchicalStacks)
        fmt::print("Stacks        L_module and H_module of {} layers, run H_cycles {} x (L_cycles {} + 1) times: the {} layers "
                   "above are those runs\n",
                   c.layersPerStack, c.hCycles, c.lCycles, c.numLayers);
    fmt::print("Heads         {} query, {} key/value, head_dim {}{}\n", c.numHeads, c.numKvHeads, c.headDim,
               c.headDimGiven ? "" : " (derived)");
    if (c.isMoe())
        fmt::print("MoE           {} experts, {} per token, expert intermediate {}{}\n", c.numExperts,
                   c.expertsPerToken, c.moeIntermediateSize,
                   c.numSharedExperts ? fmt::format(", {} shared", c.numSharedExperts) : "");
    if (c.isMla())
        fmt::print("MLA           q_lora_rank {}, kv_lora_rank {}, qk_rope {}, qk_nope {}, v_head {}\n",
                   c.qLoraRank ? std::to_string(*c.qLoraRank) : "none", c.kvLoraRank, c.qkRopeHeadDim,
                   c.qkNopeHeadDim, c.vHeadDim);
    fmt::print("Embeddings    {}\n", c.tieWordEmbeddings ? "tied to lm_head" : "untied");
    fmt::print("Valid tp      {}  (divide {} heads and {} KV heads)\n", fmt::join(tp::tpSizesDividingHeads(c, 64), ", "),
               c.numHeads, c.numKvHeads);
    if (c.quantBits > 0) // AWQ / GPTQ: buffers the pinned Transformers' plan never shards (plan validate says more)
        fmt::print("Quantized     {} {}-bit, group_size {}: Transformers does not split these weights; tp_size 1 only for "
                   "Transformers (plan validate --tp N names what vLLM/SGLang could split)\n",
                   c.quantization.value_or("?") == "gptq" ? "GPTQ" : "AWQ", c.quantBits, c.quantGroup);
    if (om.checkpoint)
        fmt::print("Checkpoint    {} file(s), {} tensors, {}\n", om.checkpoint->files.size(),
                   withCommas(static_cast<std::int64_t>(om.checkpoint->tensors.size())),
                   humanBytes(double(om.checkpoint->totalBytes)));
    fmt::print("\nDefault tp_plan ({} keys; supports_tp_plan: {})\n", s.defaultTpPlan.size(),
               s.supportsTpPlan ? "yes" : "no");
    for (const auto& e : s.defaultTpPlan)
        fmt::print("  {:<52} {}\n", e.key, e.style);
    if (!s.defaultEpPlan.empty()) {
        fmt::print("Default ep_plan ({} keys)\n", s.defaultEpPlan.size());
        for (const auto& e : s.defaultEpPlan)
            fmt::print("  {:<52} {}\n", e.key, e.style);
    }
    if (!s.diagnostics.empty()) {
        fmt::print("\nDiagnostics\n");
        for (const auto& d : s.diagnostics)
            fmt::print("  {:<7} {}: {}{}\n", tp::severityName(d.severity), d.where, d.message,
                       d.hint.empty() ? "" : "\n          hint: " + d.hint);
    }
}

} // namespace

std::function<int()> addInspect(CLI::App& app)
{
    struct Opts
    {
        std::string model;
        bool tree = false, json = false, allLayers = false;
    };
    auto o = std::make_shared<Opts>();
    auto* cmd = app.add_subcommand("inspect", "Open a model as Transformers sees it (no weights loaded) and describe it");
    cmd->add_option("MODEL", o->model,
                    "A folder, config.json, .safetensors file or index, a Hugging Face repo id in the local cache, "
                    "or a catalog id (see 'tpstudio-cli catalog')")
        ->required();
    cmd->add_flag("--tree", o->tree, "Print the module tree with parameter shapes and dtypes");
    cmd->add_flag("--all-layers", o->allLayers, "With --tree: print every decoder layer, not one per run of equal layers");
    cmd->add_flag("--json", o->json, "Print JSON (schema tpstudio.model/1); with --tree, include every module");
    return [o] {
        auto om = tp::openModel(o->model);
        if (!om) {
            fmt::print(stderr, "tpstudio-cli inspect: {}\n", om.status().message());
            return int(kBadInput);
        }
        if (o->json) {
            std::cout << tp::modelSpecToJson(om->spec, o->tree).dump(2, ' ', false, tp::kReplaceInvalidUtf8) << "\n";
            return int(kOk);
        }
        printSummary(*om);
        if (o->tree) {
            fmt::print("\nModule tree\n");
            printTree(om->spec, 0, 0, tp::layerRunStarts(om->spec), o->allLayers);
        }
        return int(kOk);
    };
}

std::function<int()> addCatalog(CLI::App& app)
{
    auto json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("catalog", "List the built-in model configs");
    cmd->add_flag("--json", *json, "Print JSON");
    return [json] {
        nlohmann::ordered_json arr = nlohmann::ordered_json::array();
        for (const auto& e : tp::catalog()) {
            std::vector<tp::Diagnostic> d;
            auto cfg = tp::parseConfig(e.configJson, e.id, &d);
            auto spec = cfg ? tp::buildModelSpec(*cfg) : tp::Result<tp::ModelSpec>(cfg.status());
            if (!spec) {
                fmt::print(stderr, "tpstudio-cli catalog: {}\n", spec.status().message());
                return int(kBadInput);
            }
            if (*json)
                arr.push_back({{"id", e.id}, {"repo_id", e.repoId}, {"name", e.displayName},
                               {"model_type", spec->config.modelType}, {"parameters", spec->parameterCount()},
                               {"runnable", e.runnable}});
            else
                fmt::print("{:<16} {:<36} {:<12} {:>18}  {}\n", e.id, e.repoId, spec->config.modelType,
                           withCommas(spec->parameterCount()), e.displayName);
        }
        if (*json)
            std::cout << arr.dump(2, ' ', false, tp::kReplaceInvalidUtf8) << "\n";
        return int(kOk);
    };
}

std::function<int()> addFamilies(CLI::App& app)
{
    auto markdown = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("families", "List every tensor-parallel causal LM of the pinned Transformers and "
                                               "what TP Studio does with it: plans and runs it, plans it, or neither yet");
    cmd->add_flag("--markdown", *markdown, "Print the README's list (Markdown)");
    return [markdown] {
        std::map<std::string, const tp::KnownModelType*> known;
        for (const tp::KnownModelType& k : tp::knownModelTypes())
            known[k.modelType] = &k;
        std::vector<std::string> runs, plans, neither;
        const std::vector<std::string> all = tp::transformersTpModelTypes();
        for (const std::string& t : all) {
            auto it = known.find(t);
            (it == known.end() ? neither : it->second->engineLacks.empty() ? runs : plans).push_back(t);
        }
        if (*markdown) {
            fmt::print("Transformers {} can tensor-parallelise {} causal-LM model types "
                       "(`tpstudio-cli families`; `scripts/make-model-types.py` lists them):\n\n",
                       tp::pinnedTransformersVersion(), all.size());
            fmt::print("- **Plans and runs on the engine** ({}): {}\n", runs.size(), fmt::join(runs, ", "));
            fmt::print("- **Plans** (tree, default plan, shards, collectives, memory, export; the engine refuses "
                       "them, naming what it lacks) ({}):\n",
                       plans.size());
            std::map<std::string, std::vector<std::string>> byLack; // the same lack, one line
            for (const std::string& t : plans)
                byLack[known.at(t)->engineLacks].push_back(t);
            std::vector<std::pair<std::string, std::vector<std::string>>> lines(byLack.begin(), byLack.end());
            std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.second.front() < b.second.front(); });
            for (const auto& [lack, types] : lines)
                fmt::print("  - {}: {}\n", fmt::join(types, ", "), lack);
            if (!neither.empty()) // a newer Transformers' types until the tables learn them
                fmt::print("- **Not yet** ({}): opened from a checkpoint's tensor names with a plan you give: {}\n",
                           neither.size(), fmt::join(neither, ", "));
            return int(kOk);
        }
        for (const std::string& t : all) {
            auto it = known.find(t);
            const std::string what = it == known.end()        ? "not yet: tree from a checkpoint's tensor names, plan by hand"
                                     : it->second->engineLacks.empty() ? "plans and runs"
                                                                      : "plans; the engine lacks " + it->second->engineLacks;
            const std::string tree = it == known.end() || tp::familyName(it->second->family) == t
                                         ? ""
                                         : fmt::format(" ({}'s tree)", tp::familyName(it->second->family));
            fmt::print("{:<24} {}{}\n", t, what, tree);
        }
        fmt::print("{} of {} model types of Transformers {}: {} plan and run, {} plan only\n", runs.size() + plans.size(),
                   all.size(), tp::pinnedTransformersVersion(), runs.size(), plans.size());
        return int(kOk);
    };
}

} // namespace tpcli
