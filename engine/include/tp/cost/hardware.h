// hardware.h — a machine as the cost model sees it: dense peak per dtype, memory bandwidth, a GEMM
// efficiency curve, and per-collective alpha-beta figures. Profiles are data files
// (plans/hardware/*.json, schema tpstudio.hardware/1), embedded in the binary; the formulas that
// use them are written down in docs/metrics.md.
//
//   HardwareProfile hw = findHardware("h100-sxm-8").value();
//   hw.collectiveSeconds(CollectiveKind::AllReduce, 4 << 20, 8);
#pragma once

#include "tp/core/status.h"
#include "tp/graph/layer_graph.h"
#include "tp/model/dtype.h"
#include "tp/plan/style.h"

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tp {

// A series of (x, y) points, x ascending: y at x by linear interpolation in log x, clamped to the
// first and last y outside them.
using Curve = std::vector<std::pair<double, double>>;
double curveAt(const Curve& c, double x);

struct CollectiveFigures
{
    double baseLatencyUs = 0;     // fixed cost of one call
    double hopLatencyUs = 0;      // per algorithm step (ring: 2(T-1) steps for all-reduce, T-1 otherwise)
    double busBandwidthGBps = 0;  // nccl-tests busbw the link sustains (large messages)
    // Size-dependent busbw: (full tensor bytes, GB/s) — a protocol's ramp (NCCL's LL below ~1 MB,
    // Simple or NVLS above) or what `calibrate` measured; empty: busBandwidthGBps at every size.
    Curve busBandwidthCurve;
};

// GEMM efficiency measured for one weight shape: (rows of x, fraction of peak) over rows ascending.
struct GemmSeries
{
    std::int64_t out = 0, in = 0;  // w [out, in]
    Curve rows;
};

// What `tpstudio-cli calibrate` measured with `ranks` ranks computing at once (each on its own
// core or device): the engine's own ops on this machine. Time of an op = the roofline with these
// efficiencies, or for memory-bound ops overhead + bytes / bandwidth.
struct CalibratedFigures
{
    int ranks = 1;
    std::vector<GemmSeries> gemm;                 // y = x·wᵀ, by weight shape
    Curve attention;                              // prefill: (GFLOP of one sequence's head, fraction of peak)
    Curve attentionDecode;                        // one query per sequence over its cache, the same
    std::map<OpKind, std::pair<double, double>> ops; // (overhead µs, GB/s) of norms, adds, rope, activation, embedding
    // Efficiency of a GEMM of `rows` × [out, in]: the measured shape nearest in log(out), log(in),
    // at `rows` (log-interpolated); 0 when nothing was measured.
    double gemmEfficiency(double rows, double out, double in) const;
};

struct HardwareProfile
{
    std::string id, name, interconnect, source;
    int devices = 0;                                 // GPUs (or cores for the local CPU) of one node
    // Several nodes of `devices` GPUs each: a group of more than `devices` ranks spans nodes and each of its
    // collectives runs at the network's figures (its slowest links); a pipeline stage boundary between nodes is one
    // GPU's send over its NIC.
    int nodes = 1;
    std::string network;                             // between nodes: "8 × 400 Gb/s InfiniBand NDR per node"
    std::map<CollectiveKind, CollectiveFigures> networkCollectives;
    double networkP2pLatencyUs = 0, networkP2pGBps = 0;
    double memoryGiB = 0;                            // per device, as the device reports it (nvidia-smi's total)
    // Kept back from every plan: the CUDA context, NCCL's buffers, cuBLAS workspaces and the allocator's slack.
    double memoryReserveGiB = 0;
    std::map<DType, double> peakTflops;              // dense, per device
    double memoryBandwidthGBps = 0;                  // per device
    double memoryEfficiency = 1.0;
    std::vector<std::pair<double, double>> gemmEfficiency; // (GFLOP of one GEMM, fraction of peak), ascending
    std::map<CollectiveKind, CollectiveFigures> collectives;
    std::vector<CalibratedFigures> calibrated;       // by ranks ascending; empty for datasheet profiles
    std::vector<std::string> sources;

    int totalDevices() const { return devices * nodes; }
    bool spansNodes(int ranks) const { return nodes > 1 && ranks > devices; }
    // One rank's send of `bytes` to the matching rank of the next pipeline stage: over the network between nodes,
    // else over the node's links (the all_gather figures: base latency + one hop, bytes at the bus bandwidth).
    double p2pSeconds(std::int64_t bytes, bool acrossNodes) const;
    double peakFlops(DType t) const;                 // FLOP/s; bf16 figure for dtypes without one
    // What a plan may use per device: memoryGiB less the reserve, in bytes.
    std::int64_t usableMemoryBytes() const;
    // "77.65 GiB (79.65 GiB less 2.00 GiB kept back)", or "80.00 GiB" without a reserve.
    std::string usableMemoryText() const;
    // Fraction of peak a GEMM of `flops` reaches: log-linear between the curve's points.
    double gemmEfficiencyAt(double flops) const;
    // Alpha-beta time of one collective of `bytes` (full tensor) over `ranks` ranks, with the busbw
    // of that size; a group that spans nodes takes the network's figures.
    double collectiveSeconds(CollectiveKind kind, std::int64_t bytes, int ranks) const;
    // The calibration taken with the most ranks at once not above `activeRanks` (else the fewest);
    // nullptr when the profile has none.
    const CalibratedFigures* calibratedFor(int activeRanks) const;
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
