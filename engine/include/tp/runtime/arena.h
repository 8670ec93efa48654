// arena.h — one buffer for all of a rank's activations, planned once from tensor lifetimes.
//
// Every tensor the forward needs (activations, pre-collective buffers, op scratch) is a block of
// bytes live from one step to another, both inclusive. Blocks whose lifetimes overlap get disjoint
// ranges; the others share memory. Placement is greedy by size (largest first, each at the lowest
// offset free over its lifetime), as TFLite's and ggml's allocators do: the result is never larger
// than the sum of the blocks and, for a layer-by-layer forward, close to the peak of live bytes.
//
//   std::vector<ArenaBlock> b = {{.bytes = 4096, .first = 0, .last = 3}, …};
//   const std::int64_t total = planArena(b, 256);   // b[i].offset is set
#pragma once

#include <cstdint>
#include <vector>

namespace tp {

struct ArenaBlock
{
    std::int64_t bytes = 0;
    int first = 0;               // first step that uses it
    int last = 0;                // last step that uses it (inclusive)
    std::int64_t offset = -1;    // set by planArena
};

// Places every block (offsets multiples of `alignment`); returns the arena's size in bytes.
std::int64_t planArena(std::vector<ArenaBlock>& blocks, std::int64_t alignment);

// The most bytes live at one step (a lower bound on any plan), for reports and tests.
std::int64_t peakLiveBytes(const std::vector<ArenaBlock>& blocks);

} // namespace tp
