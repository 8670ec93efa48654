// span.h — what the engine measures: timed spans of graph nodes and collectives on every rank, and
// the measurement of one tp size. The runtime produces these; run records and reporters read them.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tp {

// One timed piece of work on one rank (a graph node's compute, or one of its collectives).
struct Span
{
    int rank = 0;
    int node = -1;                             // index into the graph's nodes
    int collective = -1;                       // index into ShardedGraph::collectives, -1: compute
    int layer = -1;
    double startUs = 0;                        // from the iteration's start
    double endUs = 0;
    std::int64_t bytes = 0;                    // collectives: the full tensor's bytes
};

// What one rank held on its device: weights, the activation arena (activations, pre-collective
// buffers, op scratch, planned once), and how many allocations it made in all.
struct RankFootprint
{
    std::int64_t weightBytes = 0;
    std::int64_t workspaceBytes = 0;
    std::int64_t allocations = 0;
};

// The decode phase of a run: greedy steps of one token per sequence after each prefill.
struct DecodeMeasurement
{
    int steps = 0;                             // decode steps after each prefill (0: prefill only)
    std::int64_t batch = 0;
    std::vector<double> stepSeconds;           // every timed iteration's steps, in order
    std::vector<Span> spans;                   // every rank, one representative step of the last iteration: the
                                               // median of up to 64 evenly spaced steps
    int spanStep = -1;                         // which step of the last iteration that is
    // Per layer (index layer + 1; 0: outside the layers), per sampled step of the last iteration:
    // compute + communication µs, each the slowest rank's (the per-layer rule of the record's layers).
    std::vector<std::vector<double>> layerSamplesUs;
    std::vector<std::vector<std::int32_t>> generated; // per sequence, the steps + 1 tokens of the last iteration
                                                      // (the first from prefill)
};

// What one run of one tp size measured.
struct Measurement
{
    int tpSize = 1;
    double loadSeconds = 0;                    // slowest rank: weights loaded and on the device
    std::vector<double> iterationSeconds;      // timed iterations (not warm-up): prefill, and the first
                                               // token's argmax when decoding (time to first token)
    std::vector<Span> spans;                   // every rank, last timed iteration's prefill
    std::vector<RankFootprint> footprint;      // per rank
    // Per layer (index layer + 1; 0: outside the layers), per timed iteration: prefill's compute +
    // communication µs, each the slowest rank's (the per-layer rule of the record's layers). Its
    // spread over iterations is the noise of a layer's figure.
    std::vector<std::vector<double>> layerSamplesUs;
    // Single-device emulation: compute spans were measured one rank at a time on one device,
    // collective spans and the iteration times come from the hardware profile's model.
    bool emulated = false;
    // Mean cores other processes kept busy from weight loading to the last step (host_load.h); -1:
    // not measured (one process per rank, where the other ranks are other processes).
    double hostOtherCores = -1;
    DecodeMeasurement decode;
};

// Re-times one iteration of emulated ranks as T real devices would run it: compute spans keep their
// measured durations back to back, each collective starts when the last rank reaches it and takes
// `modeledUs` of it. `spans` holds every rank's spans, each rank's in execution order; they are
// rewritten in place. Returns the iteration's length in µs (the slowest rank's end).
double emulateTimeline(std::vector<Span>& spans, int ranks, const std::function<double(const Span&)>& modeledUs);

} // namespace tp
