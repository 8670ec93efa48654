// cuda_check.h — CUDA, cuBLAS and NCCL errors as Status values naming the call, file and line, and
// RAII owners for the CUDA handles the backend and communicators hold. Device code and host code of
// the .cu files include this; nvcc cannot compile fmt in C++20 mode, so messages use a stream.
#pragma once

#include "tp/core/status.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <sstream>
#include <string>
#include <utility>

namespace tp::cuda {

template<typename... A> std::string cat(const A&... a)
{
    std::ostringstream s;
    (s << ... << a);
    return s.str();
}

inline Status cudaStatus(cudaError_t e, const char* call, const char* file, int line)
{
    if (e == cudaSuccess)
        return {};
    const StatusCode code = e == cudaErrorMemoryAllocation ? StatusCode::ResourceExhausted
        : e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice
        ? StatusCode::FailedPrecondition
        : StatusCode::Internal;
    return Status(code, cat(call, " failed at ", file, ":", line, ": ", cudaGetErrorString(e), " (", cudaGetErrorName(e), ")"));
}

inline Status cublasStatus(cublasStatus_t e, const char* call, const char* file, int line)
{
    if (e == CUBLAS_STATUS_SUCCESS)
        return {};
    return Status(e == CUBLAS_STATUS_ALLOC_FAILED ? StatusCode::ResourceExhausted : StatusCode::Internal,
                  cat(call, " failed at ", file, ":", line, ": ", cublasGetStatusString(e)));
}

#define TP_CUDA(call) TP_RETURN_IF_ERROR(::tp::cuda::cudaStatus((call), #call, __FILE__, __LINE__))
#define TP_CUBLAS(call) TP_RETURN_IF_ERROR(::tp::cuda::cublasStatus((call), #call, __FILE__, __LINE__))
// After a kernel launch: the launch's own error (bad configuration, no kernel image for this GPU).
#define TP_CUDA_LAUNCHED() TP_CUDA(cudaGetLastError())

// A handle with one owner: not copyable, movable, released by `Release` when it goes.
template<typename H, typename Release> class Owned
{
public:
    Owned() = default;
    explicit Owned(H h)
        : m_h(h)
    {
    }
    Owned(const Owned&) = delete;
    Owned& operator=(const Owned&) = delete;
    Owned(Owned&& o) noexcept
        : m_h(std::exchange(o.m_h, H{}))
    {
    }
    Owned& operator=(Owned&& o) noexcept
    {
        if (this != &o) {
            reset();
            m_h = std::exchange(o.m_h, H{});
        }
        return *this;
    }
    ~Owned() { reset(); }
    void reset()
    {
        if (m_h)
            Release{}(m_h);
        m_h = H{};
    }
    H get() const { return m_h; }
    H* out() { return &m_h; } // for the create call; the old handle must be empty

private:
    H m_h{};
};

struct StreamRelease
{
    void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct EventRelease
{
    void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct BlasRelease
{
    void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};
struct MemoryRelease
{
    void operator()(void* p) const { cudaFree(p); }
};
using StreamHandle = Owned<cudaStream_t, StreamRelease>;
using EventHandle = Owned<cudaEvent_t, EventRelease>;
using BlasHandle = Owned<cublasHandle_t, BlasRelease>;
using DeviceMemory = Owned<void*, MemoryRelease>;

// Makes `device` current for this host thread (CUDA's current device is per thread).
inline Status useDevice(int device) { return cudaStatus(cudaSetDevice(device), "cudaSetDevice", __FILE__, __LINE__); }

} // namespace tp::cuda
