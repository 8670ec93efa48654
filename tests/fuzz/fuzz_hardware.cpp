// Fuzzes hardware profiles (schema tpstudio.hardware/1) and the alpha-beta model on what parses.
#include "tp/cost/hardware.h"

#include <cmath>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto hw = tp::parseHardwareJson(text, "fuzz/hardware.json");
    if (!hw.ok())
        return 0;
    for (auto kind : {tp::CollectiveKind::AllReduce, tp::CollectiveKind::AllGather, tp::CollectiveKind::AllToAll})
        for (int ranks : {1, 2, 8})
            if (!(hw->collectiveSeconds(kind, 1 << 20, ranks) >= 0))
                __builtin_trap(); // a parsed profile never yields a negative or NaN time
    (void)hw->gemmEfficiencyAt(1e9);
    (void)hw->peakFlops(tp::DType::BF16);
    return 0;
}
