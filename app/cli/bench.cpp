// bench.cpp — `tpstudio-cli bench load`: time opening a full-size sharded checkpoint's headers.
//              `tpstudio-cli bench plan`: time propagating a plan over a full-size model, step by
//              step; --layers and --keys make the scaling inputs (deep models, long plans).
//              `tpstudio-cli bench gemm`: one rank's Linear GEMMs against the machine's measured peak
//              (cuBLAS bf16 on a GPU; the CPU backend against plain SGEMM, the better of oneDNN and OpenBLAS, with --backend cpu).
#include "commands.h"
#include "interruption.h"
#include "tp/core/json.h"

#include "tp/core/file.h"
#include "tp/core/units.h"
#include "tp/model/catalog.h"
#include "tp/model/loader.h"
#include "tp/model/synthetic.h"
#include "tp/cost/cost_model.h"
#include "tp/plan/plan_io.h"
#include "tp/shard/sharded_graph.h"
#include "tp/runtime/backend.h"
#include "tp/runtime/gpu.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <iostream>
#include <sstream>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace fs = std::filesystem;

namespace tpcli {

using tp::withCommas;

// The (out, in) shapes of rank 0's Linear weights for the model's default plan at tp size T.
std::vector<std::pair<std::int64_t, std::int64_t>> linearShapes(const tp::ModelSpec& spec, int tp)
{
    const tp::ShardedGraph g = tp::shardModel(spec, tp::defaultPlan(spec, tp));
    std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
    for (const auto& p : g.params) {
        const auto& m = spec.modules[static_cast<std::size_t>(p.module)];
        if (m.kind != tp::ModuleKind::Linear || p.shapes[0].size() != 2 || p.path.ends_with(".bias"))
            continue;
        const std::pair<std::int64_t, std::int64_t> s{p.shapes[0][0], p.shapes[0][1]};
        if (s.first > 0 && s.second > 0 && std::find(shapes.begin(), shapes.end(), s) == shapes.end())
            shapes.push_back(s);
    }
    return shapes;
}

namespace {

struct LoadOpts
{
    std::string model = "deepseek-v3";
    std::string dir;
    int repeat = 5;
    bool keep = false;
    bool json = false;
};

int benchLoad(const LoadOpts& o)
{
    const tp::CatalogEntry* entry = tp::findCatalogEntry(o.model);
    if (!entry) {
        fmt::print(stderr, "tpstudio-cli bench load: '{}' is not a catalog id\n", o.model);
        return kBadInput;
    }
    Interruption interruption(true); // before the folder exists: no signal can leave it behind
    std::string dir = o.dir;
    bool made = false;
    if (dir.empty()) {
        std::string tmpl = (fs::temp_directory_path() / "tpstudio-bench-XXXXXX").string();
        if (!::mkdtemp(tmpl.data())) {
            fmt::print(stderr, "tpstudio-cli bench load: cannot create a temporary folder\n");
            return kBadInput;
        }
        dir = tmpl;
        made = true;
    }
    // The synthesized temporary folder (hundreds of sparse files) goes however the verb ends: an
    // error, an interrupt (SIGINT, SIGTERM, SIGHUP, SIGQUIT: checked between steps) or success.
    struct Cleanup
    {
        const std::string& dir;
        bool remove;
        ~Cleanup()
        {
            std::error_code ec;
            if (remove)
                fs::remove_all(dir, ec);
        }
    } cleanup{dir, made && !o.keep};
    const auto interrupted = [&] {
        if (interruption.signal() == 0)
            return false;
        fmt::print(stderr, "tpstudio-cli bench load: interrupted by {}{}\n", strsignal(interruption.signal()),
                   cleanup.remove ? "; the synthesized folder was removed" : "");
        return true;
    };
    std::error_code ec;
    bool synthesize = made;
    if (!made && !fs::exists(fs::path(dir) / "config.json", ec)) {
        // A synthetic checkpoint is hundreds of sparse files: only into a new or empty folder, never
        // beside somebody's files, and never making a mistyped path's parents.
        const fs::path d(dir);
        if (fs::exists(d, ec) && !fs::is_directory(d, ec)) {
            fmt::print(stderr, "tpstudio-cli bench load: --dir {}: exists and is not a folder\n", dir);
            return kBadInput;
        }
        if (fs::is_directory(d, ec) && !fs::is_empty(d, ec)) {
            fmt::print(stderr,
                       "tpstudio-cli bench load: --dir {}: has no config.json and is not empty; a checkpoint is "
                       "synthesized only into a new or empty folder\n",
                       dir);
            return kBadInput;
        }
        if (!fs::is_directory(d, ec) && !fs::create_directory(d, ec)) {
            fmt::print(stderr, "tpstudio-cli bench load: --dir {}: cannot create it ({}); its parent must exist\n", dir,
                       ec ? ec.message() : "unknown error");
            return kBadInput;
        }
        synthesize = true;
    }
    if (synthesize) {
        auto cfg = tp::parseConfig(entry->configJson, entry->id, nullptr);
        auto spec = cfg ? tp::buildModelSpec(*cfg) : tp::Result<tp::ModelSpec>(cfg.status());
        if (!spec) {
            fmt::print(stderr, "tpstudio-cli bench load: {}\n", spec.status().message());
            return kBadInput;
        }
        tp::SyntheticOptions so;
        so.fp8BlockScales = spec->config.quantization.value_or("") == "fp8";
        so.extraLayers = spec->config.family == tp::Family::DeepseekV3 ? 1 : 0; // the MTP layer
        const auto layout = tp::checkpointLayout(*spec, so);
        const auto t0 = std::chrono::steady_clock::now();
        if (auto st = tp::writeSyntheticCheckpoint(dir, layout, so.maxShardBytes, std::string(entry->configJson),
                                                   interruption.token());
            !st.ok()) {
            if (interrupted())
                return 128 + interruption.signal();
            fmt::print(stderr, "tpstudio-cli bench load: {}\n", st.message());
            return kBadInput;
        }
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (interrupted())
            return 128 + interruption.signal();
        if (!o.json)
            fmt::print("synthesized {} tensors of {} (sparse) in {} ({:.0f} ms)\n", withCommas(std::int64_t(layout.size())),
                       entry->id, dir, ms);
    }

    std::vector<double> times;
    std::size_t tensors = 0, files = 0, diags = 0;
    std::int64_t params = 0;
    for (int i = 0; i < std::max(1, o.repeat); ++i) {
        if (interrupted())
            return 128 + interruption.signal();
        const auto t0 = std::chrono::steady_clock::now();
        auto om = tp::openModel(dir);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!om) {
            fmt::print(stderr, "tpstudio-cli bench load: {}\n", om.status().message());
            return kBadInput;
        }
        times.push_back(s);
        tensors = om->checkpoint ? om->checkpoint->tensors.size() : 0;
        files = om->checkpoint ? om->checkpoint->files.size() : 0;
        diags = om->spec.diagnostics.size();
        params = om->spec.parameterCount();
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    if (o.json) {
        nlohmann::ordered_json j;
        j["bench"] = "load";
        j["model"] = entry->id;
        j["files"] = files;
        j["tensors"] = tensors;
        j["parameters"] = params;
        j["repeat"] = times.size();
        j["min_s"] = times.front();
        j["median_s"] = median;
        j["max_s"] = times.back();
        std::cout << j.dump(2, ' ', false, tp::kReplaceInvalidUtf8) << "\n";
    } else {
        fmt::print("{:>8} {:>10} {:>16} {:>10} {:>10} {:>10}\n", "files", "tensors", "parameters", "min(s)",
                   "median(s)", "max(s)");
        fmt::print("{:>8} {:>10} {:>16} {:>10.3f} {:>10.3f} {:>10.3f}\n", files, withCommas(std::int64_t(tensors)),
                   withCommas(params), times.front(), median, times.back());
        fmt::print("open = config + {} safetensors headers + module tree + reconciliation ({} diagnostics)\n", files,
                   diags);
    }
    return kOk;
}

struct PlanBenchOpts
{
    std::string model = "deepseek-v3";
    std::string hardware = "h100-sxm-8";
    int tp = 8;
    int repeat = 20;
    std::int64_t layers = 0; // > 0: num_hidden_layers overridden
    std::int64_t keys = 0;   // extra indexed keys "model.layers.<i>.…", i = 0…keys-1
    bool json = false;
};

double secondsSince(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The model's config with num_hidden_layers = `layers` (layer_types repeated to that length).
tp::Result<tp::ModelSpec> withLayers(const tp::OpenedModel& om, const std::string& what, std::int64_t layers)
{
    std::string text;
    if (const tp::CatalogEntry* e = tp::findCatalogEntry(what); e && om.configPath.empty())
        text = std::string(e->configJson);
    else if (!om.configPath.empty()) {
        TP_ASSIGN_OR_RETURN(text, tp::readInputFile(om.configPath, std::int64_t(16) << 20, "a config"));
    } else
        return tp::invalidArgument(fmt::format("--layers: '{}' has no config.json to change", what));
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
    if (!j.is_object())
        return tp::invalidArgument(fmt::format("--layers: the config of '{}' is not a JSON object", what));
    nlohmann::ordered_json& c = j.contains("text_config") && j["text_config"].is_object() ? j["text_config"] : j;
    c["num_hidden_layers"] = layers;
    if (c.contains("layer_types") && c["layer_types"].is_array() && !c["layer_types"].empty()) {
        const nlohmann::ordered_json pattern = c["layer_types"];
        c["layer_types"] = nlohmann::ordered_json::array();
        for (std::int64_t i = 0; i < layers; ++i)
            c["layer_types"].push_back(pattern[static_cast<std::size_t>(i) % pattern.size()]);
    }
    TP_ASSIGN_OR_RETURN(tp::ModelConfig cfg, tp::parseConfig(j.dump(), what, nullptr));
    TP_ASSIGN_OR_RETURN(tp::ModelSpec spec, tp::buildModelSpec(cfg));
    spec.source = om.spec.source;
    return spec;
}

// `keys` indexed copies of the plan's first per-layer key, as a plan file holds them
// ({"tp_plan": {"model.layers.0.self_attn.q_proj": "colwise", …}}); indices past the last layer
// match nothing, as in a plan written for a deeper model. Empty when the text would pass
// `maxBytes` (it is not made: a million keys took 2.7 GB to parse).
std::string extraKeysJson(const tp::Plan& plan, std::int64_t keys, std::size_t maxBytes)
{
    std::string pattern = "model.layers.*.self_attn.q_proj", style = "colwise";
    for (const auto& e : plan.entries)
        if (const auto star = e.key.find(".*."); star != std::string::npos) {
            pattern = e.key;
            style = e.style;
            break;
        }
    const auto star = pattern.find(".*.");
    std::string out = "{\"tp_plan\": {";
    for (std::int64_t i = 0; i < keys; ++i) {
        out += fmt::format("{}\"{}.{}.{}\": \"{}\"", i ? ", " : "", pattern.substr(0, star), i, pattern.substr(star + 3),
                           style);
        if (out.size() > maxBytes)
            return {};
    }
    return out + "}}\n";
}

struct Step
{
    const char* name;
    const char* json;
    std::vector<double> seconds;
    double median() const { return seconds[seconds.size() / 2]; }
};

int benchPlan(const PlanBenchOpts& o)
{
    auto om = tp::openModel(o.model);
    if (!om) {
        fmt::print(stderr, "tpstudio-cli bench plan: {}\n", om.status().message());
        return kBadInput;
    }
    if (o.layers > 0) {
        // Refused before the deeper model is built: its parameters (the limit every config has) and
        // its module tree in memory, scaled from this model's per layer.
        const double scale = double(o.layers) / double(std::max<std::int64_t>(1, om->spec.config.numLayers));
        const double params = double(om->spec.parameterCount()) * scale;
        if (params > 0x1p45) {
            fmt::print(stderr, "tpstudio-cli bench plan: --layers {}: about {:.3g} parameters, more than the 2^45 a config "
                               "may describe\n",
                       o.layers, params);
            return kBadInput;
        }
        if (const std::string big = treeTooLarge(std::int64_t(double(om->spec.modules.size()) * scale),
                                                 fmt::format("--layers {}", o.layers), true);
            !big.empty()) {
            fmt::print(stderr, "tpstudio-cli bench plan: {}\n", big);
            return kBadInput;
        }
        auto spec = withLayers(*om, o.model, o.layers);
        if (!spec) {
            fmt::print(stderr, "tpstudio-cli bench plan: {}\n", spec.status().message());
            return kBadInput;
        }
        om->spec = std::move(*spec);
    }
    auto hw = tp::findHardware(o.hardware);
    if (!hw) {
        fmt::print(stderr, "tpstudio-cli bench plan: {}\n", hw.status().message());
        return kBadInput;
    }
    const tp::Plan defaults = tp::defaultPlan(om->spec, o.tp);
    const std::string keysText = o.keys > 0 ? extraKeysJson(defaults, o.keys, std::size_t(16) << 20) : std::string();
    if (o.keys > 0 && keysText.empty()) {
        fmt::print(stderr, "tpstudio-cli bench plan: --keys {}: the plan text would be more than the 16 MiB a plan file may "
                           "hold\n",
                   o.keys);
        return kBadInput;
    }
    // Steps as `plan validate/preview --plan FILE` takes them; the first two only with --keys.
    Step parse{"parse plan file", "parse_median_s", {}}, resolve{"merge with the default plan", "resolve_median_s", {}},
        match{"key matching", "match_median_s", {}}, graph{"layer graph", "graph_median_s", {}},
        propagate{"layouts + shards + collectives + memory", "propagation_median_s", {}},
        cost{"cost model", "cost_median_s", {}};
    const std::string costName = fmt::format("cost model ({})", hw->id);
    cost.name = costName.c_str();
    std::vector<double> shard;
    tp::ShardedGraph g;
    tp::Plan plan = defaults;
    for (int i = 0; i < o.repeat; ++i) {
        if (o.keys > 0) {
            auto t0 = std::chrono::steady_clock::now();
            auto p = tp::parsePlanJson(keysText, "--keys", tp::VersionProfile::G3);
            parse.seconds.push_back(secondsSince(t0));
            if (!p) {
                fmt::print(stderr, "tpstudio-cli bench plan: {}\n", p.status().message());
                return kBadInput;
            }
            t0 = std::chrono::steady_clock::now();
            plan = tp::resolveOverrides(om->spec, *p);
            resolve.seconds.push_back(secondsSince(t0));
            plan.tpSize = o.tp;
        }
        auto t0 = std::chrono::steady_clock::now();
        tp::LayerGraph lg = tp::buildLayerGraph(om->spec);
        graph.seconds.push_back(secondsSince(t0));
        tp::ShardTimings st;
        g = tp::shardModel(om->spec, plan, {}, std::move(lg), &st);
        shard.push_back(secondsSince(t0));
        match.seconds.push_back(st.matchSeconds);
        propagate.seconds.push_back(st.propagateSeconds);
        t0 = std::chrono::steady_clock::now();
        const tp::CostReport c = tp::estimateCost(om->spec, g, *hw);
        cost.seconds.push_back(secondsSince(t0));
        if (c.nodes.size() != g.graph.nodes.size())
            return kBadInput;
    }
    std::vector<Step*> steps;
    if (o.keys > 0)
        steps = {&parse, &resolve};
    for (Step* s : {&match, &graph, &propagate, &cost})
        steps.push_back(s);
    for (Step* s : steps)
        std::sort(s->seconds.begin(), s->seconds.end());
    std::sort(shard.begin(), shard.end());
    const double med = shard[shard.size() / 2], costMed = cost.median();
    if (o.json) {
        nlohmann::ordered_json j;
        j["bench"] = "plan";
        j["model"] = om->spec.source;
        j["tp_size"] = o.tp;
        j["layers"] = om->spec.config.numLayers;
        j["plan_keys"] = plan.entries.size();
        j["modules"] = om->spec.modules.size();
        j["parameters"] = g.params.size();
        j["graph_nodes"] = g.graph.nodes.size();
        j["collectives"] = g.collectives.size();
        j["diagnostics"] = g.diagnostics.size();
        j["key_lookups"] = g.match.keyLookups;
        j["repeat"] = shard.size();
        j["propagate_min_s"] = shard.front();
        j["propagate_median_s"] = med;
        j["cost_median_s"] = costMed;
        for (const Step* s : steps)
            if (s != &cost)
                j[s->json] = s->median();
        std::cout << j.dump(2, ' ', false, tp::kReplaceInvalidUtf8) << "\n";
        return kOk;
    }
    fmt::print("{} at T={}: {} layers, {} plan keys, {} modules, {} parameters, {} graph nodes, {} collectives, {} "
               "diagnostics\n",
               om->spec.className, o.tp, withCommas(om->spec.config.numLayers),
               withCommas(std::int64_t(plan.entries.size())), withCommas(std::int64_t(om->spec.modules.size())),
               withCommas(std::int64_t(g.params.size())), withCommas(std::int64_t(g.graph.nodes.size())),
               withCommas(std::int64_t(g.collectives.size())), withCommas(std::int64_t(g.diagnostics.size())));
    fmt::print("{:<44} {:>10} {:>10} {:>10}\n", "", "min(ms)", "median(ms)", "max(ms)");
    fmt::print("{:<44} {:>10.2f} {:>10.2f} {:>10.2f}\n", "match + graph + layouts + shards + memory",
               shard.front() * 1e3, med * 1e3, shard.back() * 1e3);
    fmt::print("{:<44} {:>10.2f} {:>10.2f} {:>10.2f}\n", costName, cost.seconds.front() * 1e3, costMed * 1e3,
               cost.seconds.back() * 1e3);
    fmt::print("by step:\n");
    for (const Step* s : steps)
        fmt::print("  {:<42} {:>10.2f} {:>10.2f} {:>10.2f}\n", s->name, s->seconds.front() * 1e3, s->median() * 1e3,
                   s->seconds.back() * 1e3);
    return kOk;
}

struct GemmOpts
{
    std::string model = "llama-3.1-8b";
    int tp = 1;
    std::int64_t tokens = 512;
    int device = 0;
    int iters = 20;
    bool json = false;
    std::string backend = "cuda";
    std::string dtype = "f32";
    int rounds = 3;
    std::string peakOnly; // internal: "M:N:K,…" — print plain SGEMM GFLOP/s of these shapes as JSON
};

struct Shape
{
    std::int64_t m = 0, n = 0, k = 0;
    double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

// Plain SGEMM GFLOP/s of each shape, in this process.
tp::Result<std::vector<double>> sgemmPeaks(const std::vector<Shape>& shapes, int iters)
{
    std::vector<double> out;
    for (const Shape& s : shapes) {
        TP_ASSIGN_OR_RETURN(double g, tp::cpuSgemmGflops(s.m, s.n, s.k, iters));
        out.push_back(g);
    }
    return out;
}

// The variables that cap the CPU backend's math below this CPU's widest kernels.
constexpr const char* kIsaCaps[] = {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OPENBLAS_CORETYPE"};

std::string isaCapsSet()
{
    std::string set;
    for (const char* var : kIsaCaps)
        if (const char* v = std::getenv(var); v && *v)
            set += fmt::format("{}{}={}", set.empty() ? "" : ", ", var, v);
    return set;
}

// The same in a child process (this program, `bench gemm --peak-only`) without those variables, so
// that oneDNN and OpenBLAS pick the widest kernels this CPU runs.
tp::Result<std::vector<double>> sgemmPeaksUnforced(const std::vector<Shape>& shapes, int iters)
{
    std::string list;
    for (const Shape& s : shapes)
        list += fmt::format("{}{}:{}:{}", list.empty() ? "" : ",", s.m, s.n, s.k);
    const std::string self = fs::read_symlink("/proc/self/exe").string(), itersArg = std::to_string(iters);
    std::vector<std::string> args{self, "bench", "gemm", "--backend", "cpu", "--iters", itersArg, "--peak-only", list};
    std::vector<char*> argv, envp;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    for (char** e = environ; *e; ++e)
        if (std::none_of(std::begin(kIsaCaps), std::end(kIsaCaps),
                         [&](const char* var) { return std::string_view(*e).rfind(std::string(var) + "=", 0) == 0; }))
            envp.push_back(*e);
    envp.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0)
        return tp::Status(tp::StatusCode::Internal, "bench gemm: cannot create a pipe for the peak measurement");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, self.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    std::string text;
    if (rc == 0) {
        char buf[4096];
        for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) // to the end, so that the child never blocks
            if (text.size() < (1 << 20))
                text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    if (rc != 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return tp::Status(tp::StatusCode::Internal, "bench gemm: the peak measurement without the ISA caps failed");
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_array() || j.size() != shapes.size())
        return tp::Status(tp::StatusCode::Internal, "bench gemm: the peak measurement printed no result");
    std::vector<double> out;
    for (const auto& v : j)
        out.push_back(v.is_number() ? v.get<double>() : 0.0);
    return out;
}

// The CPU backend's GEMM (Backend::gemm, what a forward calls, in the run's storage dtype) on the
// shapes rank 0 runs, against plain SGEMM on the same shapes with the best kernel this machine
// has; rounds interleave the two (the machine may be shared), medians over rounds.
int benchGemmCpu(const GemmOpts& o)
{
    const auto say = [](const tp::Status& s) {
        fmt::print(stderr, "tpstudio-cli bench gemm: {}\n", s.message());
        return int(kBadInput);
    };
    if (!o.peakOnly.empty()) { // the child of sgemmPeaksUnforced
        dieWithParent();
        std::vector<Shape> shapes;
        std::istringstream in(o.peakOnly);
        for (std::string item; std::getline(in, item, ',');) {
            Shape s;
            char c1 = 0, c2 = 0;
            std::istringstream f(item);
            if (!(f >> s.m >> c1 >> s.n >> c2 >> s.k) || c1 != ':' || c2 != ':' || !f.eof())
                return say(tp::invalidArgument(fmt::format("--peak-only: '{}' is not M:N:K", item)));
            shapes.push_back(s);
        }
        auto g = sgemmPeaks(shapes, o.iters);
        if (!g)
            return say(g.status());
        std::cout << nlohmann::json(*g).dump() << "\n";
        return kOk;
    }
    auto om = tp::openModel(o.model);
    if (!om)
        return say(om.status());
    const tp::DType dt = o.dtype == "bf16" ? tp::DType::BF16 : o.dtype == "f16" ? tp::DType::F16 : tp::DType::F32;
    auto be = tp::makeCpuBackend(dt);
    if (!be)
        return say(be.status());
    std::vector<Shape> shapes;
    for (const auto& [n, k] : linearShapes(om->spec, o.tp))
        shapes.push_back({o.tokens, n, k});
    shapes.push_back({2048, 2048, 2048}); // the square: the peak as usually quoted
    // Operands of the largest shape, reused for every shape.
    std::int64_t xFloats = 0, wFloats = 0, yFloats = 0, scratch = 0;
    for (const Shape& s : shapes) {
        xFloats = std::max(xFloats, s.m * s.k);
        wFloats = std::max(wFloats, s.n * s.k);
        yFloats = std::max(yFloats, s.m * s.n);
        scratch = std::max(scratch, (*be)->gemmScratchBytes(s.m, s.k, s.n));
    }
    const std::int64_t need = tp::dtypeBytes(dt, xFloats + wFloats + yFloats) + scratch;
    if (need > tp::hostMemoryAvailable())
        return say(tp::Status(tp::StatusCode::ResourceExhausted, fmt::format("the operands need {}, more than this host has available",
                                                                               tp::humanBytes(double(need)))));
    std::vector<tp::DeviceBuffer> bufs;
    for (std::int64_t bytes : {tp::dtypeBytes(dt, xFloats), tp::dtypeBytes(dt, wFloats), tp::dtypeBytes(dt, yFloats), scratch}) {
        auto b = (*be)->allocate(bytes);
        if (!b)
            return say(b.status());
        std::memset(b->data(), 0, static_cast<std::size_t>(std::max<std::int64_t>(bytes, 0)));
        bufs.push_back(std::move(*b));
    }
    auto engineGflops = [&](const Shape& s) -> tp::Result<double> {
        using tp::Tensor;
        const Tensor x = Tensor::contiguous(bufs[0].data(), dt, s.m, s.k, tp::DeviceKind::Cpu);
        const Tensor w = Tensor::contiguous(bufs[1].data(), dt, s.n, s.k, tp::DeviceKind::Cpu);
        const Tensor y = Tensor::contiguous(bufs[2].data(), dt, s.m, s.n, tp::DeviceKind::Cpu);
        const Tensor sc = Tensor::contiguous(bufs[3].data(), tp::DType::U8, 1, std::max<std::int64_t>(bufs[3].bytes(), 1), tp::DeviceKind::Cpu);
        std::vector<double> seconds;
        for (int i = -1; i < o.iters; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            TP_RETURN_IF_ERROR((*be)->gemm(x, w, nullptr, y, sc));
            if (i >= 0)
                seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
        return s.flops() / seconds[seconds.size() / 2] / 1e9;
    };
    const std::string caps = isaCapsSet();
    const bool unforce = !caps.empty();
    std::vector<std::vector<double>> eng(shapes.size()), peak(shapes.size());
    for (int r = 0; r < o.rounds; ++r) { // in this process shape by shape, engine then peak; else pass by pass
        for (std::size_t i = 0; i < shapes.size(); ++i) {
            auto g = engineGflops(shapes[i]);
            if (!g)
                return say(g.status());
            eng[i].push_back(*g);
            if (!unforce) {
                auto p = tp::cpuSgemmGflops(shapes[i].m, shapes[i].n, shapes[i].k, o.iters);
                if (!p)
                    return say(p.status());
                peak[i].push_back(*p);
            }
        }
        if (unforce) {
            auto p = sgemmPeaksUnforced(shapes, o.iters);
            if (!p)
                return say(p.status());
            for (std::size_t i = 0; i < shapes.size(); ++i)
                peak[i].push_back((*p)[i]);
        }
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const std::string peakKernel = unforce ? fmt::format("a child process without {} (the libraries' own pick for this CPU)", caps)
                                           : "this process";
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    double engSeconds = 0, peakSeconds = 0;
    if (!o.json)
        fmt::print("{} at T={}: CPU backend GEMM ({} storage, {}) against plain SGEMM ({}), one thread, median of {} rounds\n"
                   "{:>8} {:>8} {:>8} {:>14} {:>14} {:>8}\n",
                   om->spec.className, o.tp, o.dtype, tp::cpuKernelsInUse(), peakKernel, o.rounds, "M", "N", "K", "engine GFLOP/s",
                   "peak GFLOP/s", "engine %");
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        const double e = median(eng[i]), p = median(peak[i]);
        const bool square = i + 1 == shapes.size();
        if (!square) { // the forward's shapes: weighted by their flops
            engSeconds += shapes[i].flops() / e;
            peakSeconds += shapes[i].flops() / p;
        }
        rows.push_back({{"m", shapes[i].m}, {"n", shapes[i].n}, {"k", shapes[i].k}, {"engine_gflops", e}, {"peak_gflops", p},
                        {"fraction_of_peak", e / p}, {"square", square}});
        if (!o.json)
            fmt::print("{:>8} {:>8} {:>8} {:>14.1f} {:>14.1f} {:>7.1f}%{}\n", shapes[i].m, shapes[i].n, shapes[i].k, e, p, 100 * e / p,
                       square ? "  (square, not in the total)" : "");
    }
    const double fraction = peakSeconds / engSeconds;
    if (o.json)
        std::cout << nlohmann::ordered_json({{"bench", "gemm"}, {"backend", "cpu"}, {"model", o.model}, {"tp", o.tp}, {"dtype", o.dtype},
                                             {"kernels", tp::cpuKernelsInUse()}, {"peak_kernel", peakKernel}, {"rounds", o.rounds},
                                             {"shapes", rows}, {"fraction_of_peak", fraction}})
                         .dump(2, ' ', false, tp::kReplaceInvalidUtf8)
                  << "\n";
    else
        fmt::print("engine GEMM time at {:.1f}% of the peak's on these shapes (flop-weighted)\n", 100 * fraction);
    if (const std::string w = tp::cpuMathWarning(); !w.empty())
        fmt::print(stderr, "warning: {}\n", w);
    return kOk;
}

// cuBLAS bf16 GEMMs with the shapes one rank runs for a model at tp size T, against a large square
// GEMM as the measured peak.
int benchGemm(const GemmOpts& o)
{
    if (o.backend == "cpu")
        return benchGemmCpu(o);
    auto inv = tp::gpu::probe();
    if (!inv) {
        fmt::print(stderr, "tpstudio-cli bench gemm: {}\n", inv.status().message());
        return kBadInput;
    }
    if (o.device >= static_cast<int>(inv->devices.size())) {
        fmt::print(stderr, "tpstudio-cli bench gemm: --device {}: {} CUDA device(s) visible\n", o.device, inv->devices.size());
        return kBadInput;
    }
    auto om = tp::openModel(o.model);
    if (!om) {
        fmt::print(stderr, "tpstudio-cli bench gemm: {}\n", om.status().message());
        return kBadInput;
    }
    const auto shapes = linearShapes(om->spec, o.tp); // (out, in) on rank 0
    auto peak = tp::gpu::benchGemmBf16(o.device, 8192, 8192, 8192, o.iters);
    if (!peak) {
        fmt::print(stderr, "tpstudio-cli bench gemm: {}\n", peak.status().message());
        return kBadInput;
    }
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    if (!o.json)
        fmt::print("{} on {} (device {}): cuBLAS bf16, fp32 accumulate; peak 8192^3 = {:.1f} TFLOP/s\n{:>8} {:>8} {:>8} {:>10} {:>8}\n",
                   om->spec.className, inv->devices[static_cast<std::size_t>(o.device)].name, o.device, peak->tflops, "M",
                   "N", "K", "TFLOP/s", "% peak");
    for (const auto& [n, k] : shapes) {
        auto t = tp::gpu::benchGemmBf16(o.device, o.tokens, n, k, o.iters);
        if (!t) {
            fmt::print(stderr, "tpstudio-cli bench gemm: {}\n", t.status().message());
            return kBadInput;
        }
        rows.push_back({{"m", o.tokens}, {"n", n}, {"k", k}, {"seconds", t->seconds}, {"tflops", t->tflops},
                        {"fraction_of_peak", t->tflops / peak->tflops}});
        if (!o.json)
            fmt::print("{:>8} {:>8} {:>8} {:>10.1f} {:>7.1f}%\n", o.tokens, n, k, t->tflops, 100 * t->tflops / peak->tflops);
    }
    if (o.json)
        std::cout << nlohmann::ordered_json({{"bench", "gemm"}, {"model", o.model}, {"tp", o.tp}, {"device", inv->devices[static_cast<std::size_t>(o.device)].name},
                                             {"peak_tflops", peak->tflops}, {"shapes", rows}}).dump(2, ' ', false, tp::kReplaceInvalidUtf8) << "\n";
    return kOk;
}

} // namespace

std::function<int()> addBench(CLI::App& app)
{
    auto* bench = app.add_subcommand("bench", "Benchmarks");
    bench->require_subcommand(1);
    auto o = std::make_shared<LoadOpts>();
    auto* load = bench->add_subcommand(
        "load", "Time opening a full-size sharded checkpoint (headers only). Without --dir, a sparse checkpoint with "
                "the model's real tensor layout is synthesized in a temporary folder");
    load->add_option("--model", o->model, "Catalog id whose layout to synthesize")->capture_default_str();
    load->add_option("--dir", o->dir, "Open this folder; one without config.json must be new or empty, and the checkpoint is synthesized into it");
    load->add_option("--repeat", o->repeat, "Timed repetitions")->capture_default_str()->check(CLI::Range(1, 1000));
    load->add_flag("--keep", o->keep, "Keep the synthesized temporary folder");
    load->add_flag("--json", o->json, "Print JSON");

    auto po = std::make_shared<PlanBenchOpts>();
    auto* plan = bench->add_subcommand(
        "plan", "Time applying the model's default plan: key matching, the layer graph, layout propagation, per-rank "
                "shards and memory (the planner's live-preview path), then the cost model");
    plan->add_option("--model", po->model, "Model: catalog id, folder, config.json, …")->capture_default_str();
    plan->add_option("--tp", po->tp, "Tensor-parallel size")->check(CLI::Range(1, 4096))->capture_default_str();
    plan->add_option("--hardware", po->hardware, "Hardware profile for the cost model")->capture_default_str();
    plan->add_option("--repeat", po->repeat, "Timed repetitions")->check(CLI::Range(1, 10000))->capture_default_str();
    plan->add_option("--layers", po->layers,
                     "Scaling input: rebuild the model with this num_hidden_layers (layer_types repeated). Time "
                     "grows linearly: compare N and 2N")
        ->check(CLI::Range(1, 131072));
    plan->add_option("--keys", po->keys,
                     "Scaling input: add this many indexed keys (model.layers.<i>.… for i = 0…N-1, past the last "
                     "layer they match nothing) as a plan file holds them; times parsing and merging them too")
        ->check(CLI::Range(1, 1000000));
    plan->add_flag("--json", po->json, "Print JSON");
    auto go = std::make_shared<GemmOpts>();
    auto* gemm = bench->add_subcommand(
        "gemm", "GEMM throughput for the shapes one rank of a model runs at a tp size, against the machine's measured peak: "
                "cuBLAS bf16 against a 8192^3 GEMM (needs a GPU), or with --backend cpu the CPU backend's GEMM against "
                "plain SGEMM on the same shapes (the better of oneDNN and OpenBLAS, with the widest kernels this CPU runs), rounds interleaved");
    gemm->add_option("--backend", go->backend, "cuda or cpu")->check(CLI::IsMember({"cuda", "cpu"}))->capture_default_str();
    gemm->add_option("--dtype", go->dtype, "CPU backend storage: f32, bf16 or f16")->check(CLI::IsMember({"f32", "bf16", "f16"}))->capture_default_str();
    gemm->add_option("--rounds", go->rounds, "CPU: interleaved rounds (engine, then peak), medians")->check(CLI::Range(1, 100))->capture_default_str();
    gemm->add_option("--peak-only", go->peakOnly, "Internal: plain SGEMM GFLOP/s of M:N:K,… as JSON")->group("");
    gemm->add_option("--model", go->model, "Model whose Linear shapes to time")->capture_default_str();
    gemm->add_option("--tp", go->tp, "Tensor-parallel size (rank 0's shards)")->check(CLI::Range(1, 4096))->capture_default_str();
    gemm->add_option("--tokens", go->tokens, "Rows M (batch × sequence)")->check(CLI::Range(1, 1 << 20))->capture_default_str();
    gemm->add_option("--device", go->device, "CUDA device")->check(CLI::Range(0, 255))->capture_default_str();
    gemm->add_option("--iters", go->iters, "Timed repetitions per shape")->check(CLI::Range(1, 10000))->capture_default_str();
    gemm->add_flag("--json", go->json, "Print JSON");
    auto comm = addBenchComm(bench);
    return [o, load, po, plan, go, gemm, comm] {
        if (load->parsed())
            return benchLoad(*o);
        if (plan->parsed())
            return benchPlan(*po);
        if (gemm->parsed())
            return benchGemm(*go);
        if (const int rc = comm(); rc >= 0)
            return rc;
        return int(kUsage);
    };
}

} // namespace tpcli
