// communicator.h — the collectives one rank issues, on tensors of its backend, and the groups that
// make them: threads of this process (host memory, NCCL with one GPU each, or every rank on one
// GPU for emulation) and processes under mpirun (MPI on host memory, NCCL bootstrapped over MPI).
//
// Every call is collective: all ranks of the group make the same calls in the same order. A call
// returns an error Status instead of hanging when another rank aborted the group or when no
// partner arrived within the group's timeout (the watchdog), naming the collective and the rank.
//
//   auto group = makeLocalGroup(2, std::chrono::seconds(30));
//   // in rank r's thread:
//   Communicator& c = group->rank(r);
//   TP_RETURN_IF_ERROR(c.allReduce(tensor));
#pragma once

#include "tp/core/status.h"
#include "tp/runtime/tensor.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tp {

class Backend;

class Communicator
{
public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::string kind() const = 0;      // "local", "mpi", "nccl", "emulated"

    // --- device collectives ----------------------------------------------------------------------
    // Tensors are contiguous, on this rank's device, in one storage dtype (the same on every rank);
    // a tensor is its rows·cols elements in order. Calls are enqueued on the backend's
    // communication stream (host-memory groups: complete when they return); sums are exact in fp32
    // for 16-bit dtypes.

    // `out` = the sum over ranks of `in` (same shape); in place when they are the same tensor.
    virtual Status allReduce(const Tensor& in, const Tensor& out) = 0;
    Status allReduce(const Tensor& data) { return allReduce(data, data); }
    // `out` = every rank's `in` in rank order; rank p contributes counts[p] elements. In place when
    // `in` is this rank's piece of `out`.
    virtual Status allGather(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts) = 0;
    // The sum over ranks of `in` (Σ counts elements); rank r keeps piece r (counts[r] elements) in `out`.
    virtual Status reduceScatter(const Tensor& in, const Tensor& out, std::span<const std::int64_t> counts) = 0;
    virtual Status broadcast(const Tensor& data, int root) = 0;
    // This rank sends sendCounts[p] consecutive elements of `in` to rank p, in rank order, and
    // receives recvCounts[p] from rank p into `out`, in rank order. The storage dtypes or I64 (an
    // expert dispatch's counts).
    virtual Status allToAll(const Tensor& in, std::span<const std::int64_t> sendCounts, const Tensor& out,
                            std::span<const std::int64_t> recvCounts) = 0;
    // Waits, under the watchdog, until every collective this rank has enqueued is done.
    virtual Status synchronize() = 0;

    // An all-gather along the columns of a [rows, W] tensor, where rank p's piece is columns
    // [offsets[p], offsets[p+1]) (size + 1 offsets): every rank has written its own piece into
    // `out`, and afterwards holds every piece there. Only communicators that can move 2-D strided
    // pieces have it (gathersColumns()): they spare the caller packing a staging buffer and laying
    // the pieces out again. The others answer Unimplemented.
    virtual bool gathersColumns() const { return false; }
    virtual Status allGatherColumns(const Tensor& out, std::span<const std::int64_t> offsets);

    // --- host ---------------------------------------------------------------------------------------
    // Every rank's `mine` (any length) concatenated in rank order into `all`, with each rank's length
    // in `counts`. Integers travel as integers: exact over the whole int64 range.
    virtual Status exchange(std::span<const std::int64_t> mine, std::vector<std::int64_t>& all,
                            std::vector<std::int64_t>& counts) = 0;
    virtual Status barrier() = 0;
    // Makes every pending and later call of every rank of the group fail (a rank hit an error).
    virtual void abort(const std::string& why) = 0;
    // Whether the group was aborted (by any rank, or by the watchdog).
    virtual bool aborted() const = 0;

    // What the collectives called from now on are for ("layer 3/self_attn.o_proj/all_reduce"), so
    // that an error found later than the call (a collective that never finished, seen by
    // synchronize()) can name it. Copied within the label's capacity once it has held one as long:
    // no allocation per collective.
    void setLabel(std::string_view label) { m_label.assign(label); }

protected:
    std::string m_label;
};

// Ranks that are threads of this process, one communicator each.
class CommGroup
{
public:
    virtual ~CommGroup() = default;
    virtual Communicator& rank(int r) = 0;
    virtual int size() const = 0;
};

// Host memory (CPU backends). Data moves through shared memory: each rank publishes its buffer,
// then works on its own chunk of every rank's (a ring's traffic, no root).
std::shared_ptr<CommGroup> makeLocalGroup(int size, std::chrono::milliseconds timeout = std::chrono::seconds(60));

// NCCL on device buffers, one GPU per rank (backends[r] on its own device), ncclCommInitRank in a
// group. Asynchronous errors are polled; a collective past the timeout aborts every rank's
// communicator. Unimplemented without a CUDA build; FailedPrecondition when the backends are not
// CUDA devices, one each.
Result<std::shared_ptr<CommGroup>> makeNcclGroup(const std::vector<Backend*>& backends,
                                                 std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Single-GPU emulation: every rank's backend on the same device; collectives are device copies and
// reductions between the ranks' buffers (exact data, no transfer time worth measuring).
Result<std::shared_ptr<CommGroup>> makeDeviceGroup(const std::vector<Backend*>& backends,
                                                   std::chrono::milliseconds timeout = std::chrono::seconds(60));

// One process per rank under mpirun (OpenMPI), over MPI_COMM_WORLD, on host memory. Collectives are
// non-blocking MPI calls polled against the timeout, so a lost partner ends in DeadlineExceeded, not
// a hang. The caller initialises and finalises MPI (see mpiInit); `abort` only marks the
// communicator: ending the job (MPI_Abort) is the front end's decision. Null without MPI.
std::unique_ptr<Communicator> makeMpiCommunicator(std::chrono::milliseconds timeout = std::chrono::seconds(60));
// NCCL for one process per GPU (the multi-node path): rank 0's unique id reaches the others through
// `bootstrap` (the MPI communicator's host exchange), then ncclCommInitRank on `backend`'s device.
// Host calls (exchange, barrier) go through `bootstrap`, which must outlive the result.
Result<std::unique_ptr<Communicator>> makeNcclCommunicator(Communicator& bootstrap, Backend& backend,
                                                           std::chrono::milliseconds timeout = std::chrono::seconds(60));
// MPI_Init_thread once per process; false when this build has no MPI.
bool mpiInit(int* argc, char*** argv);
void mpiFinalize();
// MPI_Abort(MPI_COMM_WORLD, code): ends every process of the job.
void mpiAbortJob(int code);
// This process's rank among the processes of its node (for its GPU), from the launcher; 0 if none.
int mpiLocalRank();
bool haveMpi();
bool haveNccl();

// Element offsets of pieces of `counts` elements laid end to end (size + 1 entries).
std::vector<std::int64_t> pieceOffsets(std::span<const std::int64_t> counts);

} // namespace tp
