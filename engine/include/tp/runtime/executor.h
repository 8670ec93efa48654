// executor.h — runs a sharded graph for real: one thread per rank, each with its weight slices, the
// CPU backend (fp32, OpenBLAS with one BLAS thread per rank) and a communicator. The collectives it
// issues are the ShardedGraph's Collective nodes, so what the planner previews is what runs.
//
//   auto r = runModel(spec, graph, {.checkpoint = &ck}, {.batch = 1, .seq = 16});
//   r->logits  // rank 0's [B·S, vocab]
#pragma once

#include "tp/core/status.h"
#include "tp/runtime/weights.h"
#include "tp/shard/sharded_graph.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <vector>

namespace tp {

struct RunOptions
{
    std::int64_t batch = 1;
    std::int64_t seq = 16;
    std::vector<std::int32_t> tokens;          // B·S ids; empty: a fixed pseudo-random sequence
    int warmup = 0;
    int iterations = 1;
    std::chrono::milliseconds collectiveTimeout{30000};
    std::stop_token stop;                       // cancellation, checked between nodes
    // Fault injection for tests: rank `failRank` fails when it reaches the node named `failNode`:
    // "error" returns an error, "oom" throws std::bad_alloc, "exception" throws, "hang" stops
    // answering (the other ranks' watchdog ends the run).
    int failRank = -1;
    std::string failNode;
    std::string failKind = "error";
    // Called by rank 0 after each iteration (warm-up ones too) with its index and seconds.
    std::function<void(int iteration, bool warmup, double seconds)> progress;
};

// One timed piece of work on one rank (a graph node's compute, or one of its collectives).
struct Span
{
    int rank = 0;
    int node = -1;
    int collective = -1;                       // index into ShardedGraph::collectives, -1: compute
    int layer = -1;
    double startUs = 0;                        // from the iteration's start
    double endUs = 0;
    std::int64_t bytes = 0;                    // collectives: the full tensor's bytes
};

struct RunResult
{
    int tpSize = 1;
    std::vector<float> logits;                 // rank 0, [B·S, vocab], last iteration
    std::int64_t vocab = 0;
    double loadSeconds = 0;                    // slowest rank
    std::vector<double> iterationSeconds;      // timed iterations (not warm-up)
    std::vector<Span> spans;                   // every rank, last timed iteration
};

// Why a model or plan cannot run on the CPU engine yet (empty: it can).
std::string cpuExecutableProblem(const ModelSpec& spec, const ShardedGraph& g);

// Refuses a graph with error diagnostics (the message lists them) and weights that do not match,
// before any rank starts. A rank that fails aborts every rank; the Status names rank and node.
Result<RunResult> runModel(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights,
                           const RunOptions& options);

class Communicator;

// One rank of a run whose ranks are processes (under mpirun): this process runs comm.rank() of
// comm.size() == g.tpSize ranks. Rank 0's result holds the logits and every rank's spans (gathered).
Result<RunResult> runModelRank(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights,
                               const RunOptions& options, Communicator& comm);

} // namespace tp
