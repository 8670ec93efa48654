// arena.cpp — greedy-by-size placement of blocks with lifetimes.
#include "tp/runtime/arena.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace tp {

std::int64_t planArena(std::vector<ArenaBlock>& blocks, std::int64_t alignment)
{
    const auto align = [&](std::int64_t n) { return (n + alignment - 1) / alignment * alignment; };
    std::vector<std::size_t> order(blocks.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return blocks[a].bytes > blocks[b].bytes || (blocks[a].bytes == blocks[b].bytes && blocks[a].first < blocks[b].first);
    });
    std::vector<std::size_t> placed;
    std::int64_t total = 0;
    std::vector<std::pair<std::int64_t, std::int64_t>> taken; // [begin, end) of placed blocks live with this one
    for (const std::size_t i : order) {
        ArenaBlock& b = blocks[i];
        const std::int64_t size = align(std::max<std::int64_t>(b.bytes, 0));
        taken.clear();
        for (const std::size_t j : placed) {
            const ArenaBlock& o = blocks[j];
            if (o.first <= b.last && b.first <= o.last)
                taken.push_back({o.offset, o.offset + align(o.bytes)});
        }
        std::sort(taken.begin(), taken.end());
        std::int64_t at = 0;
        for (const auto& [begin, end] : taken) {
            if (begin >= at + size)
                break; // the gap before this range fits
            at = std::max(at, end);
        }
        b.offset = at;
        total = std::max(total, at + size);
        placed.push_back(i);
    }
    return total;
}

std::int64_t peakLiveBytes(const std::vector<ArenaBlock>& blocks)
{
    std::map<int, std::int64_t> delta;
    for (const ArenaBlock& b : blocks) {
        delta[b.first] += b.bytes;
        delta[b.last + 1] -= b.bytes;
    }
    std::int64_t live = 0, peak = 0;
    for (const auto& [step, d] : delta)
        peak = std::max(peak, live += d);
    return peak;
}

} // namespace tp
