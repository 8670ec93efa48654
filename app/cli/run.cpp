// run.cpp — `tpstudio-cli run`: execute a plan on the embedded engine (CPU or CUDA backend, local
// ranks, MPI processes or single-device emulation) for one or more tp sizes and report per-layer
// compute/communication, memory, speedup against T=1, and traces.
#include "commands.h"
#include "interruption.h"
#include "tp/core/digest.h"
#include "tp/core/file.h"
#include "tp/core/json.h"

#include "tp/model/loader.h"
#include "tp/plan/plan_io.h"
#include "tp/profile/run_record.h"
#include "tp/cost/compare.h"
#include "tp/cost/hardware.h"
#include "tp/runtime/backend.h"
#include "tp/runtime/communicator.h"
#include "tp/runtime/executor.h"
#include "tp/runtime/gpu.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <csignal>
#include <cstring>
#include <optional>
#include <stop_token>
#include <thread>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace tpcli {

namespace {

struct RunOpts
{
    std::string model;
    std::string planFile;
    std::string profile = "G3";
    std::vector<int> tp{1, 2};
    std::vector<int> givenTp;  // --tp as given (under mpirun, T is the job's size)
    std::int64_t batch = 1, seq = 128;
    int decode = 0;
    std::string logits;         // all | last; empty: all, or last when decoding (as generate())
    int warmup = 1, iters = 3;
    std::string backend = "cpu";
    std::string dtype;          // empty: f32 on the CPU, bf16 on CUDA
    std::vector<int> emulate;   // sizes emulated on one device (instead of --tp)
    std::string hardware;       // the profile that models emulated collectives
    std::string comm = "local";
    std::string trace, json, csv;
    bool jsonStream = false;
    bool randomWeights = false;
    std::uint64_t seed = 0x5eed;
    int timeoutS = 60;
    std::int64_t maxMemory = 0; // bytes; 0: what the host has available
    std::string logitsFile;
    std::vector<std::int32_t> tokens;
    std::string tokensFile;     // token ids in a file (beyond what a command line can hold)
    std::string injectFailure; // "RANK:NODE", for fault tests
};

void emit(const nlohmann::ordered_json& j)
{
    std::cout << j.dump(-1, ' ', false, tp::kReplaceInvalidUtf8) << "\n" << std::flush;
}

int failWith(const RunOpts& o, const std::string& message)
{
    if (o.jsonStream)
        emit({{"event", "error"}, {"message", message}});
    else
        fmt::print(stderr, "tpstudio-cli run: {}\n", message);
    return kBadInput;
}

// Under mpirun every process runs this; only rank 0 reports. A failing rank ends the job.
struct MpiSession
{
    std::unique_ptr<tp::Communicator> comm;
    ~MpiSession()
    {
        if (comm)
            tp::mpiFinalize();
    }
};


// Under mpirun every process must run the same thing: the ranks exchange what they were given
// (sizes, seed, dtype, and digests of the model's tensors, the sharded plan and the weights' files)
// and refuse, naming the first difference, before any collective could mismatch.
tp::Status mpiHandshake(tp::Communicator& comm, const RunOpts& o, tp::DType dtype, const tp::OpenedModel& om,
                        const tp::ShardedGraph& g, bool useCheckpoint)
{
    tp::Digest plan, weights, tokens;
    const auto model = static_cast<std::int64_t>(std::stoull(tp::modelDigest(om.spec), nullptr, 16));
    for (const auto& ps : g.params)
        for (const auto& shape : ps.shapes) {
            plan.add(ps.path).add(std::int64_t(ps.placement.kind)).add(std::int64_t(ps.dim));
            for (auto d : shape)
                plan.add(d);
        }
    for (const auto& n : g.graph.nodes)
        plan.add(n.name);
    plan.add(std::int64_t(g.collectives.size()));
    weights.add(useCheckpoint ? "checkpoint" : "random");
    if (useCheckpoint)
        for (const auto& t : om.checkpoint->tensors)
            weights.add(t.name).add(std::int64_t(t.begin)).add(std::int64_t(t.end));
    for (auto t : o.tokens)
        tokens.add(std::int64_t(t));
    tp::Digest tp;
    for (int t : o.givenTp)
        tp.add(std::int64_t(t));
    const std::pair<const char*, std::int64_t> fields[] = {
        {"the handshake version", 3},
        {"--batch", o.batch},
        {"--seq", o.seq},
        {"--decode", o.decode},
        {"--logits", o.logits.empty() ? (o.decode > 0 ? 1 : 0) : o.logits == "last"},
        {"--warmup", o.warmup},
        {"--iters", o.iters},
        {"--dtype", std::int64_t(dtype)},
        {"--seed", static_cast<std::int64_t>(o.seed)},
        {"--tokens", tokens.value()},
        {"--tp", tp.value()},
        {"the model (--model: its tensors' names, shapes and dtypes)", model},
        {"the plan (--plan, --profile: every rank's shard of every tensor)", plan.value()},
        {"the weights (the checkpoint's tensors, or --random-weights)", weights.value()},
    };
    std::vector<std::int64_t> mine;
    for (const auto& f : fields)
        mine.push_back(f.second);
    std::vector<std::int64_t> all, counts;
    TP_RETURN_IF_ERROR(comm.exchange(mine, all, counts));
    const std::size_t n = mine.size();
    for (int r = 1; r < comm.size(); ++r) {
        if (counts[static_cast<std::size_t>(r)] != static_cast<std::int64_t>(n))
            return tp::invalidArgument(fmt::format("process rank {} runs another version of tpstudio-cli", r));
        for (std::size_t i = 0; i < n; ++i) {
            const std::int64_t theirs = all[static_cast<std::size_t>(r) * n + i], first = all[i];
            if (theirs == first)
                continue;
            const bool digest = i >= 9; // --tokens onwards are digests
            return tp::invalidArgument(
                digest ? fmt::format("process rank {} was started with other arguments than rank 0: {} differs; every "
                                     "rank of mpirun must run the same command",
                                     r, fields[i].first)
                       : fmt::format("process rank {} was started with other arguments than rank 0: {} is {} there and {} on "
                                     "rank 0; every rank of mpirun must run the same command",
                                     r, fields[i].first, theirs, first));
        }
    }
    return {};
}

int runRanks(RunOpts o, MpiSession& mpi);

int runVerb(RunOpts o)
{
    MpiSession mpi;
    const int code = runRanks(std::move(o), mpi);
    if (code != kOk && mpi.comm && mpi.comm->size() > 1)
        tp::mpiAbortJob(code); // the other processes may be waiting in a collective
    return code;
}

// --tokens-file: decimal token ids separated by commas or white space, at most 64 MiB of them.
tp::Result<std::vector<std::int32_t>> readTokens(const std::string& path)
{
    TP_ASSIGN_OR_RETURN(std::string text, tp::readInputFile(path, std::int64_t(64) << 20, "token ids"));
    std::vector<std::int32_t> ids;
    const char* p = text.data();
    const char* end = p + text.size();
    const auto separator = [](char c) { return c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
    while (p < end) {
        if (separator(*p)) {
            ++p;
            continue;
        }
        const char* q = p;
        while (q < end && !separator(*q))
            ++q;
        std::int32_t id = 0;
        const auto [stop, ec] = std::from_chars(p, q, id, 10);
        if (ec != std::errc() || stop != q || id < 0)
            return tp::invalidArgument(fmt::format("{}: token {} ('{}') is not a whole number from 0 to 2147483647",
                                                   tp::terminalSafe(path), ids.size() + 1,
                                                   tp::terminalSafe(std::string(p, std::min<std::size_t>(q - p, 32)))));
        ids.push_back(id);
        p = q;
    }
    if (ids.empty())
        return tp::invalidArgument(fmt::format("{}: holds no token ids", tp::terminalSafe(path)));
    return ids;
}

int runRanks(RunOpts o, MpiSession& mpi)
{
    if (!o.emulate.empty() && o.comm == "mpi") {
        fmt::print(stderr, "tpstudio-cli run: --emulate-tp runs every rank in this process; it does not combine with "
                           "--comm mpi\n");
        return kUsage;
    }
    if (o.comm == "mpi") {
        if (!tp::haveMpi())
            return failWith(o, "this build has no MPI (install libopenmpi-dev and rebuild)");
        tp::mpiInit(nullptr, nullptr);
        mpi.comm = tp::makeMpiCommunicator(std::chrono::seconds(o.timeoutS));
        o.givenTp = o.tp;
        if (o.tp.size() != 1 || o.tp[0] != mpi.comm->size())
            o.tp = {mpi.comm->size()}; // one process per rank: T is the job's size
        if (mpi.comm->rank() != 0) { // quiet ranks: no files, no console
            o.trace.clear();
            o.json.clear();
            o.csv.clear();
        }
    }
    const bool reporter = !mpi.comm || mpi.comm->rank() == 0;
    if (!o.tokensFile.empty()) {
        auto ids = readTokens(o.tokensFile);
        if (!ids)
            return failWith(o, ids.status().message());
        o.tokens = std::move(*ids);
    }
    const bool cuda = o.backend == "cuda";
    // Prefill's logits at every position, or at each sequence's last (what generation needs).
    const bool lastLogits = o.logits.empty() ? o.decode > 0 : o.logits == "last";
    const tp::DType dtype = o.dtype == "bf16" ? tp::DType::BF16
        : o.dtype == "f16"                    ? tp::DType::F16
        : o.dtype == "f32"                    ? tp::DType::F32
        : cuda                                ? tp::DType::BF16
                                              : tp::DType::F32;
    const bool emulate = !o.emulate.empty();
    if (emulate)
        o.tp = o.emulate;
    std::string devices = "cpu";
    std::optional<tp::HardwareProfile> commModel;
    if (cuda) {
        auto inv = tp::gpu::probe();
        if (!inv)
            return failWith(o, fmt::format("--backend cuda: {}", inv.status().message()));
        const int most = *std::max_element(o.tp.begin(), o.tp.end());
        if (!emulate && !mpi.comm && most > static_cast<int>(inv->devices.size()))
            return failWith(o, fmt::format("tp size {} needs {} GPUs, {} visible; emulate it on one GPU with "
                                           "--emulate-tp {}",
                                           most, most, inv->devices.size(), most));
        devices.clear();
        for (const auto& d : inv->devices)
            devices += fmt::format("{}cuda:{} {} ({:.0f} GiB)", devices.empty() ? "" : ", ", d.index, d.name,
                                   static_cast<double>(d.memoryBytes) / (1 << 30));
    }
    if (emulate) {
        // The profile of the device at hand models the collectives, unless one is named.
        std::string id = o.hardware;
        if (id.empty()) {
            const std::string gpu = cuda ? devices : "";
            id = !cuda                                          ? "local-cpu"
                : gpu.find("H200") != std::string::npos         ? "h200-sxm-8"
                : gpu.find("H100 PCIe") != std::string::npos    ? "pcie-h100-8"
                : gpu.find("H100") != std::string::npos         ? "h100-sxm-8"
                : gpu.find("A100") != std::string::npos         ? "a100-sxm-8"
                                                                : "";
            if (id.empty())
                return failWith(o, fmt::format("no built-in hardware profile matches {}; name one with --hardware "
                                               "(one of: {})",
                                               devices, fmt::join(tp::builtinHardwareIds(), ", ")));
        }
        auto hw = tp::findHardware(id);
        if (!hw)
            return failWith(o, hw.status().message());
        commModel = *hw;
        if (hw->source != fmt::format("plans/hardware/{}.json", id)) // a file: the record names the file
            commModel->id = fmt::format("{} ({})", hw->id, id);
    }
    auto om = tp::openModel(o.model);
    if (!om)
        return failWith(o, om.status().message());
    if (const std::int64_t most = om->spec.config.maxPositionEmbeddings; reporter && most > 0 && o.seq + o.decode > most)
        fmt::print(stderr, "warning: positions up to {} (prompt {} + {} decode steps) exceed the model's "
                           "max_position_embeddings {}: Transformers computes them too, but the model was not trained there\n",
                   o.seq + o.decode, o.seq, o.decode, most);
    const tp::VersionProfile profile = *tp::profileFromName(o.profile);
    tp::Plan base = tp::defaultPlan(om->spec, 1, profile);
    if (!o.planFile.empty()) {
        auto p = tp::loadPlanFile(o.planFile, profile);
        if (!p)
            return failWith(o, p.status().message());
        base = tp::resolveOverrides(om->spec, *p);
    }
    // Outputs are checked before anything runs: an input or another output is never overwritten.
    if (reporter)
        if (const std::string bad = checkOutputPaths({{"--trace", o.trace}, {"--json", o.json}, {"--csv", o.csv},
                                                      {"--dump-logits", o.logitsFile}},
                                                     {o.model, o.planFile, o.hardware, o.tokensFile});
            !bad.empty())
            return failWith(o, bad);
    // T=1 first, so that every other size has its speedup.
    std::vector<int> sizes = o.tp;
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());

    // Every size is checked before anything runs.
    std::vector<tp::ShardedGraph> graphs;
    for (int t : sizes) {
        tp::Plan p = base;
        p.tpSize = t;
        graphs.push_back(tp::shardModel(om->spec, p, {.batch = o.batch, .seq = o.seq, .activationDtype = dtype,
                                                       .lastPositionLogits = lastLogits}));
        std::string errors;
        for (const auto& d : graphs.back().diagnostics)
            if (d.severity == tp::Severity::Error)
                errors += fmt::format("\n  {}: {}{}", d.where, d.message, d.hint.empty() ? "" : " (hint: " + d.hint + ")");
        if (!errors.empty())
            return failWith(o, fmt::format("the plan has errors at tp_size {}; nothing ran:{}", t, errors));
        if (auto why = tp::engineExecutableProblem(om->spec, graphs.back()); !why.empty())
            return failWith(o, why);
    }
    // RANK:NODE[:KIND], KIND = error | oom | exception | hang: a rank the largest size has, a node of the graph.
    int failRank = -1;
    std::string failNode, failKind = "error";
    if (o.injectFailure.size() > 256)
        return failWith(o, fmt::format("--inject-failure: {} bytes is not RANK:NODE[:KIND]", o.injectFailure.size()));
    if (!o.injectFailure.empty()) {
        const auto colon = o.injectFailure.find(':');
        const std::string rank = o.injectFailure.substr(0, colon);
        failNode = colon == std::string::npos ? "" : o.injectFailure.substr(colon + 1);
        for (const char* kind : {"oom", "exception", "hang", "error"})
            if (failNode.ends_with(std::string(":") + kind)) {
                failKind = kind;
                failNode.resize(failNode.size() - std::strlen(kind) - 1);
            }
        const bool number = !rank.empty() && rank.size() < 6 && std::all_of(rank.begin(), rank.end(), ::isdigit);
        if (number)
            failRank = std::atoi(rank.c_str());
        const auto& nodes = graphs.back().graph.nodes;
        if (!number || failRank >= sizes.back())
            return failWith(o, fmt::format("--inject-failure {}: the rank must be 0..{}", o.injectFailure, sizes.back() - 1));
        if (std::none_of(nodes.begin(), nodes.end(), [&](const tp::GraphNode& n) { return n.name == failNode; }))
            return failWith(o, fmt::format("--inject-failure {}: '{}' is not a node of {}'s graph (e.g. {}); kinds: "
                                           "error, oom, exception, hang",
                                           o.injectFailure, failNode, om->spec.className, nodes.back().name));
    }
    const bool useCheckpoint = om->checkpoint && !o.randomWeights;
    tp::WeightSource weights{useCheckpoint ? &*om->checkpoint : nullptr, o.seed};
    if (useCheckpoint)
        if (auto st = tp::checkWeights(om->spec, weights); !st.ok())
            return failWith(o, st.message());
    if (mpi.comm && mpi.comm->size() > 1)
        if (auto st = mpiHandshake(*mpi.comm, o, dtype, *om, graphs.back(), useCheckpoint); !st.ok())
            return failWith(o, fmt::format("process rank {}: {}", mpi.comm->rank(), st.message()));

    tp::RunRecord rec;
    auto& set = rec.settings;
    set.model = o.model;
    set.modelClass = om->spec.className;
    set.plan = o.planFile.empty() ? "default plan" : o.planFile;
    {
        std::error_code ec;
        set.modelPath = std::filesystem::exists(o.model, ec) ? std::filesystem::absolute(o.model, ec).lexically_normal().string()
                                                             : o.model; // a catalog or Hub id
        if (!o.planFile.empty())
            set.planPath = std::filesystem::absolute(o.planFile, ec).lexically_normal().string();
        set.modelDigest = tp::modelDigest(om->spec);
        if (auto text = tp::configText(*om))
            set.configDigest = tp::configDigest(*text);
        set.planDigest = tp::planDigest(base, om->spec);
    }
    set.backend = o.backend;
    set.communicator = emulate ? "emulated" : cuda ? (mpi.comm ? "nccl (mpi bootstrap)" : "nccl") : o.comm;
    set.dtype = o.dtype.empty() ? (cuda ? "bf16" : "f32") : o.dtype;
    set.emulated = emulate;
    set.commModel = commModel ? commModel->id : "";
    set.batch = o.batch;
    set.seq = o.seq;
    set.decodeSteps = o.decode;
    set.logits = lastLogits ? "last" : "all";
    set.warmup = o.warmup;
    set.iterations = o.iters;
    set.weights = useCheckpoint ? "checkpoint" : fmt::format("random (seed {:#x})", o.seed);
    rec.provenance = tp::collectProvenance();
    rec.provenance.devices = devices;
    rec.provenance.openblas = tp::cpuMathLibrary();
    if (!cuda) {
        rec.provenance.cpuKernels = tp::cpuKernelsInUse();
        if (const std::string w = tp::cpuMathWarning(); !w.empty() && reporter)
            fmt::print(stderr, "warning: {}\n", w);
    }
    if (o.jsonStream && reporter)
        emit({{"event", "start"}, {"model", o.model}, {"class", om->spec.className}, {"tp", sizes}, {"batch", o.batch},
              {"seq", o.seq}, {"decode_steps", o.decode}, {"logits", set.logits}, {"warmup", o.warmup}, {"iterations", o.iters}, {"weights", rec.settings.weights},
              {"backend", o.backend}, {"dtype", set.dtype}, {"emulated", emulate}, {"comm_model", set.commModel},
              {"devices", devices}});
    else if (!useCheckpoint && reporter)
        fmt::print(stderr, "note: {}; running seeded random weights\n",
                   om->checkpoint ? "--random-weights: the checkpoint is not read" : o.model + " has no checkpoint here");

    // The outputs are rewritten (each whole, on its own) as every tp size completes: a later size
    // that fails, or a Ctrl-C, keeps what finished. One that cannot be written costs no other.
    std::vector<std::string> failedOutputs;
    auto writeOutputs = [&] {
        failedOutputs.clear();
        for (const auto& [path, writer] : std::vector<std::pair<std::string, std::function<void(std::ostream&)>>>{
                 {o.trace, [&](std::ostream& s) { tp::writeChromeTrace(rec, s); }},
                 {o.json, [&](std::ostream& s) { tp::writeJson(rec, s); }},
                 {o.csv, [&](std::ostream& s) { tp::writeCsv(rec, s); }}})
            if (!path.empty())
                if (std::string bad = writeOutput(path, writer); !bad.empty())
                    failedOutputs.push_back(std::move(bad));
    };
    // What finished, said when a later size fails or the run is interrupted.
    auto kept = [&]() -> std::string {
        if (rec.runs.empty() || (o.trace.empty() && o.json.empty() && o.csv.empty()))
            return "";
        std::vector<int> done;
        for (const auto& r : rec.runs)
            done.push_back(r.tp);
        return fmt::format("; the outputs hold the finished tp size{} {}", done.size() > 1 ? "s" : "", fmt::join(done, ", "));
    };
    Interruption interruption(mpi.comm == nullptr);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        tp::RunOptions ro;
        ro.stop = interruption.token();
        ro.batch = o.batch;
        ro.seq = o.seq;
        ro.decodeSteps = o.decode;
        ro.lastPositionLogits = lastLogits; // as the graph was sharded
        ro.warmup = o.warmup;
        ro.tokens = o.tokens;
        ro.iterations = o.iters;
        ro.device = cuda ? tp::DeviceKind::Cuda : tp::DeviceKind::Cpu;
        ro.dtype = dtype;
        ro.emulate = emulate;
        ro.commModel = commModel ? &*commModel : nullptr;
        ro.collectiveTimeout = std::chrono::seconds(o.timeoutS);
        ro.maxHostBytes = o.maxMemory;
        ro.failRank = failRank;
        ro.failNode = failNode;
        ro.failKind = failKind;
        ro.keepLogits = !o.logitsFile.empty() && i + 1 == sizes.size();
        const int t = sizes[i];
        if (emulate && reporter && commModel->devices > 0 && t > commModel->devices)
            fmt::print(stderr, "note: T={} emulated with the collective figures of {}, a machine of {} devices\n", t,
                       commModel->id, commModel->devices);
        ro.progress = [&](int it, bool warm, double secs) {
            if (o.jsonStream)
                emit({{"event", "progress"}, {"tp", t}, {"iteration", it}, {"warmup", warm}, {"seconds", secs}});
            else
                fmt::print(stderr, "T={} {} {}: {:.2f} ms{}\n", t, warm ? "warm-up" : "iteration", it, secs * 1e3,
                           o.decode > 0 ? " prefill (time to first token)" : "");
        };
        std::vector<double> steps; // of the iteration, for the console's one line
        steps.reserve(static_cast<std::size_t>(o.decode));
        ro.stepProgress = [&](int it, bool warm, int step, double secs) {
            if (o.jsonStream) {
                emit({{"event", "step"}, {"tp", t}, {"iteration", it}, {"warmup", warm}, {"step", step}, {"seconds", secs}});
                return;
            }
            steps.push_back(secs);
            if (step + 1 == o.decode) {
                fmt::print(stderr, "T={} {} {}: {} decode steps, median {:.3f} ms\n", t, warm ? "warm-up" : "iteration", it,
                           o.decode, tp::percentile(steps, 0.5) * 1e3);
                steps.clear();
            }
        };
        auto r = mpi.comm ? tp::runModelRank(om->spec, graphs[i], weights, ro, *mpi.comm)
                          : tp::runModel(om->spec, graphs[i], weights, ro);
        if (!r && interruption.signal() != 0) {
            if (!rec.runs.empty() && !o.jsonStream)
                tp::writeConsole(rec, std::cout); // the finished sizes
            failWith(o, fmt::format("interrupted by {} during tp_size {}{}", strsignal(interruption.signal()), t, kept()));
            return 128 + interruption.signal();
        }
        if (!r) {
            return failWith(o, fmt::format("tp_size {}{}: {}{}", t,
                                           mpi.comm ? fmt::format(", process rank {}", mpi.comm->rank()) : "",
                                           r.status().message(), reporter ? kept() : ""));
        }
        if (!reporter)
            continue;
        if (!o.logitsFile.empty() && i + 1 == sizes.size())
            if (const std::string bad = writeOutput(o.logitsFile, [&](std::ostream& s) {
                   // [B·S × vocab], or [B × vocab] at the last positions
                   nlohmann::json j{{"tp", t}, {"vocab", r->vocab}, {"positions", set.logits}, {"logits", r->logits}};
                   if (o.decode > 0) {
                       j["step_logits"] = r->stepLogits;
                       j["generated"] = r->decode.generated; // [B][steps + 1]
                   }
                   s << j.dump(-1, ' ', false, tp::kReplaceInvalidUtf8) << "\n";
               });
                !bad.empty())
                return failWith(o, bad);
        tp::addRun(rec, graphs[i], *r);
        writeOutputs();
        const auto& run = rec.runs.back();
        if (o.jsonStream) {
            nlohmann::ordered_json res{{"event", "result"},       {"tp", t},
                                       {"median_s", run.medianSeconds}, {"tokens_per_s", run.tokensPerSecond},
                                       {"speedup", run.speedup},  {"comm_share", run.commShare},
                                       {"load_s", run.loadSeconds}};
            if (o.decode > 0)
                res["decode"] = {{"ttft_s", run.decode.ttftSeconds}, {"itl_median_s", run.decode.itlSeconds},
                                 {"itl_p10_s", run.decode.itlP10Seconds}, {"itl_p90_s", run.decode.itlP90Seconds},
                                 {"tokens_per_s", run.decode.tokensPerSecond}, {"speedup", run.decode.speedup},
                                 {"comm_share", run.decode.commShare}};
            emit(res);
        }
    }

    if (!reporter)
        return kOk;
    if (o.jsonStream)
        emit({{"event", "record"}, {"record", tp::recordToJson(rec)}});
    else
        tp::writeConsole(rec, std::cout);
    for (const auto& f : failedOutputs)
        failWith(o, f);
    return failedOutputs.empty() ? kOk : kBadInput;
}
} // namespace

std::function<int()> addRun(CLI::App& app)
{
    auto o = std::make_shared<RunOpts>();
    auto* run = app.add_subcommand(
        "run", "Run a plan on the embedded engine for each tp size — one thread per rank on the CPU or one GPU per rank "
               "(or every rank emulated on one device) — and print per-layer compute and communication, memory per rank "
               "and the speedup against T=1; write a Chrome trace, JSON record or CSV");
    run->add_option("--model", o->model, "Model: folder with a checkpoint, config.json, HF cache id or catalog id")
        ->required()
        ->check(kNonEmpty);
    run->add_option("--plan", o->planFile, "Plan JSON (overrides of the default plan under G3); default: the model's plan")
        ->check(kNonEmpty);
    run->add_option("--profile", o->profile, "Transformers generation for plan names: G1, G2, G3")
        ->check(CLI::IsMember({"G1", "G2", "G3"}))
        ->capture_default_str();
    auto* tpOpt = addIntListOption(run, "--tp", o->tp, 1, 256, "Tensor-parallel sizes, e.g. 1,2,4 (default 1,2)");
    run->add_option("--batch", o->batch, "Batch size")->check(CLI::Range(1, 4096))->capture_default_str();
    run->add_option("--seq", o->seq, "Sequence length (prefill; the prompt when decoding)")->check(CLI::Range(1, 65536))->capture_default_str();
    run->add_option("--decode", o->decode,
                    "Greedy decode steps after each prefill, one token per sequence each, on a per-rank KV cache: "
                    "reports time to first token, inter-token latency (median, p10, p90) and per-layer decode figures")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    run->add_option("--logits", o->logits,
                    "Positions whose logits prefill computes: all (every position, [B·S × vocab]: what the fidelity "
                    "tests compare; the default without --decode) or last (each sequence's last position only, as "
                    "generate() does - Transformers' logits_to_keep=1: the final norm, the lm_head GEMM and its "
                    "collective over B rows; the default with --decode)")
        ->check(CLI::IsMember({"all", "last"}));
    run->add_option("--warmup", o->warmup, "Untimed iterations")->check(CLI::Range(0, 1000))->capture_default_str();
    run->add_option("--iters", o->iters, "Timed iterations")->check(CLI::Range(1, 100000))->capture_default_str();
    run->add_option("--backend", o->backend,
                    "cpu (fp32 math, oneDNN and OpenBLAS) or cuda (cuBLAS, one GPU per rank; NCCL between them)")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    run->add_option("--dtype", o->dtype,
                    "Storage of weights and activations, fp32 accumulation: f32, bf16 or f16 (default: f32 on the CPU, "
                    "bf16 on CUDA)")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}));
    auto* emulateOpt = addIntListOption(run, "--emulate-tp", o->emulate, 1, 256,
                                        "Emulate these tp sizes on one device instead of --tp: every rank's shards run "
                                        "there one op at a time, collectives are done on the device and timed by the "
                                        "hardware profile's model; the record says 'emulated'");
    auto* hardwareOpt = run->add_option("--hardware", o->hardware,
                    "Hardware profile (built-in id or file) that models emulated collectives; default: the profile "
                    "of the device at hand (local-cpu; h200-sxm-8, h100-sxm-8, a100-sxm-8 by the GPU's name)");
    run->add_option("--comm", o->comm,
                    "local: one thread per rank in this process (CUDA: NCCL between them); mpi: one process per rank, "
                    "started by 'mpirun -n T tpstudio-cli run --comm mpi …' (T = the job's size; CUDA: NCCL "
                    "bootstrapped over MPI, one GPU per process)")
        ->check(CLI::IsMember({"local", "mpi"}))
        ->capture_default_str();
    run->add_option("--trace", o->trace, "Write Chrome trace-event JSON (opens in Perfetto / chrome://tracing)")->check(kNonEmpty);
    run->add_option("--json", o->json, "Write the run record (schema tpstudio.run/2)")->check(kNonEmpty);
    run->add_option("--csv", o->csv, "Write every span as CSV")->check(kNonEmpty);
    run->add_flag("--json-stream", o->jsonStream, "Print progress and results as JSON lines (for the GUI)");
    run->add_flag("--random-weights", o->randomWeights, "Ignore the checkpoint; use seeded random weights");
    run->add_option_function<std::string>(
           "--seed",
           [o](const std::string& v) {
               // Decimal or 0x-hexadecimal, all of it, within 64 bits: nothing wraps or is ignored.
               const bool hex = v.starts_with("0x") || v.starts_with("0X");
               const char* first = v.data() + (hex ? 2 : 0);
               const char* last = v.data() + v.size();
               std::uint64_t seed = 0;
               const auto [end, ec] = std::from_chars(first, last, seed, hex ? 16 : 10);
               if (first == last || ec != std::errc() || end != last)
                   throw CLI::ValidationError("--seed " + v, "a seed is a whole number from 0 to 2^64-1 (decimal or 0x hex)");
               o->seed = seed;
           },
           "Seed of random weights (default 0x5eed)")
        ->type_name("UINT");
    run->add_option("--timeout", o->timeoutS, "Seconds a collective may wait for the other ranks (watchdog)")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    addSizeOption(run, "--max-memory", o->maxMemory,
                  "Host memory the run may use (K/M/G/T suffixes); a run that needs more is refused before it "
                  "allocates. Default: what the host has available (MemAvailable, lowered by a cgroup or ulimit -v limit)");
    auto* tokensOpt = run->add_option("--tokens", o->tokens, "Token ids, B·S of them, comma-separated (default: a fixed sequence)")
                          ->delimiter(',');
    run->add_option("--tokens-file", o->tokensFile,
                    "Token ids from a file, B·S of them, separated by commas or white space (prompts too long for a "
                    "command line)")
        ->check(kNonEmpty)
        ->excludes(tokensOpt);
    run->add_option("--dump-logits", o->logitsFile,
                    "Write rank 0's logits of the last tp size as JSON: prefill's ([B·S × vocab], or [B × vocab] "
                    "with --logits last, the default when decoding: each sequence's last position as generate() "
                    "computes them); decoding, also each step's [B × vocab] and the generated tokens");
    run->add_option("--inject-failure", o->injectFailure,
                    "Testing: make RANK fail at graph node NODE: RANK:NODE[:error|oom|exception|hang]");
    emulateOpt->excludes(tpOpt);
    hardwareOpt->needs(emulateOpt);
    return [o] { return runVerb(*o); };
}

} // namespace tpcli
