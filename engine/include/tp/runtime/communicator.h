// communicator.h — the collectives one rank issues, and the in-process group (one thread per rank)
// that the embedded engine uses by default.
//
// Every call is collective: all ranks of the group make the same calls in the same order. A call
// returns an error Status instead of hanging when another rank aborted the group or when no
// partner arrived within the group's timeout (the watchdog), naming the collective and the rank.
//
//   auto group = LocalGroup::create(2, std::chrono::seconds(30));
//   // in rank r's thread:
//   Communicator& c = group->rank(r);
//   TP_RETURN_IF_ERROR(c.allReduce(buf));
#pragma once

#include "tp/core/status.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tp {

class Communicator
{
public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::string kind() const = 0;

    // Sum over ranks, in place.
    virtual Status allReduce(std::span<float> data) = 0;
    // `out` = every rank's `in`, concatenated in rank order (ranks may contribute different counts).
    virtual Status allGather(std::span<const float> in, std::span<float> out) = 0;
    // Sum over ranks of `in`, then rank r keeps its chunk (`counts[r]` elements, in rank order) in `out`.
    virtual Status reduceScatter(std::span<const float> in, std::span<float> out, std::span<const std::int64_t> counts) = 0;
    virtual Status broadcast(std::span<float> data, int root) = 0;
    // Rank r sends in[sendOffsets[p] … +sendCounts[p]) to rank p; receives rank p's piece for r
    // into `out`, concatenated in rank order.
    virtual Status allToAll(std::span<const float> in, std::span<const std::int64_t> sendCounts, std::vector<float>& out) = 0;
    virtual Status barrier() = 0;
    // Makes every pending and later call of every rank fail (a rank hit an error).
    virtual void abort(const std::string& why) = 0;
    // Whether the group was aborted (by any rank, or by the watchdog).
    virtual bool aborted() const = 0;
};

// T ranks in one process. Data moves through shared memory: each rank publishes its buffer, then
// reads the others' (no copies through a root).
class LocalGroup
{
public:
    static std::shared_ptr<LocalGroup> create(int size, std::chrono::milliseconds timeout = std::chrono::seconds(60));
    virtual ~LocalGroup() = default;
    virtual Communicator& rank(int r) = 0;
    virtual int size() const = 0;
};

} // namespace tp

namespace tp {

// One process per rank under mpirun (OpenMPI), over MPI_COMM_WORLD. Collectives are non-blocking
// MPI calls polled against the timeout, so a lost partner ends in DeadlineExceeded, not a hang.
// The caller initialises and finalises MPI (see mpiInit); `abort` only marks the communicator:
// ending the job (MPI_Abort) is the front end's decision.
// Null when TP Studio was built without MPI.
std::unique_ptr<Communicator> makeMpiCommunicator(std::chrono::milliseconds timeout = std::chrono::seconds(60));
// MPI_Init_thread once per process; false when this build has no MPI.
bool mpiInit(int* argc, char*** argv);
void mpiFinalize();
// MPI_Abort(MPI_COMM_WORLD, code): ends every process of the job.
void mpiAbortJob(int code);
bool haveMpi();

// NCCL on one GPU per rank, one thread per rank in this process (ncclCommInitAll over devices
// 0..size-1). Buffers stay host spans: each call stages them through the rank's device, so the
// communicator fits the engine's CPU ranks and the benchmark; a collective that exceeds the timeout
// aborts the NCCL communicator (ncclCommAbort) and returns DeadlineExceeded. Unimplemented without a
// CUDA build; FailedPrecondition when fewer GPUs than ranks are visible.
class NcclGroup
{
public:
    static Result<std::shared_ptr<NcclGroup>> create(int size, std::chrono::milliseconds timeout = std::chrono::seconds(60));
    virtual ~NcclGroup() = default;
    virtual Communicator& rank(int r) = 0;
    virtual int size() const = 0;
};
bool haveNccl();

} // namespace tp
