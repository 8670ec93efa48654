// calibrate.h — measure the engine's own ops on this machine, for a hardware profile the cost
// model reads (CalibratedFigures in tp/cost/hardware.h): GEMM efficiency per weight shape over the
// row counts prefill and decode use, attention efficiency over its work per head, and the overhead
// and bandwidth of the memory-bound ops. Ranks run at once, one backend each (a core or a GPU),
// so that shared memory bandwidth is counted as a TP run meets it. Collectives are measured by the
// communicator's benchmark (tpstudio-cli bench comm), not here.
//
//   CalibrateOptions o{.ranks = 2};
//   Result<Calibration> c = calibrateOps([](int r) { return makeCpuBackend(DType::F32); }, o);
//   c->figures;   // one CalibratedFigures for 1 rank, one for o.ranks
#pragma once

#include "tp/core/status.h"
#include "tp/cost/hardware.h"
#include "tp/runtime/backend.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tp {

struct CalibrateOptions
{
    int ranks = 1;                 // the most ranks measured at once (figures for 1 and for this many)
    bool quick = false;            // fewer sizes and shorter timing: seconds, for tests
    // Weight shapes (out, in) to measure besides the built-in grid: a model's Linear shards.
    std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
    // Called before each measurement with the fraction done and what comes; false stops the work
    // (Cancelled).
    std::function<bool(double fraction, const std::string& what)> progress;
};

struct Calibration
{
    std::vector<CalibratedFigures> figures;   // ranks ascending
    double peakTflops = 0;                    // the best GEMM rate one rank reached (the efficiencies' 1.0)
    double memoryBandwidthGBps = 0;           // one rank streaming a large weight (a one-row GEMM)
    int measurements = 0;
};

using BackendFactory = std::function<Result<std::unique_ptr<Backend>>(int rank)>;

// Runs every measurement on `ranks` backends from `make` (rank r on backend r): the median over
// repetitions of the slowest rank's time, the faster of two passes' medians.
// Each rank needs calibrationBytesPerRank() of its device.
Result<Calibration> calibrateOps(const BackendFactory& make, const CalibrateOptions& options);

// What one rank allocates at most (f32): the cold-weight pool (2^24 elements + 4 x the last-level
// cache) and the largest measurement's buffers.
std::int64_t calibrationBytesPerRank(DeviceKind device);

} // namespace tp
