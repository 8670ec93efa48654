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

// A unit of time by magnitude: µs below 1 ms, ms below 1 s, else s.
struct TimeUnit
{
    double perSecond; // 1e6, 1e3, 1
    QString name;     // "µs", "ms", "s"
};
TimeUnit timeUnitFor(double seconds);
QString humanSeconds(double seconds);                   // "812.4 µs", "3.215 ms", "1.250 s"

} // namespace tpui
