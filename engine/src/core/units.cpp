#include "tp/core/units.h"

#include <fmt/format.h>

namespace tp {

std::string humanBytes(double b)
{
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        ++u;
    }
    return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

std::string withCommas(std::int64_t v)
{
    std::string s = std::to_string(v < 0 ? -v : v);
    for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
        s.insert(static_cast<std::size_t>(i), ",");
    if (v < 0)
        s.insert(s.begin(), '-');
    return s;
}

} // namespace tp
