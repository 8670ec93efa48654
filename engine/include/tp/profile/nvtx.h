// nvtx.h — NVTX ranges (nvtx3, header-only) around the engine's nodes, so that Nsight Systems shows
// "layer 3/self_attn.o_proj/all_reduce" on every rank's thread. Without a profiler attached NVTX
// calls return at once; builds without the CUDA toolkit compile them away.
#pragma once

#include <string>

#if TP_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace tp {

class NvtxRange
{
public:
    explicit NvtxRange(const std::string& name)
    {
#if TP_HAVE_NVTX
        nvtxRangePushA(name.c_str());
#else
        (void)name;
#endif
    }
    ~NvtxRange()
    {
#if TP_HAVE_NVTX
        nvtxRangePop();
#endif
    }
    NvtxRange(const NvtxRange&) = delete;
    NvtxRange& operator=(const NvtxRange&) = delete;
};

// "model.layers.3.self_attn.o_proj" → "layer 3/self_attn.o_proj"; names outside the layers stay.
std::string nvtxName(const std::string& nodeName, int layer);

} // namespace tp
