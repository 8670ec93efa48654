#include "models/format.h"

#include <QLocale>
#include <QStringList>

namespace tpui {

QString humanBytes(double b)
{
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        ++u;
    }
    return u == 0 ? QStringLiteral("%1 B").arg(b, 0, 'f', 0) : QStringLiteral("%1 %2").arg(b, 0, 'f', 2).arg(units[u]);
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

} // namespace tpui
