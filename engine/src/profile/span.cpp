// span.cpp — the timeline of emulated ranks.
#include "tp/profile/span.h"

#include <algorithm>

namespace tp {

double emulateTimeline(std::vector<Span>& spans, int ranks, const std::function<double(const Span&)>& modeledUs)
{
    std::vector<std::vector<Span*>> of(static_cast<std::size_t>(ranks));
    for (Span& s : spans)
        if (s.rank >= 0 && s.rank < ranks)
            of[static_cast<std::size_t>(s.rank)].push_back(&s);
    std::vector<std::size_t> next(of.size(), 0);
    std::vector<double> clock(of.size(), 0.0);
    for (;;) {
        // Every rank runs its compute up to its next collective (or its end).
        bool anyCollective = false;
        for (std::size_t r = 0; r < of.size(); ++r) {
            while (next[r] < of[r].size() && of[r][next[r]]->collective < 0) {
                Span& s = *of[r][next[r]++];
                const double d = s.endUs - s.startUs;
                s.startUs = clock[r];
                s.endUs = clock[r] += d;
            }
            anyCollective |= next[r] < of[r].size();
        }
        if (!anyCollective)
            break;
        // The collective starts when the last rank arrives and ends for all at once.
        double start = 0;
        for (std::size_t r = 0; r < of.size(); ++r)
            if (next[r] < of[r].size())
                start = std::max(start, clock[r]);
        for (std::size_t r = 0; r < of.size(); ++r) {
            if (next[r] >= of[r].size())
                continue;
            Span& s = *of[r][next[r]++];
            s.startUs = start;
            s.endUs = clock[r] = start + modeledUs(s);
        }
    }
    return clock.empty() ? 0.0 : *std::max_element(clock.begin(), clock.end());
}

} // namespace tp
