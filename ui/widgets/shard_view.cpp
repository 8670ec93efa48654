#include "widgets/shard_view.h"

#include "models/format.h"

#include <QPainter>

namespace tpui {

ShardView::ShardView(QWidget* parent)
    : QWidget(parent)
{
    setMinimumSize(320, 240);
}

void ShardView::setPreview(std::shared_ptr<const PreviewResult> preview)
{
    m_p = std::move(preview);
    update();
}

void ShardView::setParameter(const QString& path)
{
    m_path = path;
    update();
}

QColor ShardView::rankColor(int rank, int ranks)
{
    // Evenly spaced hues, moderate saturation: readable on light and dark palettes.
    return QColor::fromHsv((rank * 360 / std::max(ranks, 1) + 200) % 360, 140, 220);
}

const tp::ParamShard* ShardView::shard() const
{
    if (!m_p)
        return nullptr;
    const std::string path = m_path.toStdString();
    for (const auto& s : m_p->graph.params)
        if (s.path == path || s.path == path + ".weight")
            return &s;
    return nullptr;
}

void ShardView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing, false);
    const QPalette pal = palette();
    p.fillRect(rect(), pal.color(QPalette::Base));
    const tp::ParamShard* s = shard();
    if (!s) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
                   tr("Select a parameter (or a Linear/Embedding module) in the tree to see how its ranks split it."));
        return;
    }
    const auto& mod = m_p->spec->modules[std::size_t(s->module)];
    const auto& param = mod.params[std::size_t(s->param)];
    const auto& shape = param.shape;
    const int ranks = int(s->shapes.size());
    const QFontMetrics fm(font());
    const int line = fm.height();

    // Rows = the first drawn dim, columns = the second ([out, in] for a Linear weight; one expert's
    // plane for a 3-D tensor; a 1-D tensor is one row).
    const int rank0 = shape.size() >= 3 ? int(shape.size()) - 2 : 0;
    const std::int64_t rows = shape.empty() ? 1 : shape[std::size_t(rank0)];
    const std::int64_t cols = shape.size() >= 2 ? shape[std::size_t(rank0 + 1)] : (shape.empty() ? 1 : shape[0]);
    const bool oneD = shape.size() < 2;
    const int legendH = line * (std::min(ranks, 16) + 3);
    QRectF area = QRectF(rect()).adjusted(16, line * 2 + 8, -16, -legendH);
    // Keep the aspect ratio loosely (very tall or wide matrices are clamped to 1:8).
    double aspect = double(cols) / double(std::max<std::int64_t>(rows, 1));
    aspect = std::clamp(aspect, 0.125, 8.0);
    if (oneD)
        aspect = 8.0;
    QSizeF size(area.width(), area.width() / aspect);
    if (size.height() > area.height())
        size = QSizeF(area.height() * aspect, area.height());
    const QRectF m(area.center().x() - size.width() / 2, area.top(), size.width(), size.height());

    p.setPen(pal.color(QPalette::Text));
    p.drawText(QRectF(0, 4, width(), line * 2), Qt::AlignHCenter | Qt::AlignTop,
               tr("%1  %2 %3\n%4").arg(QString::fromStdString(s->path), shapeText(shape), dtypeText(param.dtype),
                                       s->dim < 0 ? tr("whole on every rank")
                                                  : tr("%1 on dim %2").arg(QString::fromStdString(s->placement.toString())).arg(s->dim)));

    const QColor whole = pal.color(QPalette::AlternateBase);
    p.fillRect(m, whole);
    if (s->dim >= 0) {
        // Which drawn axis is split: the last dim → columns, the one before → rows; dim 0 of a 3-D
        // tensor (experts) → drawn as vertical bands over the plane, labelled as experts.
        const int nd = int(shape.size());
        const bool splitCols = oneD || s->dim == nd - 1;
        const std::int64_t n = shape[std::size_t(s->dim)];
        for (int r = 0; r < ranks; ++r)
            for (const auto& iv : s->slices[std::size_t(r)]) {
                if (iv.size <= 0)
                    continue;
                const double a = double(iv.offset) / double(n), b = double(iv.offset + iv.size) / double(n);
                QRectF band = splitCols ? QRectF(m.left() + a * m.width(), m.top(), (b - a) * m.width(), m.height())
                                        : QRectF(m.left(), m.top() + a * m.height(), m.width(), (b - a) * m.height());
                p.fillRect(band, rankColor(r, ranks));
                p.setPen(QPen(pal.color(QPalette::Base), 1));
                p.drawRect(band);
                if ((splitCols ? band.width() : band.height()) > line * 1.2) {
                    p.setPen(Qt::black);
                    p.drawText(band, Qt::AlignCenter, QString::number(r));
                }
            }
    }
    p.setPen(pal.color(QPalette::Text));
    p.setBrush(Qt::NoBrush);
    p.drawRect(m);
    // A strided split of a packed [gate; up] dim: name the blocks.
    if (s->placement.kind == tp::Placement::Kind::StridedShard && s->placement.splitFactor == 2 && !oneD) {
        const bool cols = s->dim == int(shape.size()) - 1;
        const QStringList names{tr("gate"), tr("up")};
        for (int b = 0; b < 2; ++b) {
            const QRectF half = cols ? QRectF(m.left() + b * m.width() / 2, m.top() - line, m.width() / 2, line)
                                     : QRectF(m.left() - 52, m.top() + b * m.height() / 2, 48, m.height() / 2);
            p.drawText(half, Qt::AlignCenter, names[b]);
        }
    }
    if (shape.size() >= 3)
        p.drawText(QRectF(m.left(), m.bottom() + 2, m.width(), line), Qt::AlignHCenter,
                   s->dim == 0 ? tr("experts split over ranks (whole experts per rank)")
                               : tr("every one of the %1 experts is split like this").arg(shape[0]));

    // Legend: per rank local shape and bytes.
    int y = height() - legendH + line;
    for (int r = 0; r < std::min(ranks, 16); ++r, y += line) {
        p.fillRect(QRectF(16, y + 2, line - 4, line - 4), s->dim < 0 ? whole : rankColor(r, ranks));
        p.drawText(QPointF(16 + line + 4, y + fm.ascent()),
                   tr("rank %1: %2, %3").arg(r).arg(shapeText(s->shapes[std::size_t(r)]), humanBytes(double(s->bytes[std::size_t(r)]))));
    }
    if (ranks > 16)
        p.drawText(QPointF(16, y + fm.ascent()), tr("… %1 more ranks").arg(ranks - 16));
}

} // namespace tpui
