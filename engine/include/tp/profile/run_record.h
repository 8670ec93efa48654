// run_record.h — what one `run` measured, and its reporters. Measurement produces records; the
// console table, JSON (schema tpstudio.run/2; /1, from before decode, still reads), CSV and Chrome
// trace-event JSON are views of it. A run has phases: prefill (the top-level figures of each tp
// size) and, when it decodes, the decode steps (TpRun::decode).
//
//   RunRecord rec = makeRecord(settings);
//   addRun(rec, spec, graph, result);   // once per tp size, T=1 first when it is measured
//   writeChromeTrace(rec, out);         // pid = rank, tid = tp size, "X" events in µs
#pragma once

#include "tp/core/status.h"
#include "tp/profile/span.h"
#include "tp/shard/sharded_graph.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tp {

struct RunSettings
{
    std::string model;         // as given
    std::string modelClass;
    std::string plan;          // file, or "default"
    // What the run ran, unambiguously (empty in records from before them): the model as an absolute
    // path (or the catalog / Hub id it was), the plan file's absolute path, and digests of the
    // model's tensors, its config and the plan (compare.h) that `report --hardware` holds the
    // reopened files to.
    std::string modelPath, planPath, modelDigest, configDigest, planDigest;
    std::string backend = "cpu";
    std::string communicator = "local";
    std::string dtype = "f32"; // storage of weights and activations (fp32 accumulation)
    bool emulated = false;     // ranks emulated on one device, communication modelled
    std::string commModel;     // the hardware profile that modelled it (emulated runs)
    std::int64_t batch = 1, seq = 1;   // seq: the prompt (prefill) length
    int decodeSteps = 0;               // greedy decode steps after each prefill
    // Which positions prefill computes logits at: "all" (every one, [B·S × vocab]) or "last" (each
    // sequence's last, as generate(): the final norm, the head and its collective over B rows).
    // Records from before the field: "last" when they decode, else "all".
    std::string logits = "all";
    int warmup = 0, iterations = 1;
    std::string weights;       // "checkpoint" or "random (seed …)"
};

struct Provenance
{
    std::string cpuModel;
    int logicalCores = 0;
    std::string hostname, os, compiler, openblas, tpstudio, startedAt;
    std::string libraries;     // fmt, nlohmann-json, MPI versions this build uses
    std::string cpuKernels;    // cpuKernelsInUse(): the BLAS kernel and vector ISA a CPU run used
    std::string devices;       // the devices the ranks ran on ("cpu", "cuda:0 NVIDIA H200 (139 GiB)")
};
// Host facts (CPU, OS, compiler, this build's library versions); the front end adds what the run
// used (openblas = cpuMathLibrary(), cpuKernels = cpuKernelsInUse(), devices).
Provenance collectProvenance();

struct RecordedSpan
{
    int rank = 0;
    std::string name;          // node name, or node name + "/" + collective kind
    std::string kind;          // "compute" | "comm"
    std::string op;            // op kind or collective kind
    int layer = -1;
    double startUs = 0, endUs = 0;
    std::int64_t bytes = 0;
    // Comm spans: how long this rank waited for the others to arrive. A comm span starts when its
    // rank arrives at the collective; the transfer can start when the last rank of the same
    // collective of the same forward arrives, so waitUs = last arrival − this arrival, within
    // [0, endUs − startUs], and the rest is the transfer. 0 for compute, for the last rank to arrive,
    // for emulated runs (their collectives start when the last rank arrives: the wait is the gap
    // before the span) and in records from before the field.
    double waitUs = 0;
};

// The value below which a fraction p of the samples lie: sorted[min(n − 1, ⌊p·n⌋)] (p = 0.5: the
// median, the upper one of an even count). 0 for no samples.
double percentile(std::vector<double> samples, double p);

struct LayerTiming
{
    int layer = -1;            // -1: outside the decoder layers
    double computeUs = 0;      // slowest rank
    double commUs = 0;
    // Spread of compute + comm over the timed iterations (prefill) or the sampled steps of the last
    // iteration (decode): min, median, max. hasSpread false: not measured (records before it).
    bool hasSpread = false;
    double minUs = 0, medianUs = 0, maxUs = 0;
};

// Per-layer totals of one forward's spans (slowest rank per layer) and the slowest rank's share of
// communication, with the spans named.
struct PhaseTiming
{
    std::vector<LayerTiming> layers;
    std::vector<RecordedSpan> spans;
    double commShare = 0;
};

// The decode phase of one tp size.
struct DecodeRun
{
    int steps = 0;                      // 0: the run did not decode
    std::vector<double> stepSeconds;    // every timed step
    double ttftSeconds = 0;             // time to first token: the median prefill, first token picked
    double itlSeconds = 0;              // inter-token latency: median step
    double itlP10Seconds = 0, itlP90Seconds = 0;
    double tokensPerSecond = 0;         // batch / median step
    double speedup = 0;                 // median step at T=1 / at T; 0 when T=1 was not run
    double commShare = 0;               // of the representative step, slowest rank
    int spanStep = -1;                  // the step of the last iteration whose spans these are (its median)
    std::vector<LayerTiming> layers;    // of that step
    std::vector<RecordedSpan> spans;
    std::vector<std::vector<std::int32_t>> generated; // per sequence: the tokens of the last iteration
};

struct TpRun
{
    int tp = 1;
    double loadSeconds = 0;
    std::vector<double> iterationSeconds;
    double medianSeconds = 0;
    double tokensPerSecond = 0;
    double speedup = 0;        // vs T=1 of the same invocation; 0 when T=1 was not run
    double commShare = 0;      // comm / (compute + comm) on the slowest rank, from the spans
    // Mean cores other processes kept busy while this size ran (host_load.h); -1: not measured
    // (MPI ranks, records from before it). hostWasLoaded() says when it disturbs the timings.
    double hostOtherCores = -1;
    std::vector<LayerTiming> layers;
    std::vector<RecordedSpan> spans; // last timed iteration, every rank
    std::vector<RankFootprint> memory; // per rank: weights, workspace, allocations
    DecodeRun decode;
};

struct RunRecord
{
    RunSettings settings;
    Provenance provenance;
    std::vector<TpRun> runs;
};

// Folds one tp size's measurement into the record (per-layer totals, speedup against a T=1 run).
void addRun(RunRecord& record, const ShardedGraph& g, const Measurement& result);

nlohmann::ordered_json recordToJson(const RunRecord& record);
// Reads a record written by writeJson back (schema tpstudio.run/2, or /1); errors name the file and key.
Result<RunRecord> parseRunRecord(std::string_view text, const std::string& source);
void writeJson(const RunRecord& record, std::ostream& out);
void writeCsv(const RunRecord& record, std::ostream& out);          // one row per span (phase prefill or decode)
// chrome://tracing, Perfetto: pid = rank; tid = T for prefill, 256 + T for the representative decode step
void writeChromeTrace(const RunRecord& record, std::ostream& out);
void writeConsole(const RunRecord& record, std::ostream& out);      // per-layer table + summary
// The tp sizes that ran while other processes kept the host busy (hostWasLoaded), as one sentence
// for the console and the GUI; "" when none did or nothing was measured.
std::string hostLoadWarning(const RunRecord& record);

} // namespace tp
