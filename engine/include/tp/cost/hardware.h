// hardware.h — a machine as the cost model sees it: dense peak per dtype, memory bandwidth, a GEMM
// efficiency curve, and per-collective alpha-beta figures. Profiles are data files
// (plans/hardware/*.json, schema tpstudio.hardware/1), embedded in the binary; the formulas that
// use them are written down in docs/metrics.md.
//
//   HardwareProfile hw = findHardware("h100-sxm-8").value();
//   hw.collectiveSeconds(CollectiveKind::AllReduce, 4 << 20, 8);
#pragma once

#include "tp/core/status.h"
#include "tp/model/dtype.h"
#include "tp/plan/style.h"

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tp {

struct CollectiveFigures
{
    double baseLatencyUs = 0;     // fixed cost of one call
    double hopLatencyUs = 0;      // per algorithm step (ring: 2(T-1) steps for all-reduce, T-1 otherwise)
    double busBandwidthGBps = 0;  // nccl-tests busbw the link sustains
};

struct HardwareProfile
{
    std::string id, name, interconnect, source;
    int devices = 0;                                 // GPUs (or cores for the local CPU)
    double memoryGiB = 0;
    std::map<DType, double> peakTflops;              // dense, per device
    double memoryBandwidthGBps = 0;                  // per device
    double memoryEfficiency = 1.0;
    std::vector<std::pair<double, double>> gemmEfficiency; // (GFLOP of one GEMM, fraction of peak), ascending
    std::map<CollectiveKind, CollectiveFigures> collectives;
    std::vector<std::string> sources;

    double peakFlops(DType t) const;                 // FLOP/s; bf16 figure for dtypes without one
    // Fraction of peak a GEMM of `flops` reaches: log-linear between the curve's points.
    double gemmEfficiencyAt(double flops) const;
    // Alpha-beta time of one collective of `bytes` (full tensor) over `ranks` ranks.
    double collectiveSeconds(CollectiveKind kind, std::int64_t bytes, int ranks) const;
};

// nccl-tests bus-bandwidth factor: all-reduce 2(n-1)/n, all-gather / reduce-scatter / all-to-all (n-1)/n.
double busBandwidthFactor(CollectiveKind kind, int ranks);

Result<HardwareProfile> parseHardwareJson(std::string_view text, const std::string& source);
// A built-in id ("h100-sxm-8", "local-cpu", …), the id of a profile in userHardwareDir() (what
// `tpstudio-cli calibrate --install` writes), or a path to a profile file. Built-in ids win.
Result<HardwareProfile> findHardware(const std::string& idOrPath);
std::vector<std::string> builtinHardwareIds();

// Where calibrated profiles of this user live: $TPSTUDIO_HARDWARE_DIR, else
// $XDG_DATA_HOME/tpstudio/hardware, else ~/.local/share/tpstudio/hardware ("" without a home).
std::string userHardwareDir();
// The profiles there that parse (<id>.json whose id is the file's name, not a built-in id), by id.
// Files that do not parse are left out; `errors` (when given) gets one line for each.
std::vector<HardwareProfile> userHardwareProfiles(std::vector<std::string>* errors = nullptr);

} // namespace tp
