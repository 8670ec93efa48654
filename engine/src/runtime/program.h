// program.h — a sharded graph lowered for one rank: the shape and arena place of every tensor the
// rank touches, each op's scratch, and the buffers of each collective. Built once per run, before
// anything is allocated; the executor then only hands these views to backend calls.
//
// Lowering is also where the sharded graph and the ops must agree: every op's output width, derived
// from its inputs and this rank's weight shapes, must be the width the plan preview promised, and
// every op's inputs must fit it. A disagreement is an error naming the rank and the node, before
// any rank starts.
#pragma once

#include "tp/model/model_spec.h"
#include "tp/runtime/arena.h"
#include "tp/runtime/backend.h"
#include "tp/shard/sharded_graph.h"

#include <vector>

namespace tp::detail {

struct ProgramTensor
{
    int block = -1;               // arena block; -1: not in the arena (the token ids)
    std::int64_t within = 0;      // bytes into the block (a rank's piece of a staging buffer)
    std::int64_t rows = 0, cols = 0;
    DType dtype = DType::F32;
    std::int64_t stride = 0;      // elements between rows; 0: cols (a column view of a wider tensor otherwise)
};

struct CollectivePlan
{
    int input = -1;               // what the op wrote (all_reduce: the output itself)
    int staging = -1;             // all_gather: every rank's piece; reduce_scatter: the pieces packed
                                  // (-1: none: the communicator gathers columns in place, or the
                                  // pieces are token rows, contiguous already)
    int output = -1;              // the graph tensor after the collective
};

// An experts node whose tokens an all-to-all dispatches (NodeSharding::dispatch, Transformers'
// AllToAllEP): the buffers of its steps, on this rank's token rows (PhaseProgram::rows, n of them)
// of the forward's N. The op itself writes those rows of the output; the node's collective (the
// all-gather) fills in the others.
struct DispatchProgram
{
    int dispatch = -1;           // the counts' all-to-all in ShardedGraph::collectives; the rows' dispatch and combine follow
    int counts = -1;             // I32 [1, E]: this rank's picks per expert (sent to the experts' owners)
    int received = -1;           // I32 [1, T·El]: every rank's picks of this rank's experts
    int ids = -1, weights = -1;  // I32 / F32 [n, K]: each row's picks (global expert ids) and their weights
    int sendIndex = -1;          // I32 [1, n·K]: the row (of this rank's n) each sent row is
    int slots = -1;              // I32 [1, n·K]: where each pick's output comes back in `back`
    int send = -1, back = -1;    // [n·K, H]: the rows sent (sorted by expert, so by owner), their outputs returned
    int recvExperts = -1;        // I32 [N·K, 1]: each received row's local expert
    int recv = -1, out = -1;     // [N·K, H]: the rows received (at most every rank's picks), the expert outputs
    ExpertsShape given;          // the experts on the received rows: each its one expert, weight 1
};

// One forward of the rank: prefill over B·S tokens, or a decode step over B (one per sequence).
struct PhaseProgram
{
    std::int64_t tokens = 0;                 // rows of every activation
    std::int64_t seq = 0;                    // query rows per sequence
    Interval rows;                           // this rank's token rows of a tensor split by rows (sequenceRows)
    // Per node: it runs only at each sequence's last position (the final norm and the head, when
    // the logits are kept there: NodeSharding::lastPositions): its output and collective have batch
    // rows, and its input, where the node before it has B·S, is read every seq-th row.
    std::vector<bool> lastPositions;
    // Per node: the tensor [batch, features] its first input's last-position rows are copied into
    // first, for an op that reads a dense input (the final norm); -1: none.
    std::vector<int> gathered;
    std::vector<ProgramTensor> tensors;      // the graph's tensors first, then the buffers lowering adds
    std::vector<int> opOutput;               // per node: the tensor its op writes (its output, or a pre-collective buffer)
    std::vector<int> scratch;                // per node: its scratch tensor, -1: none (a Mixer's: its convolution's output)
    std::vector<CollectivePlan> collectives; // per ShardedGraph collective
    std::vector<AttentionShape> attention;   // per node (Attention nodes): this rank's heads over the KV cache
                                             // (past = 0; a decode step sets it)
    std::vector<ExpertsShape> experts;       // per node (Experts nodes): this rank's experts and rows
    std::vector<DispatchProgram> dispatch;   // per node (dispatched Experts nodes; dispatch = -1 elsewhere)
};

struct RankProgram
{
    int rank = 0;
    std::int64_t context = 0;                // KV cache rows per sequence: prompt + decode steps
    std::vector<PhaseProgram> phases;        // [0] prefill, [1] a decode step (runs that decode)
    // Per node (Attention nodes): this rank's key and value cache, [B · context, kv width], live for
    // the whole run; indices into `cache`.
    std::vector<std::pair<int, int>> kvCache;
    // Per node (Mamba 2's Mixer nodes): this rank's convolution state [B · kernel, conv channels] in the storage dtype and
    // scan state F32 [B, heads · head_dim · state], live for the whole run beside the KV caches; indices into `cache`.
    std::vector<std::pair<int, int>> mixerState;
    std::vector<ProgramTensor> cache;
    std::int64_t cacheBytes = 0;
    std::vector<ArenaBlock> blocks;          // both phases' tensors and the caches, in one arena
    std::int64_t arenaBytes = 0;
    std::vector<int> collectiveOf;           // per node: the collective after it, -1: none (a dispatched
                                             // experts node: the all-gather; its all-to-alls run within)
    // Weights: per parameter its local 2-D shape ([n] → [1, n], [E, R, C] → [E·R, C]) and byte
    // offset in the weight buffer (a tied parameter shares its owner's).
    std::vector<std::pair<std::int64_t, std::int64_t>> weightShapes;
    std::vector<std::int64_t> weightOffsets;
    std::int64_t weightBytes = 0;
};

// `columnGather`: the communicator gathers column pieces in place (Communicator::gathersColumns), so
// an all-gather's op writes its columns of the output directly and needs no staging buffer.
// `decodeSteps` > 0 adds the decode phase and sizes the KV cache for seq + decodeSteps positions.
// `lastPositionLogits`: prefill computes the logits only at each sequence's last position; the
// graph must have been sharded with the same ShardOptions::lastPositionLogits (its nodes say which
// run there, its collectives count their rows).
Result<RankProgram> lowerForRank(const ModelSpec& spec, const ShardedGraph& g, int rank, std::int64_t batch,
                                 std::int64_t seq, std::int64_t decodeSteps, bool lastPositionLogits,
                                 const Backend& backend, bool columnGather);

} // namespace tp::detail
