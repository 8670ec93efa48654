// format.h — number formatting shared by the CLI verbs.
#pragma once

#include <cstdint>
#include <string>

namespace tpcli {

// 8030261248 → "8,030,261,248"
std::string withCommas(std::int64_t v);
// Bytes in binary units: "14.96 GiB".
std::string humanBytes(double bytes);

} // namespace tpcli
