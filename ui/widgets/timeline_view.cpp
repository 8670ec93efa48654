#include "widgets/timeline_view.h"

#include "models/format.h"

#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QHeaderView>
#include <QPainter>
#include <QRegularExpression>
#include <QSplitter>
#include <QToolTip>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <map>

namespace tpui {

namespace {

// Mid-saturation hues that read on light and dark backgrounds alike.
QColor computeColor() { return QColor(70, 130, 180); }
QColor commColor() { return QColor(230, 140, 40); }
QColor textOn(const QColor& fill) { return fill.lightnessF() > 0.55 ? QColor(20, 20, 20) : QColor(245, 245, 245); }

constexpr int kAxisPad = 6;
constexpr int kRightMargin = 12;

} // namespace

class TimelineCanvas final : public QWidget
{
public:
    explicit TimelineCanvas(TimelineView* v)
        : m_v(v)
    {
        setMouseTracking(true);
        setMinimumHeight(120);
        setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
    }

protected:
    void paintEvent(QPaintEvent*) override
    {
        QPainter p(this);
        m_v->paintCanvas(p);
    }
    void wheelEvent(QWheelEvent* e) override
    {
        if (m_v->m_spans.empty())
            return;
        const double at = m_v->usAt(e->position().x());
        const double f = std::pow(0.8, e->angleDelta().y() / 120.0);
        m_v->setVisibleRange(at - (at - m_v->m_v0) * f, at + (m_v->m_v1 - at) * f);
        e->accept();
    }
    void mousePressEvent(QMouseEvent* e) override
    {
        if (e->button() != Qt::LeftButton)
            return;
        m_press = e->position();
        m_pressRange = {m_v->m_v0, m_v->m_v1};
        m_dragging = false;
    }
    void mouseMoveEvent(QMouseEvent* e) override
    {
        if (!(e->buttons() & Qt::LeftButton))
            return;
        const double dx = e->position().x() - m_press.x();
        if (!m_dragging && std::abs(dx) < 4)
            return;
        m_dragging = true;
        setCursor(Qt::ClosedHandCursor);
        const double plotW = std::max(1.0, double(width() - m_v->gutter() - kRightMargin));
        const double shift = dx / plotW * (m_pressRange.second - m_pressRange.first);
        m_v->setVisibleRange(m_pressRange.first - shift, m_pressRange.second - shift);
    }
    void mouseReleaseEvent(QMouseEvent* e) override
    {
        if (e->button() != Qt::LeftButton)
            return;
        unsetCursor();
        if (!m_dragging)
            if (const int i = m_v->spanAt(e->position().toPoint()); i >= 0)
                emit m_v->spanActivated(TimelineView::modulePathOf(QString::fromStdString(m_v->m_spans[std::size_t(i)].name)));
        m_dragging = false;
    }
    void mouseDoubleClickEvent(QMouseEvent* e) override
    {
        if (e->button() == Qt::LeftButton)
            m_v->fitAll();
    }
    bool event(QEvent* e) override
    {
        if (e->type() == QEvent::ToolTip) {
            auto* h = static_cast<QHelpEvent*>(e);
            const int i = m_v->spanAt(h->pos());
            if (i >= 0)
                QToolTip::showText(h->globalPos(), m_v->toolTipFor(i), this);
            else
                QToolTip::hideText();
            return true;
        }
        return QWidget::event(e);
    }

private:
    TimelineView* m_v;
    QPointF m_press;
    std::pair<double, double> m_pressRange;
    bool m_dragging = false;
};

namespace {

enum HotColumn { HotWhat, HotOp, HotSpans, HotTime, HotShare, HotWait, HotColumns };

// Sorts by the number behind a cell (Qt::UserRole) where it has one.
class HotItem final : public QTreeWidgetItem
{
public:
    using QTreeWidgetItem::QTreeWidgetItem;
    bool operator<(const QTreeWidgetItem& other) const override
    {
        const int c = treeWidget() ? treeWidget()->sortColumn() : 0;
        const QVariant a = data(c, Qt::UserRole), b = other.data(c, Qt::UserRole);
        if (a.isValid() && b.isValid())
            return a.toDouble() < b.toDouble();
        return QTreeWidgetItem::operator<(other);
    }
};

} // namespace

TimelineView::TimelineView(QWidget* parent)
    : QWidget(parent)
    , m_canvas(new TimelineCanvas(this))
    , m_split(new QSplitter(Qt::Vertical))
    , m_hot(new QTreeWidget)
    , m_search(new QLineEdit)
    , m_matchLabel(new QLabel)
    , m_caption(new QLabel)
{
    m_search->setPlaceholderText(tr("Search spans (Enter: next match)"));
    m_search->setClearButtonEnabled(true);
    m_search->setMinimumWidth(220);
    m_search->setMaximumWidth(320);
    m_matchLabel->setMinimumWidth(m_matchLabel->fontMetrics().horizontalAdvance(tr("%1 of %2").arg(9999).arg(9999)) + 8);
    m_caption->setTextFormat(Qt::RichText);
    m_caption->setWordWrap(true);
    auto* bar = new QHBoxLayout;
    bar->addWidget(m_search);
    bar->addWidget(m_matchLabel);
    bar->addWidget(m_caption, 1);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addLayout(bar);
    m_hot->setRootIsDecorated(false);
    m_hot->setUniformRowHeights(true);
    m_hot->setAlternatingRowColors(true);
    m_hot->setSortingEnabled(true);
    m_hot->setHeaderLabels({tr("Where the time went (over the layers)"), tr("Op"), tr("Spans/rank"), tr("Time, slowest rank"),
                            tr("Of the forward"), tr("Waiting")});
    m_hot->headerItem()->setToolTip(HotTime, tr("The rank that spent the most on it: the sum of its spans"));
    m_hot->headerItem()->setToolTip(HotShare, tr("That time over the forward's length"));
    m_hot->headerItem()->setToolTip(HotWait, tr("Collectives: the part of that time spent waiting for the other ranks to arrive"));
    m_hot->header()->setStretchLastSection(false);
    m_hot->header()->setSectionResizeMode(HotWhat, QHeaderView::Stretch);
    for (int c = HotOp; c < HotColumns; ++c)
        m_hot->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
    m_hot->setToolTip(tr("Activate a row to find its spans on the timeline"));
    m_split->addWidget(m_canvas);
    m_split->addWidget(m_hot);
    m_split->setChildrenCollapsible(false);
    m_split->setStretchFactor(0, 0);
    m_split->setStretchFactor(1, 1);
    lay->addWidget(m_split, 1);
    connect(m_hot, &QTreeWidget::itemActivated, this, [this](QTreeWidgetItem* item) {
        // The folded name past its "layers.*." (or "layers.*" before ":op") matches every layer's span.
        QString what = item->text(HotWhat);
        if (const int at = what.indexOf(QLatin1String(".*")); at >= 0)
            what = what.mid(at + (what.mid(at + 2, 1) == QLatin1String(".") ? 3 : 2));
        m_search->setText(what);
        nextMatch();
    });
    connect(m_split, &QSplitter::splitterMoved, this, [this] { m_userSized = true; });
    connect(m_search, &QLineEdit::textChanged, this, &TimelineView::search);
    connect(m_search, &QLineEdit::returnPressed, this, &TimelineView::nextMatch);
}

QWidget* TimelineView::canvas() const { return m_canvas; }

void TimelineView::setSpans(std::vector<tp::RecordedSpan> spans, int tp, const QString& caption)
{
    m_spans = std::move(spans);
    m_tp = std::max(1, tp);
    for (const auto& s : m_spans)
        m_tp = std::max(m_tp, s.rank + 1);
    const auto swatch = [](const QColor& c, const QString& what, bool hatched = false) {
        return QStringLiteral("<span style=\"color:%1\">%2</span> %3").arg(c.name(), hatched ? QStringLiteral("▨") : QStringLiteral("■"), what);
    };
    m_caption->setText(m_spans.empty() ? QString()
                                       : caption + QStringLiteral(" — ") + swatch(computeColor(), tr("compute")) + QStringLiteral(" · ")
                                             + swatch(commColor(), tr("transfer")) + QStringLiteral(" · ")
                                             + swatch(commColor(), tr("waiting for other ranks"), true));
    m_current = -1;
    search(m_search->text());
    fillHotspots();
    fitLanes();
    fitAll();
}

QString TimelineView::foldedName(const QString& spanName)
{
    static const QRegularExpression layer(QStringLiteral("(^|\\.)(layers|h|blocks|layer)\\.\\d+(?=[.:/]|$)"));
    QString out = spanName;
    return out.replace(layer, QStringLiteral("\\1\\2.*"));
}

void TimelineView::fillHotspots()
{
    struct Row
    {
        QString op;
        bool comm = false;
        std::map<int, double> timeUs, waitUs; // per rank
        std::map<int, int> count;
    };
    std::map<QString, Row> rows;
    double forwardUs = 0;
    for (const auto& s : m_spans) {
        Row& r = rows[foldedName(QString::fromStdString(s.name))];
        r.op = QString::fromStdString(s.op);
        r.comm = s.kind == "comm";
        r.timeUs[s.rank] += s.endUs - s.startUs;
        r.waitUs[s.rank] += s.waitUs;
        ++r.count[s.rank];
        forwardUs = std::max(forwardUs, s.endUs);
    }
    m_hot->setSortingEnabled(false);
    m_hot->clear();
    for (const auto& [name, r] : rows) {
        int slowest = r.timeUs.begin()->first;
        for (const auto& [rank, t] : r.timeUs)
            if (t > r.timeUs.at(slowest))
                slowest = rank;
        const double t = r.timeUs.at(slowest), w = r.waitUs.at(slowest);
        int spans = 0;
        for (const auto& [rank, n] : r.count)
            spans = std::max(spans, n);
        auto* item = new HotItem(m_hot);
        item->setText(HotWhat, name);
        item->setToolTip(HotWhat, name);
        item->setText(HotOp, r.op);
        item->setForeground(HotOp, r.comm ? commColor() : computeColor());
        item->setText(HotSpans, QString::number(spans));
        item->setData(HotSpans, Qt::UserRole, spans);
        item->setText(HotTime, humanSeconds(t / 1e6));
        item->setToolTip(HotTime, tr("rank %1").arg(slowest));
        item->setData(HotTime, Qt::UserRole, t);
        const double share = forwardUs > 0 ? t / forwardUs : 0;
        item->setText(HotShare, QStringLiteral("%1%").arg(100 * share, 0, 'f', 1));
        item->setData(HotShare, Qt::UserRole, share);
        item->setText(HotWait, r.comm && t > 0 ? QStringLiteral("%1%").arg(100 * w / t, 0, 'f', 0) : QString());
        item->setData(HotWait, Qt::UserRole, r.comm ? w : -1.0);
        for (int c = HotSpans; c < HotColumns; ++c)
            item->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
    }
    m_hot->setSortingEnabled(true);
    m_hot->sortByColumn(HotTime, Qt::DescendingOrder);
    m_hot->setVisible(!m_spans.empty());
}

void TimelineView::fitLanes()
{
    // The lanes at their tallest (laneHeight's cap), the table below them the rest.
    const int rowH = fontMetrics().height() + 6;
    const int want = plotTop() + m_tp * 4 * rowH + 8;
    const int total = m_split->height();
    if (total <= 0 || m_spans.empty() || m_userSized)
        return;
    const int lanes = std::clamp(want, m_canvas->minimumHeight(), std::max(m_canvas->minimumHeight(), total - 120));
    m_split->setSizes({lanes, total - lanes});
}

void TimelineView::resizeEvent(QResizeEvent* e)
{
    QWidget::resizeEvent(e);
    fitLanes();
}

double TimelineView::fullEndUs() const
{
    double end = 0;
    for (const auto& s : m_spans)
        end = std::max(end, s.endUs);
    return end > 0 ? end * 1.02 : 1.0;
}

void TimelineView::fitAll() { setVisibleRange(0, fullEndUs()); }

void TimelineView::setVisibleRange(double a, double b)
{
    if (!(std::isfinite(a) && std::isfinite(b)))
        return;
    if (b < a)
        std::swap(a, b);
    const double full = fullEndUs();
    const double minWidth = std::max(1e-3, full * 1e-7);
    if (b - a < minWidth) {
        const double c = (a + b) / 2;
        a = c - minWidth / 2;
        b = c + minWidth / 2;
    }
    // Never further out than the whole forward, nor panned past its ends.
    const double w = std::min(b - a, full);
    a = std::clamp(a, 0.0, std::max(0.0, full - w));
    m_v0 = a;
    m_v1 = a + w;
    m_canvas->update();
}

QString TimelineView::emptyText() const { return tr("Run the plan to see its timeline"); }

QString TimelineView::modulePathOf(const QString& spanName)
{
    QString p = spanName.section(QLatin1Char('/'), 0, 0);
    return p.section(QLatin1Char(':'), 0, 0);
}

QString TimelineView::toolTipFor(int i) const
{
    if (i < 0 || std::size_t(i) >= m_spans.size())
        return {};
    const auto& s = m_spans[std::size_t(i)];
    const double dur = std::max(0.0, s.endUs - s.startUs) / 1e6;
    QString t = tr("%1\nrank %2 · %3 · %4").arg(QString::fromStdString(s.name)).arg(s.rank).arg(QString::fromStdString(s.op), humanSeconds(dur));
    if (s.layer >= 0)
        t += tr(" · layer %1").arg(s.layer);
    if (s.kind == "comm") {
        const double wait = std::clamp(s.waitUs / 1e6, 0.0, dur);
        t += tr("\nwaiting for other ranks %1 · transfer %2").arg(humanSeconds(wait), humanSeconds(dur - wait));
    }
    if (s.bytes > 0)
        t += tr("\n%1").arg(humanBytes(double(s.bytes)));
    return t;
}

QString TimelineView::matchText() const
{
    if (m_search->text().trimmed().isEmpty())
        return {};
    if (m_matches.empty())
        return tr("no match");
    return m_current >= 0 ? tr("%1 of %2").arg(m_current + 1).arg(m_matches.size()) : (m_matches.size() == 1 ? tr("1 match") : tr("%1 matches").arg(m_matches.size()));
}

void TimelineView::search(const QString& text)
{
    const QString needle = text.trimmed();
    m_matches.clear();
    m_isMatch.assign(m_spans.size(), false);
    if (!needle.isEmpty())
        for (std::size_t i = 0; i < m_spans.size(); ++i)
            if (QString::fromStdString(m_spans[i].name).contains(needle, Qt::CaseInsensitive)
                || QString::fromStdString(m_spans[i].op).contains(needle, Qt::CaseInsensitive)) {
                m_matches.push_back(int(i));
                m_isMatch[i] = true;
            }
    // In time order, rank 0 first at a tie: Enter walks along the timeline.
    std::sort(m_matches.begin(), m_matches.end(), [this](int a, int b) {
        const auto &x = m_spans[std::size_t(a)], &y = m_spans[std::size_t(b)];
        return std::tie(x.startUs, x.rank) < std::tie(y.startUs, y.rank);
    });
    m_current = -1;
    m_matchLabel->setText(matchText());
    m_canvas->update();
}

void TimelineView::nextMatch()
{
    if (m_matches.empty())
        return;
    m_current = (m_current + 1) % int(m_matches.size());
    zoomTo(m_matches[std::size_t(m_current)]);
    m_matchLabel->setText(matchText());
}

void TimelineView::zoomTo(int i)
{
    const auto& s = m_spans[std::size_t(i)];
    const double d = std::max(s.endUs - s.startUs, 1e-3);
    const double w = std::max(d * 3, fullEndUs() * 0.01); // the span in the middle third
    const double c = (s.startUs + s.endUs) / 2;
    setVisibleRange(c - w / 2, c + w / 2);
}

int TimelineView::gutter() const { return fontMetrics().horizontalAdvance(tr("rank %1").arg(std::max(0, m_tp - 1))) + 16; }

int TimelineView::plotTop() const { return 2 * (fontMetrics().height() + kAxisPad); } // axis, then layer labels

int TimelineView::laneHeight() const
{
    const int rowH = fontMetrics().height() + 6;
    const int avail = m_canvas->height() - plotTop() - 4;
    return std::clamp(avail / std::max(1, m_tp), 2 * rowH + 8, 4 * rowH);
}

double TimelineView::xOf(double us) const
{
    const double plotW = std::max(1, m_canvas->width() - gutter() - kRightMargin);
    return gutter() + (us - m_v0) / (m_v1 - m_v0) * plotW;
}

double TimelineView::usAt(double x) const
{
    const double plotW = std::max(1, m_canvas->width() - gutter() - kRightMargin);
    return m_v0 + (x - gutter()) / plotW * (m_v1 - m_v0);
}

QRectF TimelineView::laneRect(int rank) const
{
    const int h = laneHeight();
    return QRectF(0, plotTop() + rank * h, m_canvas->width(), h);
}

QRectF TimelineView::spanRect(int i) const
{
    if (i < 0 || std::size_t(i) >= m_spans.size())
        return {};
    const auto& s = m_spans[std::size_t(i)];
    if (s.endUs < m_v0 || s.startUs > m_v1)
        return {};
    const QRectF lane = laneRect(s.rank);
    const double rowH = (lane.height() - 6) / 2;
    const double top = lane.top() + 3 + (s.kind == "comm" ? rowH : 0);
    const double left = std::max(xOf(s.startUs), double(gutter()));
    const double right = std::min(xOf(s.endUs), double(m_canvas->width() - kRightMargin));
    return QRectF(left, top + 1, std::max(1.0, right - left), rowH - 2);
}

int TimelineView::spanAt(QPoint p) const
{
    if (p.x() < gutter())
        return -1;
    // The narrowest span under the point wins (a 1-px span over a wide one stays reachable).
    int best = -1;
    double bestW = 0;
    for (std::size_t i = 0; i < m_spans.size(); ++i) {
        const QRectF r = spanRect(int(i)).adjusted(-1, 0, 1, 0);
        if (!r.isEmpty() && r.contains(p) && (best < 0 || r.width() < bestW)) {
            best = int(i);
            bestW = r.width();
        }
    }
    return best;
}

void TimelineView::paintCanvas(QPainter& p)
{
    m_drawnLabels.clear();
    m_drawnBands.clear();
    m_drawnWaits = 0;
    const QPalette pal = m_canvas->palette();
    const QFontMetrics fm = m_canvas->fontMetrics();
    const QRect all = m_canvas->rect();
    p.fillRect(all, pal.base());
    if (m_spans.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(all, Qt::AlignCenter, emptyText());
        return;
    }
    const int g = gutter(), top = plotTop(), right = all.width() - kRightMargin;
    const int lanesBottom = int(laneRect(m_tp - 1).bottom());
    const QColor text = pal.color(QPalette::Text);
    QColor faint = text;
    faint.setAlphaF(0.07);
    QColor rule = text;
    rule.setAlphaF(0.25);

    // Layer bands: a layer runs from its first span's start to its last span's end over all ranks.
    std::map<int, std::pair<double, double>> layers;
    for (const auto& s : m_spans)
        if (s.layer >= 0) {
            auto [it, fresh] = layers.try_emplace(s.layer, s.startUs, s.endUs);
            if (!fresh) {
                it->second.first = std::min(it->second.first, s.startUs);
                it->second.second = std::max(it->second.second, s.endUs);
            }
        }
    p.save();
    p.setClipRect(QRect(g, 0, right - g, all.height()));
    const int bandLabelY = fm.height() + kAxisPad;
    for (const auto& [l, range] : layers) {
        const double x0 = xOf(range.first), x1 = xOf(range.second);
        if (x1 < g || x0 > right)
            continue;
        const QRectF band(x0, bandLabelY, x1 - x0, lanesBottom - bandLabelY);
        if (l % 2 == 0)
            p.fillRect(band, faint);
        const QString label = QStringLiteral("L%1").arg(l);
        const double vx0 = std::max(x0, double(g)), vx1 = std::min(x1, double(right));
        if (vx1 - vx0 >= fm.horizontalAdvance(label) + 6) {
            p.setPen(pal.color(QPalette::PlaceholderText));
            p.drawText(QRectF(vx0, bandLabelY, vx1 - vx0, fm.height() + kAxisPad), Qt::AlignCenter, label);
            m_drawnBands << label;
        }
    }
    p.restore();

    // Time axis at the top: ticks at 1, 2 or 5 × 10^k of the unit the visible range calls for.
    const TimeUnit u = timeUnitFor((m_v1 - m_v0) / 1e6);
    const double perUs = u.perSecond / 1e6;
    const double span = (m_v1 - m_v0) * perUs;
    const double target = span / std::max(1.0, (right - g) / 90.0);
    const double mag = std::pow(10.0, std::floor(std::log10(std::max(target, 1e-12))));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (mag * m >= target) {
            step = mag * m;
            break;
        }
    p.setPen(rule);
    p.drawLine(g, fm.height() + kAxisPad, right, fm.height() + kAxisPad);
    const int decimals = std::max(0, -int(std::floor(std::log10(step))));
    for (double t = std::ceil(m_v0 * perUs / step) * step; t <= m_v1 * perUs + step * 1e-9; t += step) {
        const double x = xOf(t / perUs);
        p.setPen(rule);
        p.drawLine(QPointF(x, fm.height() + kAxisPad - 3), QPointF(x, lanesBottom));
        p.setPen(text);
        p.drawText(QRectF(x - 60, 0, 120, fm.height() + 2), Qt::AlignHCenter | Qt::AlignBottom,
                   QStringLiteral("%1 %2").arg(t, 0, 'f', decimals).arg(u.name));
    }

    // Lanes: rank 0 on top, labelled in the gutter.
    for (int r = 0; r < m_tp; ++r) {
        const QRectF lane = laneRect(r);
        p.setPen(rule);
        p.drawLine(QPointF(0, lane.bottom()), QPointF(all.width(), lane.bottom()));
        p.setPen(text);
        p.drawText(QRectF(4, lane.top(), g - 8, lane.height()), Qt::AlignVCenter | Qt::AlignLeft, tr("rank %1").arg(r));
    }

    // Spans.
    const bool searching = !m_search->text().trimmed().isEmpty();
    const int current = m_current >= 0 ? m_matches[std::size_t(m_current)] : -1;
    p.save();
    p.setClipRect(QRect(g, top, right - g, lanesBottom - top + 1));
    for (std::size_t i = 0; i < m_spans.size(); ++i) {
        const QRectF r = spanRect(int(i));
        if (r.isEmpty())
            continue;
        const auto& s = m_spans[i];
        const bool comm = s.kind == "comm";
        const bool dim = searching && !m_isMatch[i];
        QColor fill = comm ? commColor() : computeColor();
        if (dim)
            fill.setAlphaF(0.25);
        QRectF solid = r;
        const double dur = s.endUs - s.startUs;
        if (comm && s.waitUs > 0 && dur > 0) {
            // The wait: hatched and lighter, from arrival to the last rank's arrival.
            const double xw = std::clamp(xOf(s.startUs + std::min(s.waitUs, dur)), r.left(), r.right());
            const QRectF wait(r.left(), r.top(), xw - r.left(), r.height());
            if (wait.width() > 0) {
                QColor light = fill;
                light.setAlphaF(fill.alphaF() * 0.3);
                p.fillRect(wait, light);
                p.fillRect(wait, QBrush(fill, Qt::BDiagPattern));
                ++m_drawnWaits;
            }
            solid.setLeft(xw);
        }
        if (solid.width() > 0)
            p.fillRect(solid, fill);
        if (searching && m_isMatch[i]) {
            p.setPen(QPen(pal.color(QPalette::Highlight), int(i) == current ? 3 : 1.5));
            p.setBrush(Qt::NoBrush);
            p.drawRect(r);
        }
        // The name, where at least a few characters fit: on the solid part in a colour for its fill,
        // else (a span that is mostly wait) across the span in the palette's text colour.
        const double minText = fm.horizontalAdvance(QStringLiteral("ab…")) + 6;
        const bool onSolid = solid.width() >= minText;
        const QRectF textBox = (onSolid ? solid : r).adjusted(3, 0, -3, 0);
        if (textBox.width() + 6 >= minText && r.height() >= fm.height()) {
            const QString shown = fm.elidedText(QString::fromStdString(s.name), Qt::ElideMiddle, int(textBox.width()));
            if (!shown.isEmpty() && shown != QStringLiteral("…")) {
                p.setPen(onSolid && !dim ? textOn(comm ? commColor() : computeColor()) : text);
                p.drawText(textBox, Qt::AlignVCenter | Qt::AlignLeft, shown);
                m_drawnLabels << shown;
            }
        }
    }
    p.restore();
}

} // namespace tpui
