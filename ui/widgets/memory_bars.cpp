#include "widgets/memory_bars.h"

#include "models/format.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>

namespace tpui {

namespace {
// Mid-saturation colours, distinct and readable on light and dark bases alike.
const QColor kSegment[] = {QColor(70, 130, 180), QColor(89, 161, 79), QColor(230, 140, 40), QColor(176, 122, 161)};
QColor overflowColor() { return QColor(220, 50, 50); }
constexpr double kGiB = double(std::int64_t(1) << 30);

QString segmentName(int i)
{
    switch (i) {
    case 0: return MemoryBars::tr("weights");
    case 1: return MemoryBars::tr("KV cache");
    case 2: return MemoryBars::tr("activations");
    default: return MemoryBars::tr("comm buffers");
    }
}

std::int64_t segment(const tp::RankMemoryUse& u, int i)
{
    switch (i) {
    case 0: return u.weightBytes;
    case 1: return u.kvCacheBytes;
    case 2: return u.activationBytes;
    default: return u.commBufferBytes;
    }
}
} // namespace

MemoryBars::MemoryBars(QWidget* parent)
    : QWidget(parent)
    , m_empty(tr("Open a model to see its memory per rank."))
{
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    setMouseTracking(true);
}

void MemoryBars::setPreview(std::shared_ptr<const PreviewResult> r)
{
    m_ranks.clear();
    if (!r || !r->spec)
        m_empty = tr("Open a model to see its memory per rank.");
    else if (!r->hardware)
        m_empty = r->hardwareError.isEmpty() ? tr("Choose a hardware profile to see the memory per rank against its devices.")
                                             : tr("No hardware profile: %1").arg(r->hardwareError);
    else if (!r->graph.valid())
        m_empty = tr("The plan has errors at T=%1: see Diagnostics.").arg(r->graph.tpSize);
    else if (r->memory.empty())
        m_empty = r->memoryError.isEmpty() ? tr("No memory figures for this plan.") : r->memoryError;
    else {
        m_ranks = r->memory;
        m_empty.clear();
    }
    updateGeometry();
    update();
}

QString MemoryBars::label(int rank) const
{
    if (rank < 0 || rank >= barCount())
        return {};
    const auto& u = m_ranks[std::size_t(rank)];
    const double h = double(u.headroomBytes()) / kGiB;
    return h >= 0 ? tr("%1 GiB free").arg(h, 0, 'f', 1) : tr("%1 GiB over").arg(-h, 0, 'f', 1);
}

MemoryBars::Layout MemoryBars::layout() const
{
    Layout l;
    const QFontMetrics fm = fontMetrics();
    l.top = fm.height() + 10; // the legend
    l.rowHeight = std::max(fm.height() + 4, m_ranks.size() > 16 ? 0 : fm.height() + 8);
    l.barLeft = fm.horizontalAdvance(tr("rank %1").arg(std::max<int>(barCount() - 1, 0))) + 10;
    l.barRight = width() - fm.horizontalAdvance(tr("%1 GiB over").arg(8888.8, 0, 'f', 1)) - 12;
    double most = 0;
    for (const auto& u : m_ranks)
        most = std::max({most, double(u.neededBytes()), double(u.deviceBytes)});
    l.scale = most > 0 && l.barRight > l.barLeft ? (l.barRight - l.barLeft) / (most * 1.02) : 0;
    return l;
}

QSize MemoryBars::sizeHint() const
{
    const QFontMetrics fm = fontMetrics();
    const int rows = std::max(barCount(), 2);
    return {480, fm.height() + 10 + rows * (fm.height() + 8) + 8};
}

QSize MemoryBars::minimumSizeHint() const
{
    const QFontMetrics fm = fontMetrics();
    return {240, 2 * fm.height() + 20};
}

int MemoryBars::rankAt(QPoint pos) const
{
    const Layout l = layout();
    if (l.rowHeight <= 0 || pos.y() < l.top)
        return -1;
    const int r = (pos.y() - l.top) / l.rowHeight;
    return r < barCount() ? r : -1;
}

bool MemoryBars::event(QEvent* e)
{
    if (e->type() == QEvent::ToolTip) {
        auto* he = static_cast<QHelpEvent*>(e);
        const int r = rankAt(he->pos());
        if (r >= 0) {
            const auto& u = m_ranks[std::size_t(r)];
            QString text = tr("<b>rank %1</b>: %2 of %3 (%4)<br>").arg(r).arg(humanBytes(double(u.neededBytes())),
                                                                           humanBytes(double(u.deviceBytes)), label(r));
            for (int i = 0; i < 4; ++i)
                text += tr("%1: %2<br>").arg(segmentName(i), humanBytes(double(segment(u, i))));
            QToolTip::showText(he->globalPos(), text, this);
        } else {
            QToolTip::hideText();
            e->ignore();
        }
        return true;
    }
    return QWidget::event(e);
}

void MemoryBars::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette pal = palette();
    const QColor text = pal.color(QPalette::WindowText);
    p.setPen(text);
    if (m_ranks.empty()) {
        p.drawText(rect().adjusted(8, 8, -8, -8), Qt::AlignCenter | Qt::TextWordWrap, m_empty);
        return;
    }
    const QFontMetrics fm = fontMetrics();
    const Layout l = layout();
    // Legend: the four segments and the capacity line, from the left edge (the bars' gutter too).
    int x = 4;
    const int ly = 4, box = fm.height() - 4;
    for (int i = 0; i < 4; ++i) {
        p.fillRect(QRect(x, ly + 2, box, box), kSegment[i]);
        x += box + 4;
        p.drawText(QPoint(x, ly + fm.ascent()), segmentName(i));
        x += fm.horizontalAdvance(segmentName(i)) + 14;
    }
    p.setPen(QPen(text, 2));
    p.drawLine(x, ly, x, ly + fm.height());
    p.setPen(text);
    x += 6;
    p.drawText(QPoint(x, ly + fm.ascent()), tr("device %1").arg(humanBytes(double(m_ranks.front().deviceBytes))));

    for (int r = 0; r < barCount(); ++r) {
        const auto& u = m_ranks[std::size_t(r)];
        const int y = l.top + r * l.rowHeight;
        const int barH = l.rowHeight - 4;
        p.setPen(text);
        p.drawText(QRect(0, y, l.barLeft - 6, l.rowHeight), Qt::AlignRight | Qt::AlignVCenter, tr("rank %1").arg(r));
        double left = l.barLeft;
        for (int i = 0; i < 4; ++i) {
            const double w = double(segment(u, i)) * l.scale;
            if (w > 0)
                p.fillRect(QRectF(left, y + 2, w, barH), kSegment[i]);
            left += w;
        }
        // What exceeds the device: hatched in the overflow colour.
        const double cap = l.barLeft + double(u.deviceBytes) * l.scale;
        if (!u.fits())
            p.fillRect(QRectF(cap, y + 2, left - cap, barH), QBrush(overflowColor(), Qt::BDiagPattern));
        // The device's frame and its capacity line.
        p.setPen(QPen(pal.color(QPalette::Mid), 1));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRectF(l.barLeft, y + 2, cap - l.barLeft, barH));
        p.setPen(QPen(text, 2));
        p.drawLine(QPointF(cap, y), QPointF(cap, y + l.rowHeight));
        p.setPen(u.fits() ? text : overflowColor());
        p.drawText(QRect(int(std::max(cap, left)) + 6, y, width(), l.rowHeight), Qt::AlignLeft | Qt::AlignVCenter, label(r));
    }
}

} // namespace tpui
