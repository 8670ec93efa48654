#include "widgets/dataflow_view.h"

#include "models/format.h"

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <map>

namespace tpui {

namespace {
constexpr double kBoxW = 300, kBoxH = 30, kGap = 26, kLeft = 90;
}

DataflowView::DataflowView(QWidget* parent)
    : QWidget(parent)
{
    setMinimumWidth(int(kLeft + kBoxW + 300));
}

void DataflowView::setPreview(std::shared_ptr<const PreviewResult> preview)
{
    m_p = std::move(preview);
    layoutBoxes();
}

void DataflowView::setLayer(int layer)
{
    m_layer = layer;
    layoutBoxes();
}

QSize DataflowView::sizeHint() const
{
    const double h = m_boxes.empty() ? 200 : m_boxes.back().rect.bottom() + 40;
    return {int(kLeft + kBoxW + 320), int(h)};
}

void DataflowView::layoutBoxes()
{
    m_boxes.clear();
    if (m_p) {
        const auto& g = m_p->graph;
        // (node, collective) of this layer only: a 100,000-layer model's other collectives cost a
        // comparison each, not a map entry, on every layer change.
        std::vector<std::pair<int, int>> collectivesOf;
        for (std::size_t i = 0; i < g.collectives.size(); ++i) {
            const int node = g.collectives[i].node;
            if (node >= 0 && std::size_t(node) < g.graph.nodes.size() && g.graph.nodes[std::size_t(node)].layer == m_layer)
                collectivesOf.emplace_back(node, int(i));
        }
        std::stable_sort(collectivesOf.begin(), collectivesOf.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        double y = 16;
        for (std::size_t n = 0; n < g.graph.nodes.size(); ++n) {
            if (g.graph.nodes[n].layer != m_layer)
                continue;
            const auto [b, e] = std::equal_range(collectivesOf.begin(), collectivesOf.end(), std::pair<int, int>(int(n), 0),
                                                 [](const auto& x, const auto& v) { return x.first < v.first; });
            m_boxes.push_back({QRectF(kLeft, y, kBoxW, kBoxH), int(n), -1, b == e ? -1 : b->second});
            y += kBoxH + kGap;
            for (auto it = b; it != e; ++it) {
                m_boxes.push_back({QRectF(kLeft + 30, y, kBoxW - 60, kBoxH * 0.8), int(n), it->second, it->second});
                y += kBoxH * 0.8 + kGap;
            }
        }
    }
    setMinimumHeight(sizeHint().height());
    updateGeometry();
    update();
}

QString DataflowView::layoutText(int tensor) const
{
    const auto& l = m_p->graph.tensors[std::size_t(tensor)];
    const auto& t = m_p->graph.graph.tensors[std::size_t(tensor)];
    switch (l.layout) {
    case tp::Layout::Replicate: return tr("Replicate [%1]").arg(t.features);
    case tp::Layout::Partial: return tr("Partial sums [%1]").arg(t.features);
    case tp::Layout::ShardSeq: return tr("Shard(seq) [token rows split, %1 features]").arg(t.features);
    case tp::Layout::ShardLast: {
        QStringList w;
        for (std::size_t r = 0; r < l.local.size() && r < 4; ++r)
            w << QString::number(l.local[r]);
        if (l.local.size() > 4)
            w << QStringLiteral("…");
        return tr("Shard(-1) [%1 of %2]").arg(w.join(QLatin1Char(' '))).arg(t.features);
    }
    default: return QString::fromLatin1(tp::layoutName(l.layout));
    }
}

QString DataflowView::localText(int node, int firstCollective) const
{
    const auto& g = m_p->graph;
    const auto& n = g.graph.nodes[std::size_t(node)];
    if (firstCollective < 0)
        return layoutText(n.outputs[0]);
    const auto it = g.collectives.begin() + firstCollective;
    const std::int64_t features = g.graph.tensors[std::size_t(n.outputs[0])].features;
    if (it->kind == tp::CollectiveKind::AllGather) { // each rank computed its slice of the features
        const tp::ParamShard* w = g.param(n.module, "weight");
        QStringList widths;
        const int dim = n.kind == tp::OpKind::Embedding ? 1 : 0;
        for (std::size_t r = 0; w && r < w->shapes.size() && r < 4; ++r)
            widths << QString::number(w->shapes[r][std::size_t(dim)]);
        if (w && w->shapes.size() > 4)
            widths << QStringLiteral("…");
        return tr("Shard(-1) [%1 of %2]").arg(widths.join(QLatin1Char(' '))).arg(features);
    }
    if (it->kind == tp::CollectiveKind::AllToAll)
        return tr("routed rows, %1 per token").arg(it->tokensPerToken);
    return tr("Partial sums [%1]").arg(features);
}

void DataflowView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette pal = palette();
    p.fillRect(rect(), pal.color(QPalette::Base));
    if (!m_p || m_boxes.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("No decoder layer %1 in this model").arg(m_layer));
        return;
    }
    const auto& g = m_p->graph;
    const QString prefix = QStringLiteral("model.layers.%1").arg(m_layer);
    std::map<int, QRectF> nodeBox;
    for (const auto& b : m_boxes)
        if (b.collective < 0)
            nodeBox[b.node] = b.rect;

    // Data edges: from the producer's box to the consumer's, on the left; long ones arc outwards.
    p.setPen(QPen(pal.color(QPalette::Mid), 1.2));
    for (const auto& b : m_boxes) {
        if (b.collective >= 0)
            continue;
        const auto& n = g.graph.nodes[std::size_t(b.node)];
        for (int t : n.inputs) {
            const int prod = g.graph.tensors[std::size_t(t)].producer;
            auto it = nodeBox.find(prod);
            const QPointF end(b.rect.left() + 12, b.rect.top());
            if (it == nodeBox.end()) { // from the previous layer: a stub from the top
                p.drawLine(QPointF(end.x(), end.y() - kGap / 2), end);
                continue;
            }
            const QPointF start(it->second.left() + 12, it->second.bottom());
            if (end.y() - start.y() <= kGap + kBoxH) {
                p.drawLine(start, end);
            } else {
                const double depth = std::min(70.0, 18 + (end.y() - start.y()) / 20);
                QPainterPath path(QPointF(it->second.left(), it->second.center().y()));
                path.cubicTo(QPointF(it->second.left() - depth, it->second.center().y()),
                             QPointF(b.rect.left() - depth, b.rect.center().y()), QPointF(b.rect.left(), b.rect.center().y()));
                p.drawPath(path);
            }
        }
    }

    const QColor accent = pal.color(QPalette::Highlight);
    for (const auto& b : m_boxes) {
        if (b.collective >= 0) {
            const auto& c = g.collectives[std::size_t(b.collective)];
            const qint64 bytes = c.bytes(g.options.batch, g.options.seq, g.elementBytes());
            QColor fill = QColor(230, 140, 40);
            p.setPen(QPen(fill.darker(130), 1.5));
            fill.setAlpha(70);
            p.setBrush(fill);
            p.drawRoundedRect(b.rect, 6, 6);
            p.setPen(pal.color(QPalette::Text));
            QString text = QStringLiteral("%1  %2").arg(QString::fromLatin1(tp::collectiveName(c.kind)), humanBytes(double(bytes)));
            if (m_p->cost && std::size_t(b.collective) < m_p->cost->collectives.size())
                text += QStringLiteral("  · %1 µs").arg(m_p->cost->collectives[std::size_t(b.collective)].seconds * 1e6, 0, 'f', 1);
            p.drawText(b.rect, Qt::AlignCenter, text);
            const auto& n = g.graph.nodes[std::size_t(b.node)];
            p.drawText(QRectF(kLeft + kBoxW + 12, b.rect.top(), width() - kLeft - kBoxW - 16, b.rect.height()),
                       Qt::AlignVCenter | Qt::AlignLeft, QStringLiteral("→ ") + layoutText(n.outputs[0]));
            continue;
        }
        const auto& n = g.graph.nodes[std::size_t(b.node)];
        QString name = QString::fromStdString(n.name);
        if (name.startsWith(prefix))
            name = name.mid(prefix.size() + 1);
        p.setPen(QPen(n.module >= 0 ? accent : pal.color(QPalette::Mid), 1.2));
        p.setBrush(pal.color(QPalette::Button));
        p.drawRoundedRect(b.rect, 5, 5);
        p.setPen(pal.color(QPalette::ButtonText));
        p.drawText(b.rect.adjusted(8, 0, -8, 0), Qt::AlignVCenter | Qt::AlignLeft, name);
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(QRectF(4, b.rect.top(), kLeft - 10, b.rect.height()), Qt::AlignVCenter | Qt::AlignRight,
                   QString::fromLatin1(tp::opKindName(n.kind)));
        // The output's layout right of the box; a node followed by a collective shows what it computes
        // locally, and the collective's box shows what comes out.
        p.setPen(pal.color(QPalette::Text));
        if (!n.outputs.empty())
            p.drawText(QRectF(b.rect.right() + 12, b.rect.top(), width() - b.rect.right() - 16, b.rect.height()),
                       Qt::AlignVCenter | Qt::AlignLeft, QStringLiteral("→ ") + localText(b.node, b.firstCollective));
    }
}

void DataflowView::mouseDoubleClickEvent(QMouseEvent* event)
{
    for (const auto& b : m_boxes)
        if (b.rect.contains(event->position()) && m_p) {
            const auto& n = m_p->graph.graph.nodes[std::size_t(b.node)];
            if (n.module >= 0)
                emit moduleActivated(QString::fromStdString(m_p->spec->modules[std::size_t(n.module)].path));
        }
}

} // namespace tpui
