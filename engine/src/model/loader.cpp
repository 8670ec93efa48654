// loader.cpp — model resolution (folder, file, HF cache, catalog) and checkpoint reconciliation.
#include "tp/model/loader.h"

#include "tp/core/file.h"
#include "tp/model/catalog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <unordered_map>

namespace fs = std::filesystem;

namespace tp {

void appendGenericName(std::string& out, std::string_view name, bool atStart)
{
    // Transformers' replace_layer_number_by_wildcard: `\.\d+(\.|$)` → `.*`; only numeric segments
    // after a dot change, so "w1" stays and a leading "0." stays (atStart).
    for (std::size_t i = 0;;) {
        std::size_t j = name.find('.', i);
        if (j == std::string_view::npos)
            j = name.size();
        const std::string_view seg = name.substr(i, j - i);
        const bool numeric = !(atStart && i == 0) && !seg.empty()
            && std::all_of(seg.begin(), seg.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (i > 0)
            out += '.';
        if (numeric)
            out += '*';
        else
            out.append(seg);
        if (j == name.size())
            break;
        i = j + 1;
    }
}

std::string genericName(const std::string& name)
{
    std::string out;
    out.reserve(name.size());
    appendGenericName(out, name, true);
    return out;
}

namespace {

bool parseIndex(std::string_view s, std::int64_t& out)
{
    if (s.empty() || s.size() > 9)
        return false;
    std::int64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + (c - '0');
    }
    out = v;
    return true;
}

// Layer index of "…layers.N.…", or -1.
std::int64_t layerOf(const std::string& name)
{
    auto p = name.find("layers.");
    if (p == std::string::npos)
        return -1;
    p += 7;
    auto q = name.find('.', p);
    std::int64_t l = -1;
    if (!parseIndex(std::string_view(name).substr(p, q == std::string::npos ? std::string::npos : q - p), l))
        return -1;
    return l;
}

// One of Transformers' WeightRenamings (conversion_mapping.py, in resources/model_types.json): its source
// patterns, each with the target that replaces the first occurrence of its match (\1 in it: the first group).
struct Renaming
{
    struct Source
    {
        std::regex pattern;
        std::string target;
        std::string literal; // text every match contains: a name without it is not searched (70k tensors × 32 renamings)
    };
    std::vector<Source> sources;
};

// The longest run of plain characters that every match of a simple pattern contains ("\.attn\." → ".attn."), or
// empty where the pattern has an alternation or a class that makes that unsure.
std::string requiredLiteral(const std::string& pattern)
{
    if (pattern.find('|') != std::string::npos || pattern.find("(?") != std::string::npos) // alternatives, lookarounds
        return {};
    std::string best, run;
    auto cut = [&] {
        if (run.size() > best.size())
            best = run;
        run.clear();
    };
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        const char ch = pattern[i];
        if (ch == '\\' && i + 1 < pattern.size()) {
            const char next = pattern[++i];
            if (std::isalnum(static_cast<unsigned char>(next)))
                cut(); // \d, \w, \1: not a literal
            else
                run += next;
        } else if (ch == '*' || ch == '?' || ch == '{') { // the character before may be absent
            if (!run.empty())
                run.pop_back();
            cut();
            while (ch == '{' && i + 1 < pattern.size() && pattern[i] != '}') // skip the count
                ++i;
        } else if (std::string_view("^$.+()[]").find(ch) != std::string_view::npos) {
            cut();
            if (ch == '[') // skip the class
                while (i + 1 < pattern.size() && pattern[i] != ']')
                    ++i;
        } else {
            run += ch;
        }
    }
    cut();
    return best;
}

// The model type's renamings, compiled once (a pattern std::regex cannot compile is left out).
const std::vector<Renaming>& checkpointRenames(const std::string& modelType)
{
    static const std::unordered_map<std::string, std::vector<Renaming>> all = [] {
        std::unordered_map<std::string, std::vector<Renaming>> out;
        for (const KnownModelType& k : knownModelTypes())
            for (const auto& pairs : transformersClassPlans(k.modelType).checkpointRenames) {
                Renaming r;
                for (const auto& [source, target] : pairs) {
                    try {
                        r.sources.push_back({std::regex(source), target, requiredLiteral(source)});
                    } catch (const std::regex_error&) { // a Python-only construct
                    }
                }
                out[k.modelType].push_back(std::move(r));
            }
        return out;
    }();
    static const std::vector<Renaming> none;
    const auto it = all.find(modelType);
    return it == all.end() ? none : it->second;
}

// Every renaming in turn, as Transformers' apply_renamings: the leftmost match of its sources (the first source
// at a tie) replaces the first occurrence of the matched text.
void applyRenames(std::string& n, const std::vector<Renaming>& renames)
{
    for (const Renaming& r : renames) {
        std::smatch best;
        const std::string* target = nullptr;
        for (const Renaming::Source& s : r.sources) {
            std::smatch m;
            if (n.find(s.literal) != std::string::npos && std::regex_search(n, m, s.pattern) && (!target || m.position(0) < best.position(0))) {
                best = m;
                target = &s.target;
            }
        }
        if (!target)
            continue;
        std::string replacement = *target;
        if (auto g = replacement.find("\\1"); g != std::string::npos && best.size() > 1)
            replacement.replace(g, 2, best.str(1));
        const std::string matched = best.str(0);
        if (auto at = n.find(matched); at != std::string::npos)
            n.replace(at, matched.size(), replacement);
    }
}

// The name Transformers gives a checkpoint tensor on load: its model type's renamings (legacy and original
// checkpoints' names), then a multimodal wrapper's prefix.
std::string canonicalName(const std::string& name, const ModelConfig& c)
{
    std::string n = name;
    if (const auto& renames = checkpointRenames(c.modelType); !renames.empty())
        applyRenames(n, renames);
    if (!c.wrapperModelType.empty()) {
        // Multimodal checkpoints keep the text model under language_model.
        for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{"model.language_model.", "model."},
                                       {"language_model.model.", "model."},
                                       {"language_model.lm_head.", "lm_head."}})
            if (n.starts_with(from)) {
                n = std::string(to) + n.substr(from.size());
                break;
            }
    }
    return n;
}

// A per-expert checkpoint tensor: "<block>.experts.<e>.<proj>.weight".
struct ExpertPiece
{
    std::string fused;  // full name of the fused parameter
    std::int64_t expert = 0;
    int part = 0;       // 0: gate, 1: up, 2: down
};

std::optional<ExpertPiece> parseExpertPiece(const std::string& n)
{
    auto p = n.find(".experts.");
    if (p == std::string::npos || !n.ends_with(".weight"))
        return std::nullopt;
    const std::size_t start = p + 9;
    auto q = n.find('.', start);
    if (q == std::string::npos)
        return std::nullopt;
    ExpertPiece piece;
    if (!parseIndex(std::string_view(n).substr(start, q - start), piece.expert))
        return std::nullopt;
    const std::string_view proj = std::string_view(n).substr(q + 1, n.size() - 7 - (q + 1));
    if (proj == "gate_proj" || proj == "w1")
        piece.part = 0;
    else if (proj == "up_proj" || proj == "w3")
        piece.part = 1;
    else if (proj == "down_proj" || proj == "w2")
        piece.part = 2;
    else
        return std::nullopt;
    piece.fused = n.substr(0, p) + (piece.part == 2 ? ".experts.down_proj" : ".experts.gate_up_proj");
    return piece;
}

std::string shapeString(const std::vector<std::int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// Groups many findings by generic name so that 90k tensors produce a readable list.
class FindingGroups
{
public:
    void add(const std::string& name)
    {
        auto g = genericName(name);
        auto& e = m_groups[g];
        if (e.count++ == 0) {
            e.example = name;
            m_order.push_back(g);
        }
    }
    template<typename F>
    void each(F&& f) const
    {
        for (const auto& g : m_order) {
            const auto& e = m_groups.at(g);
            f(g, e.count, e.example);
        }
    }
    bool empty() const { return m_order.empty(); }

private:
    struct Entry
    {
        std::size_t count = 0;
        std::string example;
    };
    std::unordered_map<std::string, Entry> m_groups;
    std::vector<std::string> m_order;
};

} // namespace

std::optional<ExpertTensor> expertTensorOf(const std::string& tensorName, const ModelConfig& c)
{
    auto piece = parseExpertPiece(canonicalName(tensorName, c));
    if (!piece)
        return std::nullopt;
    return ExpertTensor{piece->fused, piece->expert, piece->part};
}

void reconcileCheckpoint(ModelSpec& spec, const Checkpoint& ck)
{
    const ModelConfig& c = spec.config;
    std::unordered_map<std::string, ParamSpec*> params;
    for (auto& m : spec.modules)
        for (auto& p : m.params)
            params.emplace(m.paramPath(p), &p);

    // Coverage of fused expert parameters: E×2 pieces for gate_up, E for down.
    std::unordered_map<ParamSpec*, std::vector<std::uint8_t>> pieces;
    FindingGroups extra, scales, beyond, shapeErrors;
    std::vector<Diagnostic> shapeDiags;
    auto shapeMismatch = [&](const TensorInfo& t, const std::string& param, const std::vector<std::int64_t>& want) {
        if (shapeDiags.size() < 20)
            shapeDiags.push_back({Severity::Error, t.name,
                                  fmt::format("checkpoint shape {} in {} does not match {} expected for '{}'",
                                              shapeString(t.shape), fs::path(t.file).filename().string(),
                                              shapeString(want), param),
                                  "the config and the checkpoint describe different models"});
        shapeErrors.add(t.name);
    };

    for (const auto& t : ck.tensors) {
        const std::string name = canonicalName(t.name, c);
        if (auto it = params.find(name); it != params.end()) {
            ParamSpec& p = *it->second;
            if (t.shape != p.shape) {
                shapeMismatch(t, name, p.shape);
                continue;
            }
            p.inCheckpoint = true;
            p.dtype = t.dtype;
            p.checkpointTensors.push_back(t.name);
            continue;
        }
        // An AWQ / GPTQ Linear's packed weight (ParamSpec::packBits): GPTQ's qweight [ceil(in·b/32), out], AWQ's
        // [in, ceil(out·b/32)], both int32; its qzeros, scales and g_idx are quantization tensors (below).
        if (name.ends_with(".qweight"))
            if (auto it = params.find(name.substr(0, name.size() - 7) + "weight"); it != params.end() && it->second->packBits > 0) {
                ParamSpec& p = *it->second;
                const std::int64_t out = p.shape[0], in = p.shape[1], b = p.packBits;
                const std::vector<std::int64_t> want = p.packGptq ? std::vector<std::int64_t>{(in * b + 31) / 32, out}
                                                                  : std::vector<std::int64_t>{in, (out * b + 31) / 32};
                if (t.shape != want || t.dtype != DType::I32) {
                    shapeMismatch(t, fmt::format("{} (int32, {}-bit {})", name, b, p.packGptq ? "GPTQ" : "AWQ"), want);
                    continue;
                }
                p.inCheckpoint = true;
                p.checkpointTensors.push_back(t.name);
                continue;
            }
        if (auto piece = parseExpertPiece(name)) {
            auto it = params.find(piece->fused);
            bool whole = piece->part == 2; // a piece is all of its expert's slice, not half of gate_up
            if (it == params.end() && piece->part == 1) { // ungated experts (Nemotron-H): up pieces make experts.up_proj
                piece->fused = name.substr(0, name.find(".experts.")) + ".experts.up_proj";
                it = params.find(piece->fused);
                whole = true;
            }
            if (it != params.end() && it->second->shape.size() == 3 && piece->expert < it->second->shape[0]) {
                ParamSpec& p = *it->second;
                // [E, 2I, H] gate_up (pieces [I, H]), [E, I, H] up and [E, H, I] down (pieces [I, H], [H, I]).
                const std::vector<std::int64_t> want = whole ? std::vector<std::int64_t>{p.shape[1], p.shape[2]}
                                                             : std::vector<std::int64_t>{p.shape[1] / 2, p.shape[2]};
                if (t.shape != want) {
                    shapeMismatch(t, fmt::format("{}[{}]", piece->fused, piece->expert), want);
                    continue;
                }
                auto& have = pieces[&p];
                const std::size_t perExpert = whole ? 1 : 2;
                have.resize(static_cast<std::size_t>(p.shape[0]) * perExpert);
                have[static_cast<std::size_t>(piece->expert) * perExpert + (!whole && piece->part == 1 ? 1 : 0)] = 1;
                p.dtype = t.dtype;
                p.checkpointTensors.push_back(t.name);
                continue;
            }
        }
        if (name == "lm_head.weight" && c.tieWordEmbeddings)
            continue; // some writers keep the tied copy
        const std::int64_t layer = layerOf(name);
        if (layer >= c.numLayers)
            beyond.add(fmt::format("model.layers.{}", layer)); // one finding per extra layer
        else if (c.quantization && (name.ends_with("_scale_inv") || name.ends_with("_scale") || name.ends_with("_scales")
                                    || name.ends_with("_blocks") || name.ends_with(".weight_scale") || name.ends_with(".qzeros")
                                    || name.ends_with(".scales") || name.ends_with(".g_idx")))
            scales.add(t.name);
        else
            extra.add(t.name);
    }

    // Fused parameters are present only when every piece is.
    for (auto& [p, have] : pieces)
        p->inCheckpoint = !have.empty() && std::all_of(have.begin(), have.end(), [](auto v) { return v != 0; });

    FindingGroups missing;
    for (auto& m : spec.modules)
        for (auto& p : m.params)
            if (!p.inCheckpoint && p.tiedTo.empty())
                missing.add(m.paramPath(p));

    auto& diags = spec.diagnostics;
    diags.insert(diags.end(), shapeDiags.begin(), shapeDiags.end());
    missing.each([&](const std::string& g, std::size_t n, const std::string& ex) {
        diags.push_back({Severity::Error, g,
                         fmt::format("{} parameter(s) have no tensor in the checkpoint (first: '{}')", n, ex),
                         "Transformers would initialise them randomly; check that config and checkpoint match"});
    });
    extra.each([&](const std::string& g, std::size_t n, const std::string& ex) {
        diags.push_back({Severity::Warning, g,
                         fmt::format("{} checkpoint tensor(s) match no parameter of {} (first: '{}')", n,
                                     spec.className, ex),
                         ""});
    });
    std::size_t scaleCount = 0, scaleKinds = 0;
    std::string scaleExample;
    scales.each([&](const std::string& g, std::size_t n, const std::string&) {
        scaleCount += n;
        if (scaleKinds++ == 0)
            scaleExample = g;
    });
    if (scaleCount > 0)
        diags.push_back({Severity::Info, scaleExample,
                         fmt::format("{} quantization tensor(s) of the {} checkpoint in {} pattern(s), e.g. '{}'",
                                     scaleCount, c.quantization.value_or("?"), scaleKinds, scaleExample),
                         ""});
    beyond.each([&](const std::string&, std::size_t n, const std::string& layerPath) {
        diags.push_back({Severity::Info, layerPath,
                         fmt::format("{} tensor(s) of a layer past num_hidden_layers={} (e.g. a multi-token "
                                     "prediction layer); Transformers ignores them",
                                     n, c.numLayers),
                         ""});
    });
}

ModelSpec specFromTensorNames(const ModelConfig& config, const Checkpoint& ck)
{
    ModelSpec s;
    s.config = config;
    s.className = config.architectures.empty() ? "AutoModelForCausalLM" : config.architectures.front();
    ModuleSpec root;
    root.className = s.className;
    root.kind = ModuleKind::CausalLM;
    s.modules.push_back(root);
    std::unordered_map<std::string, int> index{{"", 0}};

    auto ensure = [&](const std::string& path) {
        // Creates every module along `path` and returns its index.
        int parent = 0;
        std::size_t start = 0;
        while (start < path.size()) {
            std::size_t dot = path.find('.', start);
            if (dot == std::string::npos)
                dot = path.size();
            const std::string sub = path.substr(0, dot);
            auto it = index.find(sub);
            if (it == index.end()) {
                ModuleSpec m;
                m.name = path.substr(start, dot - start);
                m.path = sub;
                m.parent = parent;
                m.layer = static_cast<int>(layerOf(sub + "."));
                const std::string& parentName = s.modules[static_cast<std::size_t>(parent)].name;
                std::int64_t dummy = 0;
                if (parseIndex(m.name, dummy) && parentName == "layers") {
                    m.kind = ModuleKind::DecoderLayer;
                    s.modules[static_cast<std::size_t>(parent)].kind = ModuleKind::ModuleList;
                } else if (sub == "model") {
                    m.kind = ModuleKind::Model;
                }
                const int idx = static_cast<int>(s.modules.size());
                s.modules.push_back(std::move(m));
                s.modules[static_cast<std::size_t>(parent)].children.push_back(idx);
                it = index.emplace(sub, idx).first;
            }
            parent = it->second;
            start = dot + 1;
        }
        return parent;
    };

    for (const auto& t : ck.tensors) {
        const auto dot = t.name.rfind('.');
        const std::string modPath = dot == std::string::npos ? std::string() : t.name.substr(0, dot);
        const int m = modPath.empty() ? 0 : ensure(modPath);
        ParamSpec p;
        p.name = dot == std::string::npos ? t.name : t.name.substr(dot + 1);
        p.shape = t.shape;
        p.dtype = t.dtype;
        p.inCheckpoint = true;
        p.checkpointTensors.push_back(t.name);
        auto& mod = s.modules[static_cast<std::size_t>(m)];
        if (p.name == "weight" && mod.kind == ModuleKind::Other) {
            const bool embed = mod.name.find("embed") != std::string::npos || mod.name == "wte";
            if (embed && p.shape.size() == 2)
                mod.kind = ModuleKind::Embedding;
            else if (p.shape.size() == 2)
                mod.kind = ModuleKind::Linear;
            else if (p.shape.size() == 1 && (mod.name.find("norm") != std::string::npos || mod.name.starts_with("ln")))
                mod.kind = ModuleKind::RmsNorm;
            mod.className = mod.kind == ModuleKind::Other ? "" : moduleKindName(mod.kind);
        }
        mod.params.push_back(std::move(p));
    }
    s.finalize();
    s.diagnostics.push_back({Severity::Warning, config.modelType.empty() ? "config.json" : config.modelType,
                             "unknown architecture: the module tree was built from tensor names alone",
                             "module kinds are guesses; the default tp_plan comes only from a Transformers that knows the model type "
                             "(TPSTUDIO_PYTHON names a Python with one)"});
    return s;
}

Result<std::string> resolveHubCache(const std::string& repoId)
{
    const auto slash = repoId.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == repoId.size()
        || repoId.find('/', slash + 1) != std::string::npos || repoId.find("..") != std::string::npos)
        return invalidArgument(fmt::format("'{}' is not a Hugging Face repo id (expected org/name)", repoId));
    std::vector<fs::path> roots;
    if (const char* v = std::getenv("HF_HUB_CACHE"); v && *v)
        roots.emplace_back(v);
    if (const char* v = std::getenv("HUGGINGFACE_HUB_CACHE"); v && *v)
        roots.emplace_back(v);
    if (const char* v = std::getenv("HF_HOME"); v && *v)
        roots.push_back(fs::path(v) / "hub");
    if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v)
        roots.push_back(fs::path(v) / "huggingface" / "hub");
    if (const char* v = std::getenv("HOME"); v && *v)
        roots.push_back(fs::path(v) / ".cache" / "huggingface" / "hub");

    const std::string folder = "models--" + repoId.substr(0, slash) + "--" + repoId.substr(slash + 1);
    std::vector<std::string> searched;
    for (const auto& root : roots) {
        const fs::path repo = root / folder;
        searched.push_back(repo.string());
        std::error_code ec;
        if (!fs::is_directory(repo / "snapshots", ec))
            continue;
        // refs/main names the snapshot Transformers would use; otherwise take the newest one.
        std::ifstream ref(repo / "refs" / "main");
        std::string commit;
        if (ref && std::getline(ref, commit) && !commit.empty() && commit.find('/') == std::string::npos
            && fs::is_directory(repo / "snapshots" / commit, ec))
            return (repo / "snapshots" / commit).string();
        fs::path best;
        fs::file_time_type bestTime{};
        for (const auto& e : fs::directory_iterator(repo / "snapshots", ec)) {
            if (!e.is_directory(ec))
                continue;
            auto t = e.last_write_time(ec);
            if (best.empty() || t > bestTime) {
                best = e.path();
                bestTime = t;
            }
        }
        if (!best.empty())
            return best.string();
    }
    return notFound(fmt::format("'{}' is not in the local Hugging Face cache (looked in: {}); TP Studio never "
                                "downloads — fetch it with `hf download {}` first",
                                repoId, fmt::join(searched, ", "), repoId));
}

namespace {

bool isPickleFile(const fs::path& p)
{
    const auto ext = p.extension().string();
    return ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".pkl" || ext == ".ckpt";
}

Status pickleRefusal(const std::string& what)
{
    return invalidArgument(fmt::format(
        "{}: pickle checkpoints (.bin/.pt/.pth) are not read: unpickling can run arbitrary code. Convert the "
        "checkpoint to safetensors (e.g. model.save_pretrained(dir, safe_serialization=True)) and open that",
        what));
}

struct Located
{
    std::string configPath;         // may be empty
    std::string checkpointPath;     // a .safetensors file or an index; may be empty
    std::vector<std::string> extraSafetensors; // several shards without an index
    std::vector<Diagnostic> diags;
};

Result<Located> locateInFolder(const fs::path& dir)
{
    Located l;
    std::error_code ec;
    if (fs::exists(dir / "config.json", ec))
        l.configPath = (dir / "config.json").string();
    else if (fs::is_symlink(dir / "config.json", ec)) // a partial Hub download leaves links to missing blobs
        return notFound(fmt::format("{}/config.json is a link to {}, which does not exist (an incomplete download?)",
                                    dir.string(), fs::read_symlink(dir / "config.json", ec).string()));
    if (fs::exists(dir / "model.safetensors.index.json", ec)) {
        l.checkpointPath = (dir / "model.safetensors.index.json").string();
        return l;
    }
    std::vector<std::string> st, pickles;
    std::vector<std::string> indexes;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const auto name = e.path().filename().string();
        if (name.ends_with(".safetensors"))
            st.push_back(e.path().string());
        else if (name.ends_with(".safetensors.index.json"))
            indexes.push_back(e.path().string());
        else if (isPickleFile(e.path()))
            pickles.push_back(name);
    }
    if (ec)
        return notFound(fmt::format("{}: cannot list folder: {}", dir.string(), ec.message()));
    std::sort(st.begin(), st.end());
    if (indexes.size() == 1) {
        l.checkpointPath = indexes.front();
    } else if (fs::exists(dir / "model.safetensors", ec)) {
        l.checkpointPath = (dir / "model.safetensors").string();
    } else if (st.size() == 1) {
        l.checkpointPath = st.front();
    } else if (st.size() > 1) {
        l.checkpointPath = st.front();
        l.extraSafetensors.assign(st.begin() + 1, st.end());
        l.diags.push_back({Severity::Warning, dir.string(),
                           fmt::format("{} .safetensors files but no model.safetensors.index.json; reading all", st.size()),
                           ""});
    }
    if (l.checkpointPath.empty() && !pickles.empty()) {
        if (l.configPath.empty())
            return pickleRefusal(dir.string() + "/" + pickles.front());
        l.diags.push_back({Severity::Warning, dir.string() + "/" + pickles.front(),
                           "pickle checkpoint ignored (never unpickled); only the config is used",
                           "convert the weights to safetensors to check them against the tree"});
    }
    if (l.configPath.empty() && l.checkpointPath.empty())
        return notFound(fmt::format("{}: no config.json and no .safetensors files in this folder", dir.string()));
    return l;
}

Result<Checkpoint> readAll(const Located& l)
{
    TP_ASSIGN_OR_RETURN(Checkpoint ck, readCheckpoint(l.checkpointPath));
    for (const auto& f : l.extraSafetensors) {
        TP_ASSIGN_OR_RETURN(Checkpoint more, readCheckpoint(f));
        ck.files.insert(ck.files.end(), more.files.begin(), more.files.end());
        ck.totalBytes += more.totalBytes;
        ck.tensors.insert(ck.tensors.end(), std::make_move_iterator(more.tensors.begin()),
                          std::make_move_iterator(more.tensors.end()));
    }
    std::sort(ck.tensors.begin(), ck.tensors.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
    // Without an index nothing says which file holds a tensor that two of them contain.
    for (std::size_t i = 1; i < ck.tensors.size(); ++i)
        if (ck.tensors[i].name == ck.tensors[i - 1].name)
            return invalidArgument(fmt::format("tensor '{}' is in more than one of the {} .safetensors files and there is "
                                               "no model.safetensors.index.json to say which to read",
                                               ck.tensors[i].name, l.extraSafetensors.size() + 1));
    return ck;
}

ClassPlanSource& classPlanSource()
{
    static ClassPlanSource source;
    return source;
}

// A tree from tensor names: the default plans of its model type's class, where the app's source knows them.
void applyExternalPlans(ModelSpec& spec)
{
    const std::string& type = spec.config.modelType;
    if (!classPlanSource() || type.empty())
        return;
    auto r = classPlanSource()(type);
    if (!r.ok()) {
        spec.diagnostics.push_back({Severity::Warning, type, "no default tp_plan: " + r.status().message(),
                                    "give a plan (--plan FILE, or assign styles in the GUI)"});
        return;
    }
    applyClassPlans(spec, r->plans);
    spec.diagnostics.push_back({Severity::Info, type,
                                fmt::format("default tp_plan ({} keys) and ep_plan ({} keys) from {}; the tree is read from "
                                            "tensor names, so the dataflow, collectives and times are not predicted",
                                            spec.defaultTpPlan.size(), spec.defaultEpPlan.size(), r->origin),
                                ""});
}

// What from_pretrained's dtype="auto" takes without a dtype in the config (modeling_utils.get_state_dict_dtype): the
// first file's first floating-point tensor by name, fp8 and fp4 skipped, else its first tensor's; with the tensor's name.
std::optional<std::pair<DType, std::string>> checkpointDtype(const Checkpoint& ck)
{
    if (ck.files.empty())
        return std::nullopt;
    const std::string& first = *std::min_element(ck.files.begin(), ck.files.end());
    const TensorInfo* any = nullptr;
    for (const TensorInfo& t : ck.tensors) { // sorted by name
        if (t.file != first)
            continue;
        if (t.dtype == DType::F16 || t.dtype == DType::BF16 || t.dtype == DType::F32 || t.dtype == DType::F64)
            return std::pair{t.dtype, t.name};
        if (!any)
            any = &t;
    }
    return any ? std::optional(std::pair{any->dtype, any->name}) : std::nullopt;
}

// The config takes `t`; the float32 fallback's note gives way to one that says where `t` comes from.
void useDtype(ModelConfig& config, DType t, std::vector<Diagnostic>& diags, const std::string& where, std::string why)
{
    config.dtype = t;
    std::erase_if(diags, [](const Diagnostic& d) { return d.message.starts_with("no 'torch_dtype'/'dtype' given"); });
    diags.push_back({Severity::Info, where, std::move(why), ""});
}

Result<OpenedModel> openLocated(const Located& l, const std::string& source)
{
    OpenedModel out;
    std::vector<Diagnostic> diags = l.diags;
    ModelConfig config;
    if (!l.configPath.empty()) {
        TP_ASSIGN_OR_RETURN(config, loadConfigFile(l.configPath, &diags));
        out.configPath = l.configPath;
    } else {
        diags.push_back({Severity::Warning, source, "no config.json beside the checkpoint",
                         "the tree is built from tensor names alone"});
    }
    if (!l.checkpointPath.empty()) {
        TP_ASSIGN_OR_RETURN(Checkpoint ck, readAll(l));
        out.checkpoint = std::move(ck);
        diags.insert(diags.end(), out.checkpoint->diagnostics.begin(), out.checkpoint->diagnostics.end());
        if (!config.dtypeGiven && !l.configPath.empty())
            if (const auto t = checkpointDtype(*out.checkpoint))
                useDtype(config, t->first, diags, l.configPath,
                         fmt::format("config.json names no dtype; Transformers takes the checkpoint's, {} (its dtype=\"auto\": "
                                     "the first floating-point tensor, '{}')",
                                     dtypeName(t->first), t->second));
    }
    if (config.family != Family::Unknown) {
        auto spec = buildModelSpec(config);
        if (!spec)
            return spec.status().withContext(l.configPath);
        out.spec = std::move(*spec);
        if (out.checkpoint)
            reconcileCheckpoint(out.spec, *out.checkpoint);
    } else if (out.checkpoint) {
        out.spec = specFromTensorNames(config, *out.checkpoint);
        applyExternalPlans(out.spec);
    } else {
        return unimplemented(fmt::format("{}: {}; and there is no safetensors checkpoint beside it to read the module "
                                         "tree from",
                                         l.configPath, unknownModelTypeText(config.modelType)));
    }
    out.spec.source = source;
    out.spec.diagnostics.insert(out.spec.diagnostics.begin(), diags.begin(), diags.end());
    return out;
}

} // namespace

void setClassPlanSource(ClassPlanSource source) { classPlanSource() = std::move(source); }

Result<std::string> configText(const OpenedModel& om)
{
    if (!om.configPath.empty())
        return readInputFile(om.configPath, std::int64_t(64) << 20, "a config.json");
    if (om.spec.source.rfind("catalog:", 0) == 0)
        if (const CatalogEntry* e = findCatalogEntry(om.spec.source.substr(8)))
            return std::string(e->configJson);
    return notFound(fmt::format("{}: has no config", om.spec.source));
}

Result<OpenedModel> openModel(const std::string& what)
{
    if (what.empty())
        return invalidArgument("no model given");
    std::error_code ec;
    const fs::path p(what);
    if (fs::is_directory(p, ec)) {
        TP_ASSIGN_OR_RETURN(Located l, locateInFolder(p));
        return openLocated(l, what);
    }
    if (fs::exists(p, ec)) {
        const std::string name = p.filename().string();
        if (isPickleFile(p))
            return pickleRefusal(what);
        Located l;
        const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
        if (name.ends_with(".safetensors") || name.ends_with(".index.json")) {
            l.checkpointPath = what;
            if (fs::exists(dir / "config.json", ec))
                l.configPath = (dir / "config.json").string();
        } else if (name.ends_with(".json")) {
            l.configPath = what;
            if (name == "config.json") {
                // A config.json brings its folder's checkpoint along.
                auto folder = locateInFolder(dir);
                if (folder.ok()) {
                    l.checkpointPath = folder->checkpointPath;
                    l.extraSafetensors = folder->extraSafetensors;
                    l.diags = folder->diags;
                }
            }
        } else {
            return invalidArgument(fmt::format("{}: not a folder, config.json or .safetensors file", what));
        }
        return openLocated(l, what);
    }
    // Not a path: a repo id in the HF cache (only there: an uncached id is an error, never the
    // catalog's copy of its config in disguise), else a catalog id.
    const bool looksLikeRepoId = std::count(what.begin(), what.end(), '/') == 1 && what.front() != '/'
        && what.front() != '.' && what.back() != '/';
    if (looksLikeRepoId) {
        auto snap = resolveHubCache(what);
        if (!snap.ok()) {
            const CatalogEntry* e = findCatalogEntry(what);
            return e ? Status(snap.status().code(), fmt::format("{}; the built-in catalog has its configuration without weights: "
                                                               "open '{}' for that",
                                                               snap.status().message(), e->id))
                     : snap.status();
        }
        TP_ASSIGN_OR_RETURN(Located l, locateInFolder(*snap));
        return openLocated(l, what);
    }
    if (const CatalogEntry* e = findCatalogEntry(what)) {
        OpenedModel out;
        std::vector<Diagnostic> diags;
        TP_ASSIGN_OR_RETURN(ModelConfig config, parseConfig(e->configJson, "catalog:" + e->id, &diags));
        if (!config.dtypeGiven && !e->shippedDtype.empty())
            if (const auto t = dtypeFromTorch(e->shippedDtype))
                useDtype(config, *t, diags, "catalog:" + e->id,
                         fmt::format("{}'s config.json names no dtype; its checkpoint ships in {}, which Transformers' "
                                     "dtype=\"auto\" takes",
                                     e->repoId, e->shippedDtype));
        auto spec = buildModelSpec(config);
        if (!spec)
            return spec.status().withContext("catalog:" + e->id);
        out.spec = std::move(*spec);
        out.spec.source = "catalog:" + e->id;
        out.spec.diagnostics.insert(out.spec.diagnostics.begin(), diags.begin(), diags.end());
        return out;
    }
    std::string ids;
    for (const auto& e : catalog())
        ids += (ids.empty() ? "" : ", ") + e.id;
    return notFound(fmt::format("'{}': no such file or folder, and not a catalog id ({})", what, ids));
}

} // namespace tp
