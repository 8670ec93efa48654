// units.h — human-readable sizes and counts, shared by every front end.
#pragma once

#include <cstdint>
#include <string>

namespace tp {

std::string humanBytes(double bytes);   // binary units: "14.96 GiB"
std::string withCommas(std::int64_t v); // "8,030,261,248"
std::string humanSeconds(double seconds); // by magnitude: "812.4 µs", "21.53 ms", "3.210 s"

} // namespace tp
