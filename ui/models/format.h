// format.h — display strings for the GUI (sizes, counts, shapes).
#pragma once

#include "tp/model/dtype.h"

#include <QString>

#include <cstdint>
#include <vector>

namespace tpui {

QString humanBytes(double bytes);                       // "14.96 GiB"
QString humanCount(std::int64_t n);                     // "8.03 B", "57.9 M", "21,664"
QString shapeText(const std::vector<std::int64_t>& s);  // "[4096, 14336]"
QString dtypeText(tp::DType t);                         // "BF16"

} // namespace tpui
