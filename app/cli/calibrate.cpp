// calibrate.cpp — `tpstudio-cli calibrate`: measure this machine into a hardware profile the cost
// model reads (schema tpstudio.hardware/1 with a "calibrated" section; docs/metrics.md): the
// engine's own GEMMs, attention and memory-bound ops on its backend with 1 and N ranks at once,
// and the communicator's collectives per message size (bench comm's measurement).
#include "commands.h"
#include "interruption.h"

#include "tp/core/json.h"
#include "tp/core/units.h"
#include "tp/cost/hardware.h"
#include "tp/model/loader.h"
#include "tp/profile/calibrate.h"
#include "tp/profile/run_record.h"
#include "tp/runtime/backend.h"
#include "tp/runtime/gpu.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;

namespace tpcli {

namespace {

struct CalibrateOpts
{
    std::string backend = "cpu", comm = "local", dtype, output, id, name;
    std::vector<std::string> models;
    int ranks = 0;
    bool quick = false, install = false, force = false, jsonStream = false;
};

void emit(const nlohmann::ordered_json& j)
{
    std::cout << j.dump(-1, ' ', false, tp::kReplaceInvalidUtf8) << "\n" << std::flush;
}

std::string defaultId()
{
    std::string host = tp::collectProvenance().hostname;
    std::string id = "calibrated-";
    for (char c : host)
        id += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '-';
    return id.size() > 64 ? id.substr(0, 64) : id;
}

// Size-dependent figures of one collective from its times at `ranks`: the latency of the
// smallest message, and the bus bandwidth the rest need beyond it (nccl-tests' busbw of the time
// less that latency), for the sizes that are not latency-bound.
nlohmann::ordered_json collectiveFigures(const std::vector<CollectiveTiming>& rows, tp::CollectiveKind kind, int ranks)
{
    std::vector<CollectiveTiming> mine;
    for (const auto& r : rows)
        if (r.kind == kind)
            mine.push_back(r);
    const double alpha = mine.front().us;
    const double factor = tp::busBandwidthFactor(kind, ranks);
    auto curve = nlohmann::ordered_json::array();
    double last = 0;
    for (const auto& r : mine)
        if (r.us > alpha * 1.1) {
            last = std::clamp(factor * static_cast<double>(r.bytes) / ((r.us - alpha) * 1e3), 1e-3, 1e6);
            curve.push_back({r.bytes, last});
        }
    if (curve.empty()) { // every size latency-bound: the largest one's busbw over its whole time
        last = std::clamp(factor * static_cast<double>(mine.back().bytes) / (mine.back().us * 1e3), 1e-3, 1e6);
        curve.push_back({mine.back().bytes, last});
    }
    return {{"base_latency_us", alpha}, {"hop_latency_us", 0}, {"bus_bandwidth_gbps", last}, {"bus_bandwidth_curve", curve}};
}

nlohmann::ordered_json figuresJson(const tp::CalibratedFigures& f)
{
    auto gemm = nlohmann::ordered_json::array();
    for (const auto& g : f.gemm)
        gemm.push_back({{"out", g.out}, {"in", g.in}, {"rows", g.rows}});
    nlohmann::ordered_json ops = nlohmann::ordered_json::object();
    for (const auto& [kind, v] : f.ops)
        ops[tp::opKindName(kind)] = {{"overhead_us", v.first}, {"bandwidth_gbps", v.second}};
    return {{"ranks", f.ranks}, {"gemm", gemm}, {"attention", f.attention}, {"attention_decode", f.attentionDecode}, {"ops", ops}};
}

int calibrate(const CalibrateOpts& o)
{
    auto fail = [&](const std::string& m) {
        if (o.jsonStream)
            emit({{"event", "error"}, {"message", m}});
        else
            fmt::print(stderr, "tpstudio-cli calibrate: {}\n", m);
        return int(kBadInput);
    };
    const bool cuda = o.backend == "cuda";
    if (o.comm == "mpi")
        return fail("--comm mpi is not measured by calibrate; time MPI with 'mpirun -n N tpstudio-cli bench comm --comm mpi' "
                    "and put its figures in the profile's 'collectives'");
    if (o.comm == "nccl" && !cuda)
        return fail("--comm nccl needs --backend cuda");
    if (cuda && o.comm == "local")
        return fail("--backend cuda measures its collectives with --comm nccl");
    if (o.output.empty() == !o.install)
        return fail("name the profile's file with -o FILE, or --install it among your calibrated profiles");
    const std::string id = o.id.empty() ? defaultId() : o.id;
    const bool idOk = !id.empty() && id.size() <= 64 && std::isalnum(static_cast<unsigned char>(id[0]))
        && std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; });
    if (!idOk)
        return fail(fmt::format("--id '{}': an id is 1 to 64 letters, digits, '-' and '_', starting with a letter or digit "
                                "(it names the profile's file)",
                                tp::terminalSafe(id)));
    for (const auto& b : tp::builtinHardwareIds())
        if (b == id)
            return fail(fmt::format("--id '{}' is a built-in profile's id; choose another", id));
    std::string output = o.output;
    if (o.install) {
        const std::string dir = tp::userHardwareDir();
        if (dir.empty())
            return fail("no folder for calibrated profiles: set TPSTUDIO_HARDWARE_DIR, XDG_DATA_HOME or HOME");
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (ec)
            return fail(fmt::format("cannot make the folder '{}': {}", dir, ec.message()));
        output = dir + "/" + id + ".json";
        // An installed profile is replaced only when asked, and a link there is never written through
        // (it could name any file of this user's).
        const auto st = fs::symlink_status(output, ec);
        if (fs::is_symlink(st))
            return fail(fmt::format("{} is a symbolic link; calibrate --install does not write through links (remove it, "
                                    "or write the profile with -o FILE)",
                                    tp::terminalSafe(output)));
        if (fs::exists(st) && !o.force)
            return fail(fmt::format("a profile '{}' is already installed ({}); --force replaces it, --id names another",
                                    id, tp::terminalSafe(output)));
    } else if (o.force) {
        return fail("--force only applies with --install (-o replaces its file as every output does)");
    }
    if (const std::string bad = checkOutputPaths({{o.install ? "--install" : "-o", output}}, o.models); !bad.empty())
        return fail(bad);

    // The ranks measured at once: every core (CPU, at most 8) or every GPU.
    int ranks = o.ranks;
    if (ranks == 0) {
        if (cuda) {
            auto inv = tp::gpu::probe();
            ranks = inv ? std::max<int>(1, static_cast<int>(inv->devices.size())) : 1;
        } else {
            ranks = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
        }
    }
    if (!cuda && ranks > static_cast<int>(std::max(1u, std::thread::hardware_concurrency())))
        return fail(fmt::format("--ranks {}: this machine has {} logical cores, and ranks beyond them would share one "
                                "(what calibrate measures is a core each)",
                                ranks, std::max(1u, std::thread::hardware_concurrency())));
    // Refused before anything is allocated when the ranks' pools and buffers would not fit.
    if (!cuda) {
        const std::int64_t perRank = tp::calibrationBytesPerRank(tp::DeviceKind::Cpu), have = tp::hostMemoryAvailable();
        if (perRank * ranks > have)
            return fail(fmt::format("{} ranks need about {} of host memory and {} is available; nothing was allocated "
                                    "(fewer --ranks)",
                                    ranks, tp::humanBytes(static_cast<double>(perRank * ranks)),
                                    tp::humanBytes(static_cast<double>(have))));
    }
    const std::string dtypeName = !o.dtype.empty() ? o.dtype : cuda ? "bf16" : "f32";
    const tp::DType dt = dtypeName == "bf16" ? tp::DType::BF16 : dtypeName == "f16" ? tp::DType::F16 : tp::DType::F32;

    tp::CalibrateOptions co;
    co.ranks = ranks;
    co.quick = o.quick;
    for (const auto& m : o.models) {
        auto om = tp::openModel(m);
        if (!om)
            return fail(om.status().message());
        if (const std::string why = treeTooLarge(*om, m, false); !why.empty())
            return fail(why);
        for (int t = 1; t <= ranks; t *= 2)
            for (const auto& s : linearShapes(om->spec, t))
                co.shapes.push_back(s);
    }
    Interruption interruption(true);
    const auto started = std::chrono::steady_clock::now();
    co.progress = [&](double fraction, const std::string& what) {
        if (interruption.signal() != 0)
            return false;
        if (o.jsonStream)
            emit({{"event", "progress"}, {"fraction", fraction * (ranks > 1 ? 0.9 : 1.0)}, {"what", what}});
        return true;
    };
    if (o.jsonStream)
        emit({{"event", "start"}, {"backend", o.backend}, {"ranks", ranks}, {"quick", o.quick}});
    else
        fmt::print(stderr, "calibrating {} rank{} on {} ({}), {}…\n", ranks, ranks > 1 ? "s" : "", o.backend, dtypeName,
                   o.quick ? "quick" : "about a minute");
    auto cal = tp::calibrateOps(
        [&](int r) { return cuda ? tp::makeCudaBackend(r, dt) : tp::makeCpuBackend(dt); }, co);
    if (interruption.signal() != 0) {
        fail("interrupted; nothing was written");
        return 128 + interruption.signal();
    }
    if (!cal)
        return fail(cal.status().message());

    nlohmann::ordered_json collectives;
    std::string commSource;
    if (ranks > 1) {
        if (o.jsonStream)
            emit({{"event", "progress"}, {"fraction", 0.9}, {"what", fmt::format("collectives on {} ranks ({})", ranks, o.comm)}});
        auto rows = timeCollectives(o.comm, ranks, dtypeName, o.quick ? std::int64_t(4) << 20 : std::int64_t(64) << 20,
                                    o.quick ? 8 : 4, o.quick ? 5 : 20);
        if (interruption.signal() != 0) {
            fail("interrupted; nothing was written");
            return 128 + interruption.signal();
        }
        if (!rows)
            return fail(rows.status().message());
        for (auto kind : {tp::CollectiveKind::AllReduce, tp::CollectiveKind::AllGather, tp::CollectiveKind::ReduceScatter,
                          tp::CollectiveKind::AllToAll})
            collectives[tp::collectiveName(kind)] = collectiveFigures(*rows, kind, ranks);
        commSource = fmt::format("collectives: the {} communicator's out-of-place times on {} ranks ({} sizes from 8 B, data "
                                 "checked); base latency = the smallest message's time, busbw per size from the time beyond it; "
                                 "hop latency 0 (one rank count measured)",
                                 o.comm, ranks, rows->size() / 4);
    } else {
        auto cpu = tp::findHardware("local-cpu");
        for (const auto& [kind, f] : cpu->collectives)
            collectives[tp::collectiveName(kind)] = {{"base_latency_us", f.baseLatencyUs}, {"hop_latency_us", f.hopLatencyUs},
                                                     {"bus_bandwidth_gbps", f.busBandwidthGBps}};
        commSource = "collectives: one rank, nothing to measure; the local-cpu profile's figures";
    }

    const tp::Provenance p = tp::collectProvenance();
    std::string device = p.cpuModel;
    // A device's memory is what the device has: the host's physical memory shared by the ranks, not
    // this process's momentary headroom (ulimit -v, other processes).
    const double physical = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
    double memoryGiB = physical / ranks / double(1 << 30);
    if (cuda) {
        if (auto inv = tp::gpu::probe(); inv && !inv->devices.empty()) {
            device = inv->devices.front().name;
            memoryGiB = static_cast<double>(inv->devices.front().memoryBytes) / double(1 << 30);
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    nlohmann::ordered_json peak;
    for (const char* d : {"bf16", "f16", "f32"})
        if (!cuda || d == dtypeName || std::string(d) == "bf16")
            peak[d] = cal->peakTflops;
    auto calibrated = nlohmann::ordered_json::array();
    for (const auto& f : cal->figures)
        calibrated.push_back(figuresJson(f));
    const std::string name = !o.name.empty() ? o.name : fmt::format("{} ({}, {} ranks, calibrated)", device, o.backend, ranks);
    nlohmann::ordered_json j{
        {"schema", "tpstudio.hardware/1"},
        {"id", id},
        {"name", tp::terminalSafe(name)},
        {"devices", ranks},
        {"memory_gib", std::max(memoryGiB, 1e-3)},
        {"memory_reserve_gib", cuda ? std::min(2.0, memoryGiB / 2) : 0.0},
        {"interconnect", cuda ? "NCCL between the GPUs" : "shared memory, in-process communicator"},
        {"peak_tflops", peak},
        {"memory_bandwidth_gbps", std::max(cal->memoryBandwidthGBps, 1e-3)},
        {"memory_efficiency", 1.0},
        {"collectives", collectives},
        {"calibrated", calibrated},
        {"provenance",
         {{"tool", "tpstudio-cli calibrate"}, {"tpstudio", p.tpstudio}, {"host", p.hostname}, {"device", device},
          {"backend", o.backend}, {"storage_dtype", dtypeName}, {"communicator", o.comm}, {"ranks", ranks},
          {"quick", o.quick}, {"models", o.models}, {"math", cuda ? std::string("cuBLAS") : tp::cpuMathLibrary()},
          {"kernels", cuda ? std::string() : tp::cpuKernelsInUse()}, {"measured_at", p.startedAt},
          {"seconds", seconds}, {"measurements", cal->measurements}}},
        {"sources",
         {fmt::format("measured by tpstudio-cli calibrate on {} ({}) at {}: the engine's {} backend, {} storage, 1 and {} "
                      "ranks at once{}",
                      p.hostname, device, p.startedAt, o.backend, dtypeName, ranks, o.quick ? ", quick" : ""),
          fmt::format("peak_tflops: the best GEMM rate one rank reached ({:.1f} GFLOP/s); calibrated GEMM and attention "
                      "efficiencies are fractions of it",
                      cal->peakTflops * 1e3),
          "memory_bandwidth_gbps: one rank's one-row GEMM over a 4096 x 4096 weight (memory_efficiency 1)",
          cuda ? "memory_gib: the first GPU's memory as the device reports it; memory_reserve_gib: 2 GiB kept back for the "
                 "CUDA context, NCCL's buffers and cuBLAS workspaces, as the built-in GPU profiles (edit it to what your "
                 "stack keeps)"
               : "memory_gib: the host's physical memory divided among the ranks (none kept back)",
          commSource}}};
    // The profile must read back as the cost model reads it.
    const std::string text = j.dump(2, ' ', false, tp::kReplaceInvalidUtf8) + "\n";
    if (auto back = tp::parseHardwareJson(text, output); !back)
        return fail(fmt::format("the measured profile does not parse: {}", back.status().message()));
    if (const std::string bad = writeOutput(output, [&](std::ostream& out) { out << text; }); !bad.empty())
        return fail(bad);
    const std::string abs = fs::absolute(output).string();
    if (o.jsonStream) {
        emit({{"event", "done"}, {"path", abs}, {"id", id}, {"seconds", seconds}});
    } else {
        fmt::print("wrote {} ({}) in {:.1f} s: peak {:.1f} GFLOP/s per rank, memory {:.1f} GB/s, {} measurements\n", abs, id,
                   seconds, cal->peakTflops * 1e3, cal->memoryBandwidthGBps, cal->measurements);
        if (o.install)
            fmt::print("use it as --hardware {}\n", id);
    }
    return kOk;
}

} // namespace

std::function<int()> addCalibrate(CLI::App& app)
{
    auto o = std::make_shared<CalibrateOpts>();
    auto* cmd = app.add_subcommand(
        "calibrate", "Measure this machine into a hardware profile for the cost model: the engine's GEMMs per weight shape "
                     "and row count, attention, memory-bound ops (1 and N ranks at once) and each collective per message "
                     "size (schema: docs/metrics.md)");
    cmd->add_option("--backend", o->backend, "cpu (oneDNN and OpenBLAS, one core per rank) or cuda (one GPU per rank)")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    cmd->add_option("--comm", o->comm, "Communicator whose collectives are timed: local (CPU threads) or nccl (CUDA)")
        ->check(CLI::IsMember({"local", "nccl", "mpi"}))
        ->capture_default_str();
    cmd->add_option("--ranks", o->ranks, "Ranks measured at once (default: every core up to 8, or every GPU)")->check(CLI::Range(1, 64));
    cmd->add_option("--dtype", o->dtype, "Storage dtype of the ops (default: f32 on the CPU, bf16 on CUDA)")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}));
    cmd->add_option("--model", o->models, "Also measure this model's Linear shards at T = 1, 2, 4 … ranks (repeatable)")
        ->check(kNonEmpty);
    cmd->add_flag("--quick", o->quick, "Fewer sizes, shorter timing (seconds instead of about a minute)");
    cmd->add_option("-o,--output", o->output, "Write the profile to this file")->check(kNonEmpty);
    cmd->add_flag("--install", o->install,
                  "Write it among your calibrated profiles (TPSTUDIO_HARDWARE_DIR, else ~/.local/share/tpstudio/hardware), "
                  "usable as --hardware ID everywhere");
    cmd->add_flag("--force", o->force, "With --install: replace the installed profile of the same id");
    cmd->add_option("--id", o->id, "The profile's id (default: calibrated-HOSTNAME)");
    cmd->add_option("--name", o->name, "The profile's display name");
    cmd->add_flag("--json-stream", o->jsonStream, "Print progress as JSON lines (for the GUI)");
    return [o, cmd] { return cmd->parsed() ? calibrate(*o) : -1; };
}

} // namespace tpcli
