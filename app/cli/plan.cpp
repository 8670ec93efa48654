// plan.cpp — `tpstudio-cli plan show|validate|preview|export`: key matching, the sharded graph
// (layouts, collectives, memory, diagnostics), the cost model, and export for Transformers.
#include "commands.h"
#include "tp/core/json.h"

#include "tp/core/units.h"
#include "tp/cost/cost_model.h"
#include "tp/cost/plan_search.h"
#include "tp/model/loader.h"
#include "tp/model/model_json.h"
#include "tp/plan/plan_io.h"
#include "tp/runtime/backend.h"
#include "tp/shard/sharded_graph.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

namespace tpcli {

namespace {

struct PlanOpts
{
    std::string model;
    std::string planFile;
    std::string profile = "G3";
    std::string output;
    std::string format = "json";
    std::string hardware = "h100-sxm-8";
    std::string dtype;
    std::string kvDtype;        // --kv-dtype; "" as the activations
    std::int64_t batch = 1;
    std::int64_t seq = 512;
    std::int64_t context = 0;  // decode context, when contextGiven; else --seq
    std::string logits = "all"; // preview: prefill's logits at every position, or the last ones
    bool replicateKv = false;   // --replicate-kv-heads: Plan::replicateKvHeads
    bool contextGiven = false;
    bool hardwareGiven = false; // show, validate, preview: check device memory and count against it
    double memoryReserve = -1;  // GiB kept back per device instead of the profile's; < 0: the profile's
    int tp = 2;
    int maxTp = 8;
    int maxPp = 0; // plan search: 0, the profile's nodes
    bool json = false;
    // plan search
    std::vector<std::string> alsoPlans;
    std::string objective = "itl";
    std::string writeDir;
};

enum class Mode { Show, Validate, Preview, Export };

// --hardware's profile with --memory-reserve in place of its own reserve.
tp::Result<tp::HardwareProfile> hardwareFor(const PlanOpts& o)
{
    auto hw = tp::findHardware(o.hardware);
    if (!hw || o.memoryReserve < 0)
        return hw;
    if (!(o.memoryReserve < hw->memoryGiB)) // NaN too
        return tp::invalidArgument(fmt::format("--memory-reserve {:g}: must be at least 0 and less than the {:g} GiB per device "
                                               "of {}",
                                               o.memoryReserve, hw->memoryGiB, hw->id));
    hw->memoryReserveGiB = o.memoryReserve;
    return hw;
}

const char* verbName(Mode m)
{
    switch (m) {
    case Mode::Show: return "plan show";
    case Mode::Validate: return "plan validate";
    case Mode::Preview: return "plan preview";
    case Mode::Export: return "plan export";
    }
    return "plan";
}

void addCommon(CLI::App* cmd, PlanOpts& o)
{
    cmd->add_option("MODEL", o.model, "Folder, config.json, .safetensors, HF cache repo id or catalog id")
        ->required()
        ->check(kNonEmpty);
    cmd->add_option("--plan", o.planFile,
                    "Plan JSON ({\"tp_size\", \"tp_plan\"} or a bare key → style dict). Under G3 its keys override "
                    "the model's default plan as Transformers merges them; default: the model's default tp_plan")
        ->check(kNonEmpty);
    cmd->add_option("--tp", o.tp, "Tensor-parallel size (overrides the file's tp_size)")->check(CLI::Range(1, 4096));
    cmd->add_option("--profile", o.profile, "Transformers generation: G1 (4.50-4.57), G2 (5.1-5.15), G3 (current)")
        ->check(CLI::IsMember({"G1", "G2", "G3"}))
        ->capture_default_str();
    cmd->add_flag("--replicate-kv-heads", o.replicateKv,
                  "With fewer key/value heads than --tp, give each rank one whole KV head, each on T/KV ranks, as vLLM "
                  "and SGLang do (T a multiple of the KV heads; the plan file's \"replicate_kv_heads\": true). The "
                  "pinned Transformers cannot load such a plan: export refuses it");
}

void addShape(CLI::App* cmd, PlanOpts& o)
{
    cmd->add_option("--batch", o.batch, "Batch size B")->check(CLI::Range(1, 1 << 20))->capture_default_str();
    cmd->add_option("--seq", o.seq, "Sequence length S (tokens per sequence in this forward)")
        ->check(CLI::Range(1, 1 << 24))
        ->capture_default_str();
    cmd->add_option("--dtype", o.dtype, "Activation dtype: bf16, f16, f32 (default: the model's)")
        ->check(CLI::IsMember({"bf16", "f16", "f32"}));
    cmd->add_option("--kv-dtype", o.kvDtype,
                    "What the KV cache stores: bf16, f16, f32, or fp8 as vLLM/SGLang's --kv-cache-dtype fp8 (default: the "
                    "activations' dtype, as Transformers' cache)")
        ->check(CLI::IsMember({"bf16", "f16", "f32", "fp8"}));
}

std::optional<tp::DType> dtypeOption(const std::string& s)
{
    if (s == "bf16")
        return tp::DType::BF16;
    if (s == "f16")
        return tp::DType::F16;
    if (s == "f32")
        return tp::DType::F32;
    if (s == "fp8")
        return tp::DType::F8E4M3;
    return std::nullopt;
}

void printDiagnostics(const std::vector<tp::Diagnostic>& ds, bool withInfo)
{
    std::map<std::string, int> consequences; // a cause's where → how many errors follow from it
    for (const auto& d : ds)
        if (!d.follows.empty())
            ++consequences[d.follows];
    std::size_t shown = 0;
    for (const auto& d : ds) {
        if (!withInfo && d.severity == tp::Severity::Info)
            continue;
        fmt::print("{:<7} {}: {}{}\n", tp::severityName(d.severity), d.where, d.message,
                   d.hint.empty() ? "" : "\n        hint: " + d.hint);
        if (const auto it = consequences.find(d.where); it != consequences.end() && d.follows.empty()
            && d.severity == tp::Severity::Error) {
            fmt::print("        the cause of {} more {}: fix it first\n", it->second, it->second == 1 ? "error" : "errors");
            consequences.erase(it);
        }
        ++shown;
    }
    if (shown)
        fmt::print("\n");
}

// Collectives folded by (kind, generic place, style, bytes): "32 × all_reduce … 4.00 MiB".
struct CollectiveGroup
{
    tp::CollectiveKind kind;
    std::string where, style;
    std::int64_t bytes = 0;
    int count = 0;
};

// `tokens`: new tokens per sequence in the forward (the prompt in prefill, 1 in a decode step).
std::vector<CollectiveGroup> groupCollectives(const tp::ShardedGraph& g, std::int64_t tokens)
{
    std::vector<CollectiveGroup> out;
    for (const auto& c : g.collectives) {
        const std::string where = tp::genericName(c.where);
        const std::int64_t bytes = c.bytes(g.options.batch, tokens, g.elementBytes());
        auto it = std::find_if(out.begin(), out.end(), [&](const CollectiveGroup& x) {
            return x.kind == c.kind && x.where == where && x.style == c.style && x.bytes == bytes;
        });
        if (it == out.end())
            out.push_back({c.kind, where, c.style, bytes, 1});
        else
            ++it->count;
    }
    return out;
}

double us(double s) { return s * 1e6; }

nlohmann::ordered_json collectivesJson(const std::vector<CollectiveGroup>& groups, const tp::HardwareProfile& hw, int T)
{
    auto cj = nlohmann::ordered_json::array();
    for (const auto& grp : groups)
        cj.push_back({{"kind", tp::collectiveName(grp.kind)}, {"where", grp.where}, {"style", grp.style},
                      {"count", grp.count}, {"bytes", grp.bytes}, {"time_s", hw.collectiveSeconds(grp.kind, grp.bytes, T)}});
    return cj;
}

void printCollectives(const std::vector<CollectiveGroup>& groups, const tp::HardwareProfile& hw, int T)
{
    fmt::print("  {:>5}  {:<15} {:>12}  {:>11}  {:<44} {}\n", "count", "kind", "bytes each", "time each", "where", "style");
    for (const auto& grp : groups)
        fmt::print("  {:>5}  {:<15} {:>12}  {:>9.1f}µs  {:<44} {}\n", grp.count, tp::collectiveName(grp.kind),
                   tp::humanBytes(grp.bytes), us(hw.collectiveSeconds(grp.kind, grp.bytes, T)), grp.where, grp.style);
}

// "12.3 µs", "4.56 ms", "1.234 s": times of very different sizes in one table.
std::string humanSeconds(double s)
{
    if (s < 1e-3)
        return fmt::format("{:.1f}µs", s * 1e6);
    if (s < 1.0)
        return fmt::format("{:.3f}ms", s * 1e3);
    return fmt::format("{:.3f}s", s);
}

int preview(const tp::OpenedModel& om, const tp::Plan& plan, const tp::ShardedGraph& g, const PlanOpts& o)
{
    auto hw = hardwareFor(o);
    if (!hw) {
        fmt::print(stderr, "tpstudio-cli plan preview: {}\n", hw.status().message());
        return kBadInput;
    }
    // Shapes first: a workload the cost model refuses is bad input, named by its flags.
    const std::int64_t context = o.contextGiven ? o.context : g.options.seq;
    if (context < 1 || context > tp::kMaxWorkloadContext) {
        fmt::print(stderr, "tpstudio-cli plan preview: --context must be from 1 to {} tokens, found {}\n",
                   tp::kMaxWorkloadContext, context);
        return kBadInput;
    }
    if (auto st = tp::checkWorkload(tp::Workload::prefill(g.options)); !st.ok()) {
        fmt::print(stderr, "tpstudio-cli plan preview: --batch {} --seq {}: {}\n", g.options.batch, g.options.seq, st.message());
        return kBadInput;
    }
    if (auto st = tp::checkWorkload(tp::Workload::decodeStep(g.options.batch, context)); !st.ok()) {
        fmt::print(stderr, "tpstudio-cli plan preview: --batch {} --context {}: {}\n", g.options.batch, context, st.message());
        return kBadInput;
    }
    const auto groups = groupCollectives(g, g.options.seq);
    const auto decodeGroups = groupCollectives(g, 1);
    const std::int64_t e = g.elementBytes();
    std::optional<tp::CostReport> cost, decode;
    std::int64_t kvPerToken = tp::kvCacheBytesPerToken(g), kvAtContext = 0;
    if (g.valid()) {
        auto p = tp::estimateCost(om.spec, g, *hw, tp::Workload::prefill(g.options));
        auto d = tp::estimateDecodeStep(om.spec, g, *hw, g.options.batch, context);
        auto kv = tp::kvCacheBytes(g, g.options.batch, context);
        for (const tp::Status& st : {p.status(), d.status(), kv.status()})
            if (!st.ok()) {
                fmt::print(stderr, "tpstudio-cli plan preview: {}\n", st.message());
                return kBadInput;
            }
        cost = *p;
        decode = *d;
        kvAtContext = *kv;
    }
    // What fits the profile's devices: the longest context at the batch, the most sequences at the context.
    const std::int64_t maxPos = om.spec.config.maxPositionEmbeddings;
    std::optional<tp::FitLimits> fits;
    if (g.valid() && !g.graph.nodes.empty()) {
        auto f = tp::whatFits(g, *hw, g.options.batch, context, maxPos > 0 ? maxPos : tp::kMaxWorkloadContext);
        if (!f) {
            fmt::print(stderr, "tpstudio-cli plan preview: {}\n", f.status().message());
            return kBadInput;
        }
        fits = *f;
    }
    // With --hardware, a plan that cannot run there is not valid: T above its devices, a rank over
    // its memory (the prediction is still shown).
    std::vector<tp::Diagnostic> diags = g.diagnostics;
    if (o.hardwareGiven && g.valid())
        for (auto& d : tp::feasibilityDiagnostics(om.spec, g, *hw, context))
            diags.push_back(std::move(d));
    const bool valid = !tp::hasErrors(diags);
    const auto scaling = tp::predictScaling(om.spec, plan, g.options, *hw, o.maxTp, context);
    std::map<tp::CollectiveKind, int> counts;
    std::int64_t totalBytes = 0;
    for (const auto& c : g.collectives) {
        ++counts[c.kind];
        totalBytes += c.bytes(g.options.batch, g.options.seq, e);
    }

    if (o.json) {
        nlohmann::ordered_json j;
        j["schema"] = "tpstudio.preview/1";
        j["model"] = om.spec.source;
        j["class"] = om.spec.className;
        j["tp_size"] = g.tpSize;
        j["profile"] = tp::profileName(plan.profile);
        j["batch"] = g.options.batch;
        j["seq"] = g.options.seq;
        j["context"] = context;
        j["logits"] = o.logits;
        j["dtype"] = std::string(tp::dtypeName(g.activationDtype));
        j["kv_cache_dtype"] = std::string(tp::dtypeName(g.options.kvCacheDtype.value_or(g.activationDtype)));
        j["kv_cache_layout"] = tp::kvCacheLayoutText(om.spec, g);
        j["replicate_kv_heads"] = plan.replicateKvHeads;
        j["kv_head_replicas"] = g.kvHeadReplicas;
        j["hardware"] = hw->id;
        j["valid"] = valid;
        j["collectives"] = collectivesJson(groups, *hw, g.tpSize);
        nlohmann::ordered_json totals = nlohmann::ordered_json::object();
        for (const auto& [k, n] : counts)
            totals[tp::collectiveName(k)] = n;
        j["collective_counts"] = totals;
        j["collective_bytes"] = totalBytes;
        auto mj = nlohmann::ordered_json::array();
        for (std::size_t r = 0; r < g.memory.size(); ++r)
            mj.push_back({{"rank", r}, {"weight_bytes", g.memory[r].weightBytes},
                          {"kv_cache_bytes_per_token", g.memory[r].kvCacheBytesPerToken},
                          {"state_bytes_per_sequence", g.memory[r].stateBytes},
                          {"activation_peak_bytes", g.memory[r].activationPeakBytes}});
        j["memory"] = mj;
        if (cost) {
            auto lj = nlohmann::ordered_json::array();
            for (const auto& l : cost->layers)
                lj.push_back({{"layer", l.layer}, {"compute_s", l.computeSeconds}, {"comm_s", l.commSeconds}});
            j["predicted"] = {{"compute_s", cost->computeSeconds}, {"comm_s", cost->commSeconds},
                              {"total_s", cost->totalSeconds()}, {"comm_share", cost->commShare()}, {"layers", lj}};
            auto dl = nlohmann::ordered_json::array();
            for (const auto& l : decode->layers)
                dl.push_back({{"layer", l.layer}, {"compute_s", l.computeSeconds}, {"comm_s", l.commSeconds}});
            std::int64_t decodeBytes = 0;
            for (const auto& c : decode->collectives)
                decodeBytes += c.bytes;
            j["decode"] = {{"batch", g.options.batch},
                           {"context", context},
                           {"compute_s", decode->computeSeconds},
                           {"comm_s", decode->commSeconds},
                           {"step_s", decode->totalSeconds()},
                           {"tokens_per_s", static_cast<double>(g.options.batch) / decode->totalSeconds()},
                           {"comm_share", decode->commShare()},
                           {"kv_cache_bytes_per_token", kvPerToken},
                           {"kv_cache_bytes", kvAtContext},
                           {"collectives", collectivesJson(decodeGroups, *hw, g.tpSize)},
                           {"collective_bytes", decodeBytes},
                           {"layers", dl}};
        }
        auto sj = nlohmann::ordered_json::array();
        for (const auto& p : scaling) {
            nlohmann::ordered_json x = {{"tp", p.tp}, {"valid", p.valid}};
            if (p.valid) {
                x["total_s"] = p.seconds;
                x["speedup"] = p.speedup;
                x["comm_share"] = p.commShare;
                x["decode_step_s"] = p.decodeStepSeconds;
                x["decode_tokens_per_s"] = p.decodeTokensPerSecond;
                x["decode_speedup"] = p.decodeSpeedup;
                x["decode_comm_share"] = p.decodeCommShare;
                x["kv_cache_bytes_per_token"] = p.kvCacheBytesPerToken;
                x["kv_cache_bytes"] = p.kvCacheBytes;
            } else {
                x["reason"] = p.reason;
            }
            sj.push_back(x);
        }
        j["scaling"] = sj;
        if (fits)
            j["fits"] = {{"usable_device_bytes", hw->usableMemoryBytes()},
                         {"max_context", fits->maxContext},
                         {"max_context_at_batch", g.options.batch},
                         {"max_context_limited_by", fits->contextCapped ? (maxPos > 0 ? "max_position_embeddings" : "the modelled bound")
                                                                        : "memory"},
                         {"max_batch", fits->maxBatch},
                         {"max_batch_at_context", context},
                         {"max_batch_limited_by", fits->batchCapped ? "the modelled bound" : "memory"}};
        j["diagnostics"] = tp::diagnosticsJson(diags);
        std::cout << j.dump(2, ' ', false, tp::kReplaceInvalidUtf8) << "\n";
        if (valid)
            return kOk;
        // The exit status says the plan is bad; stderr says why (the JSON has every finding).
        const auto first = std::find_if(diags.begin(), diags.end(),
                                        [](const tp::Diagnostic& d) { return d.severity == tp::Severity::Error; });
        fmt::print(stderr, "tpstudio-cli plan preview: the plan has errors at tp_size {}: {}: {} (every finding is under "
                           "'diagnostics')\n",
                   g.tpSize, first->where, first->message);
        return kBadInput;
    }

    fmt::print("{} · tp_size {} · batch {} · seq {}{} · {} · {}\n\n", om.spec.className, g.tpSize, g.options.batch,
               g.options.seq, g.options.lastPositionLogits ? " · logits at the last positions" : "",
               tp::dtypeName(g.activationDtype), hw->name);
    printDiagnostics(diags, false);
    if (!g.valid()) {
        fmt::print("INVALID: the plan has errors; no collectives or times are predicted\n");
        return kBadInput;
    }
    if (g.graph.nodes.empty()) { // a tree from tensor names: no dataflow to predict from (the warning above)
        fmt::print("Weights per rank\n");
        for (std::size_t r = 0; r < g.memory.size(); ++r)
            fmt::print("  {:>4} {:>12}\n", r, tp::humanBytes(g.memory[r].weightBytes));
        fmt::print("\nvalid (shards only: collectives and times are not predicted)\n");
        return kOk;
    }
    fmt::print("Collectives per forward (prefill, {} token{})\n", g.options.batch * g.options.seq,
               g.options.batch * g.options.seq == 1 ? "" : "s");
    printCollectives(groups, *hw, g.tpSize);
    std::string summary;
    for (const auto& [k, n] : counts)
        summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", n, tp::collectiveName(k));
    fmt::print("  total: {}; {}\n\n", summary.empty() ? "none" : summary, tp::humanBytes(totalBytes));

    fmt::print("Per layer, predicted on the slowest rank\n  {:<9} {:>12} {:>12} {:>7}\n", "layer", "compute", "comm",
               "comm %");
    const auto& layers = cost->layers;
    for (std::size_t i = 0; i < layers.size();) {
        std::size_t k = i + 1;
        while (k < layers.size() && layers[i].layer >= 0 && std::abs(layers[k].computeSeconds - layers[i].computeSeconds) < 1e-12
               && std::abs(layers[k].commSeconds - layers[i].commSeconds) < 1e-12)
            ++k;
        const auto& l = layers[i];
        const std::string name = l.layer < 0 ? "other" : k - i > 1 ? fmt::format("{}-{}", l.layer, layers[k - 1].layer)
                                                                   : std::to_string(l.layer);
        const double tot = l.computeSeconds + l.commSeconds;
        fmt::print("  {:<9} {:>10.1f}µs {:>10.1f}µs {:>6.1f}%\n", name, us(l.computeSeconds), us(l.commSeconds),
                   tot > 0 ? 100 * l.commSeconds / tot : 0.0);
        i = k;
    }
    fmt::print("  {:<9} {:>10.3f}ms {:>10.3f}ms {:>6.1f}%\n\n", "forward", cost->computeSeconds * 1e3,
               cost->commSeconds * 1e3, 100 * cost->commShare());

    fmt::print("Memory per rank (KV cache: {})\n  {:>4} {:>12} {:>14} {:>16}\n", tp::kvCacheLayoutText(om.spec, g), "rank",
               "weights", "KV cache/token", "activation peak");
    for (std::size_t r = 0; r < g.memory.size(); ++r)
        fmt::print("  {:>4} {:>12} {:>14} {:>16}\n", r, tp::humanBytes(g.memory[r].weightBytes),
                   tp::humanBytes(g.memory[r].kvCacheBytesPerToken), tp::humanBytes(g.memory[r].activationPeakBytes));

    fmt::print("\nDecode step at context {} (batch {}: 1 new token per sequence, {} cached), slowest rank\n", context,
               g.options.batch, context - 1);
    fmt::print("  compute {} · comm {} ({:.1f}%) · step {} · {:.4g} tokens/s\n", humanSeconds(decode->computeSeconds),
               humanSeconds(decode->commSeconds), 100 * decode->commShare(), humanSeconds(decode->totalSeconds()),
               static_cast<double>(g.options.batch) / decode->totalSeconds());
    fmt::print("  KV cache on the largest rank: {} per token, {} at context {} × batch {}\n", tp::humanBytes(kvPerToken),
               tp::humanBytes(kvAtContext), context, g.options.batch);
    if (fits)
        fmt::print("  what fits a rank of {} ({}): {}\n", hw->id, hw->usableMemoryText(),
                   tp::whatFitsText(*fits, g.options.batch, context, maxPos));
    if (maxPos > 0 && context > maxPos)
        fmt::print("  note: context {} is beyond the model's max_position_embeddings {}\n", context, maxPos);
    fmt::print("Collectives per decode step ({} token{})\n", g.options.batch, g.options.batch == 1 ? "" : "s");
    printCollectives(decodeGroups, *hw, g.tpSize);

    fmt::print("\nPredicted scaling on {} (same plan, B={}, prefill S={}, decode at context {})\n", hw->id,
               g.options.batch, g.options.seq, context);
    fmt::print("  {:>3} {:>11} {:>8} {:>7}  {:>11} {:>10} {:>8} {:>7}  {:>11} {:>12}\n", "T", "prefill", "speedup",
               "comm %", "decode step", "tokens/s", "speedup", "comm %", "KV/token", "KV at ctx×B");
    for (const auto& p : scaling) {
        if (p.valid)
            fmt::print("  {:>3} {:>11} {:>7.2f}× {:>6.1f}%  {:>11} {:>10.4g} {:>7.2f}× {:>6.1f}%  {:>11} {:>12}\n", p.tp,
                       humanSeconds(p.seconds), p.speedup, 100 * p.commShare, humanSeconds(p.decodeStepSeconds),
                       p.decodeTokensPerSecond, p.decodeSpeedup, 100 * p.decodeCommShare,
                       tp::humanBytes(static_cast<double>(p.kvCacheBytesPerToken)),
                       tp::humanBytes(static_cast<double>(p.kvCacheBytes)));
        else
            fmt::print("  {:>3} {:>11} {}\n", p.tp, "invalid", p.reason);
    }
    if (!valid) {
        fmt::print("\nINVALID: the plan does not fit {} (above)\n", hw->id);
        return kBadInput;
    }
    fmt::print("\nvalid\n");
    return kOk;
}

int run(Mode mode, const PlanOpts& o, bool tpGiven)
{
    const char* verb = verbName(mode);
    if (mode == Mode::Export)
        if (const std::string bad = checkOutputPaths({{"-o", o.output}}, {o.model, o.planFile}); !bad.empty()) {
            fmt::print(stderr, "tpstudio-cli {}: {}\n", verb, bad);
            return kBadInput;
        }
    auto om = tp::openModel(o.model);
    if (!om) {
        fmt::print(stderr, "tpstudio-cli {}: {}\n", verb, om.status().message());
        return kBadInput;
    }
    const tp::VersionProfile profile = *tp::profileFromName(o.profile);
    tp::Plan plan = tp::defaultPlan(om->spec, o.tp, profile);
    if (!o.planFile.empty()) {
        auto p = tp::loadPlanFile(o.planFile, profile);
        if (!p) {
            fmt::print(stderr, "tpstudio-cli {}: {}\n", verb, p.status().message());
            return kBadInput;
        }
        plan = tp::resolveOverrides(om->spec, *p);
        if (tpGiven || plan.tpSize == 1)
            plan.tpSize = o.tp;
    }
    if (o.replicateKv)
        plan.replicateKvHeads = true;
    if (const std::string big = treeTooLarge(*om, o.model, mode == Mode::Preview); !big.empty()) {
        fmt::print(stderr, "tpstudio-cli {}: {}\n", verb, big);
        return kBadInput;
    }
    tp::ShardOptions so;
    so.batch = o.batch;
    so.seq = o.seq;
    so.activationDtype = dtypeOption(o.dtype);
    so.kvCacheDtype = dtypeOption(o.kvDtype);
    so.lastPositionLogits = o.logits == "last";
    tp::ShardedGraph g = tp::shardModel(om->spec, plan, so);
    if (o.hardwareGiven && mode != Mode::Preview && mode != Mode::Export && g.valid()) {
        // Show and validate with --hardware: the plan must also fit the machine.
        auto hw = hardwareFor(o);
        const std::int64_t context = o.contextGiven ? o.context : o.seq;
        tp::Status st = hw.status();
        if (st.ok())
            st = tp::checkWorkload(tp::Workload::decodeStep(o.batch, context)).withContext("--batch and --context");
        if (!st.ok()) {
            fmt::print(stderr, "tpstudio-cli {}: {}\n", verb, st.message());
            return kBadInput;
        }
        for (auto& d : tp::feasibilityDiagnostics(om->spec, g, *hw, context))
            g.diagnostics.push_back(std::move(d));
    }
    const bool errors = !g.valid();

    if (mode == Mode::Export) {
        if (errors) {
            for (const auto& d : g.diagnostics)
                if (d.severity == tp::Severity::Error)
                    fmt::print(stderr, "error   {}: {}\n", d.where, d.message);
            fmt::print(stderr, "tpstudio-cli plan export: the plan has errors; nothing written\n");
            return kBadInput;
        }
        // KV heads replicated (replicate_kv_heads): Transformers splits k_proj and v_proj colwise and fails.
        if (g.kvHeadReplicas > 1) {
            fmt::print(stderr, "tpstudio-cli plan export: the plan replicates key/value heads (replicate_kv_heads: each "
                               "of the {} KV heads on {} ranks), which the pinned Transformers 5.24 cannot load (it "
                               "splits k_proj and v_proj colwise and fails in the first forward); nothing written. vLLM "
                               "and SGLang replicate KV heads themselves at this tp size; for Transformers pick a tp size "
                               "that divides the KV heads\n",
                       om->spec.config.numKvHeads, g.kvHeadReplicas);
            return kBadInput;
        }
        if (plan.replicateKvHeads) {
            fmt::print(stderr, "note: replicate_kv_heads has no effect at tp_size {} and is left out of the export\n",
                       plan.tpSize);
            plan.replicateKvHeads = false;
        }
        if (o.format == "python" && plan.ppSize > 1) {
            fmt::print(stderr, "tpstudio-cli plan export: the plan has pp_size {} (a pipeline from plan search); the Python "
                               "export loads tensor parallelism only (torchrun over tp_size ranks); nothing written. Use "
                               "--format json, which keeps pp_size for DistributedConfig(**json.load(f))\n",
                       plan.ppSize);
            return kBadInput;
        }
        if (o.format == "json" && !plan.customStyles.empty())
            fmt::print(stderr, "note: the plan defines custom styles; DistributedConfig needs them registered first "
                               "(use --format python, which does it)\n");
        const std::string text = o.format == "python" ? tp::planToPython(plan, om->spec, o.output.empty() ? "plan.py" : o.output) : tp::planToJson(plan, &om->spec);
        if (o.output.empty()) {
            std::cout << text;
        } else {
            if (const std::string bad = writeOutput(o.output, [&](std::ostream& out) { out << text; }); !bad.empty()) {
                fmt::print(stderr, "tpstudio-cli plan export: {}\n", bad);
                return kBadInput;
            }
        }
        return kOk;
    }
    if (mode == Mode::Preview)
        return preview(*om, plan, g, o);

    if (o.json) {
        nlohmann::ordered_json j;
        j["model"] = om->spec.source;
        j["class"] = om->spec.className;
        j["tp_size"] = plan.tpSize;
        j["profile"] = tp::profileName(profile);
        j["replicate_kv_heads"] = plan.replicateKvHeads;
        j["kv_head_replicas"] = g.kvHeadReplicas;
        auto entries = nlohmann::ordered_json::array();
        for (std::size_t i = 0; i < plan.entries.size(); ++i)
            entries.push_back({{"key", plan.entries[i].key}, {"style", plan.entries[i].style},
                               {"matches", g.match.entryMatches[i]}});
        j["entries"] = entries;
        j["diagnostics"] = tp::diagnosticsJson(g.diagnostics);
        j["valid"] = !errors;
        std::cout << j.dump(2, ' ', false, tp::kReplaceInvalidUtf8) << "\n";
        if (errors) // the exit code's reason, for whoever reads stderr
            fmt::print(stderr, "tpstudio-cli {}: the plan has errors at tp_size {} (the JSON's diagnostics)\n", verb,
                       plan.tpSize);
        return errors ? kBadInput : kOk;
    }
    fmt::print("{} at tp_size {} (profile {})\n\n", om->spec.className, plan.tpSize, tp::profileName(profile));
    if (mode == Mode::Show) {
        fmt::print("{:<56} {:<30} {:>7}  {}\n", "key", "style", "matches", "forward collective");
        for (std::size_t i = 0; i < plan.entries.size(); ++i) {
            const tp::Style* s = g.match.entryStyles[i];
            fmt::print("{:<56} {:<30} {:>7}  {}\n", plan.entries[i].key, plan.entries[i].style, g.match.entryMatches[i],
                       s ? tp::collectiveName(s->forward) : "?");
        }
        fmt::print("\n");
    }
    printDiagnostics(g.diagnostics, mode == Mode::Show);
    fmt::print("{}\n", errors ? "INVALID: the plan has errors" : "valid");
    return errors ? kBadInput : kOk;
}

// `plan search`: every candidate that is valid and fits, sorted by the objective, the Pareto front
// marked; --write puts the front's plans in a new folder.
int search(const PlanOpts& o, bool maxTpGiven)
{
    const char* verb = "plan search";
    namespace fs = std::filesystem;
    bool madeDir = false; // --write's folder, made here: removed again (it is empty) when the verb fails
    auto fail = [&](const std::string& why) {
        fmt::print(stderr, "tpstudio-cli {}: {}\n", verb, why);
        std::error_code ec;
        if (madeDir)
            fs::remove(o.writeDir, ec);
        return kBadInput;
    };
    if (!o.writeDir.empty()) { // made before any work: a new folder, or an empty one
        std::error_code ec;
        const fs::path dir(o.writeDir);
        if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
            return fail(fmt::format("--write {}: exists and is not an empty folder; nothing is overwritten", o.writeDir));
        if (!dir.parent_path().empty() && !fs::is_directory(dir.parent_path(), ec))
            return fail(fmt::format("--write {}: the folder {} does not exist", o.writeDir, dir.parent_path().string()));
        madeDir = fs::create_directory(dir, ec);
        if (ec)
            return fail(fmt::format("--write {}: cannot make the folder: {}", o.writeDir, ec.message()));
    }
    if (o.contextGiven && (o.context < 1 || o.context > tp::kMaxWorkloadContext))
        return fail(fmt::format("--context must be from 1 to {} tokens, found {}", tp::kMaxWorkloadContext, o.context));
    auto hw = hardwareFor(o);
    if (!hw)
        return fail(hw.status().message());
    auto om = tp::openModel(o.model);
    if (!om)
        return fail(om.status().message());
    if (const std::string big = treeTooLarge(*om, o.model, true); !big.empty())
        return fail(big);
    tp::SearchOptions so;
    so.batch = o.batch;
    so.seq = o.seq;
    so.context = o.contextGiven ? o.context : 0;
    so.maxTp = maxTpGiven ? o.maxTp : 0;
    so.maxPp = o.maxPp;
    so.replicateKvHeads = o.replicateKv;
    so.activationDtype = dtypeOption(o.dtype);
    so.kvCacheDtype = dtypeOption(o.kvDtype);
    for (const std::string& file : o.alsoPlans) {
        auto p = tp::loadPlanFile(file, tp::VersionProfile::G3);
        if (!p)
            return fail(p.status().message());
        so.plans.push_back({fs::path(file).stem().string(), fmt::format("your plan {}", file), tp::resolveOverrides(om->spec, *p)});
    }
    auto r = tp::searchPlans(om->spec, *hw, so);
    if (!r)
        return fail(fmt::format("--batch {} --seq {} --context {}: {}", o.batch, o.seq, o.contextGiven ? o.context : o.seq,
                                r.status().message()));
    std::vector<const tp::PlanCandidate*> order;
    for (const auto& c : r->candidates)
        order.push_back(&c);
    auto key = [&](const tp::PlanCandidate* c) {
        return o.objective == "ttft" ? c->ttftSeconds : o.objective == "itl" ? c->itlSeconds : -c->tokensPerSecondPerGpu;
    };
    std::stable_sort(order.begin(), order.end(), [&](auto* a, auto* b) { return key(a) < key(b); });
    auto fileName = [](const tp::PlanCandidate& c) {
        std::string n = c.pp > 1 ? fmt::format("T{}xPP{}-{}", c.tp, c.pp, c.name) : fmt::format("T{}-{}", c.tp, c.name);
        for (char& ch : n)
            if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.')
                ch = '-';
        return n + ".json";
    };
    if (!o.writeDir.empty()) {
        for (const auto* c : order)
            if (c->pareto) {
                const std::string text = tp::planToJson(c->plan, &om->spec);
                if (const std::string bad = writeOutput((fs::path(o.writeDir) / fileName(*c)).string(),
                                                        [&](std::ostream& out) { out << text; });
                    !bad.empty())
                    return fail(bad);
            }
    }
    const std::int64_t context = o.contextGiven ? o.context : o.seq;
    if (o.json) {
        nlohmann::ordered_json j;
        j["schema"] = "tpstudio.search/1";
        j["model"] = om->spec.source;
        j["class"] = om->spec.className;
        j["hardware"] = hw->id;
        j["batch"] = o.batch;
        j["seq"] = o.seq;
        j["context"] = context;
        j["objective"] = o.objective;
        j["invalid"] = r->invalid;
        j["too_large"] = r->tooLarge;
        j["beyond_devices"] = r->beyondDevices;
        if (const auto& m = r->smallestTooLarge)
            j["smallest_too_large"] = {{"name", m->name}, {"tp", m->tp}, {"memory_bytes", m->memoryBytes}};
        auto cs = nlohmann::ordered_json::array();
        for (const auto* c : order)
            cs.push_back({{"name", c->name},
                          {"description", c->description},
                          {"tp", c->tp},
                          {"pp", c->pp},
                          {"spans_nodes", c->spansNodes},
                          {"bubble", c->bubble},
                          {"pareto", c->pareto},
                          {"ttft_s", c->ttftSeconds},
                          {"itl_s", c->itlSeconds},
                          {"tokens_per_s_per_gpu", c->tokensPerSecondPerGpu},
                          {"memory_bytes", c->memoryBytes},
                          {"headroom_bytes", c->headroomBytes},
                          {"file", c->pareto && !o.writeDir.empty() ? fileName(*c) : std::string()},
                          {"plan", nlohmann::ordered_json::parse(tp::planToJson(c->plan, &om->spec))}});
        j["candidates"] = cs;
        std::cout << j.dump(2, ' ', false, tp::kReplaceInvalidUtf8) << "\n";
        return kOk;
    }
    fmt::print("{} on {} · batch {} · prompt {} · decode context {} · sorted by {}\n", om->spec.className, hw->name,
               o.batch, o.seq, context, o.objective == "throughput" ? "tokens/s per GPU" : o.objective);
    fmt::print("{} candidates fit; {} invalid, {} do not fit {} per device\n\n", r->candidates.size(), r->invalid,
               r->tooLarge, hw->usableMemoryText());
    if (r->beyondDevices > 0)
        fmt::print("T = {}…{} not tried: {} has {} devices (plan validate --hardware refuses a larger T too)\n\n",
                   o.maxTp - r->beyondDevices + 1, o.maxTp, hw->id, hw->totalDevices());
    if (const auto& m = r->smallestTooLarge; m && r->candidates.empty())
        fmt::print("nothing fits: the smallest need is {} per device ('{}' at T={}), {} over what a device has for it\n\n",
                   tp::humanBytes(double(m->memoryBytes)), m->name, m->tp, tp::humanBytes(double(-m->headroomBytes)));
    const bool mesh = std::any_of(order.begin(), order.end(), [](const tp::PlanCandidate* c) { return c->pp > 1; });
    fmt::print("  front  {:>{}}  {:<28} {:>10} {:>10} {:>12} {:>13} {:>11}{}\n", mesh ? "TP×PP" : "T", mesh ? 7 : 3, "plan", "TTFT",
               "ITL", "tok/s/GPU", "memory/rank", "headroom", mesh ? "  bubble" : "");
    for (const auto* c : order) {
        const std::string shape = c->pp > 1 ? fmt::format("{}×{}", c->tp, c->pp) : std::to_string(c->tp);
        fmt::print("  {:^5}  {:>{}}  {:<28} {:>10} {:>10} {:>12.1f} {:>13} {:>11}{}{}\n", c->pareto ? "*" : "", shape, mesh ? 7 : 3,
                   c->name, humanSeconds(c->ttftSeconds), humanSeconds(c->itlSeconds), c->tokensPerSecondPerGpu,
                   tp::humanBytes(double(c->memoryBytes)), tp::humanBytes(double(c->headroomBytes)),
                   mesh ? fmt::format("  {:>5.0f}%", 100 * c->bubble) : std::string(),
                   c->spansNodes ? fmt::format("  TP across {} nodes", (c->tp + hw->devices - 1) / hw->devices) : std::string());
    }
    if (std::any_of(order.begin(), order.end(), [](const tp::PlanCandidate* c) { return c->spansNodes; }))
        fmt::print("\nTP across nodes: every collective of that group crosses {} (plan validate --hardware says what it costs)\n",
                   hw->network);
    if (mesh)
        fmt::print("TP×PP: load with DistributedConfig(tp_size=TP, pp_size=PP); --write puts pp_size in the file\n");
    if (!o.writeDir.empty())
    {
        if (r->candidates.empty())
            fmt::print("\nnothing written to {}/: no candidate fits\n", o.writeDir);
        else
            fmt::print("\nthe front's plans are in {}/\n", o.writeDir);
    }
    return kOk;
}

} // namespace

std::string treeTooLarge(const tp::OpenedModel& om, const std::string& model, bool manyGraphs)
{
    return treeTooLarge(static_cast<std::int64_t>(om.spec.modules.size()), model, manyGraphs);
}

std::string treeTooLarge(std::int64_t modules, const std::string& model, bool manyGraphs)
{
    const std::int64_t need = modules * (manyGraphs ? 3584 : 1664);
    const std::int64_t have = tp::hostMemoryAvailable();
    if (need <= have)
        return {};
    return fmt::format("{}: {} of {} modules needs about {} of memory, and {} is available", model,
                       manyGraphs ? "a preview" : "the sharded graph", tp::withCommas(modules),
                       tp::humanBytes(static_cast<double>(need)), tp::humanBytes(static_cast<double>(have)));
}

std::function<int()> addPlan(CLI::App& app)
{
    auto* plan = app.add_subcommand("plan", "Check a tp_plan against a model, preview its shards, collectives, memory "
                                            "and predicted time, and export it for Transformers");
    plan->require_subcommand(1);
    auto o = std::make_shared<PlanOpts>();
    auto* show = plan->add_subcommand("show", "List every key with its style, how many modules/parameters it matches, "
                                              "its forward collective, and the diagnostics");
    auto* validate = plan->add_subcommand("validate", "Report errors and warnings; exit 1 when the plan has errors");
    auto* prev = plan->add_subcommand(
        "preview", "Collectives per forward with their bytes, per-layer predicted compute and communication, memory "
                   "per rank, one decode step at --context (time, tokens/s, KV cache, its collectives), predicted "
                   "prefill and decode for T = 1..8 (formulas: docs/metrics.md)");
    auto* exp = plan->add_subcommand("export", "Print the complete resolved plan as Transformers loads it: "
                                               "{\"tp_size\", \"tp_plan\"} for DistributedConfig(**json.load(f)), or a "
                                               "ready Python script");
    for (auto* c : {show, validate, prev, exp})
        addCommon(c, *o);
    addShape(prev, *o);
    for (auto* c : {show, validate}) {
        addShape(c, *o);
        c->add_option("--hardware", o->hardware,
                      "Also check that the plan fits this machine (built-in id, calibrated id or file): T up to its "
                      "devices, the largest rank's weights + KV cache at --batch x --context + activations within its "
                      "memory (an error naming the smallest T that fits)");
        c->add_option("--context", o->context, "Context per sequence the KV cache holds, with --hardware (default: --seq)");
    }
    prev->add_option("--hardware", o->hardware,
                     "Hardware profile: a built-in id (" + fmt::format("{}", fmt::join(tp::builtinHardwareIds(), ", "))
                         + ") or a profile JSON file")
        ->capture_default_str();
    prev->add_option("--context", o->context,
                     "Decode context C: the predicted decode step is one new token per sequence with C - 1 already in "
                     "the KV cache (1 to 2^24; default: --seq)");
    prev->add_option("--logits", o->logits,
                     "Positions whose logits prefill computes, as 'run --logits': all (every position) or last (each "
                     "sequence's last, as generate() does with logits_to_keep=1: the final norm, the lm_head and its "
                     "collective over B rows, what 'run --decode' runs)")
        ->check(CLI::IsMember({"all", "last"}))
        ->capture_default_str();
    prev->add_option("--max-tp", o->maxTp, "Largest T in the predicted scaling table")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    auto* srch = plan->add_subcommand(
        "search", "Candidate plans at every valid T (the default, attention replicated, sequence-parallel norms, experts "
                  "split by id, the head replicated, the plans shipped for the model's type (plans/<model_type>/), and --plan files), each predicted on the hardware: TTFT of the "
                  "prompt, ITL at the context, tokens/s per GPU and memory per rank; those that do not fit dropped, "
                  "the Pareto front marked");
    srch->add_option("MODEL", o->model, "Folder, config.json, .safetensors, HF cache repo id or catalog id")
        ->required()
        ->check(kNonEmpty);
    addShape(srch, *o);
    srch->add_option("--hardware", o->hardware,
                     "Hardware profile: a built-in id (" + fmt::format("{}", fmt::join(tp::builtinHardwareIds(), ", "))
                         + ") or a profile JSON file")
        ->capture_default_str();
    srch->add_option("--context", o->context, "Decode context per sequence: the KV cache it needs and the step ITL times "
                                              "(1 to 2^24; default: --seq)");
    srch->add_option("--max-tp", o->maxTp, "Largest T tried, at most the hardware's device count (the default)")->check(CLI::Range(1, 64));
    srch->add_flag("--replicate-kv-heads", o->replicateKv,
                   "Also try the default plan with each key/value head on T/KV ranks at every T above the KV heads, as "
                   "vLLM and SGLang run it (the pinned Transformers cannot load such a plan)");
    srch->add_option("--max-pp", o->maxPp,
                     "Largest number of pipeline stages tried (each on its own T GPUs, T × PP at most the devices); default: "
                     "the profile's nodes, so 1 (TP only) on one node")
        ->check(CLI::Range(1, 64));
    srch->add_option("--objective", o->objective, "Sort by: ttft, itl or throughput (tokens/s per GPU)")
        ->check(CLI::IsMember({"ttft", "itl", "throughput"}))
        ->capture_default_str();
    srch->add_option("--plan", o->alsoPlans, "More candidate plan files, each tried at every T (one named like a shipped plan takes its place)")
        ->check(kNonEmpty);
    srch->add_option("--write", o->writeDir, "Write the front's plans (plan export's JSON) into this new or empty folder");
    for (auto* c : {show, validate, prev, srch})
        c->add_flag("--json", o->json, "Print JSON");
    for (auto* c : {show, validate, prev, srch})
        c->add_option("--memory-reserve", o->memoryReserve,
                      "GiB of each device kept back from the plan (CUDA context, NCCL buffers, allocator), in place of "
                      "the hardware profile's memory_reserve_gib")
            ->check(CLI::Range(0.0, 1e6));
    auto verifyVerb = addPlanVerify(plan);
    exp->add_option("-o,--output", o->output, "Write to this file instead of standard output");
    exp->add_option("--format", o->format, "json (DistributedConfig form) or python (a runnable script)")
        ->check(CLI::IsMember({"json", "python"}))
        ->capture_default_str();
    return [o, show, validate, prev, exp, srch, verifyVerb] {
        if (const int rc = verifyVerb(); rc >= 0)
            return rc;
        if (srch->parsed()) {
            o->contextGiven = srch->count("--context") > 0;
            return search(*o, srch->count("--max-tp") > 0);
        }
        auto* sub = show->parsed() ? show : validate->parsed() ? validate : prev->parsed() ? prev : exp;
        const Mode mode = sub == show ? Mode::Show : sub == validate ? Mode::Validate : sub == prev ? Mode::Preview
                                                                                                     : Mode::Export;
        auto given = [&](const char* name) {
            const CLI::Option* opt = sub->get_option_no_throw(name);
            return opt && opt->count() > 0;
        };
        o->contextGiven = given("--context");
        o->hardwareGiven = given("--hardware");
        return run(mode, *o, sub->count("--tp") > 0);
    };
}

} // namespace tpcli
