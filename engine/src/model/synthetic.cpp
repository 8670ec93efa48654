#include "tp/model/synthetic.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace tp {

namespace {
std::int64_t ceilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
} // namespace

std::vector<TensorToWrite> checkpointLayout(const ModelSpec& spec, const SyntheticOptions& opt)
{
    std::vector<TensorToWrite> out;
    const ModelConfig& c = spec.config;
    auto emit = [&](const std::string& name, std::vector<std::int64_t> shape, DType dtype, bool linearWeight) {
        if (opt.fp8BlockScales && linearWeight && shape.size() == 2) {
            out.push_back({name, DType::F8E4M3, shape, {}});
            out.push_back({name + "_scale_inv", DType::F32, {ceilDiv(shape[0], 128), ceilDiv(shape[1], 128)}, {}});
        } else {
            out.push_back({name, dtype, std::move(shape), {}});
        }
    };
    auto legacy = [&](std::string name) {
        if (c.family == Family::Mixtral)
            if (auto p = name.find(".mlp."); p != std::string::npos)
                name.replace(p, 5, ".block_sparse_moe.");
        return name;
    };

    for (const auto& m : spec.modules) {
        for (const auto& p : m.params) {
            if (!p.tiedTo.empty())
                continue;
            const std::string full = m.paramPath(p);
            const bool fusedExperts = m.kind == ModuleKind::Experts && p.shape.size() == 3
                && c.family != Family::GptOss && c.family != Family::Llama4;
            if (!fusedExperts) {
                emit(legacy(full), p.shape, p.dtype, m.kind == ModuleKind::Linear && m.name != "lm_head");
                continue;
            }
            // [E, 2I, H] → per expert gate [I, H] + up [I, H]; [E, H, I] → down [H, I].
            const std::int64_t E = p.shape[0];
            const bool mixtral = c.family == Family::Mixtral;
            for (std::int64_t e = 0; e < E; ++e) {
                const std::string base = legacy(m.path) + "." + std::to_string(e) + ".";
                if (p.name == "gate_up_proj") {
                    const std::vector<std::int64_t> piece = {p.shape[1] / 2, p.shape[2]};
                    emit(base + (mixtral ? "w1" : "gate_proj") + ".weight", piece, p.dtype, true);
                    emit(base + (mixtral ? "w3" : "up_proj") + ".weight", piece, p.dtype, true);
                } else {
                    emit(base + (mixtral ? "w2" : "down_proj") + ".weight", {p.shape[1], p.shape[2]}, p.dtype, true);
                }
            }
        }
    }
    // Extra layers (DeepSeek's multi-token prediction): copies of the last layer's tensors.
    if (opt.extraLayers > 0) {
        const std::string last = fmt::format("model.layers.{}.", c.numLayers - 1);
        std::vector<TensorToWrite> more;
        for (const auto& t : out)
            if (t.name.starts_with(last))
                for (std::int64_t k = 0; k < opt.extraLayers; ++k)
                    more.push_back({fmt::format("model.layers.{}.{}", c.numLayers + k, t.name.substr(last.size())),
                                    t.dtype, t.shape, {}});
        out.insert(out.end(), more.begin(), more.end());
    }
    return out;
}

Status writeSyntheticCheckpoint(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                                std::uint64_t maxShardBytes, const std::string& configJson, std::stop_token stop)
{
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
        return notFound(fmt::format("{}: cannot create folder: {}", dir, ec.message()));
    if (!configJson.empty()) {
        std::ofstream cfg(fs::path(dir) / "config.json");
        cfg << configJson;
        if (!cfg)
            return dataLoss(fmt::format("{}/config.json: write failed", dir));
    }
    // Greedy shards by bytes, in order, as save_pretrained does.
    std::vector<std::vector<const TensorToWrite*>> shards(1);
    std::uint64_t bytes = 0;
    for (const auto& t : tensors) {
        std::int64_t n = 1;
        for (auto d : t.shape)
            n *= d;
        const auto b = static_cast<std::uint64_t>(dtypeBytes(t.dtype, n));
        if (!shards.back().empty() && bytes + b > maxShardBytes) {
            shards.emplace_back();
            bytes = 0;
        }
        shards.back().push_back(&t);
        bytes += b;
    }
    if (shards.size() == 1) {
        std::vector<TensorToWrite> all(tensors.begin(), tensors.end());
        return writeSafetensors((fs::path(dir) / "model.safetensors").string(), all, {{"format", "pt"}});
    }
    nlohmann::ordered_json weightMap = nlohmann::ordered_json::object();
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < shards.size(); ++i) {
        if (stop.stop_requested())
            return Status(StatusCode::Cancelled, fmt::format("{}: writing the synthetic checkpoint was cancelled", dir));
        const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
        std::vector<TensorToWrite> part;
        part.reserve(shards[i].size());
        for (const auto* t : shards[i]) {
            part.push_back({t->name, t->dtype, t->shape, {}});
            weightMap[t->name] = file;
            std::int64_t n = 1;
            for (auto d : t->shape)
                n *= d;
            total += static_cast<std::uint64_t>(dtypeBytes(t->dtype, n));
        }
        TP_RETURN_IF_ERROR(writeSafetensors((fs::path(dir) / file).string(), part, {{"format", "pt"}}));
    }
    nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weightMap}};
    std::ofstream out(fs::path(dir) / "model.safetensors.index.json");
    out << index.dump(2);
    if (!out)
        return dataLoss(fmt::format("{}/model.safetensors.index.json: write failed", dir));
    return {};
}

} // namespace tp
