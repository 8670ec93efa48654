// devices.cpp — `tpstudio-cli devices`: what the engine can run on here (the GUI's Run page lists it).
#include "commands.h"
#include "tp/core/json.h"

#include "tp/core/units.h"
#include "tp/profile/run_record.h"
#include "tp/runtime/backend.h"
#include "tp/runtime/gpu.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

namespace tpcli {

namespace {

std::string version(int v) { return v > 0 ? fmt::format("{}.{}", v / 1000, v % 1000 / 10) : "?"; }
std::string ncclVersion(int v) { return v > 0 ? fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100) : "?"; }

int devicesVerb(bool json)
{
    const tp::Provenance p = tp::collectProvenance();
    const std::int64_t hostBytes = tp::makeCpuBackend(tp::DType::F32).value()->availableBytes();
    const auto inv = tp::gpu::probe();
    if (json) {
        nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
        nlohmann::ordered_json cuda = {{"built", tp::gpu::built()}, {"available", inv.ok()}};
        if (inv) {
            for (const auto& d : inv->devices)
                gpus.push_back({{"index", d.index}, {"name", d.name}, {"compute_capability", fmt::format("{}.{}", d.major, d.minor)},
                                {"memory_bytes", d.memoryBytes}, {"multiprocessors", d.multiprocessors}});
            cuda["driver"] = version(inv->driverVersion);
            cuda["runtime"] = version(inv->runtimeVersion);
            cuda["cublas"] = inv->cublasVersion;
            cuda["nccl"] = ncclVersion(inv->ncclVersion);
        } else {
            cuda["reason"] = inv.status().message();
        }
        cuda["devices"] = gpus;
        std::cout << nlohmann::ordered_json({{"cpu", {{"model", p.cpuModel}, {"logical_cores", p.logicalCores},
                                                      {"available_bytes", hostBytes}, {"math_library", tp::cpuMathLibrary()},
                                                      {"kernels", tp::cpuKernelsInUse()}, {"warning", tp::cpuMathWarning()}}},
                                             {"cuda", cuda}})
                         .dump(2, ' ', false, tp::kReplaceInvalidUtf8)
                  << "\n";
        return kOk;
    }
    fmt::print("cpu      {}, {} logical cores, {} available; {} (storage f32, bf16, f16)\n", p.cpuModel, p.logicalCores,
               tp::humanBytes(static_cast<double>(hostBytes)), tp::cpuMathLibrary());
    fmt::print("         {}\n", tp::cpuKernelsInUse());
    if (const std::string w = tp::cpuMathWarning(); !w.empty())
        fmt::print("warning: {}\n", w);
    if (!inv) {
        fmt::print("cuda     none: {}\n", inv.status().message());
        return kOk;
    }
    for (const auto& d : inv->devices)
        fmt::print("cuda:{:<3} {}, sm_{}{}, {}, {} multiprocessors\n", d.index, d.name, d.major, d.minor,
                   tp::humanBytes(static_cast<double>(d.memoryBytes)), d.multiprocessors);
    fmt::print("         driver {}, runtime {}, cuBLAS {}, NCCL {}\n", version(inv->driverVersion), version(inv->runtimeVersion),
               inv->cublasVersion, ncclVersion(inv->ncclVersion));
    return kOk;
}

} // namespace

std::function<int()> addDevices(CLI::App& app)
{
    auto json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("devices", "List what the engine can run on here: the CPU and every visible CUDA device");
    cmd->add_flag("--json", *json, "Print JSON");
    return [json] { return devicesVerb(*json); };
}

} // namespace tpcli
