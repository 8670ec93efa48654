// executor.h — runs a sharded graph for real: one thread per rank, each with its Backend (CPU or
// CUDA) and Communicator, walking the same ShardedGraph the planner previews, so the collectives it
// issues are the graph's Collective nodes. The executor holds no arithmetic: every op is a backend
// call on tensors planned once, before the first iteration, in one arena per rank.
//
//   RunOptions o{.batch = 1, .seq = 16};
//   o.device = DeviceKind::Cuda; o.dtype = DType::BF16;
//   auto r = runModel(spec, graph, {.checkpoint = &ck}, o);
//   r->logits  // rank 0's [B·S, vocab] as fp32
#pragma once

#include "tp/core/status.h"
#include "tp/cost/hardware.h"
#include "tp/profile/span.h"
#include "tp/runtime/tensor.h"
#include "tp/runtime/weights.h"
#include "tp/shard/sharded_graph.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <vector>

namespace tp {

class Communicator;

struct RunOptions
{
    std::int64_t batch = 1;
    std::int64_t seq = 16;                     // prompt length (prefill tokens per sequence)
    std::vector<std::int32_t> tokens;          // B·S ids; empty: a fixed pseudo-random sequence
    // Greedy decode steps after each prefill, one token per sequence each, reading and extending a
    // per-rank KV cache of seq + decodeSteps positions: seq + 1 … tokens generated in all.
    int decodeSteps = 0;
    // Prefill computes the logits only at each sequence's last position, as generate() does
    // (Transformers' logits_to_keep=1): the final norm, the head's GEMM and its collective over B rows
    // instead of B·S; RunResult::logits is then [B, vocab]. The graph must be sharded with the same
    // ShardOptions::lastPositionLogits, so that its collectives' bytes are what runs.
    bool lastPositionLogits = false;
    int warmup = 0;
    int iterations = 1;
    DeviceKind device = DeviceKind::Cpu;       // every rank's backend
    DType dtype = DType::F32;                  // storage of weights and activations (fp32 accumulation)
    // Single-device emulation: every rank on device 0, one op at a time, collectives done on the
    // device but timed by `commModel` (required then).
    bool emulate = false;
    const HardwareProfile* commModel = nullptr;
    std::chrono::milliseconds collectiveTimeout{30000};
    // The host-memory budget of the run in bytes (all CPU ranks of this process together); 0: what
    // the host has available (hostMemoryAvailable()). A run that needs more is refused before it
    // allocates anything.
    std::int64_t maxHostBytes = 0;
    // Bring rank 0's logits of the last iteration back whole (RunResult::logits). Without, only
    // each sequence's last position is read back, to check that the run produced finite numbers.
    bool keepLogits = true;
    std::stop_token stop;                       // cancellation, checked between nodes
    // After every node (and its collective), synchronize and check that its outputs are finite:
    // slow; a run whose logits come out NaN or infinite is repeated once this way (runModel) to name
    // the node where they began.
    bool checkFinite = false;
    // Fault injection for tests: rank `failRank` fails when it reaches the node named `failNode`:
    // "error" returns an error, "oom" throws std::bad_alloc, "exception" throws, "hang" stops
    // answering (the other ranks' watchdog ends the run).
    int failRank = -1;
    std::string failNode;
    std::string failKind = "error";
    // Called by rank 0 after each iteration's prefill (warm-up ones too) with its index and seconds,
    // and after each decode step with the step's index and seconds.
    std::function<void(int iteration, bool warmup, double seconds)> progress;
    std::function<void(int iteration, bool warmup, int step, double seconds)> stepProgress;
};

struct RunResult : Measurement
{
    std::vector<float> logits;                 // rank 0, [B·S, vocab] ([B, vocab]: lastPositionLogits), last
                                               // iteration, as fp32 (keepLogits)
    std::vector<float> stepLogits;             // rank 0, [decodeSteps, B, vocab], last iteration (keepLogits)
    std::int64_t vocab = 0;
    std::string devices;                       // what the ranks ran on, for the record
};

// Why the engine cannot run this model and plan (empty: it can): an architecture, activation or
// rope scaling it lacks, a style whose forward it does not model, expert dispatch by all-to-all.
std::string engineExecutableProblem(const ModelSpec& spec, const ShardedGraph& g);

// Refuses a graph with error diagnostics (the message lists them), options it cannot honour,
// weights that do not match, and ranks whose memory does not fit their device, before any rank
// starts; then weights that are not finite or do not fit the storage dtype, while they load. A
// rank that fails aborts every rank; the Status names rank and node. A run whose logits are not
// finite (f16 overflow, NaN in a checkpoint) is an error, never a result.
Result<RunResult> runModel(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights,
                           const RunOptions& options);

// One rank of a run whose ranks are processes (under mpirun): this process runs host.rank() of
// host.size() == g.tpSize ranks; `host` is the MPI communicator. CPU ranks use it for their
// collectives; CUDA ranks bootstrap NCCL through it, on the GPU of their local rank. Rank 0's
// result holds the logits and every rank's spans (gathered as integers).
Result<RunResult> runModelRank(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights,
                               const RunOptions& options, Communicator& host);

} // namespace tp
