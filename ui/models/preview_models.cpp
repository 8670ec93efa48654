#include "models/preview_models.h"

#include "models/format.h"

#include "tp/model/loader.h"
#include "tp/plan/plan_io.h"

#include <QColor>
#include <QFont>
#include <QGuiApplication>
#include <QIcon>
#include <QPalette>

namespace tpui {

namespace {
QString qs(const std::string& s) { return QString::fromStdString(s); }
QVariant right() { return int(Qt::AlignRight | Qt::AlignVCenter); }
QIcon severityIcon(tp::Severity s)
{
    switch (s) {
    case tp::Severity::Error: return QIcon::fromTheme(QStringLiteral("dialog-error"), QIcon(QStringLiteral(":/icons/error.svg")));
    case tp::Severity::Warning: return QIcon::fromTheme(QStringLiteral("dialog-warning"), QIcon(QStringLiteral(":/icons/warning.svg")));
    case tp::Severity::Info: break;
    }
    return QIcon::fromTheme(QStringLiteral("dialog-information"), QIcon(QStringLiteral(":/icons/info.svg")));
}
} // namespace

// --- shared -------------------------------------------------------------------------------------

HeaderedTableModel::HeaderedTableModel(QStringList headers, QObject* parent)
    : QAbstractTableModel(parent)
    , m_headers(std::move(headers))
{
}

int HeaderedTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_headers.size()); }

QVariant HeaderedTableModel::headerData(int section, Qt::Orientation o, int role) const
{
    if (o != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= m_headers.size())
        return {};
    return m_headers[section];
}

void PreviewTableModel::setPreview(std::shared_ptr<const PreviewResult> preview)
{
    beginResetModel();
    m_p = std::move(preview);
    endResetModel();
}

// --- plan -------------------------------------------------------------------------------------

PlanTableModel::PlanTableModel(QObject* parent)
    : PreviewTableModel({tr("Key"), tr("Style"), tr("Matches"), tr("Forward collective")}, parent)
{
}

int PlanTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_p || !m_p->graph.plan ? 0 : int(m_p->graph.plan->entries.size());
}

QString PlanTableModel::keyAt(int row) const
{
    return row >= 0 && row < rowCount() ? qs(m_p->graph.plan->entries[std::size_t(row)].key) : QString();
}

QVariant PlanTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount())
        return {};
    const auto& g = m_p->graph;
    const auto& e = g.plan->entries[std::size_t(index.row())];
    const int matches = g.match.entryMatches[std::size_t(index.row())];
    const tp::Style* s = g.match.entryStyles[std::size_t(index.row())];
    switch (role) {
    case Qt::DisplayRole:
    case Qt::EditRole:
        switch (index.column()) {
        case KeyColumn: return qs(e.key);
        case StyleColumn:
            return role == Qt::DisplayRole && tp::exportedToEpPlan(*g.plan, e) ? tr("%1 (ep_plan)").arg(qs(e.style)) : qs(e.style);
        case MatchesColumn: return matches;
        case CollectiveColumn: return s ? QString::fromLatin1(tp::collectiveName(s->forward)) : tr("unknown style");
        }
        return {};
    case Qt::DecorationRole:
        if (index.column() == KeyColumn && (matches == 0 || !s))
            return severityIcon(tp::Severity::Warning);
        return {};
    case Qt::ToolTipRole:
        if (!s)
            return tr("'%1' is not a style of this Transformers generation").arg(qs(e.style));
        if (matches == 0)
            return tr("This key matches no module or parameter of %1").arg(qs(m_p->spec->className));
        if (tp::exportedToEpPlan(*g.plan, e))
            return qs(s->description) + QStringLiteral("\n") + tr("Exported in ep_plan (Transformers applies it with ep_size = tp_size), "
                                                                  "\"replicate\" in tp_plan");
        return qs(s->description);
    case Qt::TextAlignmentRole: return index.column() == MatchesColumn ? right() : QVariant();
    case Qt::ForegroundRole:
        if (matches == 0 || !s)
            return QGuiApplication::palette().color(QPalette::Disabled, QPalette::Text);
        return {};
    }
    return {};
}


Qt::ItemFlags PlanTableModel::flags(const QModelIndex& index) const
{
    Qt::ItemFlags f = QAbstractTableModel::flags(index);
    if (index.isValid() && index.column() == StyleColumn)
        f |= Qt::ItemIsEditable;
    return f;
}

bool PlanTableModel::setData(const QModelIndex& index, const QVariant& value, int role)
{
    if (!index.isValid() || index.column() != StyleColumn || role != Qt::EditRole)
        return false;
    emit styleEditRequested(keyAt(index.row()), value.toString());
    return true;
}

// --- collectives ------------------------------------------------------------------------------

CollectivesModel::CollectivesModel(QObject* parent)
    : PreviewTableModel({tr("Layer"), tr("Collective"), tr("After"), tr("Style"), tr("Bytes"), tr("Predicted"),
                         tr("Decode bytes"), tr("Decode time")},
                        parent)
{
}

int CollectivesModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_p ? 0 : int(m_p->graph.collectives.size());
}

QVariant CollectivesModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount())
        return {};
    const auto& g = m_p->graph;
    const auto& c = g.collectives[std::size_t(index.row())];
    const qint64 bytes = c.bytes(g.options.batch, g.options.seq, g.elementBytes());
    const double us = m_p->cost && std::size_t(index.row()) < m_p->cost->collectives.size()
        ? m_p->cost->collectives[std::size_t(index.row())].seconds * 1e6
        : -1;
    const qint64 stepBytes = c.bytes(g.options.batch, 1, g.elementBytes());
    const double stepUs = m_p->decodeCost && std::size_t(index.row()) < m_p->decodeCost->collectives.size()
        ? m_p->decodeCost->collectives[std::size_t(index.row())].seconds * 1e6
        : -1;
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case LayerColumn: return c.layer < 0 ? tr("–") : QString::number(c.layer);
        case KindColumn: return QString::fromLatin1(tp::collectiveName(c.kind));
        case WhereColumn: return qs(c.where);
        case StyleColumn: return qs(c.style);
        case BytesColumn: return humanBytes(double(bytes));
        case TimeColumn: return us < 0 ? QString() : QStringLiteral("%1 µs").arg(us, 0, 'f', 1);
        case DecodeBytesColumn: return humanBytes(double(stepBytes));
        case DecodeTimeColumn: return stepUs < 0 ? QString() : QStringLiteral("%1 µs").arg(stepUs, 0, 'f', 1);
        }
        return {};
    case SortRole:
        switch (index.column()) {
        case LayerColumn: return c.layer;
        case BytesColumn: return bytes;
        case TimeColumn: return us;
        case DecodeBytesColumn: return stepBytes;
        case DecodeTimeColumn: return stepUs;
        default: return data(index, Qt::DisplayRole);
        }
    case PathRole: return qs(c.where);
    case Qt::TextAlignmentRole: return index.column() >= BytesColumn || index.column() == LayerColumn ? right() : QVariant();
    case Qt::ToolTipRole:
        return tr("%1 of %2 per rank share (B=%3, S=%4, %5 bytes per element)")
            .arg(QString::fromLatin1(tp::collectiveName(c.kind)), humanBytes(double(bytes)))
            .arg(g.options.batch)
            .arg(g.options.seq)
            .arg(g.elementBytes());
    }
    return {};
}


// --- memory -----------------------------------------------------------------------------------

MemoryModel::MemoryModel(QObject* parent)
    : PreviewTableModel({tr("Rank"), tr("Weights"), tr("KV cache / token"), tr("KV cache (B×S)"), tr("Activation peak"),
                         tr("Total")},
                        parent)
{
}

int MemoryModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_p ? 0 : int(m_p->graph.memory.size());
}

QVariant MemoryModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount())
        return {};
    const auto& m = m_p->graph.memory[std::size_t(index.row())];
    // batch sequences of seq tokens (a windowed layer's capped at what it keeps)
    const qint64 kv = m.kvCacheBytesAt(m_p->graph.options.seq) * m_p->graph.options.batch;
    if (role == Qt::TextAlignmentRole)
        return index.column() == RankColumn ? QVariant() : right();
    if (role == Qt::ToolTipRole && index.column() == TotalColumn && m_p->hardware)
        return tr("%1 of the %2 a plan may use of one device")
            .arg(humanBytes(double(m.weightBytes + kv + m.activationPeakBytes)), qs(m_p->hardware->usableMemoryText()));
    if (role != Qt::DisplayRole)
        return {};
    switch (index.column()) {
    case RankColumn: return tr("rank %1").arg(index.row());
    case WeightsColumn: return humanBytes(double(m.weightBytes));
    case KvColumn: return humanBytes(double(m.kvCacheBytesPerToken));
    case KvAtSeqColumn: return humanBytes(double(kv));
    case ActivationColumn: return humanBytes(double(m.activationPeakBytes));
    case TotalColumn: return humanBytes(double(m.weightBytes + kv + m.activationPeakBytes));
    }
    return {};
}


// --- diagnostics ------------------------------------------------------------------------------

DiagnosticsModel::DiagnosticsModel(QObject* parent)
    : HeaderedTableModel({tr("Severity"), tr("Where"), tr("Message")}, parent)
{
}

void DiagnosticsModel::setDiagnostics(std::vector<tp::Diagnostic> diagnostics)
{
    // Errors first, their causes before their consequences, then warnings, then notes; each group in the
    // order found.
    std::stable_sort(diagnostics.begin(), diagnostics.end(), [](const tp::Diagnostic& a, const tp::Diagnostic& b) {
        return a.severity != b.severity ? a.severity > b.severity : a.follows.empty() && !b.follows.empty();
    });
    beginResetModel();
    m_d = std::move(diagnostics);
    m_consequences.clear();
    for (const auto& d : m_d)
        if (!d.follows.empty())
            ++m_consequences[qs(d.follows)];
    endResetModel();
}

int DiagnosticsModel::count(tp::Severity s) const
{
    return int(std::count_if(m_d.begin(), m_d.end(), [s](const tp::Diagnostic& d) { return d.severity == s; }));
}

int DiagnosticsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_d.size()); }

QVariant DiagnosticsModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount())
        return {};
    const auto& d = m_d[std::size_t(index.row())];
    // An error that others follow from says how many and is bold; those that follow are dimmed and point at it.
    const int consequences = d.severity == tp::Severity::Error && d.follows.empty() ? m_consequences.value(qs(d.where)) : 0;
    const auto text = [&] {
        QString t = qs(d.message);
        if (!d.hint.empty())
            t += QStringLiteral("\n") + (d.follows.empty() ? tr("Hint: %1") : tr("Follows: %1")).arg(qs(d.hint));
        if (consequences)
            t += QStringLiteral("\n") + (consequences == 1 ? tr("The cause of 1 more error below: fix it first.")
                                                            : tr("The cause of %1 more errors below: fix it first.").arg(consequences));
        return t;
    };
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case SeverityColumn:
            return d.follows.empty() ? QString::fromLatin1(tp::severityName(d.severity)) : tr("%1 (follows)").arg(QString::fromLatin1(tp::severityName(d.severity)));
        case WhereColumn: return qs(d.where);
        case MessageColumn: return text();
        }
        return {};
    case Qt::DecorationRole: return index.column() == SeverityColumn ? QVariant(severityIcon(d.severity)) : QVariant();
    case Qt::ToolTipRole: return text();
    case Qt::FontRole:
        if (consequences) {
            QFont f;
            f.setBold(true);
            return f;
        }
        return {};
    case Qt::ForegroundRole:
        return d.follows.empty() ? QVariant() : QVariant(QGuiApplication::palette().color(QPalette::PlaceholderText));
    case WhereRole: return qs(d.where);
    case FollowsRole: return qs(d.follows);
    }
    return {};
}


} // namespace tpui
