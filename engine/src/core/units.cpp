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
    const std::string digits = std::to_string(v < 0 ? -v : v);
    std::string out = v < 0 ? "-" : "";
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0)
            out += ',';
        out += digits[i];
    }
    return out;
}

std::string humanSeconds(double s)
{
    const double a = s < 0 ? -s : s;
    if (a < 1e-3)
        return fmt::format("{:.1f} µs", s * 1e6);
    if (a < 1)
        return fmt::format("{:.2f} ms", s * 1e3);
    return fmt::format("{:.3f} s", s);
}

} // namespace tp
