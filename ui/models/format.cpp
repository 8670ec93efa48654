#include "models/format.h"

#include "tp/core/units.h"

#include <QLocale>
#include <QStringList>

namespace tpui {

QString humanBytes(double b)
{
    return QString::fromStdString(tp::humanBytes(b));
}

QString humanCount(std::int64_t n)
{
    if (n >= 1'000'000'000)
        return QStringLiteral("%1 B").arg(double(n) / 1e9, 0, 'f', 2);
    if (n >= 1'000'000)
        return QStringLiteral("%1 M").arg(double(n) / 1e6, 0, 'f', 1);
    return QLocale(QLocale::English).toString(qlonglong(n));
}

QString shapeText(const std::vector<std::int64_t>& s)
{
    QStringList parts;
    for (auto d : s)
        parts << QString::number(d);
    return QLatin1Char('[') + parts.join(QStringLiteral(", ")) + QLatin1Char(']');
}

QString dtypeText(tp::DType t)
{
    const std::string_view n = tp::dtypeName(t);
    return QString::fromLatin1(n.data(), qsizetype(n.size()));
}

TimeUnit timeUnitFor(double seconds)
{
    if (seconds < 1e-3)
        return {1e6, QStringLiteral("µs")};
    if (seconds < 1.0)
        return {1e3, QStringLiteral("ms")};
    return {1.0, QStringLiteral("s")};
}

QString humanSeconds(double seconds)
{
    const TimeUnit u = timeUnitFor(seconds);
    return QStringLiteral("%1 %2").arg(seconds * u.perSecond, 0, 'f', u.perSecond == 1e6 ? 1 : 3).arg(u.name);
}

} // namespace tpui
