// run_record.cpp — run records and their reporters.
#include "tp/profile/run_record.h"
#include "tp/core/json.h"

#include "tp/core/units.h"
#include "tp/graph/layer_graph.h"
#include "tp/profile/host_load.h"
#include "tp/profile/nvtx.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <sys/utsname.h>
#include <thread>
#include <unistd.h>

namespace tp {

std::string nvtxName(const std::string& nodeName, int layer)
{
    if (layer < 0)
        return nodeName;
    const std::string prefix = fmt::format("model.layers.{}", layer);
    if (!nodeName.starts_with(prefix))
        return nodeName;
    std::string rest = nodeName.substr(prefix.size());
    if (!rest.empty() && (rest[0] == '.' || rest[0] == ':'))
        rest.erase(0, 1);
    return fmt::format("layer {}/{}", layer, rest);
}

Provenance collectProvenance()
{
    Provenance p;
    std::ifstream cpu("/proc/cpuinfo");
    for (std::string line; std::getline(cpu, line);)
        if (line.starts_with("model name")) {
            p.cpuModel = line.substr(line.find(':') + 2);
            break;
        }
    p.logicalCores = static_cast<int>(std::thread::hardware_concurrency());
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0)
        p.hostname = host;
    utsname u{};
    if (::uname(&u) == 0)
        p.os = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
#if defined(__clang__)
    p.compiler = fmt::format("clang {}", __clang_version__);
#elif defined(__GNUC__)
    p.compiler = fmt::format("gcc {}", __VERSION__);
#endif
    p.libraries = fmt::format("fmt {}.{}.{}, nlohmann-json {}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100,
                              FMT_VERSION % 100, NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                              NLOHMANN_JSON_VERSION_PATCH);
#ifdef TP_VERSION
    p.tpstudio = TP_VERSION;
#endif
    const std::time_t now = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    p.startedAt = buf;
    return p;
}

double percentile(std::vector<double> v, double p)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(std::clamp(p, 0.0, 1.0) * static_cast<double>(v.size()));
    return v[std::min(i, v.size() - 1)];
}

namespace {

PhaseTiming foldSpans(const ShardedGraph& g, const std::vector<Span>& spans, int tp)
{
    PhaseTiming out;
    const std::size_t L = layerSlots(g.graph);
    std::vector<std::vector<double>> compute(static_cast<std::size_t>(tp), std::vector<double>(L)),
        comm(static_cast<std::size_t>(tp), std::vector<double>(L));
    // Each rank's comm span starts when it arrives at the collective; a collective's index names one
    // occurrence within a forward, so the last arrival per index is when its transfer can start.
    std::vector<double> lastArrival(g.collectives.size(), -std::numeric_limits<double>::infinity());
    for (const Span& s : spans)
        if (s.collective >= 0 && static_cast<std::size_t>(s.collective) < lastArrival.size())
            lastArrival[static_cast<std::size_t>(s.collective)] = std::max(lastArrival[static_cast<std::size_t>(s.collective)], s.startUs);
    for (const Span& s : spans) {
        const GraphNode& n = g.graph.nodes[static_cast<std::size_t>(s.node)];
        RecordedSpan rs;
        rs.rank = s.rank;
        rs.layer = s.layer;
        rs.startUs = s.startUs;
        rs.endUs = s.endUs;
        rs.bytes = s.bytes;
        const double d = s.endUs - s.startUs;
        if (s.collective >= 0) {
            const Collective& c = g.collectives[static_cast<std::size_t>(s.collective)];
            rs.name = fmt::format("{}/{}", n.name, collectiveName(c.kind));
            rs.kind = "comm";
            rs.op = collectiveName(c.kind);
            rs.waitUs = std::clamp(lastArrival[static_cast<std::size_t>(s.collective)] - s.startUs, 0.0, std::max(0.0, d));
            comm[static_cast<std::size_t>(s.rank)][static_cast<std::size_t>(s.layer + 1)] += d;
        } else {
            rs.name = n.name;
            rs.kind = "compute";
            rs.op = opKindName(n.kind);
            compute[static_cast<std::size_t>(s.rank)][static_cast<std::size_t>(s.layer + 1)] += d;
        }
        out.spans.push_back(std::move(rs));
    }
    for (std::size_t l = 0; l < L; ++l) {
        LayerTiming t;
        t.layer = static_cast<int>(l) - 1;
        for (std::size_t r = 0; r < compute.size(); ++r) {
            t.computeUs = std::max(t.computeUs, compute[r][l]);
            t.commUs = std::max(t.commUs, comm[r][l]);
        }
        out.layers.push_back(t);
    }
    double worst = -1;
    for (std::size_t r = 0; r < compute.size(); ++r) {
        double c = 0, m = 0;
        for (std::size_t l = 0; l < L; ++l) {
            c += compute[r][l];
            m += comm[r][l];
        }
        if (c + m > worst) {
            worst = c + m;
            out.commShare = c + m > 0 ? m / (c + m) : 0;
        }
    }
    return out;
}

// The spread of each layer's samples ([slot][sample], slot = layer + 1) onto its timing.
void addSpread(std::vector<LayerTiming>& layers, const std::vector<std::vector<double>>& samples)
{
    for (LayerTiming& t : layers) {
        const auto slot = static_cast<std::size_t>(t.layer + 1);
        if (slot >= samples.size() || samples[slot].empty())
            continue;
        const auto& v = samples[slot];
        t.hasSpread = true;
        t.minUs = *std::min_element(v.begin(), v.end());
        t.maxUs = *std::max_element(v.begin(), v.end());
        t.medianUs = percentile(v, 0.5);
    }
}

} // namespace

void addRun(RunRecord& record, const ShardedGraph& g, const Measurement& result)
{
    TpRun run;
    run.tp = result.tpSize;
    run.loadSeconds = result.loadSeconds;
    run.hostOtherCores = result.hostOtherCores;
    run.iterationSeconds = result.iterationSeconds;
    run.memory = result.footprint;
    run.medianSeconds = percentile(result.iterationSeconds, 0.5);
    const double tokens = static_cast<double>(record.settings.batch * record.settings.seq);
    run.tokensPerSecond = run.medianSeconds > 0 ? tokens / run.medianSeconds : 0;
    PhaseTiming prefill = foldSpans(g, result.spans, run.tp);
    run.layers = std::move(prefill.layers);
    addSpread(run.layers, result.layerSamplesUs);
    run.spans = std::move(prefill.spans);
    run.commShare = prefill.commShare;

    const DecodeMeasurement& dm = result.decode;
    if (dm.steps > 0) {
        DecodeRun& d = run.decode;
        d.steps = dm.steps;
        d.stepSeconds = dm.stepSeconds;
        d.ttftSeconds = run.medianSeconds;
        d.itlSeconds = percentile(dm.stepSeconds, 0.5);
        d.itlP10Seconds = percentile(dm.stepSeconds, 0.1);
        d.itlP90Seconds = percentile(dm.stepSeconds, 0.9);
        d.tokensPerSecond = d.itlSeconds > 0 ? static_cast<double>(dm.batch) / d.itlSeconds : 0;
        d.spanStep = dm.spanStep;
        PhaseTiming step = foldSpans(g, dm.spans, run.tp);
        d.layers = std::move(step.layers);
        addSpread(d.layers, dm.layerSamplesUs);
        d.spans = std::move(step.spans);
        d.commShare = step.commShare;
        d.generated = dm.generated;
    }
    for (const auto& r : record.runs)
        if (r.tp == 1) {
            if (r.medianSeconds > 0 && run.medianSeconds > 0)
                run.speedup = r.medianSeconds / run.medianSeconds;
            if (r.decode.itlSeconds > 0 && run.decode.itlSeconds > 0)
                run.decode.speedup = r.decode.itlSeconds / run.decode.itlSeconds;
        }
    if (run.tp == 1) {
        run.speedup = 1.0;
        if (run.decode.steps > 0)
            run.decode.speedup = 1.0;
    }
    record.runs.push_back(std::move(run));
}

namespace {

constexpr const char* kSchema = "tpstudio.run/2";

nlohmann::ordered_json layersJson(const std::vector<LayerTiming>& layers)
{
    auto out = nlohmann::ordered_json::array();
    for (const auto& l : layers) {
        nlohmann::ordered_json x = {{"layer", l.layer}, {"compute_us", l.computeUs}, {"comm_us", l.commUs}};
        if (l.hasSpread)
            x["spread_us"] = {l.minUs, l.medianUs, l.maxUs};
        out.push_back(std::move(x));
    }
    return out;
}

nlohmann::ordered_json spansJson(const std::vector<RecordedSpan>& spans)
{
    auto out = nlohmann::ordered_json::array();
    for (const auto& sp : spans) {
        nlohmann::ordered_json x{{"rank", sp.rank}, {"name", sp.name}, {"kind", sp.kind}, {"op", sp.op}, {"layer", sp.layer},
                                 {"start_us", sp.startUs}, {"end_us", sp.endUs}, {"bytes", sp.bytes}};
        if (sp.kind == "comm")
            x["wait_us"] = sp.waitUs;
        out.push_back(std::move(x));
    }
    return out;
}

} // namespace

nlohmann::ordered_json recordToJson(const RunRecord& rec)
{
    nlohmann::ordered_json j;
    j["schema"] = kSchema;
    const auto& s = rec.settings;
    j["settings"] = {{"model", s.model},          {"class", s.modelClass}, {"plan", s.plan},
                     {"backend", s.backend},      {"communicator", s.communicator},
                     {"batch", s.batch},          {"seq", s.seq},          {"decode_steps", s.decodeSteps},
                     {"logits", s.logits},        {"warmup", s.warmup},
                     {"iterations", s.iterations}, {"weights", s.weights}, {"compute_dtype", "f32"},
                     {"storage_dtype", s.dtype}, {"emulated", s.emulated}, {"comm_model", s.commModel}};
    for (const auto& [key, value] : {std::pair{"model_path", &s.modelPath}, std::pair{"model_digest", &s.modelDigest},
                                     std::pair{"config_digest", &s.configDigest}, std::pair{"plan_path", &s.planPath},
                                     std::pair{"plan_digest", &s.planDigest}})
        if (!value->empty())
            j["settings"][key] = *value;
    const auto& p = rec.provenance;
    j["provenance"] = {{"cpu", p.cpuModel}, {"logical_cores", p.logicalCores}, {"hostname", p.hostname},
                       {"os", p.os},        {"compiler", p.compiler},        {"openblas", p.openblas}, {"cpu_kernels", p.cpuKernels}, {"libraries", p.libraries},
                       {"tpstudio", p.tpstudio}, {"started_at", p.startedAt}, {"devices", p.devices}};
    auto runs = nlohmann::ordered_json::array();
    for (const auto& r : rec.runs) {
        nlohmann::ordered_json x;
        x["tp"] = r.tp;
        x["load_s"] = r.loadSeconds;
        x["iteration_s"] = r.iterationSeconds;
        x["median_s"] = r.medianSeconds;
        x["tokens_per_s"] = r.tokensPerSecond;
        x["speedup"] = r.speedup;
        x["comm_share"] = r.commShare;
        if (r.hostOtherCores >= 0)
            x["host_other_cores"] = r.hostOtherCores;
        x["layers"] = layersJson(r.layers);
        auto memory = nlohmann::ordered_json::array();
        for (std::size_t i = 0; i < r.memory.size(); ++i)
            memory.push_back({{"rank", i}, {"weight_bytes", r.memory[i].weightBytes},
                              {"workspace_bytes", r.memory[i].workspaceBytes}, {"allocations", r.memory[i].allocations}});
        x["memory"] = memory;
        x["spans"] = spansJson(r.spans);
        if (const DecodeRun& d = r.decode; d.steps > 0)
            x["decode"] = {{"steps", d.steps},
                           {"ttft_s", d.ttftSeconds},
                           {"itl_median_s", d.itlSeconds},
                           {"itl_p10_s", d.itlP10Seconds},
                           {"itl_p90_s", d.itlP90Seconds},
                           {"tokens_per_s", d.tokensPerSecond},
                           {"speedup", d.speedup},
                           {"comm_share", d.commShare},
                           {"step_s", d.stepSeconds},
                           {"span_step", d.spanStep},
                           {"generated", d.generated},
                           {"layers", layersJson(d.layers)},
                           {"spans", spansJson(d.spans)}};
        runs.push_back(std::move(x));
    }
    j["runs"] = runs;
    return j;
}

namespace {

// Typed reads that name the key on failure.
struct Reader
{
    const nlohmann::json& j;
    std::string where;
    Status need(const char* key, bool (nlohmann::json::*is)() const noexcept, const char* what) const
    {
        if (!j.is_object() || !j.contains(key) || !(j.at(key).*is)())
            return invalidArgument(fmt::format("{}: key '{}' must be {}", where, key, what));
        return {};
    }
    Result<std::string> str(const char* key) const
    {
        TP_RETURN_IF_ERROR(need(key, &nlohmann::json::is_string, "a string"));
        return j.at(key).get<std::string>();
    }
    // Every figure of a record is a time, a rate, a ratio or a share: 0 … 1e15 (a span time of 31 years in
    // µs); beyond that it is no measurement, and printed it would read as a wrapped number.
    Result<double> num(const char* key) const
    {
        TP_RETURN_IF_ERROR(need(key, &nlohmann::json::is_number, "a number"));
        const double v = j.at(key).get<double>();
        if (!(v >= 0 && v <= 1e15))
            return invalidArgument(fmt::format("{}: key '{}' must be a number from 0 to 1e15, found {}", where, key, jsonExcerpt(j.at(key))));
        return v;
    }
    Result<std::int64_t> integer(const char* key, std::int64_t lo, std::int64_t hi) const
    {
        TP_RETURN_IF_ERROR(need(key, &nlohmann::json::is_number_integer, "an integer"));
        const auto v = j.at(key).get<std::int64_t>();
        if (v < lo || v > hi)
            return invalidArgument(fmt::format("{}: key '{}' must be in {}..{}, found {}", where, key, lo, hi, v));
        return v;
    }
};

Result<std::vector<LayerTiming>> parseLayers(const Reader& r)
{
    TP_RETURN_IF_ERROR(r.need("layers", &nlohmann::json::is_array, "an array"));
    std::vector<LayerTiming> out;
    for (const auto& l : r.j["layers"]) {
        const Reader lr{l, r.where + ": layers"};
        LayerTiming t;
        TP_ASSIGN_OR_RETURN(std::int64_t layer, lr.integer("layer", -1, 1 << 20));
        t.layer = static_cast<int>(layer);
        TP_ASSIGN_OR_RETURN(t.computeUs, lr.num("compute_us"));
        TP_ASSIGN_OR_RETURN(t.commUs, lr.num("comm_us"));
        if (l.is_object() && l.contains("spread_us")) { // added later in schema 2: optional
            const auto& v = l["spread_us"];
            auto bad = [&] {
                return invalidArgument(fmt::format("{}: key 'spread_us' must be [min, median, max] µs, numbers from 0 to 1e15 "
                                                   "with min <= median <= max, found {}",
                                                   lr.where, jsonExcerpt(v)));
            };
            if (!v.is_array() || v.size() != 3)
                return bad();
            double x[3];
            for (std::size_t i = 0; i < 3; ++i) {
                if (!v[i].is_number())
                    return bad();
                x[i] = v[i].get<double>();
                if (!(x[i] >= 0 && x[i] <= 1e15))
                    return bad();
            }
            if (!(x[0] <= x[1] && x[1] <= x[2]))
                return bad();
            t.hasSpread = true;
            t.minUs = x[0];
            t.medianUs = x[1];
            t.maxUs = x[2];
        }
        out.push_back(t);
    }
    return out;
}

Result<std::vector<RecordedSpan>> parseSpans(const Reader& r, int tp)
{
    TP_RETURN_IF_ERROR(r.need("spans", &nlohmann::json::is_array, "an array"));
    std::vector<RecordedSpan> out;
    for (const auto& sp : r.j["spans"]) {
        const Reader sr{sp, r.where + ": spans"};
        RecordedSpan x;
        TP_ASSIGN_OR_RETURN(std::int64_t rank, sr.integer("rank", 0, tp - 1));
        x.rank = static_cast<int>(rank);
        TP_ASSIGN_OR_RETURN(x.name, sr.str("name"));
        TP_ASSIGN_OR_RETURN(x.kind, sr.str("kind"));
        TP_ASSIGN_OR_RETURN(x.op, sr.str("op"));
        TP_ASSIGN_OR_RETURN(std::int64_t layer, sr.integer("layer", -1, 1 << 20));
        x.layer = static_cast<int>(layer);
        TP_ASSIGN_OR_RETURN(x.startUs, sr.num("start_us"));
        TP_ASSIGN_OR_RETURN(x.endUs, sr.num("end_us"));
        if (x.endUs < x.startUs)
            return invalidArgument(fmt::format("{}: key 'end_us' ({}) is before 'start_us' ({}): a span cannot end before it starts",
                                               sr.where, x.endUs, x.startUs));
        TP_ASSIGN_OR_RETURN(x.bytes, sr.integer("bytes", 0, std::numeric_limits<std::int64_t>::max()));
        if (sp.contains("wait_us")) { // optional: records from before it lack it
            TP_ASSIGN_OR_RETURN(x.waitUs, sr.num("wait_us"));
            if (x.waitUs > std::max(0.0, x.endUs - x.startUs))
                return invalidArgument(fmt::format("{}: key 'wait_us' ({}) must not exceed the span's duration (end_us − start_us = {})",
                                                   sr.where, x.waitUs, std::max(0.0, x.endUs - x.startUs)));
        }
        out.push_back(std::move(x));
    }
    return out;
}

Result<DecodeRun> parseDecode(const Reader& r, int tp)
{
    DecodeRun d;
    TP_ASSIGN_OR_RETURN(const std::int64_t steps, r.integer("steps", 1, 1 << 20));
    d.steps = static_cast<int>(steps);
    TP_ASSIGN_OR_RETURN(d.ttftSeconds, r.num("ttft_s"));
    TP_ASSIGN_OR_RETURN(d.itlSeconds, r.num("itl_median_s"));
    TP_ASSIGN_OR_RETURN(d.itlP10Seconds, r.num("itl_p10_s"));
    TP_ASSIGN_OR_RETURN(d.itlP90Seconds, r.num("itl_p90_s"));
    TP_ASSIGN_OR_RETURN(d.tokensPerSecond, r.num("tokens_per_s"));
    TP_ASSIGN_OR_RETURN(d.speedup, r.num("speedup"));
    TP_ASSIGN_OR_RETURN(d.commShare, r.num("comm_share"));
    TP_ASSIGN_OR_RETURN(const std::int64_t spanStep, r.integer("span_step", -1, steps - 1));
    d.spanStep = static_cast<int>(spanStep);
    TP_RETURN_IF_ERROR(r.need("step_s", &nlohmann::json::is_array, "an array"));
    for (const auto& v : r.j["step_s"]) {
        if (!v.is_number())
            return invalidArgument(fmt::format("{}: key 'step_s' must hold numbers", r.where));
        d.stepSeconds.push_back(v.get<double>());
    }
    TP_RETURN_IF_ERROR(r.need("generated", &nlohmann::json::is_array, "an array"));
    for (const auto& seq : r.j["generated"]) {
        auto& tokens = d.generated.emplace_back();
        if (!seq.is_array() || seq.size() != static_cast<std::size_t>(steps) + 1)
            return invalidArgument(fmt::format("{}: key 'generated' must hold {} token ids per sequence", r.where, steps + 1));
        for (const auto& t : seq) {
            if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max())
                return invalidArgument(fmt::format("{}: key 'generated' must hold token ids", r.where));
            tokens.push_back(static_cast<std::int32_t>(t.get<std::int64_t>()));
        }
    }
    TP_ASSIGN_OR_RETURN(d.layers, parseLayers(r));
    TP_ASSIGN_OR_RETURN(d.spans, parseSpans(r, tp));
    return d;
}

} // namespace

Result<RunRecord> parseRunRecord(std::string_view text, const std::string& source)
{
    TP_ASSIGN_OR_RETURN(const nlohmann::json j, parseJson(text, source, "the run record"));
    const Reader top{j, source};
    TP_ASSIGN_OR_RETURN(std::string schema, top.str("schema"));
    if (schema != kSchema && schema != "tpstudio.run/1")
        return invalidArgument(fmt::format("{}: key 'schema' is \"{}\", expected \"{}\" (or \"tpstudio.run/1\")", source,
                                           schema, kSchema));
    RunRecord rec;
    TP_RETURN_IF_ERROR(top.need("settings", &nlohmann::json::is_object, "an object"));
    const Reader s{j["settings"], source + ": settings"};
    TP_ASSIGN_OR_RETURN(rec.settings.model, s.str("model"));
    TP_ASSIGN_OR_RETURN(rec.settings.modelClass, s.str("class"));
    TP_ASSIGN_OR_RETURN(rec.settings.plan, s.str("plan"));
    TP_ASSIGN_OR_RETURN(rec.settings.backend, s.str("backend"));
    TP_ASSIGN_OR_RETURN(rec.settings.communicator, s.str("communicator"));
    TP_ASSIGN_OR_RETURN(rec.settings.batch, s.integer("batch", 1, std::int64_t(1) << 40));
    TP_ASSIGN_OR_RETURN(rec.settings.seq, s.integer("seq", 1, std::int64_t(1) << 40));
    if (s.j.contains("decode_steps")) { // schema 2
        TP_ASSIGN_OR_RETURN(const std::int64_t steps, s.integer("decode_steps", 0, 1 << 20));
        rec.settings.decodeSteps = static_cast<int>(steps);
    }
    // Added later in schema 2: absent, the positions that version computed logits at.
    rec.settings.logits = rec.settings.decodeSteps > 0 ? "last" : "all";
    if (s.j.contains("logits")) {
        TP_ASSIGN_OR_RETURN(rec.settings.logits, s.str("logits"));
        if (rec.settings.logits != "all" && rec.settings.logits != "last")
            return invalidArgument(fmt::format("{}: settings: key 'logits' is {}, expected \"all\" or \"last\"", source,
                                               jsonExcerpt(nlohmann::json(rec.settings.logits))));
    }
    TP_ASSIGN_OR_RETURN(std::int64_t warmup, s.integer("warmup", 0, 1 << 30));
    TP_ASSIGN_OR_RETURN(std::int64_t iters, s.integer("iterations", 1, 1 << 30));
    rec.settings.warmup = static_cast<int>(warmup);
    rec.settings.iterations = static_cast<int>(iters);
    TP_ASSIGN_OR_RETURN(rec.settings.weights, s.str("weights"));
    // Added after the first records: absent means an fp32 run measured on real ranks.
    if (s.j.contains("storage_dtype")) {
        TP_ASSIGN_OR_RETURN(rec.settings.dtype, s.str("storage_dtype"));
        if (rec.settings.dtype != "f32" && rec.settings.dtype != "bf16" && rec.settings.dtype != "f16")
            return invalidArgument(fmt::format("{}: settings: key 'storage_dtype' must be f32, bf16 or f16", source));
    }
    if (s.j.contains("emulated")) {
        TP_RETURN_IF_ERROR(s.need("emulated", &nlohmann::json::is_boolean, "true or false"));
        rec.settings.emulated = s.j["emulated"].get<bool>();
    }
    if (s.j.contains("comm_model")) {
        TP_ASSIGN_OR_RETURN(rec.settings.commModel, s.str("comm_model"));
    }
    for (const auto& [key, value] : {std::pair{"model_path", &rec.settings.modelPath}, std::pair{"model_digest", &rec.settings.modelDigest},
                                     std::pair{"config_digest", &rec.settings.configDigest},
                                     std::pair{"plan_path", &rec.settings.planPath}, std::pair{"plan_digest", &rec.settings.planDigest}})
        if (s.j.contains(key)) {
            TP_ASSIGN_OR_RETURN(*value, s.str(key));
        }
    if (j.contains("provenance") && j["provenance"].is_object()) {
        const Reader p{j["provenance"], source + ": provenance"};
        if (auto v = p.str("cpu"); v.ok())
            rec.provenance.cpuModel = *v;
        if (auto v = p.str("os"); v.ok())
            rec.provenance.os = *v;
        if (auto v = p.str("devices"); v.ok())
            rec.provenance.devices = *v;
        if (auto v = p.integer("logical_cores", 0, 1 << 16); v.ok())
            rec.provenance.logicalCores = int(*v);
        if (auto v = p.str("cpu_kernels"); v.ok())
            rec.provenance.cpuKernels = *v;
    }
    TP_RETURN_IF_ERROR(top.need("runs", &nlohmann::json::is_array, "an array"));
    for (std::size_t i = 0; i < j["runs"].size(); ++i) {
        const Reader r{j["runs"][i], fmt::format("{}: runs[{}]", source, i)};
        TpRun run;
        TP_ASSIGN_OR_RETURN(std::int64_t tp, r.integer("tp", 1, 1 << 16));
        run.tp = static_cast<int>(tp);
        for (std::size_t k = 0; k < rec.runs.size(); ++k)
            if (rec.runs[k].tp == run.tp)
                return invalidArgument(fmt::format("{}: tp {} was already recorded by runs[{}]; a record holds each tp size once",
                                                   r.where, run.tp, k));
        TP_ASSIGN_OR_RETURN(run.loadSeconds, r.num("load_s"));
        TP_ASSIGN_OR_RETURN(run.medianSeconds, r.num("median_s"));
        TP_ASSIGN_OR_RETURN(run.tokensPerSecond, r.num("tokens_per_s"));
        TP_ASSIGN_OR_RETURN(run.speedup, r.num("speedup"));
        TP_ASSIGN_OR_RETURN(run.commShare, r.num("comm_share"));
        if (r.j.contains("host_other_cores")) { // records since the host's load was measured
            TP_ASSIGN_OR_RETURN(run.hostOtherCores, r.num("host_other_cores"));
            if (run.hostOtherCores > double(1 << 16))
                return invalidArgument(fmt::format("{}: key 'host_other_cores' must be at most {} cores, found {}", r.where,
                                                   1 << 16, run.hostOtherCores));
        }
        TP_ASSIGN_OR_RETURN(run.layers, parseLayers(r));
        if (r.j.contains("memory")) { // records since the device-resident engine
            TP_RETURN_IF_ERROR(r.need("memory", &nlohmann::json::is_array, "an array"));
            if (!r.j["memory"].empty() && r.j["memory"].size() != static_cast<std::size_t>(run.tp))
                return invalidArgument(fmt::format("{}: key 'memory' has {} entries for tp {}", r.where, r.j["memory"].size(), run.tp));
            for (const auto& m : r.j["memory"]) {
                const Reader mr{m, r.where + ": memory"};
                TP_ASSIGN_OR_RETURN(const std::int64_t rank, mr.integer("rank", 0, run.tp - 1));
                if (rank != static_cast<std::int64_t>(run.memory.size()))
                    return invalidArgument(fmt::format("{}: memory: rank {} out of order", r.where, rank));
                RankFootprint f;
                constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
                TP_ASSIGN_OR_RETURN(f.weightBytes, mr.integer("weight_bytes", 0, kMax));
                TP_ASSIGN_OR_RETURN(f.workspaceBytes, mr.integer("workspace_bytes", 0, kMax));
                TP_ASSIGN_OR_RETURN(f.allocations, mr.integer("allocations", 0, kMax));
                run.memory.push_back(f);
            }
        }
        TP_ASSIGN_OR_RETURN(run.spans, parseSpans(r, run.tp));
        if (r.j.contains("decode")) {
            TP_RETURN_IF_ERROR(r.need("decode", &nlohmann::json::is_object, "an object"));
            TP_ASSIGN_OR_RETURN(run.decode, parseDecode({r.j["decode"], r.where + ": decode"}, run.tp));
        }
        if (run.decode.steps != rec.settings.decodeSteps)
            return invalidArgument(fmt::format("{}: {} decode steps where settings say {}", r.where, run.decode.steps,
                                               rec.settings.decodeSteps));
        if (r.j.contains("iteration_s") && r.j["iteration_s"].is_array())
            for (const auto& v : r.j["iteration_s"])
                if (v.is_number())
                    run.iterationSeconds.push_back(v.get<double>());
        rec.runs.push_back(std::move(run));
    }
    return rec;
}

void writeJson(const RunRecord& rec, std::ostream& out) { out << recordToJson(rec).dump(1, ' ', false, kReplaceInvalidUtf8) << "\n"; }

namespace {
std::string csvField(const std::string& s)
{
    if (s.find_first_of(",\"\n") == std::string::npos)
        return s;
    std::string q = "\"";
    for (char c : s)
        q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}
} // namespace

void writeCsv(const RunRecord& rec, std::ostream& out)
{
    out << "tp,rank,name,kind,op,layer,start_us,end_us,duration_us,bytes,phase\n";
    for (const auto& r : rec.runs)
        for (const auto* phase : {&r.spans, &r.decode.spans})
            for (const auto& s : *phase)
                out << fmt::format("{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{},{}\n", r.tp, s.rank, csvField(s.name), s.kind,
                                   s.op, s.layer, s.startUs, s.endUs, s.endUs - s.startUs, s.bytes,
                                   phase == &r.spans ? "prefill" : "decode");
}

void writeChromeTrace(const RunRecord& rec, std::ostream& out)
{
    nlohmann::ordered_json events = nlohmann::ordered_json::array();
    int maxRank = 0;
    for (const auto& r : rec.runs)
        maxRank = std::max(maxRank, r.tp - 1);
    for (int rank = 0; rank <= maxRank; ++rank) {
        events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", fmt::format("rank {}", rank)}}}});
        events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
    }
    for (const auto& r : rec.runs) {
        const int decodeTid = 256 + r.tp;
        for (int rank = 0; rank < r.tp; ++rank) {
            events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", r.tp},
                              {"args", {{"name", fmt::format("tp={} prefill", r.tp)}}}});
            if (r.decode.steps > 0)
                events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", decodeTid},
                                  {"args", {{"name", fmt::format("tp={} decode step {}", r.tp, r.decode.spanStep)}}}});
        }
        for (const auto* phase : {&r.spans, &r.decode.spans})
            for (const auto& s : *phase)
                events.push_back({{"name", s.name},
                                  {"cat", s.kind},
                                  {"ph", "X"},
                                  {"ts", s.startUs},
                                  {"dur", std::max(0.0, s.endUs - s.startUs)},
                                  {"pid", s.rank},
                                  {"tid", phase == &r.spans ? r.tp : decodeTid},
                                  {"args", s.kind == "comm"
                                               ? nlohmann::ordered_json{{"op", s.op}, {"layer", s.layer}, {"bytes", s.bytes}, {"wait_us", s.waitUs}}
                                               : nlohmann::ordered_json{{"op", s.op}, {"layer", s.layer}, {"bytes", s.bytes}}}});
    }
    nlohmann::ordered_json j;
    j["traceEvents"] = std::move(events);
    j["displayTimeUnit"] = "ms";
    j["otherData"] = {{"generator", "tpstudio"},  {"model", rec.settings.model},       {"schema", kSchema},
                      {"backend", rec.settings.backend}, {"storage_dtype", rec.settings.dtype},
                      {"emulated", rec.settings.emulated}, {"logits", rec.settings.logits}};
    out << j.dump(-1, ' ', false, kReplaceInvalidUtf8) << "\n";
}

namespace {
// Text from a record as the terminal should see it: control characters (escape sequences that could
// recolour, move or retitle the terminal) shown as '?'.
std::string printable(std::string s) { return terminalSafe(std::move(s)); }
} // namespace

void writeConsole(const RunRecord& rec, std::ostream& out)
{
    const auto& s = rec.settings;
    out << fmt::format("{} · {} · batch {} · seq {}{}{} · {} warm-up + {} iterations · backend {} ({}, {} storage) · {}\n",
                       printable(s.modelClass), printable(s.plan), s.batch, s.seq,
                       s.decodeSteps > 0 ? fmt::format(" · {} decode steps", s.decodeSteps) : "",
                       s.logits == "last" ? " · logits at the last positions" : "", s.warmup, s.iterations,
                       printable(s.backend), printable(s.communicator), printable(s.dtype),
                       printable(rec.provenance.devices.empty() ? rec.provenance.cpuModel : rec.provenance.devices));
    if (s.emulated)
        out << fmt::format("EMULATED: every rank ran on one device, one at a time; communication times are modelled "
                           "with the {} profile, not measured\n",
                           printable(s.commModel));
    auto cells = [](const LayerTiming& l) {
        const double tot = l.computeUs + l.commUs;
        return fmt::format("{:>11.1f} {:>11.1f} {:>6.1f}%", l.computeUs, l.commUs, tot > 0 ? 100 * l.commUs / tot : 0.0);
    };
    for (const auto& r : rec.runs) {
        const bool decoding = r.decode.steps > 0 && r.decode.layers.size() == r.layers.size();
        out << fmt::format("\nT={}  per layer, slowest rank (µs){}\n  {:<9} {:>11} {:>11} {:>7}{}\n", r.tp,
                           decoding ? fmt::format(": prefill, and decode step {} (the median)", r.decode.spanStep) : "",
                           "layer", "compute", "comm", "comm %",
                           decoding ? fmt::format("  {:>11} {:>11} {:>7}", "decode", "comm", "comm %") : "");
        for (std::size_t i = 0; i < r.layers.size(); ++i)
            out << fmt::format("  {:<9} {}{}\n", r.layers[i].layer < 0 ? std::string("other") : std::to_string(r.layers[i].layer),
                               cells(r.layers[i]), decoding ? "  " + cells(r.decode.layers[i]) : "");
    }
    out << fmt::format("\n  {:>3} {:>12} {:>12} {:>9} {:>7} {:>9}\n", "T", "median", "tokens/s", "speedup", "comm %",
                       "load");
    for (const auto& r : rec.runs)
        out << fmt::format("  {:>3} {:>10.2f}ms {:>12.1f} {:>9} {:>6.1f}% {:>8.2f}s\n", r.tp, r.medianSeconds * 1e3,
                           r.tokensPerSecond, r.speedup > 0 ? fmt::format("{:.2f}×", r.speedup) : std::string("— (no T=1)"),
                           100 * r.commShare, r.loadSeconds);
    if (s.decodeSteps > 0) {
        out << fmt::format("\n  {:>3} {:>12} {:>12} {:>10} {:>10} {:>12} {:>9} {:>7}   (decode: {} steps × batch {})\n", "T",
                           "TTFT", "ITL median", "p10", "p90", "tokens/s", "speedup", "comm %", s.decodeSteps, s.batch);
        for (const auto& r : rec.runs)
            out << fmt::format("  {:>3} {:>10.2f}ms {:>10.3f}ms {:>8.3f}ms {:>8.3f}ms {:>12.1f} {:>9} {:>6.1f}%\n", r.tp,
                               r.decode.ttftSeconds * 1e3, r.decode.itlSeconds * 1e3, r.decode.itlP10Seconds * 1e3,
                               r.decode.itlP90Seconds * 1e3, r.decode.tokensPerSecond,
                               r.decode.speedup > 0 ? fmt::format("{:.2f}×", r.decode.speedup) : std::string("— (no T=1)"),
                               100 * r.decode.commShare);
    }
    for (const auto& r : rec.runs)
        if (!r.memory.empty()) {
            std::int64_t w = 0, a = 0;
            for (const auto& m : r.memory) {
                w = std::max(w, m.weightBytes);
                a = std::max(a, m.workspaceBytes);
            }
            out << fmt::format("  T={} memory per rank (largest): {} weights + {} activations, KV cache and scratch\n", r.tp,
                               humanBytes(static_cast<double>(w)), humanBytes(static_cast<double>(a)));
        }
    if (const std::string w = hostLoadWarning(rec); !w.empty())
        out << "\nwarning: " << w << "\n";
}

std::string hostLoadWarning(const RunRecord& rec)
{
    std::vector<std::string> loaded;
    for (const auto& r : rec.runs)
        if (hostWasLoaded(r.hostOtherCores, rec.provenance.logicalCores))
            loaded.push_back(loaded.empty() ? fmt::format("{:.1f} of its {} cores busy during T={}", r.hostOtherCores,
                                                          rec.provenance.logicalCores, r.tp)
                                            : fmt::format("{:.1f} during T={}", r.hostOtherCores, r.tp));
    if (loaded.empty())
        return "";
    return fmt::format("the host was busy: other processes kept {} (the mean over each size's run). Those timings, and "
                       "the speedups that use them, measure the contention as much as the plan; run again on a quiet host",
                       fmt::join(loaded, ", "));
}

} // namespace tp
